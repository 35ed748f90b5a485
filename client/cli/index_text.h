// The CLI's index text ("3:10:2", "2,1:5", "[[0,1],[2,3]]", ...) parsed by
// common/index.h's ParseIndexText, handed over in a form that names neither
// of tdstore's two IndexTerm types.
//
// Why a separate library: common/index.h (the planner's) and
// tdstore/client.h each define a class tdstore::IndexTerm. Besides not
// fitting in one translation unit, the two would break the one-definition
// rule at link time: their destructors, copy constructors and
// std::vector<tdstore::IndexTerm> members have identical mangled names, and
// the linker keeps one copy of each for both types. So ParseIndexText lives
// in libtdstore_index_text, linked with hidden visibility and
// --exclude-libs, which keeps every symbol of common's IndexTerm private to
// it; only ParseIndexArgText is exported. This header includes neither.
#ifndef TDSTORE_CLIENT_CLI_INDEX_TEXT_H_
#define TDSTORE_CLIENT_CLI_INDEX_TEXT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#define TDSTORE_INDEX_TEXT_API __attribute__((visibility("default")))

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

// Never throws (the result crosses a shared-library boundary); a failure,
// even running out of memory, comes back as !ok with a message.
TDSTORE_INDEX_TEXT_API IndexText ParseIndexArgText(const std::string& text) noexcept;

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_INDEX_TEXT_H_
