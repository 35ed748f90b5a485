#include "server/store/record_layout.h"

#include <utility>

#include "common/shape.h"

namespace tdstore::store {

bool FormsRecord(const DictSchema& schema) {
  return schema.meta.layout == DictLayout::kRecord && schema.RecordLeaves().empty();
}

RecordSplit SplitForRecord(const std::vector<Leaf>& leaves) {
  RecordSplit split;
  for (const Leaf& leaf : leaves) {
    (RowBytes(leaf.record) > 0 ? split.fields : split.own).push_back(leaf);
  }
  return split;
}

absl::StatusOr<PlacedRecord> PlaceRecord(int64_t rows, std::vector<Leaf> fields) {
  PlacedRecord placed;
  for (Leaf& leaf : fields) {
    leaf.record.generation = 0;
    leaf.record.in_record = {placed.stride, 0};
    placed.stride += RowBytes(leaf.record);
  }
  for (Leaf& leaf : fields) leaf.record.in_record.stride = placed.stride;
  auto bytes = ByteSize(std::vector<int64_t>{rows, placed.stride}, 1);
  if (!bytes.ok()) return bytes.status();
  placed.bytes = *bytes;
  placed.fields = std::move(fields);
  return placed;
}

}  // namespace tdstore::store
