// Plain-text tables for the CLI's listings: columns left-aligned, two spaces
// apart, no header unless the caller passes one as the first row.
#ifndef TDSTORE_CLIENT_CLI_TABLE_H_
#define TDSTORE_CLIENT_CLI_TABLE_H_

#include <ostream>
#include <string>
#include <vector>

namespace tdstore::cli {

// Writes each row on its own line, prefixed with `indent`; the last column
// is not padded. Rows may differ in length.
void PrintTable(const std::vector<std::vector<std::string>>& rows, const std::string& indent,
                std::ostream& out);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_TABLE_H_
