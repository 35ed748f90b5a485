// Server-side copy: leaves of one dict written into another (or the same)
// inside tdstored, window by window from a whole-leaf read into a write
// transaction. No byte crosses gRPC, and on a cluster the blocks move
// between slots here (two dicts' block keys never share a slot).
//
//   auto result = CopyLeaves(dicts, {"replay", id}, {}, {"replay-copy", id2}, {});
//
// The leaves at or under `from` (empty: every leaf) go to `to` + their path
// below `from`; a leaf named by `from` itself goes to `to`, which must then
// be non-empty. The copies become visible together at the commit and
// replace what is at their target paths; a copy cut short (an error, a
// client gone, a killed daemon) leaves nothing visible, and the sweeper
// deletes what it wrote. Memory: the read's and the write's window
// pipelines, leased from the budget as any read and write.
//
// Errors: NOT_FOUND (either dict; nothing at `from`); INVALID_ARGUMENT (a
// leaf's batch dims that do not fit the target dict, a leaf copied onto
// the root); FAILED_PRECONDITION (a target path nested in a leaf, or a
// locked target that the copy would add to or reshape); ABORTED (a source
// leaf replaced during the copy: retry); those of WriteTxn.
//
// Thread-safe (each call has its own read and transaction).
#ifndef TDSTORE_SERVER_REDIS_STORE_LEAF_COPY_H_
#define TDSTORE_SERVER_REDIS_STORE_LEAF_COPY_H_

#include "absl/status/statusor.h"
#include "common/path.h"
#include "server/redis_store/dict_store.h"
#include "server/redis_store/leaf_writer.h"

namespace tdstore::store {

absl::StatusOr<CommitResult> CopyLeaves(DictStore& dicts, const DictRef& src,
                                        const LeafPath& from, const DictRef& dst,
                                        const LeafPath& to);
// The same, into the dict `dst` describes, as read by the caller (a dict
// made with DictStore::CreateDict(..., publish = false) has no name to
// look up yet).
absl::StatusOr<CommitResult> CopyLeavesInto(DictStore& dicts, const DictRef& src,
                                            const LeafPath& from, DictSchema dst,
                                            const LeafPath& to);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_LEAF_COPY_H_
