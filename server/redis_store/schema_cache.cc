#include "server/redis_store/schema_cache.h"
#include "server/redis_store/schema_text.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "common/str_cat.h"
#include "server/redis_store/redis_errors.h"

namespace tdstore::store {

namespace {
constexpr char kStalePayload[] = "tdstore/stale";
}  // namespace

std::shared_ptr<const DictSchema> SchemaCache::Get(std::string_view id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(std::string(id));
  return it == by_id_.end() ? nullptr : it->second;
}

void SchemaCache::Put(const DictSchema& schema) {
  auto copy = std::make_shared<const DictSchema>(schema);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(schema.meta.id);
  if (it != by_id_.end()) {
    if (it->second->meta.version <= schema.meta.version) it->second = std::move(copy);
    return;
  }
  if (by_id_.size() >= capacity_) by_id_.clear();
  by_id_.emplace(schema.meta.id, std::move(copy));
}

void SchemaCache::Forget(std::string_view id) {
  std::lock_guard<std::mutex> lock(mu_);
  by_id_.erase(std::string(id));
}

absl::Status SendProbe(redis::Pipeline& pipe, const KeySchema& keys, const DictSchema& schema,
                       std::string_view name) {
  const std::string meta = keys.Meta(schema.meta.id);
  if (auto s = pipe.Send(meta, {"HMGET", meta, kMetaVersion, kMetaDeleting}); !s.ok()) return s;
  const std::string catalog = keys.Catalog();
  return pipe.Send(catalog, {"HGET", catalog, name});
}

absl::Status ReceiveProbe(redis::Pipeline& pipe, const DictSchema& schema,
                          std::string_view name) {
  auto meta = pipe.Receive();
  if (!meta.ok()) return meta.status();
  auto named = pipe.Receive();
  if (!named.ok()) return named.status();
  if (auto s = ReplyStatus(*meta, "probe dict schema"); !s.ok()) return s;
  if (auto s = ReplyStatus(*named, "probe dict name"); !s.ok()) return s;
  if (meta->size() != 2) return absl::InternalError("probe: HMGET returned no pair");
  if ((*meta)[0].is_nil() || !(*meta)[1].is_nil() || named->str() != schema.meta.id) {
    return absl::NotFoundError(StrCat("dict '", name, "' (id ", schema.meta.id,
                                      ") does not exist: it was deleted, renamed or replaced by "
                                      "a namesake since it was opened"));
  }
  int64_t v = -1;
  if (!absl::SimpleAtoi(std::string((*meta)[0].str()), &v) || v != schema.meta.version) {
    return StaleError(StrCat("the schema of dict '", name, "'"));
  }
  return absl::OkStatus();
}

absl::Status StaleError(std::string_view what) {
  absl::Status status =
      absl::AbortedError(StrCat("stale: ", what, " changed meanwhile; retry"));
  status.SetPayload(kStalePayload, absl::Cord("1"));
  return status;
}

bool IsStale(const absl::Status& status) {
  return status.GetPayload(kStalePayload).has_value();
}

}  // namespace tdstore::store
