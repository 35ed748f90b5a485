// Dense indexed writes on standalone Redis: a key whose ranges are many
// and close together is written as one span, read under WATCH, patched
// and written back in one MULTI/EXEC with the blocks' transactions.
// Internal to the Redis store (indexed_io.h is the door; WriteIndexed
// tries this first).
#ifndef TDSTORE_SERVER_REDIS_STORE_INDEXED_DENSE_WRITE_H_
#define TDSTORE_SERVER_REDIS_STORE_INDEXED_DENSE_WRITE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "server/redis_store/dict_store.h"
#include "server/redis_store/indexed_blocks.h"
#include "server/redis_store/indexed_io.h"
#include "server/store/schema.h"

namespace tdstore::store {

// Standalone Redis: a key whose ranges are many and dense (a step slice's
// rows, td[::3] = v) is written as one range. Its span is read, patched here
// with the ranges and written back: 2 round trips in all, where a SETRANGE
// per range had Redis run 3,334 commands per leaf of td[::3] = v on
// [10000, 64] f32 (16,670 for five leaves: 11-17 ms of Redis CPU, which
// bounded the call; the seed reads and writes the span too).
//
// Why that loses no other write: the spans are read after WATCH on their
// keys, and the blocks' transactions (guard_runs.lua, the SETRANGEs,
// release_runs.lua, as GuardedWrite makes them) run in one MULTI/EXEC. If
// anyone wrote a watched key in between (another row of the span, a
// generation's delete), EXEC runs nothing and the caller writes range by
// range instead. The seed's read-modify-write has no such check: rows
// written by another client in between are overwritten with old bytes.
//
// Memory: a span moves at most kCoverFactor times its ranges' bytes, so
// the spans read fit the write's lease (indexed_access.cc, kWriteCopies).
//
// `plans` are the blocks' PlanWrite, in `blocks`' order. Returns true when
// written; false, having written nothing, when no key qualifies or a
// watched key changed. A stale probe or block is an error, as in
// RunBlocks.
absl::StatusOr<bool> WriteCovered(const DictStore& store, const DictSchema& schema, bool probe,
                                  const std::map<int64_t, BlockWork>& blocks,
                                  const std::vector<WritePlan>& plans,
                                  const std::vector<IndexedValue>& values,
                                  std::optional<int64_t>* version_after);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_INDEXED_DENSE_WRITE_H_
