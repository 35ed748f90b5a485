#include "server/store/schema_cache.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "common/str_cat.h"
#include "server/store/redis_errors.h"

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

absl::Status SendProbe(redis::Pipeline& pipe, const KeySchema& keys, const DictSchema& schema) {
  const std::string meta = keys.Meta(schema.meta.id);
  return pipe.Send(meta, {"HMGET", meta, kMetaVersion, kMetaName, kMetaDeleting});
}

absl::Status CheckProbe(const redis::Reply& reply, const DictSchema& schema,
                        std::string_view name) {
  if (auto s = ReplyStatus(reply, "probe dict schema"); !s.ok()) return s;
  if (reply.size() != 3) return absl::InternalError("probe: HMGET returned no triple");
  const redis::ReplyView version = reply[0];
  if (version.is_nil() || !reply[2].is_nil()) {
    return absl::NotFoundError(StrCat("dict '", name, "' does not exist"));
  }
  int64_t v = -1;
  if (!absl::SimpleAtoi(std::string(version.str()), &v) || v != schema.meta.version ||
      reply[1].str() != name) {
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
