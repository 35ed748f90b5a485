#include "client/cli/table.h"

#include <algorithm>

namespace tdstore::cli {

void PrintTable(const std::vector<std::vector<std::string>>& rows, const std::string& indent,
                std::ostream& out) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    out << indent;
    for (size_t c = 0; c < row.size(); ++c) {
      out << row[c];
      if (c + 1 < row.size()) out << std::string(widths[c] - row[c].size() + 2, ' ');
    }
    out << '\n';
  }
}

}  // namespace tdstore::cli
