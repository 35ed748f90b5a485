// The Store (server/store/store.h) on Redis or Redis Cluster: tdstored's
// store. Each call is one of this folder's engines on a DictStore (the
// catalog, metas, leaf registries and quotas, dict_store.h); the schema
// watch hears every daemon's changes on the namespace's channel
// (schema_watch.h). Key layout: key_schema.h and docs/storage-layout.md.
//
// Data calls serve the schema from the cache and prove it current in their
// own round trip (schema_cache.h); schema-only calls (Describe) read it
// fresh, one round trip by id.
//
// Thread-safe: one RedisStore serves every RPC thread.
#ifndef TDSTORE_SERVER_REDIS_STORE_REDIS_STORE_H_
#define TDSTORE_SERVER_REDIS_STORE_REDIS_STORE_H_

#include <memory>
#include <string_view>
#include <vector>

#include "server/redis_store/dict_store.h"
#include "server/redis_store/schema_watch.h"
#include "server/store/store.h"

namespace tdstore::store {

class RedisStore final : public Store {
 public:
  // `dicts` and `watch` must outlive the store; without a watch, Watch is
  // UNIMPLEMENTED.
  explicit RedisStore(DictStore* dicts, SchemaWatch* watch = nullptr)
      : dicts_(dicts), watch_(watch) {}

  Health Ping() const override;
  absl::StatusOr<DictSchema> CreateDict(const NewDict& spec) override;
  absl::StatusOr<DictSchema> Describe(const DictRef& ref) const override;
  absl::StatusOr<SchemaVersionSeen> SchemaVersion(const DictRef& ref) const override;
  absl::StatusOr<std::vector<std::string>> ListDicts() const override;
  absl::Status DeleteDict(const DictRef& ref) override;
  absl::StatusOr<DictSchema> RenameDict(const DictRef& ref, std::string_view new_name) override;
  absl::StatusOr<RemovedLeaves> DeleteLeaves(const DictRef& ref,
                                             const std::vector<LeafPath>& paths) override;
  absl::StatusOr<RenamedLeaves> RenameLeaves(const DictRef& ref, const LeafPath& from,
                                             const LeafPath& to, bool replace) override;
  absl::StatusOr<CommitResult> CopyLeaves(const DictRef& src, const LeafPath& from,
                                          const DictRef& dst, const LeafPath& to) override;
  absl::StatusOr<int64_t> FillLeaves(const DictRef& ref, const std::vector<Fill>& fills,
                                     const plan::IndexSpec* index) override;
  absl::StatusOr<DictSchema> Resize(const DictRef& ref, int64_t rows) override;
  absl::Status Read(const DictRef& ref, const std::vector<LeafPath>& paths,
                    LeafSink& sink) const override;
  absl::StatusOr<IndexedReadResult> ReadIndexed(const DictRef& ref, const plan::IndexSpec& index,
                                                const std::vector<LeafPath>& paths) const override;
  absl::StatusOr<IndexedWriteResult> WriteIndexed(const DictRef& ref, const plan::IndexSpec& index,
                                                  const std::vector<IndexedWriteValue>& values,
                                                  MemoryBudget::Lease& lease) override;
  absl::StatusOr<RingAppendResult> AppendToRing(const DictRef& ref, const RingAppend& ring,
                                                const std::vector<IndexedWriteValue>& values,
                                                MemoryBudget::Lease& lease) override;
  absl::StatusOr<DictSchema> SetLocked(const DictRef& ref, bool locked) override;
  absl::StatusOr<DictSchema> UpdateAttrs(const DictRef& ref, const AttrsUpdate& update) override;
  absl::StatusOr<CounterResult> Counter(const DictRef& ref, const CounterOp& op) override;
  absl::StatusOr<uint64_t> Watch(const DictRef& ref, SchemaListener listener) override;
  void Unwatch(uint64_t token) override;
  MemoryBudget& budget() const override { return dicts_->budget(); }
  int64_t max_indexed_bytes() const override { return dicts_->options().max_indexed_bytes; }
  int64_t IndexedWriteLease(int64_t value_bytes, bool first_value) const override;

 protected:
  absl::StatusOr<std::unique_ptr<LeafWrite>> OpenLeafWrite(const DictRef& ref) override;

 private:
  absl::StatusOr<DictSchema> CreateCopy(const NewDict& spec);
  // Gives a dict built unpublished its name if `filled` (the making of its
  // leaves) is OK; deletes it otherwise and returns `filled`.
  absl::StatusOr<DictSchema> Publish(const DictSchema& built, absl::Status filled);

  DictStore* const dicts_;
  SchemaWatch* const watch_;
};

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_REDIS_STORE_H_
