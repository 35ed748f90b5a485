// The store's one front door: everything tdstored's service asks of its
// storage, in terms of dicts, leaves and indices, never of Redis.
//
// Dicts are named by DictRef (name, and the id the client opened): a ref
// whose id no longer names a dict under that name is NOT_FOUND, so a held
// handle never reaches a dict that replaced its namesake. Data calls serve
// the schema from the cache and prove it current in their own round trip
// (schema_cache.h); schema-only calls (Describe) read it fresh, one round
// trip by id.
//
// Errors, for every call: NOT_FOUND (dict, leaf or path), ALREADY_EXISTS,
// INVALID_ARGUMENT (name, path, dtype, shape, index, byte count),
// OUT_OF_RANGE (an index position), FAILED_PRECONDITION (a path that is a
// leaf and a sub-dict at once), RESOURCE_EXHAUSTED (quotas, limits, the
// memory budget), ABORTED (a leaf replaced under a read; retry),
// UNAVAILABLE (Redis unreachable; IsOutcomeUnknown() when a change may or
// may not have happened), DATA_LOSS, INTERNAL. A call refused with
// INVALID_ARGUMENT, OUT_OF_RANGE, NOT_FOUND, ALREADY_EXISTS,
// FAILED_PRECONDITION or RESOURCE_EXHAUSTED changed nothing.
//
// Thread-safe: one Store serves every RPC thread.
#ifndef TDSTORE_SERVER_STORE_STORE_H_
#define TDSTORE_SERVER_STORE_STORE_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/index.h"
#include "common/path.h"
#include "common/shape.h"
#include "server/store/dict_resize.h"
#include "server/store/dict_state.h"
#include "server/store/dict_store.h"
#include "server/store/indexed_access.h"
#include "server/store/leaf_copy.h"
#include "server/store/leaf_fill.h"
#include "server/store/leaf_reader.h"
#include "server/store/leaf_writer.h"
#include "server/store/ring_append.h"
#include "server/store/schema_watch.h"

namespace tdstore::store {

class Store {
 public:
  // `dicts` and `watch` must outlive the store; without a watch, Watch is
  // UNIMPLEMENTED.
  explicit Store(DictStore* dicts, SchemaWatch* watch = nullptr)
      : dicts_(dicts), watch_(watch) {}

  const StoreOptions& options() const { return dicts_->options(); }
  // The budget every buffer of call data is leased from.
  MemoryBudget& budget() const { return dicts_->budget(); }

  // What the store runs on, and whether every Redis master answers PING
  // now. Never fails: an unreachable Redis is redis_ok = false.
  struct Health {
    std::string backend;  // "standalone redis://host:port", "cluster of 3 masters ..."
    int redis_masters = 0;
    bool redis_ok = false;
  };
  Health Ping() const;

  // Creates a dict, with `leaves` zero-filled in it (each checked by
  // CheckNewLeaf, pairwise disjoint, all within the quotas), or with a copy
  // of the leaves at or under `copy_from->from` in another dict (made inside
  // tdstored, as CopyLeaves; the new dict takes the source's batch shape,
  // and its block layout unless one is given). Such a dict is built before
  // it gets its name (DictStore::CreateDict with publish = false): no one
  // sees it until every leaf is in place, and one whose leaves cannot be
  // made is deleted again (by the sweeper, if this daemon dies first).
  struct CopySource {
    DictRef dict;
    LeafPath from;  // empty: every leaf
  };
  struct NewDict {
    std::string_view name;
    Shape batch_shape;
    int64_t rows_per_block = 0;  // 0: the default
    int64_t part_bytes = 0;      // 0: the default
    // kRecord: each row's leaves in one record (schema.h), formed by
    // `leaves`, or else by the first indexed write. Not for a copy.
    DictLayout layout = DictLayout::kLeaves;
    struct Leaf {
      LeafPath path;
      DType dtype = DType::kUnspecified;
      Shape element_shape;
      // A value leaf (element shape [slot], slot >= 4) starts with every
      // row empty; a one-value leaf cannot be made this way.
      LeafKind kind = LeafKind::kTensor;
    };
    std::vector<Leaf> leaves;
    std::optional<CopySource> copy_from;  // then batch_shape and leaves stay empty
  };
  absl::StatusOr<DictSchema> CreateDict(const NewDict& spec);

