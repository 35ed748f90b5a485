#include "common/index.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "common/str_cat.h"

namespace tdstore::plan {

IndexTerm IndexTerm::Int(int64_t v) {
  IndexTerm term;
  term.kind = Kind::kInt;
  term.value = v;
  return term;
}

IndexTerm IndexTerm::Slice(std::optional<int64_t> start, std::optional<int64_t> stop,
                           int64_t step) {
  IndexTerm term;
  term.kind = Kind::kSlice;
  term.start = start;
  term.stop = stop;
  term.step = step;
  return term;
}

IndexTerm IndexTerm::Positions(std::vector<int64_t> positions, Shape shape) {
  IndexTerm term;
  term.kind = Kind::kPositions;
  term.positions = std::move(positions);
  term.positions_shape = std::move(shape);
  return term;
}

IndexTerm IndexTerm::Positions(std::vector<int64_t> positions) {
  const int64_t n = static_cast<int64_t>(positions.size());
  return Positions(std::move(positions), Shape{n});
}

IndexTerm IndexTerm::Mask(std::vector<bool> mask) {
  IndexTerm term;
  term.kind = Kind::kMask;
  term.mask = std::move(mask);
  return term;
}

IndexTerm IndexTerm::Ellipsis() {
  IndexTerm term;
  term.kind = Kind::kEllipsis;
  return term;
}

// ---------------------------------------------------------------------------
// ResolveIndex
//
// Torch (at::indexing::applySlicing, then at::index) works in this order, and
// so do we, so that a bad index fails with the same kind of error torch gives:
//   1. too many items;
//   2. items left to right: an int (or a 0-d position tensor, which torch
//      treats exactly like an int) selects and removes its dim at once, so an
//      out-of-range int fails here; a slice with step <= 0 fails here;
//   3. masks become positions (wrong length fails);
//   4. advanced indices broadcast (mismatch fails);
//   5. positions are bounds-checked — but only where torch's kernel would
//      visit them (see CheckPositions).
// Advanced indices are laid out over the dims that survive the ints, which
// is why x[0, :, [1, 2]] on [A, B, C] is [B, 2] in torch (NumPy: [2, B]).

namespace {

// a * b, or nullopt if it overflows int64.
std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t product;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

// The number of cells in `shape`, or nullopt if it overflows int64. A zero
// dim anywhere makes it 0, however large the others.
std::optional<int64_t> CheckedNumel(const Shape& shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t numel = 1;
  for (int64_t d : shape) {
    std::optional<int64_t> next = CheckedMul(numel, d);
    if (!next) return std::nullopt;
    numel = *next;
  }
  return numel;
}

// A batch dim that survives the ints: a slice, or one advanced index.
struct KeptDim {
  size_t item = 0;     // which tuple item produced it (for messages)
  int64_t dim = 0;     // which batch dim
  int64_t size = 0;    // batch_shape[dim]
  int64_t stride = 0;  // in cells, C-order
  bool advanced = false;

  // Slice (already clamped, Python style).
  int64_t start = 0;
  int64_t step = 1;
  int64_t length = 0;

