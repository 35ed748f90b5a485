// The store's one front door: everything tdstored's service asks of its
// storage, in terms of dicts, leaves and indices. Two stores implement it:
// the Redis store (redis_store/redis_store.h), which tdstored runs on, and
// the in-memory store (memory_store.h: tdstored --backend memory, and the
// unit tests). One contract suite (tests/store/) holds both to what this
// file says; the service (service/tdstore_service.h) sees nothing else of
// storage.
//
// Dicts are named by DictRef (name, and the id the client opened): a ref
// whose id no longer names a dict under that name is NOT_FOUND, so a held
// handle never reaches a dict that replaced its namesake.
//
// Errors, for every call: NOT_FOUND (dict, leaf or path), ALREADY_EXISTS,
// INVALID_ARGUMENT (name, path, dtype, shape, index, byte count),
// OUT_OF_RANGE (an index position), FAILED_PRECONDITION (a path that is a
// leaf and a sub-dict at once; a locked dict), RESOURCE_EXHAUSTED (quotas,
// limits, the memory budget), ABORTED (a leaf replaced under a read;
// retry), UNAVAILABLE (the back end unreachable; IsOutcomeUnknown() in
// outcome.h when a change may or may not have happened), DATA_LOSS,
// INTERNAL. A call refused with INVALID_ARGUMENT, OUT_OF_RANGE, NOT_FOUND,
// ALREADY_EXISTS, FAILED_PRECONDITION or RESOURCE_EXHAUSTED changed
// nothing.
//
// Memory: every buffer of call data is leased from the store's budget
// (memory_budget.h) before it is allocated, by the store itself; a call
// that cannot get its share in time is RESOURCE_EXHAUSTED.
//
// Thread-safe: one Store serves every RPC thread.
#ifndef TDSTORE_SERVER_STORE_STORE_H_
#define TDSTORE_SERVER_STORE_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/index.h"
#include "common/path.h"
#include "server/store/leaf_record.h"
#include "server/store/memory_budget.h"
#include "server/store/outcome.h"
#include "server/store/schema.h"
#include "server/store/store_values.h"

namespace tdstore::store {

// A whole-leaf write (Store::BeginWrite): one or more leaves streamed into
// new generations, made visible together by Commit. Destroying it without
// a successful Commit aborts it: nothing becomes visible, and what was
// written is deleted. One thread at a time.
class LeafWrite {
 public:
  virtual ~LeafWrite() = default;
  // From now on a locked dict refuses this write whatever it writes, not
  // only new and reshaped leaves (WriteBegin.refuse_if_locked).
  virtual void RefuseIfLocked() = 0;
  // The number of leaves the caller says the write carries, before the
  // first (WriteBegin.leaf_count; the service refuses a stream that
  // carries another number). A store may pass a write it knows to be of
  // one leaf on to its back end while the bytes still arrive. Ignored by
  // default.
  virtual void ExpectLeaves(int /*count*/) {}
  // Starts the next leaf, of `record`'s dtype, shape, kind and one value
  // (its generation is ignored), `byte_size` bytes. The previous leaf must
  // be complete. Checks the leaf and the quotas before anything of it is
  // written: INVALID_ARGUMENT, FAILED_PRECONDITION, RESOURCE_EXHAUSTED.
  virtual absl::Status BeginLeaf(const LeafPath& path, const LeafRecord& record,
                                 int64_t byte_size) = 0;
  // The current leaf's next bytes. INVALID_ARGUMENT past its byte size. The
  // store may write them behind the call (while the caller receives the
  // next chunk); an error of such a write is returned by a later call.
  virtual absl::Status Append(std::string bytes) = 0;
  // As Append, for bytes the caller keeps valid and unchanged until Commit
  // returns or the write is destroyed (a span of a region a client lent,
  // held for the whole call): the store may send them from where they lie,
  // and take any number at once. By default they are copied into Append.
  virtual absl::Status AppendLent(std::string_view bytes) { return Append(std::string(bytes)); }
  // As Append, for bytes valid only until this call returns (a chunk of a
  // lent region that the client reuses once tdstored releases it, within
  // the call): the store has sent or copied them when it returns, and keeps
  // no pointer into them. By default they are copied into Append.
  virtual absl::Status AppendBorrowed(std::string_view bytes) {
    return Append(std::string(bytes));
  }
  // Makes every leaf written visible in one step; the write is done either
  // way. INVALID_ARGUMENT if the last leaf is short of its bytes.
  virtual absl::StatusOr<CommitResult> Commit() = 0;
};

// td[index] = values, or a ring append, its values received one by one
// (Store::BeginIndexedWrite). Every value is held until Commit, which
// checks them all before it writes anything: a refused write wrote
// nothing. The values' memory is leased from the budget as each value is
// announced, before its bytes arrive, so a caller that waits here reads no
// more from its client. One thread at a time.
class IndexedWrite {
 public:
  struct Value {
    LeafPath path;
    DType dtype = DType::kUnspecified;
    Shape shape;  // the value's own shape (broadcast to the target)
    LeafKind kind = LeafKind::kTensor;
    // A ragged leaf's cell dtype name; empty for any other leaf (a
    // one-value leaf is written whole, never by rows).
    std::string value;
    int64_t byte_size = 0;
  };
  virtual ~IndexedWrite() = default;
  // Announces the next value. RESOURCE_EXHAUSTED past the store's
  // max_indexed_bytes (summed over the values) or if the budget stays full;
  // INVALID_ARGUMENT for a one-value leaf.
  virtual absl::Status BeginValue(Value value) = 0;
  // The current value's next bytes.
  virtual absl::Status Append(std::string_view bytes) = 0;
  // Writes every value (errors: as Store::WriteIndexed / AppendToRing).
  virtual absl::StatusOr<IndexedWriteResult> Commit() = 0;
};

// An append stream's rows (Store::OpenAppend): batches of consecutive rows
// of a fixed set of leaves, each written as td[start : start + rows].
class RowAppend {
 public:
  virtual ~RowAppend() = default;
  // Writes rows [start, start + rows) of the leaves the append was opened
  // for, `leaf_rows[i]` the C-order bytes of leaf i's rows (taken). Nothing
  // is written unless the batch is well formed: INVALID_ARGUMENT for a
  // wrong leaf count or byte count, OUT_OF_RANGE for rows outside batch
  // dim 0 as it was when the append was opened. A leaf replaced since by
  // one of another dtype or shape fails the batch, never silently.
  virtual absl::Status Append(int64_t start, int64_t rows, std::vector<std::string> leaf_rows) = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  // What the store runs on, and whether its back end answers now. Never
  // fails: an unreachable back end is redis_ok = false.
  virtual Health Ping() const = 0;

