// Dicts in Redis: the catalog, each dict's meta record and leaf registry,
// and deleting generations' blocks. The data path lives next door:
// leaf_writer.h (whole-leaf writes) and leaf_reader.h (whole-leaf reads).
//
// Key layout: server/redis_store/key_schema.h and docs/storage-layout.md.
//
// Quotas (StoreOptions::dict_quota_bytes, namespace_quota_bytes) are kept
// here, in one place:
//  - A dict's stored bytes are the sum of its leaves' byte sizes, read from
//    its leaf registry (exact; no counter to drift). Writers check it with
//    CheckDictQuota before their first Redis write. Two writers racing on
//    one dict each check the registry as they read it, so together they can
//    pass the dict quota by at most what they write.
//  - The namespace's stored bytes are a counter, <ns>:used_bytes, counting
//    every generation that has a record: committed in a registry, or in a
//    pending hash (being written, or replaced/deleted and awaiting block
//    deletion). ReserveBytes adds to it atomically against the quota
//    (reserve_bytes.lua) *before* the generation is recorded; the bytes are
//    returned exactly once, by whoever removes the generation's pending
//    entry (DropRetired, an abort, the sweeper) or the whole dict
//    (FinishDelete). A daemon killed between a reservation and its record,
//    or between the removal and the release, leaves the counter too high
//    (refusing early, never too late); docs/storage-layout.md.
//
// Errors: NOT_FOUND (no such dict or leaf), ALREADY_EXISTS, INVALID_ARGUMENT
// (bad name, shape, layout), RESOURCE_EXHAUSTED (a quota or --max-dicts;
// nothing written), UNAVAILABLE (Redis unreachable; retryable),
// DATA_LOSS (Redis holds records tdstore did not write), INTERNAL (an
// unexpected Redis error). A call that fails with INVALID_ARGUMENT,
// NOT_FOUND or ALREADY_EXISTS has changed nothing.
//
// Thread-safe: one DictStore serves every RPC thread.
#ifndef TDSTORE_SERVER_REDIS_STORE_DICT_STORE_H_
#define TDSTORE_SERVER_REDIS_STORE_DICT_STORE_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/redis_store/key_schema.h"
#include "server/redis_store/generation_hints.h"
#include "server/redis_store/retire_queue.h"
#include "common/path.h"
#include "common/shape.h"
#include "server/redis/redis_client.h"
#include "server/store/memory_budget.h"
#include "server/redis_store/schema_text.h"
#include "server/store/schema.h"
#include "server/store/store_values.h"
#include "server/redis_store/schema_cache.h"
#include "server/store/store_options.h"

namespace tdstore::store {

// Catalog fields starting with this record deletions in progress (dict
// names cannot start with '/').
inline constexpr char kDeletingPrefix[] = "/deleting/";
// ... and dicts being built before they get their name: '/creating/<id>' ->
// the unix ms after which the sweeper may take the creation as abandoned.
inline constexpr char kCreatingPrefix[] = "/creating/";

class DictStore {
 public:
  // `redis` must outlive the store.
  DictStore(redis::RedisClient* redis, StoreOptions options);
  ~DictStore();  // drops what RetireLater still holds (StopRetiring)

  const StoreOptions& options() const { return options_; }
  const KeySchema& keys() const { return keys_; }
  // The generations proposed for writes sent at once (WriteTxn's at-once
  // path).
  GenerationHints& generation_hints() { return hints_; }
  redis::RedisClient& redis() const { return *redis_; }

  // Creates an empty dict. rows_per_block / part_bytes of 0 take the
  // defaults. ALREADY_EXISTS if the name is taken. `schema_bytes` are the
  // bytes of the leaves the caller will create in it next: checked against
  // both quotas before the dict is created (RESOURCE_EXHAUSTED, nothing
  // written); the leaves' own writes reserve them for real.
  //
  // With publish = false the dict is made without its name: it has an id
  // and a meta, and can be written through WriteTxn::Begin(store, schema),
  // but no one can open it until PublishDict gives it its name, all its
  // leaves in place. The creation is recorded in the catalog first
  // ('/creating/<id>'), so if the caller dies before publishing, the
  // sweeper deletes the dict once the record has expired and no write into
  // it is in progress. The name is checked free at the start (ALREADY_EXISTS)
  // and again by PublishDict.
  // `layout` is recorded in the meta and never changes (schema.h's
  // DictLayout; INVALID_ARGUMENT for a record dict without batch dims).
  absl::StatusOr<DictSchema> CreateDict(std::string_view name, const Shape& batch_shape,
                                        int64_t rows_per_block, int64_t part_bytes,
                                        int64_t schema_bytes = 0, bool publish = true,
                                        DictLayout layout = DictLayout::kLeaves);
  // Gives a dict made with publish = false its name, atomically
  // (publish_dict.lua). ALREADY_EXISTS if the name was taken meanwhile (the
  // dict is then deleted); ABORTED if the sweeper took the creation as
  // abandoned first.
  absl::Status PublishDict(std::string_view name, const std::string& id);
  // Deletes a dict made with publish = false that will not be published
  // (its leaves could not be made; the sweeper found its builder gone),
  // unless PublishDict got there first: then it changes nothing.
  // Idempotent.
  absl::Status AbandonDict(const std::string& id);
  // Unpublished creations recorded as expiring before `now_ms` (for the
  // sweeper, which checks that no write into them is in progress).
  absl::StatusOr<std::vector<std::string>> ListExpiredCreations(int64_t now_ms);

