// Whole-leaf writes: stream one or many leaves into new generations, then
// make them visible together.
//
//   auto txn = WriteTxn::Begin(&store, "replay");
//   txn->BeginLeaf({"obs"}, DType::kFloat32, {1000, 84}, 336000);
//   txn->Append(chunk) ...                  // exactly 336000 bytes in order
//   txn->BeginLeaf(...); txn->Append(...);  // more leaves
//   auto result = txn->Commit();            // all visible, or none
//
// The stepwise protocol with Redis (docs/storage-layout.md), and the round
// trips a one-leaf write waits for (4; 8 before issue #33):
//  1. the schema: from the cache when it holds the dict (no round trip),
//     proven current by the probe that rides with step 2; else loaded
//     (one round trip more). A cached schema that refuses the header, or
//     that the probe finds stale, is replaced by a fresh load and the leaf
//     checked again, before anything is written;
//  2. the quotas: the dict's checked here, the namespace's reserved
//     (reserve_bytes.lua), with the probe in the same pipeline;
//  3. begin_write.lua gives the leaf a fresh generation and records it as
//     *pending* with an expiry. Its answer is awaited: the generation names
//     the block keys, and the namespace reservation must have succeeded
//     before the entry (which the sweeper returns bytes for) exists;
//  4. the bytes go to that generation's block keys as pipelined SETRANGE
//     windows (a part that fits one window as one SET, and so does a whole
//     part the caller hands at once, up to 64 MiB: lent bytes), 8 in flight; every
//     reply is read before the commit, so no lost or failed window can be
//     committed (the blocks live in other slots than the commit script's,
//     which cannot check them);
//  5. commit_leaves.lua flips every leaf record to its new generation in
//     one step, drops the pending entries and parks each replaced
//     generation in the pending hash as expired;
//  6. after the answer, not before it: the parked generations' blocks are
//     deleted, their entries removed and their bytes returned
//     (DictStore::RetireLater: on tdstored's retire worker; a daemon that
//     dies first leaves the parked entries to the next sweep).
// Until the commit no reader can see the new blocks. A transaction
// destroyed without Commit() deletes what it wrote (Abort); a daemon that
// dies mid-write leaves pending entries the sweeper removes.
//
// The at-once path (standalone Redis, no --write-replicas): a write of at
// most kAtOnceMaxParts parts and StoreOptions::at_once_max_bytes (of which
// at most kAtOnceMaxOwnedBytes copied here; lent bytes stay where they
// are) waits in the transaction until Commit, which sends it in one round
// trip: MULTI, claim_generations.lua, each part's SET ... NX (or a
// ZeroFill's SETRANGE of its last byte), write_at_once.lua, EXEC. The script proves the schema the write
// was checked on still current (its version), reserves the bytes and
// commits as commit_leaves.lua does, or deletes the parts. No pending entry
// is needed: the transaction runs as one step, and a daemon that dies
// before its EXEC leaves nothing. The generations are proposed by this
// daemon (GenerationHints), so that the parts' keys are known, and claimed
// in the same EXEC (claim_generations.lua), or proposed again. A write that outgrows the limits, or that the script
// finds checked on an old schema, is done again from its first leaf the
// stepwise way above (on a fresh schema for the latter), with the bytes it
// holds; so is a later leaf refused on a cached schema not yet proven
// (BeginLeaf), before it is decided again.
//
// Sent ahead: a write that its caller said is of one leaf (ExpectLeaves)
// and whose bytes come lent in several pieces (a client that copies a
// large tensor into shared memory piece by piece) does not wait for the
// last piece. From the first, the transaction goes out as they arrive:
// MULTI, the claim, and each part's SET, its value written to Redis'
// socket piece by piece (redis::Pipeline::SendOpen), so Redis receives the
// leaf while the client still copies it. Commit sends the rest (the
// commit script, EXEC). Nothing runs before EXEC, so leaving early costs
// nothing but the connection: a write aborted, refused or gone stepwise
// meanwhile closes it (Redis drops a half-received command and its MULTI),
// and the bytes stay held, so a retry (another generation, a fresh schema)
// is sent from them as before. A failure while sending ahead only ends
// the sending ahead.
//
// Quotas (dict_store.h): BeginLeaf checks the dict's quota against the
// dict as it will be after the commit, then reserves the leaf's bytes in
// the namespace counter (at once: the commit's script reserves them),
// before anything of the leaf is written; either refusal is
// RESOURCE_EXHAUSTED. The reservation follows the generation:
// returned when it is aborted, or when the generation it replaced is
// deleted after the commit (step 6).
//
// Memory: the pipeline's windows in flight are leased from the store's
// budget when the first data arrives (RESOURCE_EXHAUSTED if it stays full).
//
// Errors: INVALID_ARGUMENT for a header that does not fit the dict (dtype,
// shape, byte count, path) or data beyond the announced size; NOT_FOUND if the
// dict is deleted meanwhile; FAILED_PRECONDITION if a path collides with an
// existing leaf's nesting; ABORTED if the write was swept for taking too
// long; UNAVAILABLE if Redis fails. After any error the transaction is
// aborted and nothing is visible.
//
// One thread at a time.
#ifndef TDSTORE_SERVER_REDIS_STORE_LEAF_WRITER_H_
#define TDSTORE_SERVER_REDIS_STORE_LEAF_WRITER_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/block_layout.h"
#include "common/dtype.h"
#include "common/path.h"
#include "server/redis/redis_client.h"
#include "server/redis_store/dict_store.h"