  // Advanced: positions (masks converted) and their shape.
  const IndexTerm* term = nullptr;
  std::vector<int64_t> positions;
  Shape shape;
};

std::string ItemName(size_t item) { return StrCat("index item ", item); }

// Clamps one slice bound the way Python and at::slice do for step > 0.
int64_t ClampBound(int64_t bound, int64_t size) {
  if (bound < 0) bound += size;  // cannot overflow: size >= 0
  return std::clamp<int64_t>(bound, 0, size);
}

// Counts ellipses and dims consumed, and checks each term is well formed.
absl::Status CheckTerms(const IndexSpec& index, int64_t rank) {
  int ellipses = 0;
  int64_t specified = 0;
  for (size_t i = 0; i < index.size(); ++i) {
    const IndexTerm& term = index[i];
    if (term.kind == IndexTerm::Kind::kEllipsis) {
      ++ellipses;
      continue;
    }
    ++specified;
    if (term.kind != IndexTerm::Kind::kPositions) continue;
    if (absl::Status s = ValidateShape(term.positions_shape, ItemName(i)); !s.ok()) return s;
    std::optional<int64_t> numel = CheckedNumel(term.positions_shape);
    if (!numel || *numel != static_cast<int64_t>(term.positions.size())) {
      return absl::InvalidArgumentError(StrCat(ItemName(i), ": ", term.positions.size(),
                                               " positions do not fill shape ",
                                               ShapeToString(term.positions_shape)));
    }
  }
  if (specified > rank) {
    return absl::InvalidArgumentError(
        StrCat("too many indices: ", specified, " for a batch shape of ", rank, " dims"));
  }
  if (ellipses > 1) {
    return absl::InvalidArgumentError("an index can hold only one ellipsis ('...')");
  }
  return absl::OkStatus();
}

// Broadcasts the advanced indices' shapes together, NumPy style.
absl::StatusOr<Shape> BroadcastIndexShapes(const std::vector<KeptDim*>& advanced) {
  size_t rank = 0;
  for (const KeptDim* kept : advanced) rank = std::max(rank, kept->shape.size());
  Shape out(rank, 1);
  for (const KeptDim* kept : advanced) {
    const size_t lead = rank - kept->shape.size();
    for (size_t j = 0; j < kept->shape.size(); ++j) {
      const int64_t d = kept->shape[j];
      int64_t& o = out[lead + j];
      if (o == d || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string shapes;
      for (const KeptDim* k : advanced) {
        shapes += StrCat(shapes.empty() ? "" : ", ", ShapeToString(k->shape));
      }
      return absl::InvalidArgumentError(
          StrCat("index shapes cannot be broadcast together: ", shapes));
    }
  }
  return out;
}

// Torch checks positions lazily: its kernel checks only the positions it
// visits, so nothing is checked when the result is empty — except that an
// index into a dim of size 0 fails whenever the broadcast index shape is not
// empty (AdvancedIndex's check). We follow it exactly: x[[5], []] and, on
// batch [3, 0], x[[5]] succeed with empty results in torch, and here.
// Wraps negative positions in place.
absl::Status CheckPositions(const std::vector<KeptDim*>& advanced, int64_t broadcast_numel,
                            int64_t result_numel) {
  if (broadcast_numel == 0) return absl::OkStatus();
  for (const KeptDim* kept : advanced) {
    if (kept->size == 0) {
      return absl::OutOfRangeError(StrCat(ItemName(kept->item), ": batch dim ", kept->dim,
                                          " has size 0, so no position is in range"));
    }
  }
  if (result_numel == 0) return absl::OkStatus();
  for (KeptDim* kept : advanced) {
    for (int64_t& p : kept->positions) {
      const int64_t original = p;
      if (p < 0) p += kept->size;
      if (p < 0 || p >= kept->size) {
        return absl::OutOfRangeError(StrCat(ItemName(kept->item), ": position ", original,
                                            " is out of range for batch dim ", kept->dim,
                                            " of size ", kept->size));
      }
    }
  }
  return absl::OkStatus();
}

// The batch-cell offset of each cell of the broadcast index shape: the sum
// over advanced indices of position * stride, each index read through
// broadcasting (stride 0 along the dims it has as 1 or lacks).
std::vector<int64_t> AdvancedOffsets(const std::vector<KeptDim*>& advanced, const Shape& shape,
                                     int64_t numel) {
  const size_t rank = shape.size();
  std::vector<std::vector<int64_t>> strides;  // per index, over `shape`'s dims
  for (const KeptDim* kept : advanced) {
    std::vector<int64_t> s(rank, 0);
    int64_t stride = 1;
    for (size_t j = kept->shape.size(); j-- > 0;) {
      if (kept->shape[j] != 1) s[rank - kept->shape.size() + j] = stride;
      stride *= kept->shape[j];
    }
    strides.push_back(std::move(s));
  }
  std::vector<int64_t> offsets;
  offsets.reserve(numel);
  std::vector<int64_t> counter(rank, 0);
  for (int64_t b = 0; b < numel; ++b) {
    int64_t offset = 0;
    for (size_t k = 0; k < advanced.size(); ++k) {
      int64_t flat = 0;
      for (size_t j = 0; j < rank; ++j) flat += counter[j] * strides[k][j];
      offset += advanced[k]->positions[flat] * advanced[k]->stride;
    }
    offsets.push_back(offset);
    for (size_t j = rank; j-- > 0;) {
      if (++counter[j] < shape[j]) break;
      counter[j] = 0;
    }
  }
  return offsets;
}

// The batch-cell offsets a slice adds, one per result entry along its dim.
std::vector<int64_t> SliceOffsets(const KeptDim& kept) {
  std::vector<int64_t> offsets;
  offsets.reserve(kept.length);
  for (int64_t i = 0; i < kept.length; ++i) {
    offsets.push_back((kept.start + i * kept.step) * kept.stride);
  }
  return offsets;
}

}  // namespace

absl::Status CheckSliceStep(size_t item, int64_t step) {
  if (step > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat(ItemName(item), ": slice step must be greater than zero, got ", step));
}

absl::StatusOr<ResolvedIndex> ResolveIndex(const IndexSpec& index, const Shape& batch_shape,
                                           int64_t max_cells) {
  if (absl::Status s = ValidateShape(batch_shape, "batch shape"); !s.ok()) return s;
  const std::optional<int64_t> batch_numel = CheckedNumel(batch_shape);
  if (!batch_numel) {
    return absl::InvalidArgumentError(
        StrCat("batch shape ", ShapeToString(batch_shape), " is too large"));
  }
  const int64_t rank = static_cast<int64_t>(batch_shape.size());
  if (absl::Status s = CheckTerms(index, rank); !s.ok()) return s;

  // C-order strides, in cells. A batch with a dim of 0 has no cells, and no
  // cell offset is ever computed for it (its result is empty or an error);
  // its strides stay 0, since the product of its other dims may overflow
  // ([0, 2^62, 4]).
  std::vector<int64_t> strides(rank, *batch_numel > 0 ? 1 : 0);
  if (*batch_numel > 0) {
    for (int64_t d = rank - 1; d > 0; --d) strides[d - 1] = strides[d] * batch_shape[d];
  }

  int64_t specified = 0;
  for (const IndexTerm& term : index) specified += term.kind != IndexTerm::Kind::kEllipsis;

  // Walk the items: ints fold into `base`, everything else becomes a kept dim.
  int64_t base = 0;
  std::vector<KeptDim> kept;
  auto keep = [&](size_t item, int64_t dim) -> KeptDim& {
    KeptDim& k = kept.emplace_back();
    k.item = item;
    k.dim = dim;
    k.size = batch_shape[dim];
    k.stride = strides[dim];
    return k;
  };
  auto keep_all = [&](size_t item, int64_t dim) {
    KeptDim& k = keep(item, dim);
    k.length = k.size;
  };
  int64_t dim = 0;
  for (size_t i = 0; i < index.size(); ++i) {
    const IndexTerm& term = index[i];
    using Kind = IndexTerm::Kind;
    const bool is_int =
        term.kind == Kind::kInt || (term.kind == Kind::kPositions && term.positions_shape.empty());
    if (term.kind == Kind::kEllipsis) {
      for (int64_t n = rank - specified; n > 0; --n, ++dim) keep_all(i, dim);
    } else if (is_int) {
      const int64_t v = term.kind == Kind::kInt ? term.value : term.positions[0];
      const int64_t size = batch_shape[dim];
      const int64_t p = v < 0 ? v + size : v;
      if (p < 0 || p >= size) {
        return absl::OutOfRangeError(StrCat(
            ItemName(i), ": index ", v, " is out of range for batch dim ", dim, " of size ", size));
      }
      base += p * strides[dim];
      ++dim;
    } else if (term.kind == Kind::kSlice) {
      if (absl::Status s = CheckSliceStep(i, term.step); !s.ok()) return s;
      KeptDim& k = keep(i, dim);
      const int64_t start = ClampBound(term.start.value_or(0), k.size);
      const int64_t stop = ClampBound(term.stop.value_or(k.size), k.size);
      k.start = start;
      k.step = term.step;
      k.length = stop > start ? (stop - start - 1) / term.step + 1 : 0;
      ++dim;
    } else {  // positions (1-D or more) or a mask
      KeptDim& k = keep(i, dim);
      k.advanced = true;
      k.term = &term;
      ++dim;
    }
  }
  for (; dim < rank; ++dim) keep_all(index.size(), dim);

  // Masks become the positions of their true entries.
  std::vector<KeptDim*> advanced;
  for (KeptDim& k : kept) {
    if (!k.advanced) continue;
    advanced.push_back(&k);
    if (k.term->kind == IndexTerm::Kind::kPositions) {
      k.positions = k.term->positions;
      k.shape = k.term->positions_shape;
      continue;
    }
    const std::vector<bool>& mask = k.term->mask;
    if (static_cast<int64_t>(mask.size()) != k.size) {
      return absl::InvalidArgumentError(StrCat(ItemName(k.item), ": mask of length ", mask.size(),
                                               " for batch dim ", k.dim, " of size ", k.size));
    }
    for (size_t j = 0; j < mask.size(); ++j) {
      if (mask[j]) k.positions.push_back(static_cast<int64_t>(j));
    }
    k.shape = {static_cast<int64_t>(k.positions.size())};
  }

  absl::StatusOr<Shape> broadcast = BroadcastIndexShapes(advanced);
  if (!broadcast.ok()) return broadcast.status();
  std::optional<int64_t> broadcast_numel = CheckedNumel(*broadcast);

  // Result layout: the broadcast shape replaces the advanced dims where they
  // stand if they are adjacent (among the kept dims), else it goes first.
  bool adjacent = true;
  for (size_t j = 1; j < advanced.size(); ++j) {
    adjacent = adjacent && advanced[j] == advanced[j - 1] + 1;
  }
  std::vector<const KeptDim*> before, after;  // slices around the group
  for (const KeptDim& k : kept) {
    if (k.advanced) continue;
    const bool goes_before = advanced.empty() || (adjacent && &k < advanced.front());
    (goes_before ? before : after).push_back(&k);
  }
  ResolvedIndex resolved;
  for (const KeptDim* k : before) resolved.result_shape.push_back(k->length);
  if (!advanced.empty()) {
    resolved.result_shape.insert(resolved.result_shape.end(), broadcast->begin(), broadcast->end());
  }
  for (const KeptDim* k : after) resolved.result_shape.push_back(k->length);
  std::optional<int64_t> result_numel = CheckedNumel(resolved.result_shape);
  if (!broadcast_numel || !result_numel) {
    return absl::InvalidArgumentError(
        StrCat("the indexed shape ", ShapeToString(resolved.result_shape), " is too large"));
  }

  if (*result_numel > max_cells) {
    return absl::ResourceExhaustedError(
        StrCat("the index selects ", *result_numel, " cells (shape ",
               ShapeToString(resolved.result_shape), "), over the limit of ", max_cells));
  }
  if (absl::Status s = CheckPositions(advanced, *broadcast_numel, *result_numel); !s.ok()) {
    return s;
  }
  if (*result_numel == 0) return resolved;

  // cells = base + one offset from each group of result dims (a slice, or
  // the whole broadcast index shape), combined in C-order.
  std::vector<std::vector<int64_t>> groups;
  for (const KeptDim* k : before) groups.push_back(SliceOffsets(*k));
  if (!advanced.empty()) groups.push_back(AdvancedOffsets(advanced, *broadcast, *broadcast_numel));
  for (const KeptDim* k : after) groups.push_back(SliceOffsets(*k));

  resolved.cells = {base};
  std::vector<int64_t> next;
  for (const std::vector<int64_t>& offsets : groups) {
    next.clear();
    next.reserve(resolved.cells.size() * offsets.size());
    for (int64_t cell : resolved.cells) {
      for (int64_t offset : offsets) next.push_back(cell + offset);
    }
    resolved.cells.swap(next);
  }
  return resolved;
}

// ---------------------------------------------------------------------------
// Runs

std::vector<ByteRun> PlanRuns(const ResolvedIndex& resolved, int64_t cell_bytes,
                              const std::vector<int64_t>* order) {
  std::vector<ByteRun> runs;
  if (cell_bytes <= 0) return runs;
  const size_t n = resolved.cells.size();
  for (size_t i = 0; i < n; ++i) {
    const int64_t result_cell = order != nullptr ? (*order)[i] : static_cast<int64_t>(i);
    const int64_t leaf_offset = resolved.cells[static_cast<size_t>(result_cell)] * cell_bytes;
    const int64_t result_offset = result_cell * cell_bytes;
    if (!runs.empty() && runs.back().leaf_offset + runs.back().length == leaf_offset &&
        runs.back().result_offset + runs.back().length == result_offset) {
      runs.back().length += cell_bytes;
    } else {
      runs.push_back({leaf_offset, cell_bytes, result_offset});
    }
  }
  return runs;
}

std::vector<int64_t> AscendingCells(const ResolvedIndex& resolved) {
  const std::vector<int64_t>& cells = resolved.cells;
  if (std::is_sorted(cells.begin(), cells.end())) return {};
  // Sorted as (cell, result cell) pairs: by value, no comparator looking
  // both up, and ties fall in result order.
  std::vector<std::pair<int64_t, int64_t>> keyed(cells.size());
  for (size_t i = 0; i < cells.size(); ++i) keyed[i] = {cells[i], static_cast<int64_t>(i)};
  std::sort(keyed.begin(), keyed.end());
  std::vector<int64_t> order(cells.size());
  for (size_t i = 0; i < keyed.size(); ++i) order[i] = keyed[i].second;
  return order;
}

std::vector<PartRun> SplitRuns(const std::vector<ByteRun>& runs, const BlockLayout& layout) {
  std::vector<PartRun> out;
  out.reserve(runs.size());
  // Every block starts a new part, so splitting at parts splits at blocks too.
  for (const ByteRun& run : runs) {
    layout.ForEachSegment(
        run.leaf_offset, run.length, std::numeric_limits<int64_t>::max(), [&](const Segment& seg) {
          out.push_back({seg.block, seg.part, seg.offset_in_part, seg.length,
                         run.result_offset + (seg.leaf_offset - run.leaf_offset)});
        });
  }
  return out;
}

// ---------------------------------------------------------------------------
// BroadcastBytes

namespace {

// Expands by recursion over the dims outside the longest suffix that the
// value already has in full (that suffix is one memcpy). A broadcast dim is
// filled once and then doubled by copying what is already written, so even
// a scalar spread over millions of cells takes a few dozen memcpys.
class Expander {
 public:
  Expander(const Shape& value_dims, const Shape& target, int64_t elem_size)
      : value_dims_(value_dims), target_(target) {
    const size_t rank = target.size();
    value_strides_.assign(rank, 0);
    target_strides_.assign(rank, 0);
    int64_t vs = elem_size, ts = elem_size;
    for (size_t d = rank; d-- > 0;) {
      value_strides_[d] = vs;
      target_strides_[d] = ts;
      vs *= value_dims[d];
      ts *= target[d];
    }
    inner_dim_ = rank;
    while (inner_dim_ > 0 && value_dims[inner_dim_ - 1] == target[inner_dim_ - 1]) --inner_dim_;
    inner_bytes_ =
        inner_dim_ == rank ? elem_size : target_strides_[inner_dim_] * target[inner_dim_];
  }