  // --- Quotas (see the top of this file) --------------------------------------
  // RESOURCE_EXHAUSTED naming --dict-quota-bytes if the dict would hold
  // `bytes_after` bytes. Pure: no Redis.
  absl::Status CheckDictQuota(const DictMeta& meta, int64_t bytes_after) const;
  // Adds `bytes` to the namespace counter unless that passes the quota
  // (RESOURCE_EXHAUSTED naming --namespace-quota-bytes; nothing changed).
  // `what` says what the bytes are for, in the message.
  absl::Status ReserveBytes(int64_t bytes, std::string_view what);
  // The same in the round trip of the schema probe of `cached`, a schema
  // from the cache (schema_cache.h; `cached.meta.name` is the name probed):
  // *current says whether the probe proved it current. If it did not, the
  // probe's status is returned (stale, NOT_FOUND, UNAVAILABLE) and nothing
  // stays reserved (unless the connection broke: then the counter may stay
  // high, refusing early, never late).
  absl::Status ProbeAndReserveBytes(const DictSchema& cached, int64_t bytes,
                                    std::string_view what, bool* current);
  // Returns bytes to the namespace counter. Best effort: a failure leaves
  // the counter high (logged).
  void ReleaseBytes(int64_t bytes);
  // The namespace counter (0 if absent).
  absl::StatusOr<int64_t> NamespaceUsedBytes() const;
  // Without reserving: RESOURCE_EXHAUSTED if `bytes` more would not fit
  // under the namespace quota now.
  absl::Status CheckNamespaceRoom(int64_t bytes, std::string_view what) const;

  // The budget every buffer of call data is leased from (memory_budget.h).
  MemoryBudget& budget() const { return budget_; }

  // The current schema of a dict (two round trips: catalog, then meta and
  // leaves pipelined). NOT_FOUND if there is no such dict.
  absl::StatusOr<DictSchema> LoadDict(std::string_view name) const;

  // The current schema of the dict `ref` names, remembered in the cache.
  // By id: one round trip (meta, leaves and the catalog's entry for
  // ref.name pipelined), NOT_FOUND unless that dict still exists and the
  // catalog still gives ref.name its id. By name alone: as LoadDict.
  absl::StatusOr<DictSchema> Load(const DictRef& ref) const;

  // Schemas loaded before, for calls that prove them current in their own
  // round trip (schema_cache.h). Only id refs are served from it.
  std::shared_ptr<const DictSchema> Cached(const DictRef& ref) const;
  // Runs `attempt` against the dict's current schema at the cost of no
  // extra round trip when it can: first against the cached schema, with
  // probe = true (the attempt must then start its pipeline with the probe
  // and fail IsStale() when it fails, before acting on the schema). If that
  // fails in a way a newer schema could explain (stale; a path, dtype or
  // shape the cached schema does not have), the schema is loaded and the
  // attempt made again with probe = false; one that goes stale then (a
  // generation replaced mid-call) gets one more fresh try. So an attempt
  // may run up to three times: it must not have acted on a failure it
  // returns in those classes (or, for writes, acting again must be
  // harmless).
  absl::Status WithSchema(
      const DictRef& ref,
      const std::function<absl::Status(const DictSchema& schema, bool probe)>& attempt) const;

  // Remembers a schema derived without reading it (e.g. after a commit
  // whose reply says nothing else changed).
  void Remember(const DictSchema& schema) const { cache_.Put(schema); }

  // Every dict name, sorted.
  absl::StatusOr<std::vector<std::string>> ListDicts();

