// The cells of a ragged leaf (LeafKind::kRagged, common/leaf_kind.h): one
// tensor per batch cell, each of its own shape, all of one dtype.
//
// A ragged leaf is a value leaf: its rows are slots (common/value_rows.h), so
// a cell is read and written with the tensor rows of the same batch cell, in
// the same block calls. What a slot's value holds is a cell:
//
//   byte 0        ndim, the cell's number of dims (at most kMaxRaggedDims)
//   bytes 1..7    zero
//   8 * ndim      the dims, each an int64, little-endian
//   the rest      the elements, C order, little-endian, of the leaf's dtype
//
// The leaf's dtype is not repeated in its cells: it lives once, in the leaf
// record's value, spelled as DTypeName gives it ("float32"). An empty value
// (a row never written, or one a resize added) is the empty cell: ndim 1,
// dim 0.
//
// Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_COMMON_RAGGED_CELLS_H_
#define TDSTORE_COMMON_RAGGED_CELLS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"

namespace tdstore {

// The most dims one cell may have.
inline constexpr int kMaxRaggedDims = 16;

// Bytes before a cell's dims.
inline constexpr int64_t kRaggedCellPrefixBytes = 8;

// The dtype a ragged leaf's record value names. INVALID_ARGUMENT (saying
// what a ragged leaf needs) for an empty or unknown name.
absl::StatusOr<DType> RaggedDType(std::string_view record_value);

// The bytes of the cell holding `shape` with `data` (exactly the shape's
// element count times DTypeSize(dtype) bytes). INVALID_ARGUMENT for a
// negative dim, too many dims, or a data size that does not match.
absl::StatusOr<std::string> EncodeRaggedCell(DType dtype, const std::vector<int64_t>& shape,
                                             std::string_view data);

// One decoded cell: its shape, and its elements (a view into the value).
struct RaggedCell {
  std::vector<int64_t> shape;
  std::string_view data;
};

// The cell a slot's value holds (the empty value is the empty cell).
// DATA_LOSS for bytes no tdstore client wrote: a short prefix, too many
// dims, nonzero reserved bytes, negative dims, or a size that does not
// match the dims.
absl::StatusOr<RaggedCell> DecodeRaggedCell(DType dtype, std::string_view value);

}  // namespace tdstore

#endif  // TDSTORE_COMMON_RAGGED_CELLS_H_
