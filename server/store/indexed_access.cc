#include "server/store/indexed_access.h"

#include <optional>

#include "common/str_cat.h"
#include "server/store/indexed_io.h"
#include "server/store/leaf_writer.h"

namespace tdstore::store {

namespace {

std::string Display(const LeafPath& path) { return StrCat("'", PathToDisplay(path), "'"); }

absl::Status CheckSize(int64_t max_bytes, int64_t bytes) {
  if (bytes > max_bytes) {
    return absl::ResourceExhaustedError(
        StrCat("the index selects ", bytes, " bytes, over the ", max_bytes,
               "-byte limit of one indexed call; use a smaller index or whole-leaf calls"));
  }
  return absl::OkStatus();
}

// The planner keeps 8 bytes per selected cell: bound it by the same budget
// as the selected data.
int64_t MaxCells(const StoreOptions& options) { return options.max_indexed_bytes / 8; }

// What a resolved index occupies while a call uses it: its cells, and the
// byte runs planned from them (about as many).
int64_t IndexMemory(const plan::ResolvedIndex& resolved) {
  return 2 * 8 * static_cast<int64_t>(resolved.cells.size());
}

// A write holds each selected byte up to four more times: expanded to the
// indexed shape, copied into its block's script argument, formatted into
// the Redis command, and appended to the connection's output buffer (which
// hiredis grows by reallocating: old and new buffer at once). Measured with
// E2eBudget.ConcurrentMaximalIndexedWritesStayUnderTheBudget.
constexpr int64_t kWriteCopies = 4;
constexpr int64_t kIndexAllowance = 1 << 20;

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

// A value checked against the current schema and expanded to its target.
struct PlannedValue {
  const Leaf* leaf = nullptr;       // null: the leaf must be created first
  std::optional<ZeroLeaf> create;   // set when leaf is null
  std::string expanded;             // C-order at the indexed shape
};

// Checks every value against `schema` and broadcasts it. Pure: no Redis.
absl::StatusOr<std::vector<PlannedValue>> PlanValues(const DictSchema& schema,
                                                     const plan::ResolvedIndex& resolved,
                                                     const std::vector<IndexedWriteValue>& values,
                                                     int64_t max_bytes,
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
      if (IsPathPrefix(values[j].path, v.path) || IsPathPrefix(v.path, values[j].path)) {
        return absl::InvalidArgumentError(StrCat("leaves ", Display(values[j].path), " and ",
                                                 Display(v.path), " overlap in one write"));
      }
    }
    if (!IsKnownDType(static_cast<int>(v.dtype))) {
      return absl::InvalidArgumentError(StrCat("leaf ", Display(v.path), ": unknown dtype"));
    }
    if (auto s = ValidateShape(v.shape, StrCat("value shape of ", Display(v.path))); !s.ok()) {
      return s;
    }
    auto bytes = ByteSize(v.shape, DTypeSize(v.dtype));
    if (!bytes.ok()) return bytes.status();
    if (*bytes != static_cast<int64_t>(v.bytes.size())) {
      return absl::InvalidArgumentError(StrCat("leaf ", Display(v.path), ": ", v.bytes.size(),
                                               " bytes for a value of shape ",
                                               ShapeToString(v.shape), " (", *bytes, " expected)"));
    }

    PlannedValue p;
    Shape element;
    p.leaf = schema.Find(v.path);
    if (p.leaf != nullptr) {
      if (p.leaf->record.dtype != v.dtype) {
        return absl::InvalidArgumentError(StrCat(
            "leaf ", Display(v.path), " holds ", DTypeName(p.leaf->record.dtype),
            " but the value is ", DTypeName(v.dtype), " (cast it, e.g. SetIndexOptions::cast)"));
      }
      element.assign(p.leaf->record.shape.begin() + batch.size(), p.leaf->record.shape.end());
    } else {
      if (schema.Classify(v.path) == DictSchema::PathKind::kNode) {
        return absl::FailedPreconditionError(
            StrCat("cannot write leaf ", Display(v.path), ": it is a sub-dict"));
      }
      for (const auto& [_, existing] : schema.leaves) {
        if (IsPathPrefix(existing.path, v.path)) {
          return absl::FailedPreconditionError(StrCat("cannot write leaf ", Display(v.path),
                                                      ": ", Display(existing.path),
                                                      " is a leaf"));
        }
      }
      // A new leaf's element shape is what the value has past the indexed
      // batch dims (as the Python seed infers it).
      const size_t rank = resolved.result_shape.size();
      if (v.shape.size() > rank) element.assign(v.shape.begin() + rank, v.shape.end());
      Shape full = batch;
      full.insert(full.end(), element.begin(), element.end());
      if (auto s = ValidateShape(full, "new leaf shape"); !s.ok()) return s;
      p.create = ZeroLeaf{v.path, v.dtype, full};
    }
    Shape target = resolved.result_shape;
    target.insert(target.end(), element.begin(), element.end());
    auto target_bytes = ByteSize(target, DTypeSize(v.dtype));
    if (!target_bytes.ok()) return target_bytes.status();
    // Checked before expanding: broadcasting a scalar to a huge selection
    // must not allocate first and fail later.
    total += *target_bytes;
    if (auto s = CheckSize(max_bytes, total); !s.ok()) return s;
    if (auto s = LeaseAtLeast(lease, held + kWriteCopies * total, "an indexed write");
        !s.ok()) {
      return s;
    }
    auto expanded = plan::BroadcastBytes(v.bytes, StripLeadingOnes(v.shape, target.size()), target,
                                   DTypeSize(v.dtype));
    if (!expanded.ok()) {
      return absl::InvalidArgumentError(StrCat("leaf ", Display(v.path), ": value of shape ",
                                               ShapeToString(v.shape),
                                               " cannot be written to td[index] of shape ",
                                               ShapeToString(target)));
    }
    p.expanded = *std::move(expanded);
    planned.push_back(std::move(p));
  }
  return planned;
}

}  // namespace

