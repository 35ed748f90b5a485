// What a dict's keys are, given its leaf paths: the one rule behind
// TensorDict.keys() and `key in td`, shared by tdstored (ListKeys, Exists)
// and the client core (answering them from a watched schema copy).
//
// A dict's keys are its leaves' paths and every proper prefix of them (the
// nested sub-dicts). Pure code, no I/O; any thread.
#ifndef TDSTORE_COMMON_KEY_LISTING_H_
#define TDSTORE_COMMON_KEY_LISTING_H_

#include <vector>

#include "common/path.h"

namespace tdstore {

enum class PathKind { kAbsent, kLeaf, kNode };

// kLeaf if `path` is one of `leaves`, kNode if it is a proper prefix of
// one, kAbsent otherwise.
PathKind ClassifyPath(const std::vector<LeafPath>& leaves, const LeafPath& path);

// As TensorDict.keys(include_nested, leaves_only): without include_nested
// the top level only (a one-component leaf, or the first component of a
// longer path, which names a sub-dict unless leaves_only); with it, every
// leaf and (unless leaves_only) every sub-dict at any depth. Sorted by
// encoded path (EncodePath), each key once.
std::vector<LeafPath> ListKeys(const std::vector<LeafPath>& leaves, bool include_nested,
                               bool leaves_only);

// The keys of the sub-dict at `prefix` (a kNode of `leaves`), relative to
// it: ListKeys of the leaves under it with `prefix` taken off. An empty
// prefix is the whole dict.
std::vector<LeafPath> ListKeysUnder(const std::vector<LeafPath>& leaves, const LeafPath& prefix,
                                    bool include_nested, bool leaves_only);

}  // namespace tdstore

#endif  // TDSTORE_COMMON_KEY_LISTING_H_
