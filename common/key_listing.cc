#include "common/key_listing.h"

#include <map>
#include <string>

namespace tdstore {

PathKind ClassifyPath(const std::vector<LeafPath>& leaves, const LeafPath& path) {
  PathKind kind = PathKind::kAbsent;
  for (const LeafPath& leaf : leaves) {
    if (leaf == path) return PathKind::kLeaf;
    if (leaf.size() > path.size() && IsPathPrefix(path, leaf)) kind = PathKind::kNode;
  }
  return kind;
}

std::vector<LeafPath> ListKeys(const std::vector<LeafPath>& leaves, bool include_nested,
                               bool leaves_only) {
  std::map<std::string, LeafPath> keys;  // encoded -> path: sorted, each once
  for (const LeafPath& p : leaves) {
    if (p.empty()) continue;
    if (!include_nested) {
      if (p.size() == 1 || !leaves_only) {
        LeafPath top{p[0]};
        keys.emplace(EncodePath(top), top);
      }
      continue;
    }
    keys.emplace(EncodePath(p), p);
    if (leaves_only) continue;
    for (size_t n = 1; n < p.size(); ++n) {
      LeafPath node(p.begin(), p.begin() + n);
      keys.emplace(EncodePath(node), node);
    }
  }
  std::vector<LeafPath> out;
  out.reserve(keys.size());
  for (auto& [_, p] : keys) out.push_back(std::move(p));
  return out;
}

std::vector<LeafPath> ListKeysUnder(const std::vector<LeafPath>& leaves, const LeafPath& prefix,
                                    bool include_nested, bool leaves_only) {
  if (prefix.empty()) return ListKeys(leaves, include_nested, leaves_only);
  std::vector<LeafPath> under;
  for (const LeafPath& p : leaves) {
    if (p.size() > prefix.size() && IsPathPrefix(prefix, p)) {
      under.emplace_back(p.begin() + static_cast<std::ptrdiff_t>(prefix.size()), p.end());
    }
  }
  return ListKeys(under, include_nested, leaves_only);
}

}  // namespace tdstore