absl::StatusOr<IndexedReadResult> ReadIndexedLeaves(const DictStore& store, std::string_view dict,
                                                    const plan::IndexSpec& index,
                                                    const std::vector<LeafPath>& paths) {
  // One retry: a stale block means a leaf was replaced after we read the
  // schema; the fresh schema names the new generation.
  for (int attempt = 0;; ++attempt) {
    auto schema = store.LoadDict(dict);
    if (!schema.ok()) return schema.status();
    auto resolved = plan::ResolveIndex(index, schema->meta.batch_shape, MaxCells(store.options()));
    if (!resolved.ok()) return resolved.status();
    auto leaves = schema->Select(paths);
    if (!leaves.ok()) return leaves.status();
    int64_t total = 0;
    for (const Leaf* leaf : *leaves) {
      total += CellBytes(*schema, leaf->record) * static_cast<int64_t>(resolved->cells.size());
    }
    if (auto s = CheckSize(store.options().max_indexed_bytes, total); !s.ok()) return s;
    auto lease = store.budget().Acquire(total + IndexMemory(*resolved),
                                        "an indexed read's selection");
    if (!lease.ok()) return lease.status();

    auto bytes = ReadIndexed(store, *schema, *resolved, *leaves);
    if (IsStale(bytes.status()) && attempt == 0) continue;
    if (!bytes.ok()) return bytes.status();

    IndexedReadResult result;
    // The index is done with; the selection stays leased until sent.
    result.lease = *std::move(lease);
    result.result_shape = resolved->result_shape;
    for (size_t i = 0; i < leaves->size(); ++i) {
      const Leaf* leaf = (*leaves)[i];
      result.leaves.push_back({*leaf, IndexedShape(*schema, leaf->record, resolved->result_shape),
                               std::move((*bytes)[i])});
    }
    return result;
  }
}

int64_t IndexedWriteLease(int64_t value_bytes, bool first_value) {
  return (1 + kWriteCopies) * value_bytes + (first_value ? kIndexAllowance : 0);
}

absl::StatusOr<std::vector<Leaf>> WriteIndexedLeaves(DictStore* store, std::string_view dict,
                                                     const plan::IndexSpec& index,
                                                     const std::vector<IndexedWriteValue>& values) {
  MemoryBudget::Lease lease = store->budget().Empty();
  int64_t value_bytes = 0;
  for (const IndexedWriteValue& v : values) value_bytes += static_cast<int64_t>(v.bytes.size());
  if (auto s = lease.Grow(IndexedWriteLease(value_bytes, true), "an indexed write"); !s.ok()) {
    return s;
  }
  return WriteIndexedLeaves(store, dict, index, values, lease);
}

absl::StatusOr<std::vector<Leaf>> WriteIndexedLeaves(DictStore* store, std::string_view dict,
                                                     const plan::IndexSpec& index,
                                                     const std::vector<IndexedWriteValue>& values,
                                                     MemoryBudget::Lease& lease) {
  if (values.empty()) return absl::InvalidArgumentError("an indexed write needs a value");
  bool created = false;
  for (int attempt = 0;; ++attempt) {
    auto schema = store->LoadDict(dict);
    if (!schema.ok()) return schema.status();
    auto resolved = plan::ResolveIndex(index, schema->meta.batch_shape, MaxCells(store->options()));
    if (!resolved.ok()) return resolved.status();
    auto planned =
        PlanValues(*schema, *resolved, values, store->options().max_indexed_bytes, lease);
    if (!planned.ok()) return planned.status();

    // Missing leaves: create them zero-filled, then plan again against the
    // schema that has them (someone may have created them differently).
    std::vector<ZeroLeaf> missing;
    for (const PlannedValue& p : *planned) {
      if (p.create) missing.push_back(*p.create);
    }
    if (!missing.empty()) {
      if (created) {
        return absl::AbortedError("leaves keep disappearing during the indexed write; retry");
      }
      if (auto s = CreateZeroFilledLeaves(store, dict, missing); !s.ok()) return s;
      created = true;
      continue;
    }

    std::vector<IndexedValue> to_write;
    for (const PlannedValue& p : *planned) to_write.push_back({p.leaf, p.expanded});
    absl::Status status = WriteIndexed(*store, *schema, *resolved, to_write);
    if (IsStale(status) && attempt < 2) continue;
    if (!status.ok()) return status;
    std::vector<Leaf> written;
    for (const PlannedValue& p : *planned) written.push_back(*p.leaf);
    return written;
  }
}

absl::Status CreateZeroFilledLeaves(DictStore* store, std::string_view dict,
                                    const std::vector<ZeroLeaf>& leaves) {
  if (leaves.empty()) return absl::OkStatus();
  auto txn = WriteTxn::Begin(store, dict);
  if (!txn.ok()) return txn.status();
  for (const ZeroLeaf& z : leaves) {
    auto bytes = ByteSize(z.shape, DTypeSize(z.dtype));
    if (!bytes.ok()) return bytes.status();
    if (auto s = (*txn)->BeginLeaf(z.path, z.dtype, z.shape, *bytes); !s.ok()) return s;
    if (auto s = (*txn)->ZeroFill(); !s.ok()) return s;
  }
  return (*txn)->Commit(CommitMode::kCreateMissing).status();
}

}  // namespace tdstore::store
