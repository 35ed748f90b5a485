#include "server/redis_store/dict_store.h"
#include "server/redis_store/schema_text.h"

#include <set>

#include <algorithm>
#include <chrono>
#include <map>

#include "absl/strings/numbers.h"
#include "common/str_cat.h"
#include "server/log.h"
#include "server/redis_store/dict_state.h"
#include "server/redis_store/lua_scripts.h"
#include "server/store/outcome.h"
#include "server/redis_store/redis_errors.h"
#include "server/store/store_checks.h"

namespace tdstore::store {

namespace {

// Validation shared by create and rename.
absl::Status CheckName(std::string_view name) { return ValidateDictName(name); }

absl::Status NotFoundDict(std::string_view name) { return DictNotFound(name); }

}  // namespace

DictStore::DictStore(redis::RedisClient* redis, StoreOptions options)
    : redis_(redis),
      options_(std::move(options)),
      keys_(options_.ns),
      budget_(options_.memory_budget_bytes, options_.memory_budget_wait) {}

DictStore::~DictStore() { StopRetiring(); }

void DictStore::RetireInBackground() {
  if (retire_ != nullptr) return;
  retire_ = std::make_unique<RetireQueue>(
      [this](const DictMeta& meta, const LeafRecord& record) { return DropRetired(meta, record); });
}

void DictStore::StopRetiring() {
  if (retire_ != nullptr) retire_->Stop();
}

void DictStore::RetireLater(const DictMeta& meta, const LeafRecord& record) {
  if (retire_ != nullptr && retire_->Push(meta, record)) return;
  absl::Status s = DropRetired(meta, record);
  if (!s.ok()) {
    LogWarning(StrCat("could not delete replaced generation ", record.generation, " of dict ",
                      meta.id, " (the sweeper will): ", s.ToString()));
  }
}

absl::Status DictStore::CheckDictQuota(const DictMeta& meta, int64_t bytes_after) const {
  return store::CheckDictQuota(options_, meta, bytes_after);
}

absl::Status DictStore::QuotaError(int64_t used, int64_t bytes, std::string_view what) const {
  return NamespaceQuotaError(options_, used, bytes, what);
}

absl::Status DictStore::ReserveBytes(int64_t bytes, std::string_view what) {
  if (bytes <= 0) return absl::OkStatus();
  const std::string counter = keys_.UsedBytes();
  auto reply = redis_->Eval(GetScripts().reserve_bytes, {counter},
                            {StrCat(bytes), StrCat(options_.namespace_quota_bytes)});
  if (!reply.ok()) return reply.status();
  return ReserveReplyStatus(*reply, bytes, what);
}

absl::Status DictStore::ReserveReplyStatus(const redis::Reply& reply, int64_t bytes,
                                           std::string_view what) const {
  if (ErrorTag(reply) == "TDQUOTA") {
    int64_t used = 0;
    (void)absl::SimpleAtoi(std::string(ErrorDetail(reply)), &used);
    return QuotaError(used, bytes, what);
  }
  return ReplyStatus(reply, "reserve stored bytes");
}

absl::Status DictStore::ProbeAndReserveBytes(const DictSchema& cached, int64_t bytes,
                                             std::string_view what, bool* current) {
  *current = false;
  const std::string_view name = cached.meta.name;
  auto pipe = redis_->NewPipeline(kProbeCommands + 1);  // the probe, the reservation
  if (!pipe.ok()) return pipe.status();
  if (auto s = SendProbe(**pipe, keys_, cached, name); !s.ok()) return s;
  const redis::Script& script = GetScripts().reserve_bytes;
  const std::string counter = keys_.UsedBytes();
  const std::string delta = StrCat(bytes), quota = StrCat(options_.namespace_quota_bytes);
  const bool reserving = bytes > 0;
  if (reserving) {
    // Sent before the probe's answer: a reservation is no write of the
    // dict's, and it is taken back below if the probe fails.
    if (auto s = (*pipe)->Send(counter, {"EVALSHA", script.sha1(), "1", counter, delta, quota});
        !s.ok()) {
      return s;
    }
  }
  absl::Status probe = ReceiveProbe(**pipe, cached, name);
  if (!reserving) {
    *current = probe.ok();
    return probe;
  }
  auto reply = (*pipe)->Receive();
  if (!reply.ok()) return probe.ok() ? reply.status() : probe;  // the counter may stay high
  const bool noscript = reply->is_error() && reply->str().substr(0, 8) == "NOSCRIPT";
  if (!probe.ok()) {
    if (!noscript && ReserveReplyStatus(*reply, bytes, what).ok()) ReleaseBytes(bytes);
    return probe;
  }
  *current = true;
  // Redis lost its scripts (restart, flush): Eval loads it and runs it again.
  if (noscript) return ReserveBytes(bytes, what);
  return ReserveReplyStatus(*reply, bytes, what);
}

void DictStore::ReleaseBytes(int64_t bytes) {
  if (bytes <= 0) return;
  const std::string counter = keys_.UsedBytes();
  auto reply = redis_->Eval(GetScripts().reserve_bytes, {counter}, {StrCat(-bytes), "0"});
  absl::Status status = reply.ok() ? ReplyStatus(*reply, "release stored bytes") : reply.status();
  if (!status.ok()) {
    LogWarning(StrCat("could not return ", bytes, " bytes to ", counter,
                      " (the namespace quota counts them until reset): ", status.ToString()));
  }
}

absl::StatusOr<int64_t> DictStore::NamespaceUsedBytes() const {
  const std::string counter = keys_.UsedBytes();
  auto reply = redis_->Call(counter, {"GET", counter});
  if (!reply.ok()) return reply.status();
  if (auto s = ReplyStatus(*reply, "read stored bytes"); !s.ok()) return s;
  int64_t used = 0;
  if (!reply->is_nil() && !absl::SimpleAtoi(std::string(reply->str()), &used)) {
    return absl::DataLossError(StrCat(counter, " holds '", reply->str(), "', not a number"));
  }
  return used;
}

absl::Status DictStore::CheckNamespaceRoom(int64_t bytes, std::string_view what) const {
  if (options_.namespace_quota_bytes <= 0 || bytes <= 0) return absl::OkStatus();
  // Also refuses what could never fit, without a round trip.
  if (bytes > options_.namespace_quota_bytes) return QuotaError(0, bytes, what);
  auto used = NamespaceUsedBytes();
  if (!used.ok()) return used.status();
  if (*used + bytes > options_.namespace_quota_bytes) return QuotaError(*used, bytes, what);
  return absl::OkStatus();
}

absl::StatusOr<DictSchema> DictStore::CreateDict(std::string_view name, const Shape& batch_shape,
                                                 int64_t rows_per_block, int64_t part_bytes,
                                                 int64_t schema_bytes, bool publish,
                                                 DictLayout layout) {
  if (auto s = CheckNewDict(options_, name, batch_shape, layout, &rows_per_block, &part_bytes);
      !s.ok()) {
    return s;
  }

  // Quotas before anything is written: a schema that cannot fit must not
  // leave a dict behind.
  DictMeta proposed;
  proposed.name = std::string(name);
  if (auto s = CheckDictQuota(proposed, schema_bytes); !s.ok()) return s;
  if (auto s = CheckNamespaceRoom(schema_bytes, StrCat("the schema of dict '", name, "'"));
      !s.ok()) {
    return s;
  }

  const std::string catalog = keys_.Catalog();
  auto count = redis_->Call(catalog, {"HLEN", catalog});
  if (!count.ok()) return count.status();
  if (auto s = ReplyStatus(*count, "count dicts"); !s.ok()) return s;
  if (count->integer() >= options_.max_dicts) {
    return MaxDictsError(options_, count->integer());
  }

  // Allocate an id, write the meta record, then publish the name: a dict
  // visible in the catalog always has its meta.
  const std::string counter = keys_.DictIdCounter();
  auto id_reply = redis_->Call(counter, {"INCR", counter});
  if (!id_reply.ok()) return id_reply.status();
  if (auto s = ReplyStatus(*id_reply, "allocate dict id"); !s.ok()) return s;
  const std::string id = StrCat(id_reply->integer());

  if (!publish) {
    // Fail fast on a taken name (PublishDict checks again, atomically), and
    // record the creation before the meta exists: a meta no record names
    // could never be found again.
    auto taken = redis_->Call(catalog, {"HEXISTS", catalog, name});
    if (!taken.ok()) return taken.status();
    if (auto s = ReplyStatus(*taken, "look up dict"); !s.ok()) return s;
    if (taken->integer() == 1) {
      return absl::AlreadyExistsError(StrCat("dict '", name, "' already exists"));
    }
    const int64_t expires = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count() +
                            options_.pending_timeout.count();
    auto recorded = redis_->Call(
        catalog, {"HSET", catalog, StrCat(kCreatingPrefix, id), StrCat(expires)});
    if (!recorded.ok()) return recorded.status();
    if (auto s = ReplyStatus(*recorded, "record dict creation"); !s.ok()) return s;
  }

  const std::string meta_key = keys_.Meta(id);
  const std::string shape_csv = ShapeToCsv(batch_shape);
  const std::string rpb = StrCat(rows_per_block);
  const std::string pb = StrCat(part_bytes);
  std::vector<std::string_view> meta_fields{
      "HSET", meta_key, kMetaFormat, "1", kMetaName, name, kMetaBatchShape, shape_csv,
      kMetaRowsPerBlock, rpb, kMetaPartBytes, pb, kMetaVersion, "0", kMetaNextGen, "0"};
  // Absent means "leaves": dicts made before record dicts existed read so.
  if (layout == DictLayout::kRecord) {
    meta_fields.insert(meta_fields.end(), {kMetaLayout, DictLayoutName(layout)});
  }
  auto meta_reply = redis_->Call(meta_key, meta_fields);
  if (!meta_reply.ok()) return meta_reply.status();
  if (auto s = ReplyStatus(*meta_reply, "write dict meta"); !s.ok()) return s;

  if (!publish) {
    DictSchema schema;
    schema.meta = DictMeta{id, std::string(name), batch_shape, rows_per_block, part_bytes, 0};
    schema.meta.layout = layout;
    return schema;
  }
  auto published = redis_->Call(catalog, {"HSETNX", catalog, name, id});
  if (!published.ok()) {
    // No reply: the name may or may not have been published, so the meta
    // must stay (a published name without meta could never be used again).
    return OutcomeUnknown(StrCat("creating dict '", name,
                                 "': outcome unknown: ", published.status().message()));
  }
  if (published->is_error() || published->integer() == 0) {
    // Name taken (or refused): take back the meta we wrote.
    (void)redis_->Call(meta_key, {"DEL", meta_key});
    if (auto s = ReplyStatus(*published, "publish dict"); !s.ok()) return s;
    return absl::AlreadyExistsError(StrCat("dict '", name, "' already exists"));
  }

  DictSchema schema;
  schema.meta = DictMeta{id, std::string(name), batch_shape, rows_per_block, part_bytes, 0};
  schema.meta.layout = layout;
  return schema;
}

absl::Status DictStore::PublishDict(std::string_view name, const std::string& id) {
  const std::string catalog = keys_.Catalog();
  auto reply = redis_->Eval(GetScripts().publish_dict, {catalog}, {name, id, "publish"});
  if (!reply.ok()) {
    return OutcomeUnknown(StrCat("creating dict '", name, "': outcome unknown: ",
                                 reply.status().message()));
  }
  if (auto s = ReplyStatus(*reply, "publish dict"); !s.ok()) return s;
  if (reply->integer() == 1) return absl::OkStatus();
  if (reply->integer() == -1) {
    return absl::AbortedError(StrCat("creating dict '", name,
                                     "' took longer than the pending timeout and was swept; "
                                     "retry"));
  }
  // The script recorded the deletion: finish it (or the sweeper will).
  (void)FinishDelete(id);
  return absl::AlreadyExistsError(StrCat("dict '", name, "' already exists"));
}

absl::Status DictStore::AbandonDict(const std::string& id) {
  // Decided on the creation record (publish_dict.lua): a publish that got
  // there first wins, and its dict is left alone.
  const std::string catalog = keys_.Catalog();
  auto reply = redis_->Eval(GetScripts().publish_dict, {catalog}, {"", id, "abandon"});
  if (!reply.ok()) return reply.status();
  if (auto s = ReplyStatus(*reply, "abandon dict creation"); !s.ok()) return s;
  if (reply->integer() == -1) return absl::OkStatus();
  return FinishDelete(id);
}

absl::StatusOr<std::vector<std::string>> DictStore::ListExpiredCreations(int64_t now_ms) {
  const std::string catalog = keys_.Catalog();
  auto reply = redis_->Call(catalog, {"HGETALL", catalog});
  if (!reply.ok()) return reply.status();
  if (auto s = ReplyStatus(*reply, "list creations"); !s.ok()) return s;
  std::vector<std::string> fields = StringArray(*reply), ids;
  const std::string_view prefix = kCreatingPrefix;
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    int64_t expires = 0;
    if (fields[i].rfind(prefix, 0) == 0 && absl::SimpleAtoi(fields[i + 1], &expires) &&
        expires <= now_ms) {
      ids.push_back(fields[i].substr(prefix.size()));
    }
  }
  return ids;
}

