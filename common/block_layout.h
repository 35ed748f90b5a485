// How one leaf's bytes are cut into Redis values.
//
// A leaf of a dict with batch shape [N, ...] is a sequence of N *rows* (one
// per index of batch dim 0), each `row_bytes` long, stored C-order. Rows are
// grouped into *blocks* of `rows_per_block` rows; block b of every leaf shares
// the hash tag {dict_id.b}, so one block of all leaves lives in one cluster
// slot. A block bigger than `part_bytes` is cut at byte offsets into *parts*
// of `part_bytes` (the last one shorter), each its own Redis string, so no
// value nears Redis' 512 MB limit.
//
// A dict without batch dims has no rows; each leaf is cut straight into
// pieces of `part_bytes`, piece p stored as part 0 of block p. The layout
// models that as rows of one byte with rows_per_block = part_bytes.
//
// A leaf of 0 bytes has no blocks at all.
//
// A leaf of a record dict (docs/storage-layout.md, "Record dicts") shares
// its blocks with the record's other leaves: each stored row is `stride`
// bytes, the whole record, and the leaf's row sits at `field_offset` in
// it. Blocks and parts are then cut from stride-byte rows, and a range of
// the leaf's bytes maps to one segment per row it touches.
//
// Pure code, no I/O. Immutable after construction; safe to share.
#ifndef TDSTORE_COMMON_BLOCK_LAYOUT_H_
#define TDSTORE_COMMON_BLOCK_LAYOUT_H_

#include <algorithm>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tdstore {

// One contiguous byte range inside one Redis value (block b, part p).
struct Segment {
  int64_t block = 0;
  int64_t part = 0;
  int64_t offset_in_part = 0;
  int64_t length = 0;
  // Where the range starts in the leaf's C-order bytes.
  int64_t leaf_offset = 0;
};

class BlockLayout {
 public:
  // batch_shape: the dict's; leaf_shape: the full shape (batch dims first);
  // elem_size: dtype size. INVALID_ARGUMENT if rows_per_block or part_bytes
  // is < 1, leaf_shape does not start with batch_shape, or sizes overflow.
  // stride > 0: a leaf in a record of `stride` bytes per row, at
  // `field_offset` (INVALID_ARGUMENT without batch dims, or if the leaf's
  // row does not fit inside the record).
  static absl::StatusOr<BlockLayout> Make(absl::Span<const int64_t> batch_shape,
                                          absl::Span<const int64_t> leaf_shape,
                                          int64_t elem_size, int64_t rows_per_block,
                                          int64_t part_bytes, int64_t stride = 0,
                                          int64_t field_offset = 0);

  // The leaf's bytes (not what its blocks store: stored_bytes()).
  int64_t total_bytes() const { return total_bytes_; }
  int64_t rows() const { return rows_; }
  int64_t row_bytes() const { return row_bytes_; }
  // Bytes of one stored row: the record's for a leaf in one, else row_bytes.
  int64_t stride() const { return stride_; }
  bool in_record() const { return stride_ != row_bytes_ || field_offset_ != 0; }
  // Bytes the blocks hold: rows x stride.
  int64_t stored_bytes() const { return rows_ * stride_; }
  // Where the leaf's row starts in a stored row (0 unless in a record).
  int64_t field_offset() const { return field_offset_; }
  // The layout of the stored rows themselves, whole: for a leaf in a
  // record, the record's (its "leaf" bytes are the stored bytes); else this.
  BlockLayout StoredRows() const;
  int64_t rows_per_block() const { return rows_per_block_; }
  int64_t part_bytes() const { return part_bytes_; }

  // Number of blocks holding data (0 when total_bytes() == 0).
  int64_t block_count() const;
  // Stored bytes in block b (the last block may be short).
  int64_t block_bytes(int64_t block) const;
  // Parts of block b: ceil(block_bytes / part_bytes).
  int64_t part_count(int64_t block) const;
  // Bytes in part p of block b.
  int64_t part_size(int64_t block, int64_t part) const;
  // Byte offset of block b's first row in the leaf.
  int64_t block_offset(int64_t block) const { return block * rows_per_block_ * row_bytes_; }

  // Calls fn for each piece of the leaf byte range [offset, offset + length),
  // split at part boundaries (and, in a record, at rows) and further so no
  // piece exceeds max_piece bytes, in increasing offset order. The range
  // must lie inside the leaf.
  //
  // A template, so that a caller's lambda is inlined: an indexed read or
  // write of a record dict makes one segment per row and leaf (768 for a
  // 256-row sample of 3 leaves), and a std::function call per segment was
  // a visible share of tdstored's planning (docs/benchmarks.md, *The
  // version read inside the pipeline's window*).
  template <typename Fn>
  void ForEachSegment(int64_t offset, int64_t length, int64_t max_piece, Fn&& fn) const {
    // A range outside the leaf is a caller bug; yield nothing rather than
    // pieces of keys that do not exist. (Written so that offset + length
    // cannot overflow.)
    if (offset < 0 || length < 0 || max_piece < 1 || offset > total_bytes_ ||
        length > total_bytes_ - offset) {
      return;
    }
    const int64_t end = offset + length;
    const bool record = in_record();
    // A record's leaf is a segment per row, mostly all in one block: its
    // size is looked up once per block, not once per segment (part_size
    // divides three times).
    int64_t known_block = -1;
    int64_t known_block_bytes = 0;
    int64_t pos = offset;
    while (pos < end) {
      const int64_t row = pos / row_bytes_;
      const int64_t in_row = pos - row * row_bytes_;
      const int64_t block = row / rows_per_block_;
      const int64_t in_block = (row - block * rows_per_block_) * stride_ + field_offset_ + in_row;
      const int64_t part = in_block / part_bytes_;
      const int64_t in_part = in_block - part * part_bytes_;
      if (block != known_block) {
        known_block = block;
        known_block_bytes = block_bytes(block);
      }
      // part_size(block, part): the range lies inside the leaf, so `part`
      // is one of the block's parts.
      const int64_t left_in_part =
          std::min(part_bytes_, known_block_bytes - part * part_bytes_) - in_part;
      int64_t piece = std::min({end - pos, left_in_part, max_piece});
      // A record's next row of this leaf is a stride further on, not adjacent.
      if (record) piece = std::min(piece, row_bytes_ - in_row);
      fn(Segment{block, part, in_part, piece, pos});
      pos += piece;
    }
  }

 private:
  BlockLayout() = default;
  int64_t total_bytes_ = 0;
  int64_t rows_ = 0;
  int64_t row_bytes_ = 0;
  int64_t stride_ = 0;
  int64_t field_offset_ = 0;
  int64_t rows_per_block_ = 1;
  int64_t part_bytes_ = 1;
};

}  // namespace tdstore

#endif  // TDSTORE_COMMON_BLOCK_LAYOUT_H_