  // Creates a dict, with `spec.leaves` zero-filled in it (each checked by
  // CheckNewLeaf, pairwise disjoint, all within the quotas), or with a copy
  // of the leaves at or under `copy_from->from` in another dict (the new
  // dict takes the source's batch shape, and its block layout unless one
  // is given). Such a dict gets its name only once every leaf is in place:
  // no one sees it before, and one whose leaves cannot be made is deleted
  // again. ALREADY_EXISTS if the name is taken; RESOURCE_EXHAUSTED past
  // max_dicts or a quota.
  virtual absl::StatusOr<DictSchema> CreateDict(const NewDict& spec) = 0;

  // The dict's schema, read now.
  virtual absl::StatusOr<DictSchema> Describe(const DictRef& ref) const = 0;
  // The dict's id and schema version, read now: what a call reports as the
  // schema it saw, read after the call took effect (docs/protocol.md,
  // "Causal schema reads"). NOT_FOUND if the ref no longer names a dict.
  virtual absl::StatusOr<SchemaVersionSeen> SchemaVersion(const DictRef& ref) const = 0;
  // Every dict name, sorted.
  virtual absl::StatusOr<std::vector<std::string>> ListDicts() const = 0;
  // Deletes the dict and every leaf in it. With ref.id, only if the name
  // still means that id.
  virtual absl::Status DeleteDict(const DictRef& ref) = 0;
  // Renames atomically. NOT_FOUND / ALREADY_EXISTS. Returns the schema
  // under its new name.
  virtual absl::StatusOr<DictSchema> RenameDict(const DictRef& ref,
                                                std::string_view new_name) = 0;

  // Removes the leaves and subtrees `paths` name; all or none. NOT_FOUND
  // naming the first path that matches nothing; FAILED_PRECONDITION for a
  // locked dict.
  virtual absl::StatusOr<RemovedLeaves> DeleteLeaves(const DictRef& ref,
                                                     const std::vector<LeafPath>& paths) = 0;
  // Moves the leaf or subtree at `from` to `to` in one step, without moving
  // data. With `replace`, whatever is at `to` goes. NOT_FOUND if nothing is
  // at `from`; ALREADY_EXISTS if something is at `to` and not `replace`;
  // FAILED_PRECONDITION if `to` lies under a leaf, one path holds the
  // other, or the dict is locked.
  virtual absl::StatusOr<RenamedLeaves> RenameLeaves(const DictRef& ref, const LeafPath& from,
                                                     const LeafPath& to, bool replace) = 0;
  // Copies the leaves at or under `from` (empty: every leaf) to `to` + their
  // path below `from`, in `dst` (or within one dict), visible together.
  // ABORTED if a source leaf is replaced during the copy.
  virtual absl::StatusOr<CommitResult> CopyLeaves(const DictRef& src, const LeafPath& from,
                                                  const DictRef& dst, const LeafPath& to) = 0;
  // Whole leaves, or the rows `index` selects (if not null), set to one
  // value each. FAILED_PRECONDITION if a leaf's dtype is no longer the one
  // named. Returns the schema version after the fill (whole leaves), or the
  // one an indexed fill wrote at.
  virtual absl::StatusOr<int64_t> FillLeaves(const DictRef& ref, const std::vector<Fill>& fills,
                                             const plan::IndexSpec* index) = 0;

