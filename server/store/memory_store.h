// The Store (store.h) in this process's memory: for tests, and for trying
// tdstore without Redis (tdstored --backend memory). Not durable (a restart
// loses everything) and not shared: every daemon has its own.
//
//   MemoryStore store(StoreOptions{});
//   auto schema = store.CreateDict({.name = "replay", .batch_shape = {1000}});
//
// It keeps the whole contract, as the Redis store (redis_store/) keeps it,
// with the same errors and messages: dict ids never reused, schema versions
// bumped by the same calls, a new generation per whole-leaf write, commits
// that make all of their leaves visible at once, quotas and max_dicts
// checked before anything changes, locks, counters, resize, ring appends.
//
// How: every dict, leaf and counter lives in one State under one mutex.
// A leaf's bytes are its C-order tensor, held by a shared_ptr: a read takes
// the pointers it needs under the mutex and streams them after it, so it
// sees every leaf at one generation; an indexed write copies a leaf's bytes
// before changing them if a reader still holds them. A record dict
// (DictLayout::kRecord) reports its record in the schema as the Redis store
// does (shared generation, offset and stride), but keeps each leaf's bytes
// apart.
//
// Watchers are told on a thread of the store's own, never under the mutex.
//
// Thread-safe.
#ifndef TDSTORE_SERVER_STORE_MEMORY_STORE_H_
#define TDSTORE_SERVER_STORE_MEMORY_STORE_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "server/store/indexed_plan.h"
#include "server/store/store.h"
#include "server/store/store_options.h"

namespace tdstore::store {

class MemoryStore final : public Store {
 public:
  // What Ping reports as the back end.
  static constexpr char kBackend[] = "memory (not durable, one daemon)";

  explicit MemoryStore(StoreOptions options = {});
  ~MemoryStore() override;  // Stop()

  // Tells every watcher UNAVAILABLE "tdstored is shutting down" and refuses
  // new ones. Idempotent.
  void Stop();

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
  MemoryBudget& budget() const override { return budget_; }
  int64_t max_indexed_bytes() const override { return options_.max_indexed_bytes; }
  // The value and one expanded copy of it, plus the index allowance.
  int64_t IndexedWriteLease(int64_t value_bytes, bool first_value) const override;

 protected:
  absl::StatusOr<std::unique_ptr<LeafWrite>> OpenLeafWrite(const DictRef& ref) override;

 private:
  class Write;  // the LeafWrite (memory_store.cc)
  using Bytes = std::shared_ptr<std::string>;
  struct Dict {
    DictSchema schema;                   // meta.name is the dict's name now
    std::map<std::string, Bytes> data;   // encoded path -> C-order bytes
    std::map<std::string, int64_t> counters;
    int64_t next_generation = 1;
  };
  struct Watcher {
    std::string name;
    std::string id;
    std::shared_ptr<const SchemaListener> listener;
  };

  // --- With mu_ held ---------------------------------------------------------
  // The dict `ref` names: NOT_FOUND unless its name means ref.id (if given).
  absl::StatusOr<Dict*> FindLocked(const DictRef& ref) const;
  // Every watcher of `id` hears of the dict's change.
  void ChangedLocked(const std::string& id);
  // The namespace quota: RESOURCE_EXHAUSTED unless `bytes` more fit.
  absl::Status CheckNamespaceLocked(int64_t bytes, std::string_view what) const;
  // Makes zero-filled leaves in `dict` that are missing there, in one
  // commit (forming a record dict's record from the first leaves with
  // rows); paths that exist are left alone. Checks the lock and the
  // quotas. Returns the leaves made.
  absl::StatusOr<std::vector<Leaf>> CreateZeroLeavesLocked(Dict& dict,
                                                           const std::vector<ZeroLeaf>& leaves);
  // Applies a counter operation (counter.lua's semantics).
  absl::StatusOr<CounterResult> CounterLocked(Dict& dict, const DictRef& ref,
                                              const CounterOp& op);

  // The thread that tells watchers, one change at a time.
  void Notify();

  const StoreOptions options_;
  mutable MemoryBudget budget_;

  mutable std::mutex mu_;
  // Guarded by mu_:
  std::map<std::string, std::string, std::less<>> names_;  // name -> id
  mutable std::map<std::string, Dict> dicts_;               // id -> dict
  int64_t next_id_ = 1;
  int64_t used_bytes_ = 0;      // what every dict stores
  int64_t reserved_bytes_ = 0;  // what writes not committed yet will store
  // Watchers, and the ids whose watchers are due to hear.
  bool stopped_ = false;
  uint64_t next_token_ = 1;
  std::map<uint64_t, Watcher> watchers_;
  std::set<std::string> due_;
  std::condition_variable due_changed_;

  std::thread notifier_;  // last: started once the members above exist
};

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_STORE_MEMORY_STORE_H_