absl::StatusOr<std::string> DictStore::LookupId(std::string_view name) const {
  if (auto s = CheckName(name); !s.ok()) return s;
  const std::string catalog = keys_.Catalog();
  auto reply = redis_->Call(catalog, {"HGET", catalog, name});
  if (!reply.ok()) return reply.status();
  if (auto s = ReplyStatus(*reply, "look up dict"); !s.ok()) return s;
  if (reply->is_nil()) return NotFoundDict(name);
  return std::string(reply->str());
}

absl::StatusOr<DictSchema> DictStore::LoadDictById(const std::string& id) const {
  const std::string meta_key = keys_.Meta(id);
  const std::string leaves_key = keys_.Leaves(id);
  const std::string attrs_key = keys_.Attrs(id);
  // The keys share the slot {id}: one pipeline, one round trip.
  auto pipe = redis_->NewPipeline(3);
  if (!pipe.ok()) return pipe.status();
  if (auto s = (*pipe)->Send(meta_key, {"HGETALL", meta_key}); !s.ok()) return s;
  if (auto s = (*pipe)->Send(leaves_key, {"HGETALL", leaves_key}); !s.ok()) return s;
  if (auto s = (*pipe)->Send(attrs_key, {"HGETALL", attrs_key}); !s.ok()) return s;
  auto meta = (*pipe)->Receive();
  if (!meta.ok()) return meta.status();
  auto leaves = (*pipe)->Receive();
  if (!leaves.ok()) return leaves.status();
  auto attrs = (*pipe)->Receive();
  if (!attrs.ok()) return attrs.status();
  if (auto s = ReplyStatus(*meta, "read dict meta"); !s.ok()) return s;
  if (auto s = ReplyStatus(*leaves, "read leaf registry"); !s.ok()) return s;
  if (auto s = ReplyStatus(*attrs, "read dict attributes"); !s.ok()) return s;
  return ParseSchema(id, StringArray(*meta), StringArray(*leaves), StringArray(*attrs));
}

