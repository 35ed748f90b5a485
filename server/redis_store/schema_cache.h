// Serving a dict's schema from memory without ever serving a stale one.
//
// Loading a schema costs a Redis round trip (HGETALL meta + leaves), and the
// data path needs one on every call. So tdstored keeps the schemas it loaded
// (SchemaCache, keyed by dict id) and proves a cached one current in the
// same round trip that moves the data: a data pipeline starts with the
// probe (SendProbe: HMGET of the meta's version, name and deleting mark),
// and nothing read is handed on, and no plan is trusted, until CheckProbe
// says the version is the one the plan was made from. Every schema change
// (leaf added, replaced, removed) bumps the version in the same script that
// makes it, so another client's or another daemon's committed change is
// seen by the next call; a change that commits while a call is in flight is
// concurrent with it, and the call may be ordered before it.
//
// Writes pipelined behind the probe are sent before its answer arrives: an
// indexed write that learns its schema was stale is simply done again from
// a fresh one (it sets the selected cells to given values, so redoing it
// is harmless), and write_runs.lua never creates a key, so the first try
// cannot resurrect a replaced generation.
//
// Thread-safe.
#ifndef TDSTORE_SERVER_REDIS_STORE_SCHEMA_CACHE_H_
#define TDSTORE_SERVER_REDIS_STORE_SCHEMA_CACHE_H_

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/status/status.h"
#include "server/redis_store/key_schema.h"
#include "server/redis/redis_client.h"
#include "server/store/schema.h"

namespace tdstore::store {

class SchemaCache {
 public:
  // At most `capacity` schemas are kept; past it the cache starts over
  // (a miss costs one round trip, so no finer eviction is worth having).
  explicit SchemaCache(size_t capacity = 1024) : capacity_(capacity) {}

  // The schema last remembered for dict `id`, or null.
  std::shared_ptr<const DictSchema> Get(std::string_view id) const;
  // Remembers a schema just read from Redis (or derived from a commit's
  // reply). An older version never replaces a newer one.
  void Put(const DictSchema& schema);
  void Forget(std::string_view id);

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const DictSchema>> by_id_;  // guarded by mu_
};

// Queues the probe of dict `schema.meta.id` under `name` on `pipe`: two
// commands, HMGET of the meta's version and deleting mark, and HGET of the
// catalog's entry for `name` (on a cluster they go to two nodes at once;
// the catalog, not the meta's informational name, says which dict a name
// means). Their replies are the first two the pipeline returns if sent
// first.
absl::Status SendProbe(redis::Pipeline& pipe, const KeySchema& keys, const DictSchema& schema,
                       std::string_view name);
// The commands SendProbe queues: a pipeline that carries the probe must
// have room for them, or its Send waits for a reply (a round trip).
inline constexpr int kProbeCommands = 2;

// Receives the probe's two replies and says what they mean for `schema`:
//   OK          it is current (same version, not deleting, and `name`
//               still means its id);
//   IsStale()   it changed: load it again;
//   NOT_FOUND   the dict is deleted, being deleted, or no longer so named.
absl::Status ReceiveProbe(redis::Pipeline& pipe, const DictSchema& schema,
                          std::string_view name);

// The status planners return when the schema they planned from is no longer
// current (ABORTED with a "stale" payload); callers load it again and redo.
absl::Status StaleError(std::string_view what);
bool IsStale(const absl::Status& status);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_SCHEMA_CACHE_H_