namespace tdstore::store {

enum class CommitMode {
  // Every leaf written replaces whatever is at its path (set / update).
  kReplace,
  // Only absent paths get the new leaf; a path created by someone else
  // meanwhile keeps theirs and ours is dropped (zero-filled leaves that an
  // indexed write or a schema creates). Those leaves are left out of
  // CommitResult::written.
  kCreateMissing,
};

class WriteTxn {
 public:
  // Writes into the dict `ref` names. By id, with its schema in the cache
  // (schema_cache.h): no round trip here; the first leaf's reservation
  // carries the schema probe, and a leaf refused on the cached schema, or a
  // probe that finds it stale, makes BeginLeaf load the schema and decide
  // again. Otherwise it loads the schema now (DictStore::Load). NOT_FOUND
  // if the dict does not exist (or, by id, no longer under that name),
  // here or at the first BeginLeaf.
  static absl::StatusOr<std::unique_ptr<WriteTxn>> Begin(DictStore* store, const DictRef& ref);
  // Writes into the dict `schema` describes, as just loaded. A schema that
  // is stale by then is caught where it matters: the scripts refuse a
  // deleted dict and nesting conflicts, and the layout never changes.
  static std::unique_ptr<WriteTxn> Begin(DictStore* store, DictSchema schema);
  ~WriteTxn();  // aborts unless committed

  const DictSchema& schema() const { return schema_; }
  // From now on a locked dict refuses this write whatever it writes, not
  // only new and reshaped leaves (WriteBegin.refuse_if_locked).
  void RefuseIfLocked() { refuse_if_locked_ = true; }
  // The number of leaves the caller says the write carries (0: not said);
  // a write of one may be sent ahead (see the top of this file).
  void ExpectLeaves(int count) { expected_leaves_ = count; }