absl::StatusOr<DictSchema> DictStore::LoadDict(std::string_view name) const {
  auto id = LookupId(name);
  if (!id.ok()) return id.status();
  auto schema = LoadDictById(*id);
  // The catalog named it but its meta is gone or being deleted: deleted in
  // between.
  if (absl::IsNotFound(schema.status()) || (schema.ok() && schema->meta.deleting)) {
    return NotFoundDict(name);
  }
  if (schema.ok()) schema->meta.name = std::string(name);
  return schema;
}

absl::Status DictStore::NotFound(const DictRef& ref) const { return DictNotFound(ref); }

absl::StatusOr<DictSchema> DictStore::Load(const DictRef& ref) const {
  if (ref.id.empty()) {
    auto schema = LoadDict(ref.name);
    if (schema.ok()) cache_.Put(*schema);
    return schema;
  }
  if (auto s = CheckName(ref.name); !s.ok()) return s;
  const std::string id(ref.id);
  const std::string meta_key = keys_.Meta(id);
  const std::string leaves_key = keys_.Leaves(id);
  const std::string attrs_key = keys_.Attrs(id);
  const std::string catalog = keys_.Catalog();
  // One round trip: the schema (one slot) and what the catalog says the
  // name means (the catalog decides; the meta's name is informational).
  auto pipe = redis_->NewPipeline(4);
  if (!pipe.ok()) return pipe.status();
  if (auto s = (*pipe)->Send(meta_key, {"HGETALL", meta_key}); !s.ok()) return s;
  if (auto s = (*pipe)->Send(leaves_key, {"HGETALL", leaves_key}); !s.ok()) return s;
  if (auto s = (*pipe)->Send(attrs_key, {"HGETALL", attrs_key}); !s.ok()) return s;
  if (auto s = (*pipe)->Send(catalog, {"HGET", catalog, ref.name}); !s.ok()) return s;
  auto meta = (*pipe)->Receive();
  if (!meta.ok()) return meta.status();
  auto leaves = (*pipe)->Receive();
  if (!leaves.ok()) return leaves.status();
  auto attrs = (*pipe)->Receive();
  if (!attrs.ok()) return attrs.status();
  auto named = (*pipe)->Receive();
  if (!named.ok()) return named.status();
  if (auto s = ReplyStatus(*meta, "read dict meta"); !s.ok()) return s;
  if (auto s = ReplyStatus(*leaves, "read leaf registry"); !s.ok()) return s;
  if (auto s = ReplyStatus(*attrs, "read dict attributes"); !s.ok()) return s;
  if (auto s = ReplyStatus(*named, "look up dict"); !s.ok()) return s;
  auto schema =
      ParseSchema(id, StringArray(*meta), StringArray(*leaves), StringArray(*attrs));
  if (absl::IsNotFound(schema.status()) || (schema.ok() && schema->meta.deleting) ||
      named->str() != id) {
    cache_.Forget(id);
    return NotFound(ref);
  }
  if (!schema.ok()) return schema.status();
  schema->meta.name = std::string(ref.name);
  cache_.Put(*schema);
  return schema;
}

