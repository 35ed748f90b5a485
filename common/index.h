// Indices over a dict's batch dims, with torch's semantics, and the plan
// that turns one into byte runs of a leaf.
//
// An IndexSpec is a tuple of terms, one per batch dim it consumes (Ellipsis
// consumes as many as needed; missing trailing dims mean ':'):
//   int          a position, negative counts from the end; removes the dim
//   slice        start:stop:step, bounds optional or negative, step > 0
//   positions    an int64 tensor of positions (any order, duplicates; shape
//                [] (0-d), [n] or any N-D shape, as torch allows)
//   mask         a 1-D bool tensor whose length equals the dim
//   ellipsis     `...`, at most once
// The result is exactly what torch's `t.index({...})` returns for a tensor t
// whose leading dims are the batch shape: ints are applied first (as
// select), then slices and advanced indices (positions, masks) follow
// NumPy's rule — advanced indices broadcast together; their dims replace the
// advanced dims in place when those are adjacent, and go first otherwise.
//
// Everything here is in namespace tdstore::plan: the client library has
// its own user-facing tdstore::Index/IndexTerm, and one binary may link both.
//
// Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_COMMON_INDEX_H_
#define TDSTORE_COMMON_INDEX_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/block_layout.h"
#include "common/shape.h"

namespace tdstore::plan {

struct IndexTerm {
  enum class Kind { kInt, kSlice, kPositions, kMask, kEllipsis };
  Kind kind = Kind::kEllipsis;

  int64_t value = 0;  // kInt

  std::optional<int64_t> start, stop;  // kSlice; nullopt = omitted
  int64_t step = 1;                    // kSlice; must be > 0

  std::vector<int64_t> positions;  // kPositions, C-order
  Shape positions_shape;           // kPositions; numel must equal positions.size()

  std::vector<bool> mask;  // kMask

  static IndexTerm Int(int64_t v);
  static IndexTerm Slice(std::optional<int64_t> start, std::optional<int64_t> stop,
                         int64_t step = 1);
  static IndexTerm All() { return Slice(std::nullopt, std::nullopt, 1); }
  static IndexTerm Positions(std::vector<int64_t> positions, Shape shape);
  static IndexTerm Positions(std::vector<int64_t> positions);  // 1-D
  static IndexTerm Mask(std::vector<bool> mask);
  static IndexTerm Ellipsis();
};

using IndexSpec = std::vector<IndexTerm>;

// The slice rule, written once: a slice's step must be > 0 (torch has no
// negative or zero steps). ResolveIndex applies it, and the client core
// calls it before sending an index (client/core/src/convert.cc), so that a
// bad step costs no call. INVALID_ARGUMENT "index item <item>: slice step
// must be greater than zero, got <step>" when it is not.
absl::Status CheckSliceStep(size_t item, int64_t step);

// An index checked against a batch shape.
struct ResolvedIndex {
  // The indexed batch shape: what the batch dims become.
  Shape result_shape;
  // For each cell of the result (C-order over result_shape), the flat
  // C-order position of the batch cell it selects. Size = numel(result_shape).
  std::vector<int64_t> cells;
};

// Errors: OUT_OF_RANGE for an int or position outside its dim;
// INVALID_ARGUMENT for too many items, more than one ellipsis, step <= 0,
// a mask whose length differs from its dim, index shapes that cannot
// broadcast, or a position list whose shape does not match its size.
// Messages name the offending item and dim. RESOURCE_EXHAUSTED, before
// anything is allocated, if the result has more than max_cells cells
// (positions of shape [n, 1] and [1, n] broadcast to n * n cells).
absl::StatusOr<ResolvedIndex> ResolveIndex(
    const IndexSpec& index, const Shape& batch_shape,
    int64_t max_cells = std::numeric_limits<int64_t>::max());

// One contiguous byte range of a leaf and where it lands in the result.
struct ByteRun {
  int64_t leaf_offset = 0;
  int64_t length = 0;
  int64_t result_offset = 0;
};

// The coalesced byte runs, in result order, that read (or write) the cells
// of `resolved` in a leaf whose cells are `cell_bytes` long (the product of
// the leaf's non-batch dims times the dtype size). Consecutive cells that are
// adjacent in the leaf merge into one run. Empty when cell_bytes is 0.
//
// With `order` (a permutation of the result's cells, as AscendingCells
// gives), the runs come in that order instead: cell order[0] first. Cells
// merge only where both their leaf and their result bytes follow on.
std::vector<ByteRun> PlanRuns(const ResolvedIndex& resolved, int64_t cell_bytes,
                              const std::vector<int64_t>* order = nullptr);

// The result's cells ordered by the batch cell they select (ties in result
// order), or an empty vector when they already are: a read's runs planned
// in this order come in leaf order, so its plan merges stretches instead
// of sorting every run of every leaf (indexed_blocks.cc, KeyOffsetOrder).
std::vector<int64_t> AscendingCells(const ResolvedIndex& resolved);

// A run split so it lies inside one part of one block.
struct PartRun {
  int64_t block = 0;
  int64_t part = 0;
  int64_t offset_in_part = 0;
  int64_t length = 0;
  int64_t result_offset = 0;
};

// Splits runs at part boundaries, keeping result order.
std::vector<PartRun> SplitRuns(const std::vector<ByteRun>& runs, const BlockLayout& layout);

// Broadcasts a C-order value of `value_shape` (elements of `elem_size`
// bytes) to `target_shape` as torch's expand would, returning the expanded
// C-order bytes. INVALID_ARGUMENT naming both shapes if it cannot broadcast
// (value_shape may have fewer dims; each dim must equal the target's or be 1).
absl::StatusOr<std::string> BroadcastBytes(std::string_view value, const Shape& value_shape,
                                           const Shape& target_shape, int64_t elem_size);

}  // namespace tdstore::plan

#endif  // TDSTORE_COMMON_INDEX_H_
