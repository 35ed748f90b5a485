// Server-side fill: every element of whole leaves, or of the rows an index
// selects, set to one value per leaf, without the leaf's bytes crossing
// gRPC (fill_, zero_, td[idx] = 0).
//
//   std::vector<Fill> fills{{{"obs"}, DType::kFloat32, std::string(4, '\0')}};
//   auto version = FillLeaves(store, ref, fills, nullptr);   // zero_ of obs
//
// Whole leaves are rewritten as new generations by one WriteTxn, visible
// all together: a value of zero bytes costs one SETRANGE per part (Redis
// pads with zeros), any other value is written window by window from one
// 1 MiB pattern leased from the memory budget. With an index, each value
// is a 0-d indexed write that the store broadcasts to the selection
// (indexed_access.h), bounded by max_indexed_bytes.
//
// Errors: NOT_FOUND (dict, leaf); INVALID_ARGUMENT (no fills, a path named
// twice, an element whose size is not its dtype's); FAILED_PRECONDITION (a
// leaf whose dtype is no longer the one the caller named: it was replaced
// meanwhile; a subtree where a leaf is expected); those of WriteTxn and of
// WriteIndexed. Nothing is written on any error before the commit.
//
// Thread-safe (each call has its own transaction).
#ifndef TDSTORE_SERVER_REDIS_STORE_LEAF_FILL_H_
#define TDSTORE_SERVER_REDIS_STORE_LEAF_FILL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/index.h"
#include "common/path.h"
#include "server/redis_store/dict_store.h"

namespace tdstore::store {

// The schema version after the fill (whole leaves), or the version an
// indexed fill wrote at.
absl::StatusOr<int64_t> FillLeaves(DictStore& dicts, const DictRef& ref,
                                   const std::vector<Fill>& fills,
                                   const plan::IndexSpec* index);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_LEAF_FILL_H_