std::shared_ptr<const DictSchema> DictStore::Cached(const DictRef& ref) const {
  if (ref.id.empty()) return nullptr;
  auto schema = cache_.Get(ref.id);
  // A cached schema under another name cannot pass the probe anyway.
  if (schema != nullptr && schema->meta.name != ref.name) return nullptr;
  return schema;
}

namespace {

// Failures that a schema newer than the cached one could turn into success.
bool NewerSchemaMayHelp(const absl::Status& status) {
  return IsStale(status) || absl::IsNotFound(status) || absl::IsInvalidArgument(status) ||
         absl::IsOutOfRange(status) || absl::IsFailedPrecondition(status);
}

}  // namespace

absl::Status DictStore::WithSchema(
    const DictRef& ref,
    const std::function<absl::Status(const DictSchema& schema, bool probe)>& attempt) const {
  if (std::shared_ptr<const DictSchema> cached = Cached(ref); cached != nullptr) {
    absl::Status status = attempt(*cached, /*probe=*/true);
    if (!NewerSchemaMayHelp(status)) return status;
  }
  for (int fresh_try = 0;; ++fresh_try) {
    auto schema = Load(ref);
    if (!schema.ok()) return schema.status();
    absl::Status status = attempt(*schema, /*probe=*/false);
    if (!IsStale(status) || fresh_try == 1) return status;
  }
}

