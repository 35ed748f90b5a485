#include "common/block_layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/shape.h"

namespace tdstore {

absl::StatusOr<BlockLayout> BlockLayout::Make(absl::Span<const int64_t> batch_shape,
                                              absl::Span<const int64_t> leaf_shape,
                                              int64_t elem_size, int64_t rows_per_block,
                                              int64_t part_bytes, int64_t stride,
                                              int64_t field_offset) {
  if (rows_per_block < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows_per_block must be at least 1, got ", rows_per_block));
  }
  if (part_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("part_bytes must be at least 1, got ", part_bytes));
  }
  if (elem_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("element size must be at least 1, got ", elem_size));
  }
  if (absl::Status s = ValidateShape(batch_shape, "batch shape"); !s.ok()) return s;
  if (absl::Status s = ValidateShape(leaf_shape, "leaf shape"); !s.ok()) return s;
  if (!HasPrefix(leaf_shape, batch_shape)) {
    return absl::InvalidArgumentError(absl::StrCat("leaf shape ", ShapeToString(leaf_shape),
                                                   " does not start with the batch shape ",
                                                   ShapeToString(batch_shape)));
  }

  BlockLayout layout;
  absl::StatusOr<int64_t> total = ByteSize(leaf_shape, elem_size);
  if (!total.ok()) return total.status();
  layout.total_bytes_ = *total;
  layout.part_bytes_ = part_bytes;

  if (batch_shape.empty()) {
    // No rows to group: one-byte rows and part-sized blocks give exactly one
    // part per block, which is the documented "piece p in block p" layout.
    layout.rows_ = layout.total_bytes_;
    layout.row_bytes_ = 1;
    layout.stride_ = 1;
    layout.rows_per_block_ = part_bytes;
    if (stride != 0) return absl::InvalidArgumentError("a record needs batch dims");
    return layout;
  }

  // Computed on its own (not total / rows) because rows may be 0. It cannot
  // overflow when total does not, except for empty leaves with huge rows,
  // which we reject like any other overflow.
  absl::StatusOr<int64_t> row_bytes = ByteSize(leaf_shape.subspan(1), elem_size);
  if (!row_bytes.ok()) return row_bytes.status();
  layout.rows_ = batch_shape[0];
  layout.row_bytes_ = *row_bytes;
  layout.stride_ = *row_bytes;
  layout.rows_per_block_ = rows_per_block;
  if (stride != 0) {
    if (stride < 0 || field_offset < 0 || field_offset > stride - layout.row_bytes_ ||
        !ByteSize(std::vector<int64_t>{layout.rows_, stride}, 1).ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a ", layout.row_bytes_, "-byte row at offset ", field_offset,
          " does not fit a record of ", stride, " bytes"));
    }
    layout.stride_ = stride;
    layout.field_offset_ = field_offset;
  }
  return layout;
}

// Row counts are used instead of rows_per_block * row_bytes throughout: that
// product may overflow when rows_per_block exceeds the number of rows, while
// any quantity bounded by the leaf's size cannot.

BlockLayout BlockLayout::StoredRows() const {
  BlockLayout stored = *this;
  stored.total_bytes_ = stored_bytes();
  stored.row_bytes_ = stride_;
  stored.field_offset_ = 0;
  return stored;
}

int64_t BlockLayout::block_count() const {
  if (total_bytes_ == 0) return 0;
  return rows_ / rows_per_block_ + (rows_ % rows_per_block_ != 0 ? 1 : 0);
}

int64_t BlockLayout::block_bytes(int64_t block) const {
  if (block < 0 || block >= block_count()) return 0;
  const int64_t first_row = block * rows_per_block_;
  return std::min(rows_per_block_, rows_ - first_row) * stride_;
}

int64_t BlockLayout::part_count(int64_t block) const {
  const int64_t bytes = block_bytes(block);
  return bytes / part_bytes_ + (bytes % part_bytes_ != 0 ? 1 : 0);
}

int64_t BlockLayout::part_size(int64_t block, int64_t part) const {
  if (part < 0 || part >= part_count(block)) return 0;
  return std::min(part_bytes_, block_bytes(block) - part * part_bytes_);
}

}  // namespace tdstore
