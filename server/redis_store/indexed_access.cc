#include "server/redis_store/indexed_access.h"

#include "server/store/record_layout.h"

#include <optional>

#include "common/str_cat.h"
#include "server/redis_store/indexed_io.h"
#include "server/redis_store/leaf_writer.h"

namespace tdstore::store {

namespace {

// A write holds each selected byte up to five more times: expanded to the
// indexed shape (only when the value broadcasts), gathered where runs of a
// key touch (a record dict's rows), formatted into the Redis command, and
// appended to the connection's output buffer (which hiredis grows by
// reallocating: old and new buffer at once). Checked with
// E2eBudget.ConcurrentMaximalIndexedWritesStayUnderTheBudget.
constexpr int64_t kWriteCopies = 5;

}  // namespace

absl::StatusOr<IndexedReadResult> ReadIndexedLeaves(const DictStore& store, const DictRef& ref,
                                                    const plan::IndexSpec& index,
                                                    const std::vector<LeafPath>& paths) {
  IndexedReadResult result;
  absl::Status status = store.WithSchema(ref, [&](const DictSchema& schema, bool probe) {
    auto resolved = plan::ResolveIndex(index, schema.meta.batch_shape, MaxIndexCells(store.options().max_indexed_bytes));
    if (!resolved.ok()) return resolved.status();
    auto leaves = schema.Select(paths);
    if (!leaves.ok()) return leaves.status();
    int64_t total = 0;
    for (const Leaf* leaf : *leaves) {
      total += CellBytes(schema, leaf->record) * static_cast<int64_t>(resolved->cells.size());
    }
    if (auto s = CheckIndexedSize(store.options().max_indexed_bytes, total); !s.ok()) return s;
    const auto runs = static_cast<int64_t>(resolved->cells.size() * leaves->size());
    auto lease = store.budget().Acquire(IndexedReadMemory(total, runs) + IndexMemory(*resolved),
                                        "an indexed read's selection");
    if (!lease.ok()) return lease.status();

    std::optional<int64_t> version_after;
    auto bytes = ReadIndexed(store, schema, *resolved, *leaves, probe, &version_after);
    if (!bytes.ok()) return bytes.status();
    result.version_after.reset();
    if (version_after) result.version_after = SchemaVersionSeen{schema.meta.id, *version_after};
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
                                                     int64_t* version,
                                                     std::optional<SchemaVersionSeen>* version_after) {
  if (values.empty()) return absl::InvalidArgumentError("an indexed write needs a value");
  std::vector<Leaf> written;
  // Redone from a fresh schema when the probe finds the cached one stale:
  // it only sets the selected cells to the given values (schema_cache.h).
  absl::Status status = store->WithSchema(ref, [&](const DictSchema& given, bool probe) {
    auto resolved = plan::ResolveIndex(index, given.meta.batch_shape, MaxIndexCells(store->options().max_indexed_bytes));
    if (!resolved.ok()) return resolved.status();
    auto planned =
        PlanValues(given, *resolved, values, store->options().max_indexed_bytes, kWriteCopies,
                   lease);
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
    std::optional<int64_t> after;
    absl::Status s = WriteIndexed(*store, *schema, *resolved, to_write, probe,
                                  version_after != nullptr ? &after : nullptr);
    if (version_after != nullptr) {
      version_after->reset();
      if (after) *version_after = SchemaVersionSeen{schema->meta.id, *after};
    }
    return s;
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
