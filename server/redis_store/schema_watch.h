// Telling watchers about every change of a dict's schema, whoever made it.
//
// Every script that changes a schema (commit_leaves, delete_leaves,
// rename_dict, unpublish_dict) publishes the dict's id on the namespace's
// schema channel (KeySchema::SchemaChannel) in the same atomic step. Each
// tdstored subscribes to it (redis/subscriber.h); when a watched id is
// published, it loads that dict's schema fresh (DictStore::Load, one round
// trip) and hands it to the dict's watchers. Several publications that
// arrive together cost one load.
//
// Why a watcher can trust what it was told last: the load happens after
// the publication, which happens after the change, so the schema handed on
// is at least as new as every change published so far; any later change
// publishes again. Only a lost subscription can hide a change, and then
// every watcher is told UNAVAILABLE and dropped (it must not trust its copy
// any more, and may watch again).
//
// What a listener is told, in order:
//   OK(schema)    the current schema: once after Watch (as soon as the
//                 subscription is live), then after each change;
//   NOT_FOUND     the dict was deleted, or its name means another dict now
//                 (rename, delete and re-create) — final;
//   UNAVAILABLE   the subscription was lost, the load failed, or the watch
//                 stopped — final.
// After a final status the watcher is removed. Listeners run on the
// watch's thread, one at a time, and must return quickly (queue, don't
// block: one slow listener delays every other).
//
// Thread-safe.
#ifndef TDSTORE_SERVER_REDIS_STORE_SCHEMA_WATCH_H_
#define TDSTORE_SERVER_REDIS_STORE_SCHEMA_WATCH_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "server/redis/subscriber.h"
#include "server/redis_store/dict_store.h"

namespace tdstore::store {

class SchemaWatch : private redis::Subscriber::Listener {
 public:
  using Listener = std::function<void(const absl::StatusOr<DictSchema>&)>;

  // `dicts` must outlive the watch. At most `max_watchers` watchers at once.
  // `delay` (tests only) holds each change back that long before it is
  // loaded and handed on.
  explicit SchemaWatch(DictStore* dicts,
                       std::chrono::milliseconds delay = std::chrono::milliseconds(0),
                       size_t max_watchers = 100000);
  ~SchemaWatch() override;  // Stop()

  // Subscribes (in the background; watchers hear nothing until it is live).
  void Start();
  // Tells every watcher UNAVAILABLE "tdstored is shutting down", ends the
  // subscription, and refuses new watchers. Idempotent.
  void Stop();

  // Watches the dict `ref` names (by id). Returns a token for Unwatch.
  // RESOURCE_EXHAUSTED past max_watchers; UNAVAILABLE after Stop.
  absl::StatusOr<uint64_t> Watch(const DictRef& ref, Listener listener);
  // Removes a watcher; a call of its listener already under way may still
  // finish. Unknown tokens are ignored.
  void Unwatch(uint64_t token);

  // Watchers registered now (for tests and metrics).
  size_t watchers() const;

 private:
  struct Watcher {
    std::string name;
    std::string id;
    std::shared_ptr<const Listener> listener;
  };

  // redis::Subscriber::Listener, on the subscriber's thread.
  void OnSubscribed() override;
  void OnLost(const absl::Status& why) override;
  void OnMessage(std::string_view message) override;
  void OnIdle() override;

  // Tells every watcher `why` and removes them all.
  void EndAll(const absl::Status& why);

  DictStore* const dicts_;
  const std::chrono::milliseconds delay_;
  const size_t max_watchers_;
  redis::Subscriber subscriber_;

  mutable std::mutex mu_;
  bool stopped_ = false;                        // guarded by mu_
  bool live_ = false;                           // subscribed now; guarded by mu_
  uint64_t next_token_ = 1;                     // guarded by mu_
  std::map<uint64_t, Watcher> watchers_;        // guarded by mu_
  std::multimap<std::string, uint64_t> by_id_;  // id -> token; guarded by mu_
  // Ids to load and hand on at the next OnIdle. Guarded by mu_.
  std::set<std::string> due_;
};

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_SCHEMA_WATCH_H_
