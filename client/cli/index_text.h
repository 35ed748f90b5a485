// The CLI's index text ("3:10:2", "2,1:5", "[[0,1],[2,3]]", ...) parsed by
// common/index.h's plan::ParseIndexText, handed over as plain structs so that
// the CLI's other files deal only with the client's tdstore::Index.
#ifndef TDSTORE_CLIENT_CLI_INDEX_TEXT_H_
#define TDSTORE_CLIENT_CLI_INDEX_TEXT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tdstore::cli {

// One item of the parsed text.
struct IndexTextItem {
  enum class Kind { kInt, kSlice, kPositions, kMask, kEllipsis };
  Kind kind = Kind::kEllipsis;
  int64_t value = 0;                    // kInt
  std::optional<int64_t> start, stop;   // kSlice; nullopt = omitted
  int64_t step = 1;                     // kSlice
  std::vector<int64_t> positions;       // kPositions, C order
  std::vector<int64_t> shape;           // kPositions; [] for a single number
  std::vector<bool> mask;               // kMask
};

struct IndexText {
  bool ok = false;
  std::string error;  // when !ok: what is wrong and where
  std::vector<IndexTextItem> items;
};

// A failure comes back as !ok with a message; never throws.
IndexText ParseIndexArgText(const std::string& text) noexcept;

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_INDEX_TEXT_H_
