#include "server/redis_store/redis_store.h"

#include "server/redis_store/dict_resize.h"
#include "server/redis_store/dict_state.h"
#include "server/redis_store/indexed_access.h"
#include "server/redis_store/leaf_copy.h"
#include "server/redis_store/leaf_fill.h"
#include "server/redis_store/leaf_reader.h"
#include "server/redis_store/leaf_writer.h"
#include "server/redis_store/ring_append.h"
#include "server/redis_store/schema_text.h"

#include "absl/strings/numbers.h"
#include "common/str_cat.h"
#include "server/log.h"
#include "server/store/outcome.h"
#include "server/redis_store/redis_errors.h"

namespace tdstore::store {

Health RedisStore::Ping() const {
  Health health;
  redis::RedisClient& redis = dicts_->redis();
  health.backend = redis.Describe();
  auto pongs = redis.CallOnEveryMaster({"PING"});
  if (!pongs.ok()) return health;
  health.redis_masters = static_cast<int>(pongs->size());
  health.redis_ok = true;
  for (const redis::Reply& pong : *pongs) health.redis_ok = health.redis_ok && !pong.is_error();
  return health;
}

absl::StatusOr<DictSchema> RedisStore::CreateDict(const NewDict& spec) {
  if (spec.copy_from) return CreateCopy(spec);
  // Every leaf is checked before anything is created: a refused create
  // writes nothing.
  std::vector<ZeroLeaf> leaves;
  int64_t schema_bytes = 0;  // checked against the quotas before creating
  for (const NewDict::Leaf& leaf : spec.leaves) {
    Shape shape = spec.batch_shape;
    shape.insert(shape.end(), leaf.element_shape.begin(), leaf.element_shape.end());
    const LeafRecord record{leaf.dtype, shape, 0, leaf.kind};
    auto bytes = CheckNewLeaf(spec.batch_shape, leaf.path, record);
    if (!bytes.ok()) return bytes.status();
    for (const ZeroLeaf& other : leaves) {
      if (auto s = CheckDisjoint(other.path, leaf.path); !s.ok()) return s;
    }
    schema_bytes += *bytes;
    leaves.push_back({leaf.path, leaf.dtype, std::move(shape), leaf.kind});
  }
  if (leaves.empty()) {
    return dicts_->CreateDict(spec.name, spec.batch_shape, spec.rows_per_block,
                              spec.part_bytes, 0, /*publish=*/true, spec.layout);
  }
  auto schema = dicts_->CreateDict(spec.name, spec.batch_shape, spec.rows_per_block,
                                   spec.part_bytes, schema_bytes, /*publish=*/false, spec.layout);
  if (!schema.ok()) return schema;
  return Publish(*schema, CreateZeroFilledLeaves(dicts_, *schema, leaves).status());
}

absl::StatusOr<DictSchema> RedisStore::CreateCopy(const NewDict& spec) {
  if (!spec.batch_shape.empty() || !spec.leaves.empty()) {
    return absl::InvalidArgumentError(
        "a dict created as a copy takes the source's batch shape and leaves: give neither");
  }
  if (spec.layout == DictLayout::kRecord) {
    // The copy writes whole leaves, which a record dict does not take.
    return absl::InvalidArgumentError(
        "a copy is made in the default layout: create a record dict with the leaves and "
        "write its rows (td[:] = source) instead");
  }
  const CopySource& source = *spec.copy_from;
  auto from = dicts_->Load(source.dict);
  if (!from.ok()) return from.status();
  auto selected = from->Select(source.from.empty() ? std::vector<LeafPath>{}
                                                   : std::vector<LeafPath>{source.from});
  if (!selected.ok()) return selected.status();
  int64_t bytes = 0;
  for (const Leaf* leaf : *selected) bytes += RecordBytes(leaf->record);
  const DictMeta& meta = from->meta;
  const bool layout_given = spec.rows_per_block != 0 || spec.part_bytes != 0;
  const int64_t rows_per_block = layout_given ? spec.rows_per_block : meta.rows_per_block;
  const int64_t part_bytes = layout_given ? spec.part_bytes : meta.part_bytes;
  // A copy of an empty dict is an empty dict.
  if (selected->empty()) {
    return dicts_->CreateDict(spec.name, meta.batch_shape, rows_per_block, part_bytes);
  }
  auto schema = dicts_->CreateDict(spec.name, meta.batch_shape, rows_per_block, part_bytes,
                                   bytes, /*publish=*/false);
  if (!schema.ok()) return schema;
  // The source by the id just read: a namesake created meanwhile is not
  // copied.
  const DictRef src{source.dict.name, meta.id};
  return Publish(*schema,
                 store::CopyLeavesInto(*dicts_, src, source.from, *schema, {}).status());
}

absl::StatusOr<DictSchema> RedisStore::Publish(const DictSchema& built, absl::Status filled) {
  const std::string& id = built.meta.id;
  if (!filled.ok()) {
    // An unknown outcome is a commit that may have run: the dict is
    // deleted all the same (it was never published, so no one saw it).
    if (auto undo = dicts_->AbandonDict(id); !undo.ok()) {
      LogWarning(StrCat("could not delete the unpublished dict id ", id,
                        " (the sweeper will): ", undo.ToString()));
    }
    return IsOutcomeUnknown(filled) ? absl::UnavailableError(filled.message()) : filled;
  }
  if (auto s = dicts_->PublishDict(built.meta.name, id); !s.ok()) return s;
  return dicts_->Load({built.meta.name, id});
}

absl::StatusOr<DictSchema> RedisStore::Describe(const DictRef& ref) const { return dicts_->Load(ref); }

absl::StatusOr<SchemaVersionSeen> RedisStore::SchemaVersion(const DictRef& ref) const {
  SchemaVersionSeen seen;
  if (ref.id.empty()) {
    auto id = dicts_->LookupId(ref.name);
    if (!id.ok()) return id.status();
    seen.id = *std::move(id);
  } else {
    seen.id = std::string(ref.id);
  }
  const std::string meta = dicts_->keys().Meta(seen.id);
  auto reply = dicts_->redis().Call(meta, {"HGET", meta, kMetaVersion});
  if (!reply.ok()) return reply.status();
  if (auto s = ReplyStatus(*reply, "read a dict's schema version"); !s.ok()) return s;
  if (reply->is_nil()) return dicts_->NotFound(ref);
  if (!absl::SimpleAtoi(std::string(reply->str()), &seen.version)) {
    return absl::DataLossError(StrCat("dict ", seen.id, " has a malformed schema version"));
  }
  return seen;
}

absl::StatusOr<std::vector<std::string>> RedisStore::ListDicts() const { return dicts_->ListDicts(); }

absl::Status RedisStore::DeleteDict(const DictRef& ref) { return dicts_->DeleteDict(ref); }

absl::StatusOr<DictSchema> RedisStore::RenameDict(const DictRef& ref, std::string_view new_name) {
  return dicts_->RenameDict(ref, new_name);
}

absl::StatusOr<RenamedLeaves> RedisStore::RenameLeaves(const DictRef& ref, const LeafPath& from,
                                                       const LeafPath& to, bool replace) {
  return dicts_->RenameLeaves(ref, from, to, replace);
}

absl::StatusOr<CommitResult> RedisStore::CopyLeaves(const DictRef& src, const LeafPath& from,
                                               const DictRef& dst, const LeafPath& to) {
  return store::CopyLeaves(*dicts_, src, from, dst, to);
}

absl::StatusOr<int64_t> RedisStore::FillLeaves(const DictRef& ref, const std::vector<Fill>& fills,
                                          const plan::IndexSpec* index) {
  return store::FillLeaves(*dicts_, ref, fills, index);
}

absl::StatusOr<DictSchema> RedisStore::Resize(const DictRef& ref, int64_t rows) {
  return ResizeDict(*dicts_, ref, rows);
}

absl::StatusOr<DictSchema> RedisStore::SetLocked(const DictRef& ref, bool locked) {
  return store::SetLocked(*dicts_, ref, locked);
}

absl::StatusOr<DictSchema> RedisStore::UpdateAttrs(const DictRef& ref, const AttrsUpdate& update) {
  return store::UpdateAttrs(*dicts_, ref, update);
}

absl::StatusOr<CounterResult> RedisStore::Counter(const DictRef& ref, const CounterOp& op) {
  return ApplyCounter(*dicts_, ref, op);
}

absl::StatusOr<uint64_t> RedisStore::Watch(const DictRef& ref, SchemaListener listener) {
  if (watch_ == nullptr) return absl::UnimplementedError("this store has no schema watch");
  if (ref.id.empty()) return absl::InvalidArgumentError("a schema watch needs the dict's id");
  if (auto s = ValidateDictName(ref.name); !s.ok()) return s;
  return watch_->Watch(ref, std::move(listener));
}

void RedisStore::Unwatch(uint64_t token) {
  if (watch_ != nullptr) watch_->Unwatch(token);
}

absl::StatusOr<RemovedLeaves> RedisStore::DeleteLeaves(const DictRef& ref,
                                                       const std::vector<LeafPath>& paths) {
  return dicts_->DeleteLeaves(ref, paths);
}

absl::Status RedisStore::Read(const DictRef& ref, const std::vector<LeafPath>& paths,
                         LeafSink& sink) const {
  return dicts_->WithSchema(ref, [&](const DictSchema& schema, bool probe) {
    auto selected = schema.Select(paths);
    if (!selected.ok()) return selected.status();
    return ReadLeaves(*dicts_, schema, *selected, probe, sink);
  });
}

absl::StatusOr<IndexedReadResult> RedisStore::ReadIndexed(const DictRef& ref,
                                                     const plan::IndexSpec& index,
                                                     const std::vector<LeafPath>& paths) const {
  return ReadIndexedLeaves(*dicts_, ref, index, paths);
}

absl::StatusOr<IndexedWriteResult> RedisStore::WriteIndexed(
    const DictRef& ref, const plan::IndexSpec& index,
    const std::vector<IndexedWriteValue>& values, MemoryBudget::Lease& lease) {
  IndexedWriteResult result;
  auto written = WriteIndexedLeaves(dicts_, ref, index, values, lease, &result.version,
                                    &result.version_after);
  if (!written.ok()) return written.status();
  result.written = *std::move(written);
  return result;
}

int64_t RedisStore::IndexedWriteLease(int64_t value_bytes, bool first_value) const {
  return store::IndexedWriteLease(value_bytes, first_value);
}

namespace {

// WriteTxn as the Store's LeafWrite.
class TxnLeafWrite final : public LeafWrite {
 public:
  explicit TxnLeafWrite(std::unique_ptr<WriteTxn> txn) : txn_(std::move(txn)) {}
  void RefuseIfLocked() override { txn_->RefuseIfLocked(); }
  void ExpectLeaves(int count) override { txn_->ExpectLeaves(count); }
  absl::Status BeginLeaf(const LeafPath& path, const LeafRecord& record,
                         int64_t byte_size) override {
    return txn_->BeginLeaf(path, record, byte_size);
  }
  // A small write holds its bytes until Commit (WriteTxn's at-once path):
  // handed over, lent, or (borrowed) copied; otherwise they are sent from
  // the caller's memory before Append returns.
  absl::Status Append(std::string bytes) override { return txn_->AppendOwned(std::move(bytes)); }
  absl::Status AppendLent(std::string_view bytes) override { return txn_->AppendLent(bytes); }
  absl::Status AppendBorrowed(std::string_view bytes) override { return txn_->Append(bytes); }
  absl::StatusOr<CommitResult> Commit() override { return txn_->Commit(); }

 private:
  std::unique_ptr<WriteTxn> txn_;  // aborts on destruction unless committed
};

}  // namespace

absl::StatusOr<std::unique_ptr<LeafWrite>> RedisStore::OpenLeafWrite(const DictRef& ref) {
  auto txn = WriteTxn::Begin(dicts_, ref);
  if (!txn.ok()) return txn.status();
  return std::make_unique<TxnLeafWrite>(*std::move(txn));
}

absl::StatusOr<RingAppendResult> RedisStore::AppendToRing(const DictRef& ref, const RingAppend& ring,
                                                     const std::vector<IndexedWriteValue>& values,
                                                     MemoryBudget::Lease& lease) {
  return store::AppendToRing(dicts_, ref, ring, values, lease);
}

}  // namespace tdstore::store