absl::StatusOr<std::vector<std::string>> DictStore::ListDicts() {
  const std::string catalog = keys_.Catalog();
  auto reply = redis_->Call(catalog, {"HKEYS", catalog});
  if (!reply.ok()) return reply.status();
  if (auto s = ReplyStatus(*reply, "list dicts"); !s.ok()) return s;
  std::vector<std::string> names;
  for (std::string& field : StringArray(*reply)) {
    // Fields starting with '/' are bookkeeping (deletions in progress).
    if (!field.empty() && field[0] != '/') names.push_back(std::move(field));
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::vector<std::string>> DictStore::ListDictIds() {
  const std::string catalog = keys_.Catalog();
  auto reply = redis_->Call(catalog, {"HGETALL", catalog});
  if (!reply.ok()) return reply.status();
  if (auto s = ReplyStatus(*reply, "list dict ids"); !s.ok()) return s;
  std::vector<std::string> fields = StringArray(*reply), ids;
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    if (!fields[i].empty() && fields[i][0] != '/') ids.push_back(fields[i + 1]);
  }
  return ids;
}

absl::StatusOr<std::vector<std::string>> DictStore::ListDeletingIds() {
  const std::string catalog = keys_.Catalog();
  auto reply = redis_->Call(catalog, {"HGETALL", catalog});
  if (!reply.ok()) return reply.status();
  if (auto s = ReplyStatus(*reply, "list deletions"); !s.ok()) return s;
  std::vector<std::string> fields = StringArray(*reply), ids;
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    if (fields[i].rfind(kDeletingPrefix, 0) == 0) ids.push_back(fields[i + 1]);
  }
  return ids;
}

absl::Status DictStore::DeleteDict(const DictRef& ref) {
  const std::string_view name = ref.name;
  absl::StatusOr<std::string> id = std::string(ref.id);
  if (ref.id.empty()) id = LookupId(name);
  if (!id.ok()) return id.status();
  if (auto s = CheckName(name); !s.ok()) return s;
  cache_.Forget(*id);
  // 1. Unpublish, only if the name still means this id (a rename and a new
  //    create in between must not be hit), recording the deletion.
  const std::string catalog = keys_.Catalog();
  auto unpublished = redis_->Eval(GetScripts().unpublish_dict, {catalog},
                                   {name, *id, keys_.SchemaChannel()});
  if (!unpublished.ok()) return unpublished.status();
  if (auto s = ReplyStatus(*unpublished, "unpublish dict"); !s.ok()) return s;
  if (unpublished->integer() == 0) return NotFound(ref);
  // 2. Everything the dict owns; resumable by the sweeper from here on.
  return FinishDelete(*id);
}