  // Starts the next leaf, of `leaf`'s dtype, shape, kind and one value (its
  // generation is ignored). The previous one must be complete.
  absl::Status BeginLeaf(const LeafPath& path, const LeafRecord& leaf, int64_t byte_size);
  // The same for a tensor leaf.
  absl::Status BeginLeaf(const LeafPath& path, DType dtype, const Shape& shape, int64_t byte_size) {
    return BeginLeaf(path, LeafRecord{dtype, shape, 0}, byte_size);
  }
  // Starts the record of a record dict (schema.h's DictLayout::kRecord)
  // that has none yet: one generation, every row `stride` bytes, holding
  // each of `fields` (path, dtype, shape, kind; checked as BeginLeaf checks
  // a leaf) at the next offset, in the order given. Follow it with
  // ZeroFill. The commit makes all of them, only if the dict still has no
  // record and none of the paths (else every one is left out of
  // CommitResult::written, as kCreateMissing leaves a path someone else made).
  absl::Status BeginRecord(const std::vector<Leaf>& fields);
  // Appends bytes of the current leaf: valid until this returns (copied
  // if the write holds them), lent until Commit returns or the write is
  // destroyed (never copied), or handed over.
  absl::Status Append(std::string_view data);
  absl::Status AppendLent(std::string_view data);
  absl::Status AppendOwned(std::string data);
  // Fills the whole current leaf with zero bytes without sending them: each
  // part is created by one SETRANGE of its last byte (Redis pads with
  // zeros). The leaf must have no data appended yet.
  absl::Status ZeroFill();
  // Flips every written leaf visible; the transaction is done either way.
  absl::StatusOr<CommitResult> Commit(CommitMode mode = CommitMode::kReplace);
  // Deletes every block written and the pending entries. Idempotent.
  void Abort();

  // Bytes of a leaf held for the at-once path.
  struct HeldPiece {
    std::string owned;      // the bytes, when held here
    std::string_view lent;  // else where the caller keeps them
    std::string_view bytes() const { return lent.data() != nullptr ? lent : owned; }
  };

  // The at-once path's limits (see the top of this file).
  // (The most bytes: StoreOptions::at_once_max_bytes.)
  static constexpr int kAtOnceMaxParts = 64;
  static constexpr int64_t kAtOnceMaxOwnedBytes = int64_t{1} << 20;

 private:
  // INVALID_ARGUMENT if `leaf`'s one value would take the dict's past
  // kMaxOneValueBytesPerDict (common/leaf_kind.h).
  absl::Status CheckOneValueTotal(const LeafPath& path, const LeafRecord& leaf) const;

  struct PendingLeaf {
    Leaf leaf;
    BlockLayout layout;
    int64_t written = 0;  // bytes appended so far
    // A record (BeginRecord): `leaf` is its uint8 [rows, stride] bytes,
    // and these are the leaves the commit makes of it.
    std::vector<Leaf> fields;
    // Held for the at-once path: nothing of it is in Redis, its generation
    // is not chosen yet, and what the caller asked and appended is kept
    // to be sent at Commit or done again stepwise (ReplayStepwise).
    bool held = false;
    LeafRecord asked;                // BeginLeaf's record
    std::vector<Leaf> asked_fields;  // BeginRecord's fields
    bool zero = false;               // ZeroFill()ed
    std::vector<HeldPiece> pieces;
  };
  static PendingLeaf Pending(Leaf leaf, BlockLayout layout, std::vector<Leaf> fields);
  enum class Given { kBorrowed, kLent, kOwned };
  absl::Status AppendGiven(std::string_view data, std::string* owned, Given given);
  // BeginRecord's work on schema_ as it stands.
  absl::Status BeginRecordOn(const std::vector<Leaf>& fields);
  // Whether the leaf just checked (its layout) joins the write held for the
  // at-once path; false once the write went stepwise.
  bool Holds(const BlockLayout& layout, int64_t byte_size) const;
  // The held leaves begun again the stepwise way, in order, with their
  // bytes (on a schema loaded now if `fresh`); the write stays stepwise.
  absl::Status ReplayStepwise(bool fresh);
  // The at-once commit (leaf_writer_at_once.cc): the result, or nullopt
  // once the write was found checked on an old schema and begun again
  // stepwise on a fresh one (ReplayStepwise), for Commit to finish.
  absl::StatusOr<std::optional<CommitResult>> CommitAtOnce(CommitMode mode);
  // Sends the held leaf's transaction on, as far as its bytes have come,
  // ending with `data`, its newest lent piece: when the write may be sent
  // ahead (see the top of this file), starting with the first piece.
  void SendAhead(std::string_view data);
  // One try of it, on generations proposed now (or, sent ahead, then): as CommitAtOnce, except
  // that when claim_generations.lua found them taken it returns nullopt
  // with `*counter` set to Redis' counter (else -1).
  absl::StatusOr<std::optional<CommitResult>> SendAtOnce(CommitMode mode, int64_t* counter);
  // What the commit names: each leaf, and for a record each leaf in it.
  std::vector<const Leaf*> LeavesCommitted() const;
  // The commit scripts' arguments for them (commit_leaves.lua's ARGV): n,
  // the mode, n triples, the schema channel and the dict's id.
  void AppendCommitArgs(CommitMode mode, std::vector<std::string>* args) const;
  // A commit script's refusal as a status (the leaves are not visible).
  absl::Status CommitRefusal(redis::ReplyView reply) const;
  // After a commit that succeeded: the result, the generations replaced
  // retired after the answer, the schema remembered when derivable.
  CommitResult AfterCommit(redis::ReplyView reply);
  // FAILED_PRECONDITION when done; INVALID_ARGUMENT (aborting) if the
  // previous leaf is short of its bytes.
  absl::Status CheckReadyForLeaf();
  // Quotas, then a pending generation for `record`: the part BeginLeaf and
  // BeginRecord share once their header is checked.
  absl::Status Reserve(const LeafPath& path, LeafRecord record, int64_t byte_size,
                       int64_t replaced_bytes, std::vector<Leaf> fields);

