#include "server/redis_store/indexed_access.h"

#include "server/store/record_layout.h"

#include <optional>

#include "common/str_cat.h"
#include "server/redis_store/indexed_io.h"
#include "server/redis_store/leaf_writer.h"

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

// A write holds each selected byte up to five more times: expanded to the
// indexed shape (only when the value broadcasts), gathered where runs of a
// key touch (a record dict's rows), formatted into the Redis command, and
// appended to the connection's output buffer (which hiredis grows by
// reallocating: old and new buffer at once). Checked with
// E2eBudget.ConcurrentMaximalIndexedWritesStayUnderTheBudget.
constexpr int64_t kWriteCopies = 5;
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
  // The value at the indexed shape, C-order: the received bytes themselves
  // when they need no broadcasting (no copy), else `expanded`.
  std::string_view received;
  std::string expanded;
  bool broadcast = false;
  std::string_view bytes() const { return broadcast ? std::string_view(expanded) : received; }
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
      if (auto s = CheckDisjoint(values[j].path, v.path); !s.ok()) return s;
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
      if (p.leaf->record.kind != v.kind) {
        return absl::InvalidArgumentError(StrCat(
            "leaf ", Display(v.path), " holds ", LeafKindName(p.leaf->record.kind),
            " but the value is ", LeafKindName(v.kind), ": a leaf keeps its kind"));
      }
      if (IsOneValue(p.leaf->record.kind, p.leaf->record.shape)) {
        return absl::InvalidArgumentError(StrCat(
            "leaf ", Display(v.path), " holds one ", LeafKindName(v.kind),
            " value for the whole dict: write it whole, not by rows"));
      }
      // Cells say which dtype they hold: a client that still believes an
      // earlier leaf's dtype must not write cells another reader misreads.
      if (v.kind == LeafKind::kRagged && v.value != p.leaf->record.value) {
        return absl::InvalidArgumentError(StrCat(
            "leaf ", Display(v.path), " holds ", p.leaf->record.value, " cells but the rows are ",
            v.value.empty() ? "unnamed" : v.value, " (cast them to the leaf's dtype)"));
      }
      if (p.leaf->record.dtype != v.dtype) {
        return absl::InvalidArgumentError(StrCat(
            "leaf ", Display(v.path), " holds ", DTypeName(p.leaf->record.dtype),
            " but the value is ", DTypeName(v.dtype), " (cast it, e.g. SetIndexOptions::cast)"));
      }
      element.assign(p.leaf->record.shape.begin() + batch.size(), p.leaf->record.shape.end());
      // A slot is a value's length and bytes: broadcasting it would forge one.
      if (v.kind != LeafKind::kTensor && (v.shape.empty() || v.shape.back() != element.back())) {
        return absl::InvalidArgumentError(StrCat(
            "leaf ", Display(v.path), " has slots of ", element.back(),
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
            "leaf ", Display(v.path), ": a one-value leaf is written whole, not by rows"));
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
    if (auto s = CheckSize(max_bytes, total); !s.ok()) return s;
    if (auto s = LeaseAtLeast(lease, held + kWriteCopies * total, "an indexed write");
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
      return absl::InvalidArgumentError(StrCat("leaf ", Display(v.path), ": value of shape ",
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

}  // namespace

absl::StatusOr<IndexedReadResult> ReadIndexedLeaves(const DictStore& store, const DictRef& ref,
                                                    const plan::IndexSpec& index,
                                                    const std::vector<LeafPath>& paths) {
  IndexedReadResult result;
  absl::Status status = store.WithSchema(ref, [&](const DictSchema& schema, bool probe) {
    auto resolved = plan::ResolveIndex(index, schema.meta.batch_shape, MaxCells(store.options()));
    if (!resolved.ok()) return resolved.status();
    auto leaves = schema.Select(paths);
    if (!leaves.ok()) return leaves.status();
    int64_t total = 0;
    for (const Leaf* leaf : *leaves) {
      total += CellBytes(schema, leaf->record) * static_cast<int64_t>(resolved->cells.size());
    }
    if (auto s = CheckSize(store.options().max_indexed_bytes, total); !s.ok()) return s;
    const auto runs = static_cast<int64_t>(resolved->cells.size() * leaves->size());
    auto lease = store.budget().Acquire(IndexedReadMemory(total, runs) + IndexMemory(*resolved),
                                        "an indexed read's selection");
    if (!lease.ok()) return lease.status();

    auto bytes = ReadIndexed(store, schema, *resolved, *leaves, probe);
    if (!bytes.ok()) return bytes.status();
    result.lease = *std::move(lease);
    result.result_shape = resolved->result_shape;
    result.leaves.clear();
    for (size_t i = 0; i < leaves->size(); ++i) {
      const Leaf* leaf = (*leaves)[i];
      result.leaves.push_back({*leaf, IndexedShape(schema, leaf->record, resolved->result_shape),
                               std::move((*bytes)[i])});
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return result;
}

int64_t IndexedWriteLease(int64_t value_bytes, bool first_value) {
  return (1 + kWriteCopies) * value_bytes + (first_value ? kIndexAllowance : 0);
}

absl::StatusOr<std::vector<Leaf>> WriteIndexedLeaves(DictStore* store, const DictRef& ref,
                                                     const plan::IndexSpec& index,
                                                     const std::vector<IndexedWriteValue>& values) {
  MemoryBudget::Lease lease = store->budget().Empty();
  int64_t value_bytes = 0;
  for (const IndexedWriteValue& v : values) value_bytes += static_cast<int64_t>(v.bytes.size());
  if (auto s = lease.Grow(IndexedWriteLease(value_bytes, true), "an indexed write"); !s.ok()) {
    return s;
  }
  return WriteIndexedLeaves(store, ref, index, values, lease);
}

absl::StatusOr<std::vector<Leaf>> WriteIndexedLeaves(DictStore* store, const DictRef& ref,
                                                     const plan::IndexSpec& index,
                                                     const std::vector<IndexedWriteValue>& values,
                                                     MemoryBudget::Lease& lease,
                                                     int64_t* version) {
  if (values.empty()) return absl::InvalidArgumentError("an indexed write needs a value");
  std::vector<Leaf> written;
  // Redone from a fresh schema when the probe finds the cached one stale:
  // it only sets the selected cells to the given values (schema_cache.h).
  absl::Status status = store->WithSchema(ref, [&](const DictSchema& given, bool probe) {
    auto resolved = plan::ResolveIndex(index, given.meta.batch_shape, MaxCells(store->options()));
    if (!resolved.ok()) return resolved.status();
    auto planned =
        PlanValues(given, *resolved, values, store->options().max_indexed_bytes, lease);
    if (!planned.ok()) return planned.status();

    // Missing leaves: create them zero-filled, then write into them. The
    // plan stands; only the new leaves' records are needed, and the
    // commit's reply gives them: if it moved the version just one step,
    // nothing else changed, and the schema with them is known without
    // reading it (and current, so no probe is needed after).
    const DictSchema* schema = &given;
    DictSchema with_created;
    std::vector<ZeroLeaf> missing;
    for (const PlannedValue& p : *planned) {
      if (p.create) missing.push_back(*p.create);
    }
    if (!missing.empty()) {
      // Leaves are created only from a schema just read: a cached one may
      // predate a rename (its name is not the dict's any more) or far more
      // stored bytes than the quota check would count.
      if (probe) return StaleError("the cached schema (an indexed write creates leaves)");
      auto created = CreateZeroFilledLeaves(store, given, missing);
      if (!created.ok()) return created.status();
      if (created->version != given.meta.version + 1 ||
          created->written.size() != missing.size()) {
        return StaleError("the leaves of the dict (created by someone else meanwhile)");
      }
      with_created = given;
      with_created.meta.version = created->version;
      for (const Leaf& leaf : created->written) {
        with_created.leaves[EncodePath(leaf.path)] = leaf;
      }
      store->Remember(with_created);
      schema = &with_created;
      probe = false;
    }

    std::vector<IndexedValue> to_write;
    written.clear();
    for (size_t i = 0; i < planned->size(); ++i) {
      const Leaf* leaf = schema->Find(values[i].path);
      if (leaf == nullptr) return StaleError("a leaf just created");
      to_write.push_back({leaf, (*planned)[i].bytes()});
      written.push_back(*leaf);
    }
    if (version != nullptr) *version = schema->meta.version;
    return WriteIndexed(*store, *schema, *resolved, to_write, probe);
  });
  if (!status.ok()) return status;
  return written;
}

absl::StatusOr<CommitResult> CreateZeroFilledLeaves(DictStore* store, const DictSchema& schema,
                                                    const std::vector<ZeroLeaf>& leaves) {
  if (leaves.empty()) return CommitResult{{}, schema.meta.version};
  auto txn = WriteTxn::Begin(store, schema);
  std::vector<ZeroLeaf> own = leaves;  // leaves with blocks of their own
  if (FormsRecord(schema)) {
    // The dict's first leaves with rows form its record (record_layout.h).
    std::vector<Leaf> made;
    for (const ZeroLeaf& z : leaves) {
      made.push_back({z.path, LeafRecord{z.dtype, z.shape, 0, z.kind, z.value}});
    }
    RecordSplit split = SplitForRecord(made);
    own.clear();
    for (const Leaf& leaf : split.own) {
      own.push_back({leaf.path, leaf.record.dtype, leaf.record.shape, leaf.record.kind,
                     leaf.record.value});
    }
    if (!split.fields.empty()) {
      if (auto s = txn->BeginRecord(split.fields); !s.ok()) return s;
      if (auto s = txn->ZeroFill(); !s.ok()) return s;
    }
  }
  for (const ZeroLeaf& z : own) {
    auto bytes = ByteSize(z.shape, DTypeSize(z.dtype));
    if (!bytes.ok()) return bytes.status();
    if (auto s = txn->BeginLeaf(z.path, LeafRecord{z.dtype, z.shape, 0, z.kind, z.value},
                                *bytes);
        !s.ok()) {
      return s;
    }
    if (auto s = txn->ZeroFill(); !s.ok()) return s;
  }
  return txn->Commit(CommitMode::kCreateMissing);
}

}  // namespace tdstore::store
