// What tdstored knows of one leaf: dtype, full shape, generation, kind, and
// where a leaf of a record dict keeps its rows. A value type every store
// keeps; how the Redis store writes it down is redis_store/leaf_record_text.h.
#ifndef TDSTORE_SERVER_STORE_LEAF_RECORD_H_
#define TDSTORE_SERVER_STORE_LEAF_RECORD_H_

#include <cstdint>
#include <string>
#include <utility>

#include "common/dtype.h"
#include "common/leaf_kind.h"
#include "common/shape.h"

namespace tdstore {

struct LeafRecord {
  LeafRecord() = default;
  LeafRecord(DType dtype, Shape shape, int64_t generation, LeafKind kind = LeafKind::kTensor,
             std::string value = {})
      : dtype(dtype),
        shape(std::move(shape)),
        generation(generation),
        kind(kind),
        value(std::move(value)) {}

  // Where a leaf of a record dict keeps its rows: at byte `offset` of each
  // `stride`-byte row of its generation, which every leaf of the record
  // shares. stride == 0: the leaf's generation holds its rows alone.
  struct InRecord {
    int64_t offset = 0;
    int64_t stride = 0;
    bool operator==(const InRecord& o) const { return offset == o.offset && stride == o.stride; }
  };

  DType dtype = DType::kUnspecified;
  Shape shape;  // full shape, batch dims first
  int64_t generation = 0;
  LeafKind kind = LeafKind::kTensor;
  // The value of a one-value leaf (IsOneValue), or a ragged leaf's cell
  // dtype name; empty for any other (KeepsValue).
  std::string value;
  InRecord in_record;

  bool InSharedRecord() const { return in_record.stride > 0; }

  bool operator==(const LeafRecord& o) const {
    return dtype == o.dtype && shape == o.shape && generation == o.generation &&
           kind == o.kind && value == o.value && in_record == o.in_record;
  }
};

}  // namespace tdstore

#endif  // TDSTORE_SERVER_STORE_LEAF_RECORD_H_
