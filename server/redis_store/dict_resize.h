// Changing batch dim 0 of a dict in place (docs/storage-layout.md, *Resize*).
//
//   auto schema = ResizeDict(dicts, ref, 20000);  // rows 10000.. read zeros
//
// A row's bytes sit at the same offset of the same block part whatever the
// number of rows (common/block_layout.h), so a resize moves no byte. A grow
// extends the last block's parts and creates the new blocks' parts, all
// zeros; a shrink cuts them and deletes the blocks past the end. Rows both
// sizes have keep every byte.
//
// The steps, under a lease on the dict (resize_dict.lua) so that two
// resizes never size one dict's blocks at once:
//   grow:   reserve the new bytes -> prepare (lease, rows_high) -> size
//           the blocks -> commit -> release;
//   shrink: prepare -> commit -> trim the blocks -> return the bytes ->
//           release.
// The commit changes every leaf record's shape and the batch shape in one
// script, so readers see the old size or the new one, never a mix, and a
// reader planned against the old size fails its probe and reads again. A
// write planned against the old size cannot commit it (commit_leaves.lua,
// TDBATCH). The commit is a compare-and-set on the schema version: a leaf
// written or replaced meanwhile makes the resize undo what it sized and
// plan again (at most three times, then ABORTED).
//
// Errors: NOT_FOUND (dict); INVALID_ARGUMENT (no batch dims, a negative
// size, or leaves too large at the new size); FAILED_PRECONDITION (locked);
// RESOURCE_EXHAUSTED (a grow past a quota); ABORTED (the dict kept
// changing, or another resize held it for too long; retry); UNAVAILABLE
// (Redis; IsOutcomeUnknown() when the commit's reply was lost). A resize
// refused before its commit changed nothing a reader can see.
//
// Thread-safe.
#ifndef TDSTORE_SERVER_REDIS_STORE_DICT_RESIZE_H_
#define TDSTORE_SERVER_REDIS_STORE_DICT_RESIZE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "server/redis_store/dict_store.h"

namespace tdstore::store {

// Sets batch dim 0 to `rows`; returns the schema afterwards. Resizing to the
// current size changes nothing.
absl::StatusOr<DictSchema> ResizeDict(DictStore& dicts, const DictRef& ref, int64_t rows);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_DICT_RESIZE_H_
