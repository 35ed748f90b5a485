#include "server/redis_store/schema_watch.h"

#include <thread>
#include <utility>
#include <vector>

namespace tdstore::store {

SchemaWatch::SchemaWatch(DictStore* dicts, std::chrono::milliseconds delay, size_t max_watchers)
    : dicts_(dicts),
      delay_(delay),
      max_watchers_(max_watchers),
      subscriber_(&dicts->redis(), dicts->keys().SchemaChannel(), this) {}

SchemaWatch::~SchemaWatch() { Stop(); }

void SchemaWatch::Start() { subscriber_.Start(); }

void SchemaWatch::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  subscriber_.Stop();
  EndAll(absl::UnavailableError("tdstored is shutting down"));
}

absl::StatusOr<uint64_t> SchemaWatch::Watch(const DictRef& ref, Listener listener) {
  bool wake = false;
  uint64_t token = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return absl::UnavailableError("tdstored is shutting down");
    if (watchers_.size() >= max_watchers_) {
      return absl::ResourceExhaustedError("this tdstored watches its limit of schemas");
    }
    token = next_token_++;
    watchers_.emplace(token, Watcher{std::string(ref.name), std::string(ref.id),
                                     std::make_shared<const Listener>(std::move(listener))});
    by_id_.emplace(std::string(ref.id), token);
    // Not live yet: OnSubscribed makes every watched id due.
    if (live_) {
      due_.insert(std::string(ref.id));
      wake = true;
    }
  }
  if (wake) subscriber_.Wake();
  return token;
}

void SchemaWatch::Unwatch(uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = watchers_.find(token);
  if (it == watchers_.end()) return;
  auto [first, last] = by_id_.equal_range(it->second.id);
  for (auto i = first; i != last; ++i) {
    if (i->second == token) {
      by_id_.erase(i);
      break;
    }
  }
  watchers_.erase(it);
}

size_t SchemaWatch::watchers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return watchers_.size();
}

void SchemaWatch::OnSubscribed() {
  std::lock_guard<std::mutex> lock(mu_);
  live_ = true;
  for (const auto& [id, _] : by_id_) due_.insert(id);
}

void SchemaWatch::OnLost(const absl::Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_ = false;
    due_.clear();
  }
  EndAll(absl::UnavailableError(
      std::string("tdstored lost its subscription to schema changes: ") +
      std::string(why.message())));
}

void SchemaWatch::OnMessage(std::string_view message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (by_id_.count(std::string(message)) > 0) due_.insert(std::string(message));
}

void SchemaWatch::OnIdle() {
  std::set<std::string> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    due.swap(due_);
  }
  if (!due.empty() && delay_.count() > 0) std::this_thread::sleep_for(delay_);
  for (const std::string& id : due) {
    // The watchers of this id, grouped by the name they opened it under
    // (the catalog decides what a name means, so each name loads apart).
    std::map<std::string, std::vector<std::pair<uint64_t, std::shared_ptr<const Listener>>>>
        by_name;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto [first, last] = by_id_.equal_range(id);
      for (auto i = first; i != last; ++i) {
        const Watcher& w = watchers_.at(i->second);
        by_name[w.name].emplace_back(i->second, w.listener);
      }
    }
    for (const auto& [name, listeners] : by_name) {
      absl::StatusOr<DictSchema> schema = dicts_->Load({name, id});
      if (!schema.ok() && !absl::IsNotFound(schema.status())) {
        schema = absl::UnavailableError(std::string("could not load the changed schema: ") +
                                        std::string(schema.status().message()));
      }
      for (const auto& [token, listener] : listeners) {
        (*listener)(schema);
        if (!schema.ok()) Unwatch(token);
      }
    }
  }
}

void SchemaWatch::EndAll(const absl::Status& why) {
  std::map<uint64_t, Watcher> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ended.swap(watchers_);
    by_id_.clear();
  }
  for (const auto& [_, w] : ended) (*w.listener)(why);
}

}  // namespace tdstore::store
