// A dict's state beside its leaves: the lock, the attributes and the
// counters (docs/storage-layout.md, *Lock, attributes and counters*).
//
//   auto schema = SetLocked(dicts, ref, true);   // every client sees it
//   auto info = UpdateAttrs(dicts, ref, {{{"device", "cpu"}}, {}});
//   auto n = ApplyCounter(dicts, ref, CounterOp::Add("cursor", 256));
//
// Each call is one Lua script on the dict's slot {id}, atomic with respect
// to every other client and daemon, and reaches the dict only under the
// name the ref gives (a renamed or deleted dict is NOT_FOUND).
//
// The lock itself is enforced where leaves change: commit_leaves.lua and
// delete_leaves.lua refuse a locked dict's structural changes in the same
// step as the change (LockedError), and WriteTxn::BeginLeaf refuses them
// early, before any data moves.
//
// Errors: NOT_FOUND (dict); INVALID_ARGUMENT (a name or value outside
// common/protocol_limits.h, a name both set and removed, no counter
// operation); RESOURCE_EXHAUSTED (more than kMaxAttrs attributes or
// kMaxCounters counters; nothing changed); OUT_OF_RANGE (a counter add that
// would overflow int64; nothing changed); UNAVAILABLE (Redis).
//
// Thread-safe.
#ifndef TDSTORE_SERVER_REDIS_STORE_DICT_STATE_H_
#define TDSTORE_SERVER_REDIS_STORE_DICT_STATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/redis_store/dict_store.h"
#include "server/store/store_checks.h"

namespace tdstore::store {

// Locks (or unlocks) the dict; returns its schema afterwards. Idempotent.
absl::StatusOr<DictSchema> SetLocked(DictStore& dicts, const DictRef& ref, bool locked);

// Applies `update` whole or not at all; returns the schema afterwards.
absl::StatusOr<DictSchema> UpdateAttrs(DictStore& dicts, const DictRef& ref,
                                       const AttrsUpdate& update);

absl::StatusOr<CounterResult> ApplyCounter(DictStore& dicts, const DictRef& ref,
                                           const CounterOp& op);

// A ring append's reservation (reserve_ring.lua): `rows` added to the
// counter `cursor` in one atomic step with reading the ring's size, batch
// dim 0. `start` is the counter before. INVALID_ARGUMENT, nothing changed,
// for rows outside 1..batch dim 0 or a dict without batch dims; otherwise
// ApplyCounter's errors.
struct RingReservation {
  int64_t start = 0;
  int64_t size = 0;
};
absl::StatusOr<RingReservation> ReserveRing(DictStore& dicts, const DictRef& ref,
                                            const std::string& cursor, int64_t rows);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_DICT_STATE_H_