absl::Status DictStore::FinishDelete(const std::string& id) {
  const std::string meta_key = keys_.Meta(id);
  const std::string leaves_key = keys_.Leaves(id);
  const std::string pending_key = keys_.Pending(id);
  // Writers check this mark in begin_write/commit_leaves; the meta itself
  // stays until the end because the block layout is needed to find blocks.
  auto marked = redis_->Eval(GetScripts().mark_deleting, {meta_key}, {});
  if (!marked.ok()) return marked.status();
  if (auto s = ReplyStatus(*marked, "mark dict deleting"); !s.ok()) return s;
  if (marked->integer() == 1) {
    auto schema = LoadDictById(id);
    if (!schema.ok()) return schema.status();
    auto pending = redis_->Call(pending_key, {"HGETALL", pending_key});
    if (!pending.ok()) return pending.status();
    if (auto s = ReplyStatus(*pending, "read pending writes"); !s.ok()) return s;
    // Data blocks of every committed and every pending generation.
    std::set<int64_t> deleted;  // a record's leaves share one generation
    for (const auto& [_, leaf] : schema->leaves) {
      if (!deleted.insert(leaf.record.generation).second) continue;
      if (auto s = DeleteGeneration(schema->meta, leaf.record); !s.ok()) return s;
    }
    int64_t stored = schema->StoredBytes();
    std::vector<std::string> pending_fields = StringArray(*pending);
    for (size_t i = 0; i + 1 < pending_fields.size(); i += 2) {
      auto record = DecodePendingRecord(pending_fields[i + 1]);
      int64_t gen = 0;
      if (!record.ok() || !absl::SimpleAtoi(pending_fields[i], &gen)) continue;
      record->leaf.generation = gen;
      if (auto s = DeleteGeneration(schema->meta, record->leaf); !s.ok()) return s;
      stored += GenerationBytes(record->leaf);
    }
    // The registry and the meta, in one slot.
    auto del = redis_->Call(meta_key, {"DEL", leaves_key, pending_key, keys_.Attrs(id),
                                       keys_.Counters(id), meta_key});
    if (!del.ok()) return del.status();
    if (auto s = ReplyStatus(*del, "delete dict registry"); !s.ok()) return s;
    // Only the call whose DEL removed the records returns their bytes (a
    // deletion resumed by the sweeper, or two racing, count them once).
    if (del->integer() > 0) ReleaseBytes(stored);
  }
  // 3. The record of the deletion: done.
  const std::string catalog = keys_.Catalog();
  auto done = redis_->Call(catalog, {"HDEL", catalog, StrCat(kDeletingPrefix, id)});
  if (!done.ok()) return done.status();
  return ReplyStatus(*done, "finish dict deletion");
}

absl::StatusOr<DictSchema> DictStore::RenameDict(const DictRef& ref,
                                                 std::string_view new_name) {
  const std::string_view name = ref.name;
  if (auto s = CheckName(name); !s.ok()) return s;
  if (auto s = CheckName(new_name); !s.ok()) return s;
  const std::string catalog = keys_.Catalog();
  auto reply = redis_->Eval(GetScripts().rename_dict, {catalog},
                            {name, new_name, ref.id, keys_.SchemaChannel()});
  if (!reply.ok()) return reply.status();
  std::string_view tag = ErrorTag(*reply);
  if (tag == "TDNOTFOUND") return NotFound(ref);
  if (tag == "TDEXISTS") {
    return absl::AlreadyExistsError(StrCat("dict '", new_name, "' already exists"));
  }
  if (auto s = ReplyStatus(*reply, "rename dict"); !s.ok()) return s;
  const std::string id(reply->str());
  // The meta's name is informational (the catalog is the truth); keep it in
  // step for people reading Redis.
  (void)redis_->Eval(GetScripts().set_meta_name, {keys_.Meta(id)}, {new_name});
  cache_.Forget(id);
  return Load({new_name, id});
}

// What delete_leaves.lua and rename_leaves.lua answer for a removed leaf of
// a record whose generation other leaves still name.
constexpr std::string_view kSharedRecord = "shared";