  // The dict's schema, read now.
  absl::StatusOr<DictSchema> Describe(const DictRef& ref) const;
  // The dict's id and schema version, read now: one round trip (two without
  // an id). What a call reports as the schema it saw, read after the call
  // took effect (docs/protocol.md, "Causal schema reads"). NOT_FOUND if the
  // ref no longer names a dict.
  struct SchemaVersionSeen {
    std::string id;
    int64_t version = 0;
  };
  absl::StatusOr<SchemaVersionSeen> SchemaVersion(const DictRef& ref) const;
  // Every dict name, sorted.
  absl::StatusOr<std::vector<std::string>> ListDicts() const;
  absl::Status DeleteDict(const DictRef& ref);
  absl::StatusOr<DictSchema> RenameDict(const DictRef& ref, std::string_view new_name);
  // Removes the leaves and subtrees `paths` name; all or none.
  absl::StatusOr<DictStore::Removed> DeleteLeaves(const DictRef& ref,
                                                  const std::vector<LeafPath>& paths);

  // Moves a leaf or subtree without moving data (DictStore::RenameLeaves).
  absl::StatusOr<DictStore::Renamed> RenameLeaves(const DictRef& ref, const LeafPath& from,
                                                  const LeafPath& to, bool replace);
  // Copies leaves into `dst` (or within one dict) inside tdstored
  // (leaf_copy.h).
  absl::StatusOr<CommitResult> CopyLeaves(const DictRef& src, const LeafPath& from,
                                          const DictRef& dst, const LeafPath& to);
  // Whole leaves, or the rows `index` selects (if not null), set to one
  // value each (leaf_fill.h). Returns the schema version.
  absl::StatusOr<int64_t> FillLeaves(const DictRef& ref, const std::vector<Fill>& fills,
                                     const plan::IndexSpec* index);

  // Sets batch dim 0 to `rows`, moving no byte (dict_resize.h). Returns the
  // schema afterwards.
  absl::StatusOr<DictSchema> Resize(const DictRef& ref, int64_t rows);

  // Whole leaves under `paths` (all when empty) into `sink`, each at one
  // generation (leaf_reader.h).
  absl::Status Read(const DictRef& ref, const std::vector<LeafPath>& paths, LeafSink& sink) const;
  // A whole-leaf write transaction (leaf_writer.h).
  absl::StatusOr<std::unique_ptr<WriteTxn>> BeginWrite(const DictRef& ref);
  // td[index] for the leaves under `paths`; td[index] = values
  // (indexed_access.h). `lease` holds what the caller leased for `values`.
  absl::StatusOr<IndexedReadResult> ReadIndexed(const DictRef& ref, const plan::IndexSpec& index,
                                                const std::vector<LeafPath>& paths) const;
  // `*version` (if given): the schema version written at (indexed_access.h).
  absl::StatusOr<std::vector<Leaf>> WriteIndexed(const DictRef& ref, const plan::IndexSpec& index,
                                                 const std::vector<IndexedWriteValue>& values,
                                                 MemoryBudget::Lease& lease,
                                                 int64_t* version = nullptr);

  // A ring buffer's append: rows reserved from a counter, written, then
  // counted (ring_append.h).
  absl::StatusOr<RingAppendResult> AppendToRing(const DictRef& ref, const RingAppend& ring,
                                                const std::vector<IndexedWriteValue>& values,
                                                MemoryBudget::Lease& lease);

  // The dict's lock, attributes and counters (dict_state.h). SetLocked and
  // UpdateAttrs return the schema afterwards (its version moved on).
  absl::StatusOr<DictSchema> SetLocked(const DictRef& ref, bool locked);
  absl::StatusOr<DictSchema> UpdateAttrs(const DictRef& ref, const AttrsUpdate& update);
  absl::StatusOr<CounterResult> Counter(const DictRef& ref, const CounterOp& op);

  // Tells `listener` the dict's schema now and after every change, made
  // through any daemon (schema_watch.h says what it is told, and when).
  // Returns a token for Unwatch. INVALID_ARGUMENT without an id;
  // RESOURCE_EXHAUSTED past the watcher limit; UNAVAILABLE while shutting
  // down.
  absl::StatusOr<uint64_t> Watch(const DictRef& ref, SchemaWatch::Listener listener);
  void Unwatch(uint64_t token);

 private:
  absl::StatusOr<DictSchema> CreateCopy(const NewDict& spec);
  // Gives a dict built unpublished its name if `filled` (the making of its
  // leaves) is OK; deletes it otherwise and returns `filled`.
  absl::StatusOr<DictSchema> Publish(const DictSchema& built, absl::Status filled);

  DictStore* const dicts_;
  SchemaWatch* const watch_;
};

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_STORE_STORE_H_
