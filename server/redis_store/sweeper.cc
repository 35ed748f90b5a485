#include "server/redis_store/sweeper.h"

#include "absl/strings/numbers.h"
#include "common/str_cat.h"
#include "server/log.h"
#include "server/redis_store/lua_scripts.h"
#include "server/redis_store/redis_errors.h"

namespace tdstore::store {

absl::StatusOr<int> Sweeper::SweepOnce(int64_t now_ms) {
  int generations = 0;
  int deletions = 0;
  absl::Status status = SweepAll(now_ms, &generations, &deletions);
  if (observer_ != nullptr) observer_->OnSweep(generations, deletions, status.ok());
  if (!status.ok()) return status;
  return generations + deletions;
}

absl::Status Sweeper::SweepAll(int64_t now_ms, int* generations, int* deletions) {
  // One dict's trouble (an unreachable master, a malformed record) must not
  // stop the others from being swept: remember the first error, go on.
  absl::Status first_error;
  auto deleting = store_->ListDeletingIds();
  if (!deleting.ok()) return deleting.status();
  for (const std::string& id : *deleting) {
    // A dict deletion that was cut short: finish it.
    absl::Status s = store_->FinishDelete(id);
    if (s.ok()) ++*deletions;
    else if (first_error.ok()) first_error = s;
  }
  auto creations = store_->ListExpiredCreations(now_ms);
  if (!creations.ok()) return creations.status();
  for (const std::string& id : *creations) {
    // A dict built before it got its name whose builder died: delete it,
    // unless a write into it is still making progress (a long copy).
    auto busy = HasLivePending(id, now_ms);
    absl::Status s = busy.ok() ? (*busy ? absl::OkStatus() : store_->AbandonDict(id))
                               : busy.status();
    if (s.ok() && busy.ok() && !*busy) ++*deletions;
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  auto ids = store_->ListDictIds();
  if (!ids.ok()) return ids.status();
  for (const std::string& id : *ids) {
    absl::Status s = SweepDict(id, now_ms, generations);
    if (absl::IsNotFound(s)) continue;  // deleted meanwhile
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  return first_error;
}

absl::StatusOr<bool> Sweeper::HasLivePending(const std::string& id, int64_t now_ms) {
  const std::string pending_key = store_->keys().Pending(id);
  auto reply = store_->redis().Call(pending_key, {"HGETALL", pending_key});
  if (!reply.ok()) return reply.status();
  if (auto s = ReplyStatus(*reply, "read pending writes"); !s.ok()) return s;
  std::vector<std::string> fields = StringArray(*reply);
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    auto record = DecodePendingRecord(fields[i + 1]);
    if (record.ok() && record->expires_ms > now_ms) return true;
  }
  return false;
}

absl::Status Sweeper::SweepDict(const std::string& id, int64_t now_ms, int* removed) {
  const std::string pending_key = store_->keys().Pending(id);
  auto reply = store_->redis().Call(pending_key, {"HGETALL", pending_key});
  if (!reply.ok()) return reply.status();
  if (auto s = ReplyStatus(*reply, "read pending writes"); !s.ok()) return s;
  std::vector<std::string> fields = StringArray(*reply);
  if (fields.empty()) return absl::OkStatus();

  auto schema = store_->LoadDictById(id);
  if (!schema.ok()) return schema.status();

  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string& gen_text = fields[i];
    const std::string& value = fields[i + 1];
    auto record = DecodePendingRecord(value);
    int64_t gen = 0;
    if (!record.ok() || !absl::SimpleAtoi(gen_text, &gen)) continue;
    if (record->expires_ms > now_ms) continue;
    // Claim it with a lease rather than removing it: if this sweep dies
    // before the blocks are gone, the lease expires and a later pass (here
    // or in another daemon) deletes them again.
    PendingRecord lease = *record;
    lease.expires_ms = now_ms + store_->options().pending_timeout.count();
    const std::string leased = EncodePendingRecord(lease);
    auto claim = store_->redis().Eval(GetScripts().claim_pending, {pending_key},
                                      {gen_text, value, leased});
    if (!claim.ok()) return claim.status();
    if (auto s = ReplyStatus(*claim, "claim pending write"); !s.ok()) return s;
    if (claim->integer() != 1) continue;  // committed or refreshed meanwhile
    record->leaf.generation = gen;  // the field name is the generation
    if (auto s = store_->DeleteGeneration(schema->meta, record->leaf); !s.ok()) return s;
    // Blocks gone: drop the entry, if it still holds our lease.
    auto dropped = store_->redis().Eval(GetScripts().claim_pending, {pending_key},
                                        {gen_text, leased, ""});
    if (!dropped.ok()) return dropped.status();
    // The entry is gone for good only if it still held our lease: then
    // this pass, and no other, returns the generation's bytes.
    if (dropped->is_integer() && dropped->integer() == 1) {
      store_->ReleaseBytes(GenerationBytes(record->leaf));
    }
    ++*removed;
  }
  return absl::OkStatus();
}

void Sweeper::Start(std::chrono::milliseconds interval) {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this, interval] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, interval, [this] { return stop_; })) {
      lock.unlock();
      int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
      auto n = SweepOnce(now);
      // Redis may be down for a while; the next pass tries again.
      if (!n.ok()) {
        LogWarning(StrCat("sweep failed: ", n.status().ToString()));
      } else if (*n > 0) {
        LogInfo(StrCat("swept ", *n, " abandoned generation(s) and unfinished dict deletion(s)"));
      }
      lock.lock();
    }
  });
}

void Sweeper::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace tdstore::store