absl::StatusOr<DictStore::Renamed> DictStore::RenameLeaves(const DictRef& ref,
                                                           const LeafPath& from,
                                                           const LeafPath& to, bool replace) {
  const std::string_view name = ref.name;
  if (auto s = ValidatePath(from); !s.ok()) return s;
  if (auto s = ValidatePath(to); !s.ok()) return s;
  auto schema = Load(ref);
  if (!schema.ok()) return schema.status();
  const std::string& id = schema->meta.id;
  const std::string channel = keys_.SchemaChannel();
  const std::string from_key = EncodePath(from);
  const std::string to_key = EncodePath(to);
  auto reply = redis_->Eval(GetScripts().rename_leaves,
                            {keys_.Meta(id), keys_.Leaves(id), keys_.Pending(id)},
                            {channel, id, from_key, to_key, replace ? "1" : "0"});
  if (!reply.ok()) return reply.status();
  const std::string_view tag = ErrorTag(*reply);
  auto display = [&](std::string_view encoded) {
    auto path = DecodePath(encoded);
    return StrCat("'", path.ok() ? PathToDisplay(*path) : std::string(encoded), "'");
  };
  if (tag == "TDNODICT") return NotFound(ref);
  if (tag == "TDLOCKED") return LockedError(name, "rename leaves");
  if (tag == "TDNOTFOUND") {
    return absl::NotFoundError(StrCat("dict '", name, "' has no leaf or sub-dict ",
                                      display(from_key)));
  }
  if (tag == "TDEXISTS") {
    return absl::AlreadyExistsError(StrCat("cannot rename ", display(from_key), " to ",
                                           display(to_key), ": dict '", name, "' has leaf ",
                                           display(ErrorDetail(*reply)),
                                           " there (replace it, or pick another name)"));
  }
  if (tag == "TDCONFLICT") {
    return absl::FailedPreconditionError(StrCat(
        "cannot rename ", display(from_key), " to ", display(to_key), ": it conflicts with ",
        display(ErrorDetail(*reply)),
        " (a path cannot be both a leaf and a sub-dict, nor move into itself)"));
  }
  if (auto s = ReplyStatus(*reply, "rename leaves"); !s.ok()) return s;
  Renamed renamed;
  renamed.version = (*reply)[0].integer();
  size_t i = 1;
  for (; i + 1 < reply->size() && !(*reply)[i].str().empty(); i += 2) {
    auto before = DecodePath((*reply)[i].str());
    auto after = DecodePath((*reply)[i + 1].str());
    if (before.ok() && after.ok()) renamed.moved.emplace_back(*before, *after);
  }
  for (++i; i + 1 < reply->size(); i += 2) {
    auto path = DecodePath((*reply)[i].str());
    if (!path.ok()) continue;
    renamed.replaced.push_back(*std::move(path));
    if ((*reply)[i + 1].str() == kSharedRecord) continue;
    auto record = DecodeLeafRecord((*reply)[i + 1].str());
    if (!record.ok()) continue;
    // Best effort, as a delete's: the sweeper finds a parked entry later.
    (void)DropRetired(schema->meta, *record);
  }
  return renamed;
}