  void Fill(size_t d, const char* src, char* dst) const {
    if (d == inner_dim_) {
      std::memcpy(dst, src, inner_bytes_);
      return;
    }
    const int64_t n = target_[d];
    const int64_t step = target_strides_[d];
    if (value_dims_[d] == n) {
      for (int64_t i = 0; i < n; ++i) Fill(d + 1, src + i * value_strides_[d], dst + i * step);
      return;
    }
    Fill(d + 1, src, dst);  // value_dims_[d] == 1: write once, then double
    for (int64_t done = 1; done < n;) {
      const int64_t chunk = std::min(done, n - done);
      std::memcpy(dst + done * step, dst, chunk * step);
      done += chunk;
    }
  }

 private:
  const Shape& value_dims_;
  const Shape& target_;
  std::vector<int64_t> value_strides_, target_strides_;
  size_t inner_dim_ = 0;
  int64_t inner_bytes_ = 0;
};

}  // namespace

absl::StatusOr<std::string> BroadcastBytes(std::string_view value, const Shape& value_shape,
                                           const Shape& target_shape, int64_t elem_size) {
  if (elem_size < 1) {
    return absl::InvalidArgumentError(StrCat("element size must be at least 1, got ", elem_size));
  }
  if (absl::Status s = ValidateShape(value_shape, "value shape"); !s.ok()) return s;
  if (absl::Status s = ValidateShape(target_shape, "target shape"); !s.ok()) return s;
  auto cannot = [&](std::string_view why) {
    return absl::InvalidArgumentError(StrCat("cannot broadcast a value of shape ",
                                             ShapeToString(value_shape), " to shape ",
                                             ShapeToString(target_shape), ": ", why));
  };
  if (value_shape.size() > target_shape.size()) return cannot("the value has more dims");
  // The value's dims, aligned to the target's from the right.
  Shape value_dims(target_shape.size() - value_shape.size(), 1);
  value_dims.insert(value_dims.end(), value_shape.begin(), value_shape.end());
  for (size_t d = 0; d < target_shape.size(); ++d) {
    if (value_dims[d] != target_shape[d] && value_dims[d] != 1) {
      return cannot(StrCat("dim ", d, " is ", value_dims[d], ", not 1 or ", target_shape[d]));
    }
  }

  absl::StatusOr<int64_t> value_bytes = ByteSize(value_shape, elem_size);
  if (!value_bytes.ok()) return value_bytes.status();
  if (*value_bytes != static_cast<int64_t>(value.size())) {
    return absl::InvalidArgumentError(StrCat("a value of shape ", ShapeToString(value_shape),
                                             " and element size ", elem_size, " needs ",
                                             *value_bytes, " bytes, got ", value.size()));
  }
  absl::StatusOr<int64_t> target_bytes = ByteSize(target_shape, elem_size);
  if (!target_bytes.ok()) return target_bytes.status();

  std::string out(*target_bytes, '\0');
  if (*target_bytes == 0) return out;
  Expander(value_dims, target_shape, elem_size).Fill(0, value.data(), out.data());
  return out;
}

}  // namespace tdstore::plan