  // BeginLeafOn's checks of a leaf's header against schema_ and the leaves
  // begun (no quota, nothing done).
  absl::Status CheckLeafOn(const LeafPath& path, const LeafRecord& leaf, int64_t byte_size) const;
  // The dict quota for a leaf of `byte_size` replacing `replaced_bytes`.
  absl::Status CheckDictQuotaWith(int64_t byte_size, int64_t replaced_bytes) const;
  // The bytes of the leaf at `path` now (0 if none).
  int64_t ReplacedBytes(const LeafPath& path) const;
  // BeginLeaf's work on schema_ as it stands (BeginLeaf retries it once on
  // a fresh schema).
  absl::Status BeginLeafOn(const LeafPath& path, const LeafRecord& leaf, int64_t byte_size);
  // Replaces a cached schema not yet proven current by the schema loaded
  // now; before the first leaf only.
  absl::Status LoadFreshSchema();

  WriteTxn(DictStore* store, DictSchema schema);
  absl::Status Fail(absl::Status status);  // aborts, returns status
  absl::Status OpenPipeline();
  absl::Status DrainReplies(int keep_outstanding);
  absl::Status TouchPendingIfDue();
  std::string PendingRecordFor(const LeafRecord& record) const;

  DictStore* const store_;
  DictSchema schema_;
  std::vector<PendingLeaf> leaves_;
  std::unique_ptr<redis::Pipeline> pipe_;
  // The memory budget's share for pipe_'s windows in flight.
  MemoryBudget::Lease pipe_lease_;
  std::chrono::steady_clock::time_point last_touch_;
  // What the dict will store once this write commits.
  int64_t bytes_after_commit_ = 0;
  // Reserved for a leaf whose generation is not recorded yet (begin_write
  // failed or has not answered): returned by Abort.
  int64_t unrecorded_reserved_ = 0;
  bool refuse_if_locked_ = false;
  bool done_ = false;
  // False once the write went stepwise (or could not go at once).
  bool may_hold_ = true;
  int64_t held_owned_bytes_ = 0;
  // The budget's share for the bytes held here (kAtOnceMaxOwnedBytes).
  std::optional<MemoryBudget::Lease> held_lease_;
  int expected_leaves_ = 0;  // ExpectLeaves
  // The at-once transaction sent ahead (SendAhead): its pipeline, and the
  // bytes of the leaf sent on it so far. Reset (which closes its
  // connection: replies or a value are due on it) when the write leaves
  // that path.
  std::unique_ptr<redis::Pipeline> ahead_;
  int64_t ahead_bytes_ = 0;
  // Non-empty while schema_ came from the cache and no probe has proven it
  // current yet: the id the caller's ref named (the name is schema_'s).
  std::string unproven_ref_id_;
};

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_LEAF_WRITER_H_
