#include "client/cli/dict_leaves.h"

#include <algorithm>

namespace tdstore::cli {

std::vector<core::LeafMeta> SortedLeaves(const core::DictInfo& info) {
  std::vector<core::LeafMeta> leaves = info.leaves;
  std::sort(leaves.begin(), leaves.end(),
            [](const core::LeafMeta& a, const core::LeafMeta& b) { return a.path < b.path; });
  return leaves;
}

int64_t TotalBytes(const std::vector<core::LeafMeta>& leaves) {
  int64_t total = 0;
  for (const core::LeafMeta& leaf : leaves) total += leaf.byte_size;
  return total;
}

}  // namespace tdstore::cli
