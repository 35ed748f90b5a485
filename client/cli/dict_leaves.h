// A dict's leaves as the CLI lists and moves them: in path order, so that
// listings and exported files are the same whatever order the server keeps
// them in.
#ifndef TDSTORE_CLIENT_CLI_DICT_LEAVES_H_
#define TDSTORE_CLIENT_CLI_DICT_LEAVES_H_

#include <cstdint>
#include <vector>

#include "tdstore/core.h"

namespace tdstore::cli {

// info.leaves sorted by path.
std::vector<core::LeafMeta> SortedLeaves(const core::DictInfo& info);

// The sum of their byte sizes.
int64_t TotalBytes(const std::vector<core::LeafMeta>& leaves);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_DICT_LEAVES_H_
