#include "server/store/indexed_plan.h"

#include <utility>

#include "common/str_cat.h"

namespace tdstore::store {

int64_t CellBytes(const DictSchema& schema, const LeafRecord& record) {
  int64_t bytes = DTypeSize(record.dtype);
  for (size_t d = schema.meta.batch_shape.size(); d < record.shape.size(); ++d) {
    bytes *= record.shape[d];
  }
  return bytes;
}

Shape IndexedShape(const DictSchema& schema, const LeafRecord& record,
                   const Shape& result_shape) {
  Shape shape = result_shape;
  shape.insert(shape.end(), record.shape.begin() + schema.meta.batch_shape.size(),
               record.shape.end());
  return shape;
}

absl::Status CheckIndexedSize(int64_t max_bytes, int64_t bytes) {
  if (bytes > max_bytes) {
    return absl::ResourceExhaustedError(
        StrCat("the index selects ", bytes, " bytes, over the ", max_bytes,
               "-byte limit of one indexed call; use a smaller index or whole-leaf calls"));
  }
  return absl::OkStatus();
}

int64_t IndexMemory(const plan::ResolvedIndex& resolved) {
  return 2 * 8 * static_cast<int64_t>(resolved.cells.size());
}

plan::IndexSpec RingRows(int64_t start, int64_t rows, int64_t size) {
  const int64_t first = ((start % size) + size) % size;
  if (first + rows <= size) return {plan::IndexTerm::Slice(first, first + rows)};
  std::vector<int64_t> positions(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) positions[static_cast<size_t>(i)] = (first + i) % size;
  return {plan::IndexTerm::Positions(std::move(positions))};
}

namespace {


// Grows `lease` to at least `need` bytes.
absl::Status LeaseAtLeast(MemoryBudget::Lease& lease, int64_t need, std::string_view what) {
  return lease.Grow(need - lease.bytes(), what);
}

// torch's `t[idx] = v` drops v's leading size-1 dims before broadcasting
// (a [1, n] value fits a [n] target); expand alone would refuse them.
Shape StripLeadingOnes(Shape shape, size_t target_rank) {
  size_t drop = 0;
  while (shape.size() - drop > target_rank && shape[drop] == 1) ++drop;
  shape.erase(shape.begin(), shape.begin() + drop);
  return shape;
}

}  // namespace

absl::StatusOr<std::vector<PlannedValue>> PlanValues(const DictSchema& schema,
                                                     const plan::ResolvedIndex& resolved,
                                                     const std::vector<IndexedWriteValue>& values,
                                                     int64_t max_bytes, int64_t copies,
                                                     MemoryBudget::Lease& lease) {
  const Shape& batch = schema.meta.batch_shape;
  std::vector<PlannedValue> planned;
  int64_t total = 0;
  // The values as received and the resolved index stay held throughout.
  int64_t held = IndexMemory(resolved);
  for (const IndexedWriteValue& v : values) held += static_cast<int64_t>(v.bytes.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const IndexedWriteValue& v = values[i];
    if (auto s = ValidatePath(v.path); !s.ok()) return s;
    for (size_t j = 0; j < i; ++j) {
      if (auto s = CheckDisjoint(values[j].path, v.path); !s.ok()) return s;
    }
    if (!IsKnownDType(static_cast<int>(v.dtype))) {
      return absl::InvalidArgumentError(StrCat("leaf ", QuotedPath(v.path), ": unknown dtype"));
    }
    if (auto s = ValidateShape(v.shape, StrCat("value shape of ", QuotedPath(v.path))); !s.ok()) {
      return s;
    }
    auto bytes = ByteSize(v.shape, DTypeSize(v.dtype));
    if (!bytes.ok()) return bytes.status();
    if (*bytes != static_cast<int64_t>(v.bytes.size())) {
      return absl::InvalidArgumentError(StrCat("leaf ", QuotedPath(v.path), ": ", v.bytes.size(),
                                               " bytes for a value of shape ",
                                               ShapeToString(v.shape), " (", *bytes, " expected)"));
    }

    PlannedValue p;
    Shape element;
    p.leaf = schema.Find(v.path);
    if (p.leaf != nullptr) {
      if (p.leaf->record.kind != v.kind) {
        return absl::InvalidArgumentError(StrCat(
            "leaf ", QuotedPath(v.path), " holds ", LeafKindName(p.leaf->record.kind),
            " but the value is ", LeafKindName(v.kind), ": a leaf keeps its kind"));
      }
      if (IsOneValue(p.leaf->record.kind, p.leaf->record.shape)) {
        return absl::InvalidArgumentError(StrCat(
            "leaf ", QuotedPath(v.path), " holds one ", LeafKindName(v.kind),
            " value for the whole dict: write it whole, not by rows"));
      }
      // Cells say which dtype they hold: a client that still believes an
      // earlier leaf's dtype must not write cells another reader misreads.
      if (v.kind == LeafKind::kRagged && v.value != p.leaf->record.value) {
        return absl::InvalidArgumentError(StrCat(
            "leaf ", QuotedPath(v.path), " holds ", p.leaf->record.value, " cells but the rows are ",
            v.value.empty() ? "unnamed" : v.value, " (cast them to the leaf's dtype)"));
      }
      if (p.leaf->record.dtype != v.dtype) {
        return absl::InvalidArgumentError(StrCat(
            "leaf ", QuotedPath(v.path), " holds ", DTypeName(p.leaf->record.dtype),
            " but the value is ", DTypeName(v.dtype), " (cast it, e.g. SetIndexOptions::cast)"));
      }
      element.assign(p.leaf->record.shape.begin() + batch.size(), p.leaf->record.shape.end());
      // A slot is a value's length and bytes: broadcasting it would forge one.
      if (v.kind != LeafKind::kTensor && (v.shape.empty() || v.shape.back() != element.back())) {
        return absl::InvalidArgumentError(StrCat(
            "leaf ", QuotedPath(v.path), " has slots of ", element.back(),
            " bytes but the value's last dim is ", v.shape.empty() ? 0 : v.shape.back()));
      }
    } else {
      if (auto s = CheckNesting(schema, v.path); !s.ok()) return s;
      // A new leaf's element shape is what the value has past the indexed
      // batch dims (as the Python seed infers it).
      const size_t rank = resolved.result_shape.size();
      if (v.kind != LeafKind::kTensor && !v.shape.empty()) {
        // A value leaf's element is its slot, even when the rows broadcast
        // (one value for every selected row: a value of shape [slot]).
        element = {v.shape.back()};
      } else if (v.shape.size() > rank) {
        element.assign(v.shape.begin() + rank, v.shape.end());
      }
      Shape full = batch;
      full.insert(full.end(), element.begin(), element.end());
      const LeafRecord created{v.dtype, full, 0, v.kind, v.value};
      if (auto s = CheckNewLeaf(batch, v.path, created); !s.ok()) return s.status();
      if (IsOneValue(v.kind, full)) {
        return absl::InvalidArgumentError(StrCat(
            "leaf ", QuotedPath(v.path), ": a one-value leaf is written whole, not by rows"));
      }
      p.create = ZeroLeaf{v.path, v.dtype, full, v.kind, v.value};
    }
    Shape target = resolved.result_shape;
    target.insert(target.end(), element.begin(), element.end());
    auto target_bytes = ByteSize(target, DTypeSize(v.dtype));
    if (!target_bytes.ok()) return target_bytes.status();
    // Checked before expanding: broadcasting a scalar to a huge selection
    // must not allocate first and fail later.
    total += *target_bytes;
    if (auto s = CheckIndexedSize(max_bytes, total); !s.ok()) return s;
    if (auto s = LeaseAtLeast(lease, held + copies * total, "an indexed write");
        !s.ok()) {
      return s;
    }
    const Shape value_shape = StripLeadingOnes(v.shape, target.size());
    if (value_shape == target) {
      p.received = v.bytes;
      planned.push_back(std::move(p));
      continue;
    }
    auto expanded = plan::BroadcastBytes(v.bytes, value_shape, target, DTypeSize(v.dtype));
    if (!expanded.ok()) {
      return absl::InvalidArgumentError(StrCat("leaf ", QuotedPath(v.path), ": value of shape ",
                                               ShapeToString(v.shape),
                                               " cannot be written to td[index] of shape ",
                                               ShapeToString(target)));
    }
    p.expanded = *std::move(expanded);
    p.broadcast = true;
    planned.push_back(std::move(p));
  }
  return planned;
}


}  // namespace tdstore::store