  // Removes the dict from the catalog, then every key it owns: meta, leaf
  // registry, pending writes and all data blocks. The deletion is recorded
  // in the catalog first, so one cut short (Redis failure, daemon killed) is
  // finished by the sweeper (FinishDelete). A catalog entry whose meta is
  // missing is simply removed. With ref.id, only if the name still means
  // that id (NOT_FOUND otherwise, nothing deleted).
  absl::Status DeleteDict(const DictRef& ref);

  // Completes the deletion of dict `id` recorded by DeleteDict: marks its
  // meta deleting (writers stop), deletes every block of every committed and
  // pending generation, then the registry, the meta and the record.
  // Idempotent.
  absl::Status FinishDelete(const std::string& id);

  // Ids whose deletion was recorded but not finished (for the sweeper).
  absl::StatusOr<std::vector<std::string>> ListDeletingIds();

  // Renames atomically in the catalog. NOT_FOUND / ALREADY_EXISTS. With
  // ref.id, only if the name still means that id.
  absl::StatusOr<DictSchema> RenameDict(const DictRef& ref, std::string_view new_name);

  // Removes leaves (each path a leaf or a nested prefix) and their blocks.
  // NOT_FOUND naming the first path that matches nothing; then nothing is
  // removed. Returns the removed leaves' paths, sorted, and the schema
  // version the removal made.
  using Removed = RemovedLeaves;
  absl::StatusOr<Removed> DeleteLeaves(const DictRef& ref, const std::vector<LeafPath>& paths);

  // Moves the leaf or subtree at `from` to `to` in one step, without moving
  // data (rename_leaves.lua): only leaf records change. With `replace`,
  // whatever is at `to` goes (its blocks deleted afterwards, as a delete's).
  // NOT_FOUND if nothing is at `from`; ALREADY_EXISTS if something is at
  // `to` and not `replace`; FAILED_PRECONDITION if `to` lies under a leaf,
  // one path holds the other, or the dict is locked. Nothing changes then.
  using Renamed = RenamedLeaves;
  absl::StatusOr<Renamed> RenameLeaves(const DictRef& ref, const LeafPath& from,
                                       const LeafPath& to, bool replace);

  // Deletes every key of one generation of one leaf (pipelined UNLINKs),
  // up to the dict's rows_high (GenerationExtent in schema.h). Deleting
  // keys that are already gone is fine.
  absl::Status DeleteGeneration(const DictSchema& schema, const LeafRecord& record);
  absl::Status DeleteGeneration(const DictMeta& meta, const LeafRecord& record);

  // For a generation the scripts parked in the pending hash as garbage (a
  // replaced or deleted leaf): deletes its blocks, then its pending entry,
  // and returns its bytes to the namespace counter if this call removed
  // the entry.
  absl::Status DropRetired(const DictMeta& meta, const LeafRecord& record);

  // The same, after the caller's answer: queued for a worker thread
  // (retire_queue.h: why it cannot leak nor return the bytes twice) once
  // RetireInBackground has started one; dropped right here otherwise, or
  // when the queue is full. Failures are logged and left to the sweeper,
  // which finds the parked entry.
  void RetireLater(const DictMeta& meta, const LeafRecord& record);
  // Starts RetireLater's worker (tdstored does, before serving; tools and
  // most tests keep the drops synchronous). Call once, before any
  // RetireLater.
  void RetireInBackground();
  // Drops what is queued and ends the worker; RetireLater drops in the
  // caller from then on. Idempotent.
  void StopRetiring();

  // The ids of every dict in the catalog (for the sweeper).
  absl::StatusOr<std::vector<std::string>> ListDictIds();
  // Schema by id; NOT_FOUND if its meta is gone.
  absl::StatusOr<DictSchema> LoadDictById(const std::string& id) const;

  // The id the catalog gives `name` now; NOT_FOUND if none.
  absl::StatusOr<std::string> LookupId(std::string_view name) const;
  // NOT_FOUND for `ref` (naming its id when it has one).
  absl::Status NotFound(const DictRef& ref) const;

 private:
  absl::Status QuotaError(int64_t used, int64_t bytes, std::string_view what) const;
  // What reserve_bytes.lua's reply to a reservation of `bytes` means.
  absl::Status ReserveReplyStatus(const redis::Reply& reply, int64_t bytes,
                                  std::string_view what) const;

  redis::RedisClient* const redis_;
  const StoreOptions options_;
  const KeySchema keys_;
  mutable MemoryBudget budget_;
  mutable SchemaCache cache_;
  GenerationHints hints_;
  // Set once by RetireInBackground, before the store serves; last, so that
  // its worker stops before the members its drops use go.
  std::unique_ptr<RetireQueue> retire_;
};

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_DICT_STORE_H_
