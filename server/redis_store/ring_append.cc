#include "server/redis_store/ring_append.h"

#include <utility>

#include "common/str_cat.h"
#include "server/redis_store/dict_state.h"
#include "server/store/indexed_plan.h"

namespace tdstore::store {

absl::StatusOr<RingAppendResult> AppendToRing(DictStore* dicts, const DictRef& ref,
                                              const RingAppend& ring,
                                              const std::vector<IndexedWriteValue>& values,
                                              MemoryBudget::Lease& lease) {
  // Everything that can be checked before the reservation is: a refusal
  // then changes nothing at all. (ReserveRing checks the cursor's name and
  // the rows; the count's name is checked here, before anything is written.)
  if (!ring.count.empty()) {
    if (auto s = CheckStateName("counter", ring.count); !s.ok()) return s;
  }
  if (values.empty()) return absl::InvalidArgumentError("a ring append needs a value");

  // The size is read in the same atomic step as the reservation: the rows
  // are placed by the size they were reserved at.
  auto reserved = ReserveRing(*dicts, ref, ring.cursor, ring.rows);
  if (!reserved.ok()) return reserved.status();
  RingAppendResult result;
  result.start = reserved->start;
  const int64_t end = reserved->start + ring.rows;  // the cursor after
  auto written = WriteIndexedLeaves(dicts, ref, RingRows(result.start, ring.rows, reserved->size),
                                    values, lease, &result.version);
  if (!written.ok()) {
    // Give the rows back if no one reserved after them; if that fails too,
    // the write's own error is what the caller needs.
    (void)ApplyCounter(*dicts, ref,
                       {CounterOp::Kind::kCas, ring.cursor, 0, end, result.start});
    return written.status();
  }
  result.written = *std::move(written);

  if (!ring.count.empty()) {
    auto counted = ApplyCounter(*dicts, ref, {CounterOp::Kind::kAdd, ring.count, ring.rows});
    if (!counted.ok()) {
      return absl::Status(counted.status().code(),
                          StrCat("rows ", result.start, "..", result.start + ring.rows - 1,
                                 " of the ring were written, but not counted: ",
                                 counted.status().message()));
    }
    result.count_value = counted->value;
  }
  return result;
}

}  // namespace tdstore::store