  // Sets batch dim 0 to `rows`; rows both sizes have keep their bytes, new
  // rows read zeros. Returns the schema afterwards. INVALID_ARGUMENT for a
  // dict without batch dims or a negative size; FAILED_PRECONDITION if
  // locked.
  virtual absl::StatusOr<DictSchema> Resize(const DictRef& ref, int64_t rows) = 0;

  // Whole leaves under `paths` (all when empty) into `sink`, each at one
  // generation. ABORTED if a leaf is replaced while it is read (bytes the
  // sink got are then to be discarded); the sink's own error stops the read.
  virtual absl::Status Read(const DictRef& ref, const std::vector<LeafPath>& paths,
                            LeafSink& sink) const = 0;
  // td[index] for the leaves under `paths` (all when empty).
  virtual absl::StatusOr<IndexedReadResult> ReadIndexed(
      const DictRef& ref, const plan::IndexSpec& index,
      const std::vector<LeafPath>& paths) const = 0;

  // A whole-leaf write into the dict (LeafWrite above). NOT_FOUND if there
  // is no such dict.
  absl::StatusOr<std::unique_ptr<LeafWrite>> BeginWrite(const DictRef& ref);
  // td[index] = values received one by one (IndexedWrite above); with
  // `ring` instead of an index, a ring append: rows reserved from a
  // counter, written, then counted (AppendToRing). Nothing is looked up
  // before Commit.
  std::unique_ptr<IndexedWrite> BeginIndexedWrite(const DictRef& ref,
                                                  std::optional<plan::IndexSpec> index,
                                                  RingAppend ring);
  // An append stream into the leaves `paths` (RowAppend above), planned
  // against the schema now: NOT_FOUND for a missing leaf, INVALID_ARGUMENT
  // for no leaf or a dict without batch dims.
  absl::StatusOr<std::unique_ptr<RowAppend>> OpenAppend(const DictRef& ref,
                                                        const std::vector<LeafPath>& paths);

  // td[index] = values, all given (missing leaves are created zero-filled
  // first). Returns the leaves written, their records as stored, and the
  // schema version written at. `lease` holds what the caller leased for
  // `values`; the write grows it to what it needs before allocating.
  virtual absl::StatusOr<IndexedWriteResult> WriteIndexed(
      const DictRef& ref, const plan::IndexSpec& index,
      const std::vector<IndexedWriteValue>& values, MemoryBudget::Lease& lease) = 0;
  // A ring buffer's append: `ring.rows` rows reserved from the counter
  // `ring.cursor` atomically with reading batch dim 0 (writers anywhere get
  // disjoint rows of one turn), written at (start + i) mod batch dim 0,
  // then counted in `ring.count` once written. A write that fails gives its
  // reservation back when no writer reserved after it.
  virtual absl::StatusOr<RingAppendResult> AppendToRing(
      const DictRef& ref, const RingAppend& ring, const std::vector<IndexedWriteValue>& values,
      MemoryBudget::Lease& lease) = 0;

  // The dict's lock, attributes and counters, each atomic with respect to
  // every other client. SetLocked and UpdateAttrs return the schema
  // afterwards (its version moved on). A locked dict keeps its leaves'
  // paths, dtypes and shapes.
  virtual absl::StatusOr<DictSchema> SetLocked(const DictRef& ref, bool locked) = 0;
  virtual absl::StatusOr<DictSchema> UpdateAttrs(const DictRef& ref,
                                                 const AttrsUpdate& update) = 0;
  virtual absl::StatusOr<CounterResult> Counter(const DictRef& ref, const CounterOp& op) = 0;

  // Tells `listener` the dict's schema now and after every change, made
  // through any daemon: OK(schema) once live and after each change, then
  // NOT_FOUND (deleted, or its name means another dict now) or UNAVAILABLE
  // (the watch was lost or stopped), both final. Listeners run one at a
  // time on the store's thread and must return quickly. Returns a token
  // for Unwatch. INVALID_ARGUMENT without an id; RESOURCE_EXHAUSTED past
  // the watcher limit; UNAVAILABLE while shutting down; UNIMPLEMENTED for a
  // store that cannot watch.
  virtual absl::StatusOr<uint64_t> Watch(const DictRef& ref, SchemaListener listener) = 0;
  // Removes a watcher; a call of its listener already under way may still
  // finish. Unknown tokens are ignored.
  virtual void Unwatch(uint64_t token) = 0;

  // The budget every buffer of call data is leased from.
  virtual MemoryBudget& budget() const = 0;
  // Most bytes one indexed read or write may select (--max-indexed-bytes).
  virtual int64_t max_indexed_bytes() const = 0;
  // What a caller receiving an indexed write's value of `value_bytes`
  // should lease for it before buffering it: the value and the copies the
  // store makes of it, plus, with the first value, an allowance for the
  // resolved index. Leasing it at once lets a typical write take its whole
  // share in one wait.
  virtual int64_t IndexedWriteLease(int64_t value_bytes, bool first_value) const = 0;

 protected:
  // What BeginWrite's LeafWrite writes through, without write-behind.
  virtual absl::StatusOr<std::unique_ptr<LeafWrite>> OpenLeafWrite(const DictRef& ref) = 0;
};

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_STORE_STORE_H_
