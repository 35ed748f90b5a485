// Whole indexed requests: td[index] for a set of paths, and
// td[index] = values for a set of leaves. Builds on indexed_io.h (which
// moves the bytes) and adds validation, broadcasting, creating missing
// leaves, and serving the schema from the cache (DictStore::WithSchema).
//
// A rejected request writes nothing: every check (index, paths, dtypes,
// shapes, broadcasting) runs before the first byte goes to Redis.
//
// Errors: NOT_FOUND (dict or path), OUT_OF_RANGE (position outside its dim),
// INVALID_ARGUMENT (bad index, dtype or shape mismatch, value that does not
// broadcast), FAILED_PRECONDITION (a new leaf's path conflicts with a
// sub-dict), RESOURCE_EXHAUSTED (more than options.max_indexed_bytes
// selected, or the memory budget stayed full), ABORTED (still stale after a
// retry), UNAVAILABLE.
//
// Memory: each call leases from store.budget() what it gathers before it
// allocates it: the resolved index (8 bytes a cell, twice: cells and runs),
// the selection read, or for a write the expanded values, their per-block
// copies and the formatted commands (4x the selection), with the received
// values (IndexedWriteLease).
//
// Thread-safe as far as the store is.
#ifndef TDSTORE_SERVER_REDIS_STORE_INDEXED_ACCESS_H_
#define TDSTORE_SERVER_REDIS_STORE_INDEXED_ACCESS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/index.h"
#include "common/path.h"
#include "common/shape.h"
#include "server/redis_store/dict_store.h"
#include "server/redis_store/leaf_writer.h"
#include "server/store/indexed_plan.h"

namespace tdstore::store {

// td[index] for every leaf under `paths` (all leaves if empty).
absl::StatusOr<IndexedReadResult> ReadIndexedLeaves(const DictStore& store, const DictRef& ref,
                                                    const plan::IndexSpec& index,
                                                    const std::vector<LeafPath>& paths);

// td[index] = value for each value; missing leaves are created zero-filled
// (element shape = the value's dims after the indexed batch dims) first.
// Returns the leaves written (their records as stored); `*version`, if
// given, is set to the schema version the write was made at (after the
// leaves it created, if any), and `*version_after`, if given, to the
// version read behind the write when it could be (indexed_io.h).
//
// `lease` is the caller's share of store->budget(), holding what it leased
// for `values` as they arrived; the write grows it to what it needs (see
// IndexedWriteLease) before allocating.
absl::StatusOr<std::vector<Leaf>> WriteIndexedLeaves(DictStore* store, const DictRef& ref,
                                                     const plan::IndexSpec& index,
                                                     const std::vector<IndexedWriteValue>& values,
                                                     MemoryBudget::Lease& lease,
                                                     int64_t* version = nullptr,
                                                     std::optional<SchemaVersionSeen>* version_after = nullptr);
// The same, leasing everything itself.
absl::StatusOr<std::vector<Leaf>> WriteIndexedLeaves(DictStore* store, const DictRef& ref,
                                                     const plan::IndexSpec& index,
                                                     const std::vector<IndexedWriteValue>& values);

// What a caller receiving an indexed write's value of `value_bytes` should
// lease for it before buffering it: the value itself and its copies in the
// write, as if it did not broadcast (the usual case), plus an allowance
// for the resolved index with the first value. Leasing it all at once lets
// a typical write take its whole share in one wait, rather than hold part
// of the budget while it waits for the rest (which, across many calls,
// could block all of them until their waits time out). A value that
// broadcasts to more, or an index of many small cells, grows the lease
// later.
int64_t IndexedWriteLease(int64_t value_bytes, bool first_value);

// Creates zero-filled leaves (ZeroLeaf, store/indexed_plan.h) in one commit
// into the dict `schema` describes; paths that exist by then are left alone
// (and out of the result's `written`). For indexed writes and for dicts
// created with a schema.
absl::StatusOr<CommitResult> CreateZeroFilledLeaves(DictStore* store, const DictSchema& schema,
                                                    const std::vector<ZeroLeaf>& leaves);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_INDEXED_ACCESS_H_
