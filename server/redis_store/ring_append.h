// A ring buffer's append: rows reserved from a dict counter and written in
// one call (WriteBegin.ring in the protocol).
//
//   RingAppend ring{"tdstore.rb.cursor", 256, "tdstore.rb.written"};
//   auto r = AppendToRing(dicts, ref, ring, values, lease);
//   // r->start: the cursor before; rows start .. start + 255 (mod dim 0)
//
// Steps, each one Redis script on the dict's slot:
//   1. reserve: cursor += rows, atomically with reading the ring's size
//      (batch dim 0; reserve_ring.lua), so writers in any process or
//      daemon get disjoint rows of one turn;
//   2. write: td[(start + i) mod batch dim 0 for i < rows] = values, as
//      WriteIndexedLeaves (missing leaves created zero-filled);
//   3. count: count += rows, only once the rows are written. With one
//      writer every row below `count` is written. With several appending
//      at once `count` is a total, not a high-water mark: a slower
//      writer's rows, reserved before a faster one's, may still be in
//      flight while `count` already covers as many rows.
//
// The rows are placed mod batch dim 0 as it was at the reservation, so an
// append after a resize through any daemon wraps at the new size; one
// racing a resize may wrap at the old one (or, after a shrink, be refused
// OUT_OF_RANGE and give its reservation back).
//
// A write that fails after step 1 gives its reservation back when no writer
// reserved after it (cursor compared-and-set from start + rows to start):
// then a refused append changed nothing. Otherwise the rows keep what they
// held (before the first turn ends: zeros), and `count` does not count them.
//
// Errors: as WriteIndexedLeaves, and INVALID_ARGUMENT for a counter name
// outside 1..kMaxAttrNameBytes bytes, a dict without batch dims, or rows
// outside 1..batch dim 0 (all checked before anything changes);
// RESOURCE_EXHAUSTED / OUT_OF_RANGE from the counters (dict_state.h). If
// step 3 fails, the rows are written and the error says so.
//
// Thread-safe as far as the store is.
#ifndef TDSTORE_SERVER_REDIS_STORE_RING_APPEND_H_
#define TDSTORE_SERVER_REDIS_STORE_RING_APPEND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/redis_store/dict_store.h"
#include "server/redis_store/indexed_access.h"

namespace tdstore::store {

// `lease` holds what the caller leased for `values` (WriteIndexedLeaves).
absl::StatusOr<RingAppendResult> AppendToRing(DictStore* dicts, const DictRef& ref,
                                              const RingAppend& ring,
                                              const std::vector<IndexedWriteValue>& values,
                                              MemoryBudget::Lease& lease);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_RING_APPEND_H_
