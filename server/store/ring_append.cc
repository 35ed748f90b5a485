#include "server/store/ring_append.h"

#include <utility>

#include "common/str_cat.h"
#include "server/store/dict_state.h"

namespace tdstore::store {

namespace {

// The rows a reservation of `rows` from `start` covers, as an index over
// batch dim 0 of `size` rows: one slice when they do not wrap (the cheaper
// plan), else their positions. A negative cursor (a client's own counter
// call can make one) still names rows: positions are non-negative mod the
// size.
plan::IndexSpec RingRows(int64_t start, int64_t rows, int64_t size) {
  const int64_t first = ((start % size) + size) % size;
  if (first + rows <= size) return {plan::IndexTerm::Slice(first, first + rows)};
  std::vector<int64_t> positions(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) positions[static_cast<size_t>(i)] = (first + i) % size;
  return {plan::IndexTerm::Positions(std::move(positions))};
}

// Batch dim 0 of the dict, read now: the ring's size, which places the
// rows. Not from the schema cache: a write made from a cached schema that
// turns out stale is sent at once and redone, and for rows placed by a
// stale size the first try would land on the wrong rows.
absl::StatusOr<int64_t> RingSize(DictStore* dicts, const DictRef& ref) {
  auto schema = dicts->Load(ref);
  if (!schema.ok()) return schema.status();
  const Shape& batch = schema->meta.batch_shape;
  if (batch.empty() || batch[0] == 0) {
    return absl::InvalidArgumentError(StrCat("dict '", ref.name,
                                             "' has no rows to append to (batch shape [",
                                             batch.empty() ? "" : "0", "])"));
  }
  return batch[0];
}

}  // namespace

absl::StatusOr<RingAppendResult> AppendToRing(DictStore* dicts, const DictRef& ref,
                                              const RingAppend& ring,
                                              const std::vector<IndexedWriteValue>& values,
                                              MemoryBudget::Lease& lease) {
  // Everything that can be checked before the reservation is: a refusal
  // then changes nothing at all.
  if (auto s = CheckStateName("counter", ring.cursor); !s.ok()) return s;
  if (!ring.count.empty()) {
    if (auto s = CheckStateName("counter", ring.count); !s.ok()) return s;
  }
  if (values.empty()) return absl::InvalidArgumentError("a ring append needs a value");
  auto size = RingSize(dicts, ref);
  if (!size.ok()) return size.status();
  if (ring.rows < 1 || ring.rows > *size) {
    return absl::InvalidArgumentError(StrCat("a ring append of dict '", ref.name, "' takes 1 to ",
                                             *size, " rows (its batch dim 0); got ", ring.rows));
  }

  auto reserved = ApplyCounter(*dicts, ref, {CounterOp::Kind::kAdd, ring.cursor, ring.rows});
  if (!reserved.ok()) return reserved.status();
  RingAppendResult result;
  result.start = reserved->value - ring.rows;
  auto written = WriteIndexedLeaves(dicts, ref, RingRows(result.start, ring.rows, *size), values,
                                    lease, &result.version);
  if (!written.ok()) {
    // Give the rows back if no one reserved after them; if that fails too,
    // the write's own error is what the caller needs.
    (void)ApplyCounter(*dicts, ref,
                       {CounterOp::Kind::kCas, ring.cursor, 0, reserved->value, result.start});
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