absl::StatusOr<DictStore::Removed> DictStore::DeleteLeaves(const DictRef& ref,
                                                           const std::vector<LeafPath>& paths) {
  const std::string_view name = ref.name;
  if (paths.empty()) return absl::InvalidArgumentError("no paths to delete");
  std::vector<std::string> encoded;
  for (const LeafPath& p : paths) {
    if (auto s = ValidatePath(p); !s.ok()) return s;
    encoded.push_back(EncodePath(p));
  }
  auto schema = Load(ref);
  if (!schema.ok()) return schema.status();
  const std::string meta_key = keys_.Meta(schema->meta.id);
  const std::string leaves_key = keys_.Leaves(schema->meta.id);
  const std::string pending_key = keys_.Pending(schema->meta.id);
  const std::string channel = keys_.SchemaChannel();
  std::vector<std::string_view> args{channel, schema->meta.id};
  args.insert(args.end(), encoded.begin(), encoded.end());
  auto reply =
      redis_->Eval(GetScripts().delete_leaves, {meta_key, leaves_key, pending_key}, args);
  if (!reply.ok()) return reply.status();
  if (ErrorTag(*reply) == "TDNODICT") return NotFound(ref);
  if (ErrorTag(*reply) == "TDLOCKED") return LockedError(name, "delete leaves");
  if (ErrorTag(*reply) == "TDNOTFOUND") {
    std::string_view detail = ErrorDetail(*reply);
    auto path = DecodePath(detail);
    if (!path.ok()) return NotFoundDict(name);
    return absl::NotFoundError(StrCat("dict '", name, "' has no leaf or sub-dict '",
                                            PathToDisplay(*path), "'"));
  }
  if (auto s = ReplyStatus(*reply, "delete leaves"); !s.ok()) return s;

  Removed removed;
  removed.version = (*reply)[0].integer();
  std::set<int64_t> dropped;  // leaves of one record: its generation once
  for (size_t i = 1; i + 1 < reply->size(); i += 2) {
    auto path = DecodePath((*reply)[i].str());
    if (!path.ok()) continue;
    removed.paths.push_back(*std::move(path));
    // A record's generation goes with the last leaf that names it.
    if ((*reply)[i + 1].str() == kSharedRecord) continue;
    auto record = DecodeLeafRecord((*reply)[i + 1].str());
    if (!record.ok() || !dropped.insert(record->generation).second) continue;
    if (auto s = DropRetired(schema->meta, *record); !s.ok()) return s;
  }
  std::sort(removed.paths.begin(), removed.paths.end());
  return removed;
}

absl::Status DictStore::DeleteGeneration(const DictSchema& schema, const LeafRecord& record) {
  return DeleteGeneration(schema.meta, record);
}

absl::Status DictStore::DeleteGeneration(const DictMeta& meta, const LeafRecord& record) {
  // Why rows_high is read again: `meta` may predate a grow that raised it
  // and sized this generation's blocks past it (a writer retiring the
  // generation it replaced, with the schema it loaded at its start). The
  // read rides in the same pipeline as the UNLINKs, and only a higher value
  // costs a second pass.
  DictMeta extent = meta;
  int64_t done_rows = -1;  // rows_high the UNLINKs sent so far covered
  for (int pass = 0; pass < 2; ++pass) {
    auto layout = GenerationExtent(extent, record);
    if (!layout.ok()) return layout.status();
    auto pipe = redis_->NewPipeline(options_.pipeline_depth * 4);
    if (!pipe.ok()) return pipe.status();
    const std::string meta_key = keys_.Meta(meta.id);
    if (pass == 0) {
      if (auto s = (*pipe)->Send(meta_key, {"HGET", meta_key, kMetaRowsHigh}); !s.ok()) return s;
    }
    // One UNLINK per key: keys of different blocks live in different slots.
    for (int64_t b = 0; b < layout->block_count(); ++b) {
      for (int64_t p = 0; p < layout->part_count(b); ++p) {
        if (done_rows >= 0 && b * extent.rows_per_block < done_rows &&
            (b + 1) * extent.rows_per_block <= done_rows) {
          continue;  // a whole block the first pass deleted
        }
        const std::string key = keys_.BlockPart(meta.id, b, record.generation, p);
        if (auto s = (*pipe)->Send(key, {"UNLINK", key}); !s.ok()) return s;
      }
    }
    int64_t fresh_high = 0;
    bool first = pass == 0;
    while ((*pipe)->outstanding() > 0) {
      auto reply = (*pipe)->Receive();
      if (!reply.ok()) return reply.status();
      if (first) {
        first = false;
        if (reply->is_string()) (void)absl::SimpleAtoi(std::string(reply->str()), &fresh_high);
        continue;
      }
      if (auto s = ReplyStatus(*reply, "delete blocks"); !s.ok()) return s;
    }
    if (pass == 1 || fresh_high <= extent.rows_high) break;
    done_rows = layout->rows();
    extent.rows_high = fresh_high;
  }
  return absl::OkStatus();
}

absl::Status DictStore::DropRetired(const DictMeta& meta, const LeafRecord& record) {
  if (auto s = DeleteGeneration(meta, record); !s.ok()) return s;
  const std::string pending_key = keys_.Pending(meta.id);
  auto reply = redis_->Call(pending_key,
                            {"HDEL", pending_key, StrCat(record.generation)});
  if (!reply.ok()) return reply.status();
  if (auto s = ReplyStatus(*reply, "drop retired generation"); !s.ok()) return s;
  if (reply->integer() == 1) ReleaseBytes(GenerationBytes(record));
  return absl::OkStatus();
}

}  // namespace tdstore::store
