#include "server/redis_store/leaf_writer.h"

#include "server/store/record_layout.h"
#include "server/store/store_checks.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

#include "common/str_cat.h"
#include "server/redis_store/dict_state.h"
#include "server/redis_store/lua_scripts.h"
#include "server/redis_store/redis_errors.h"

namespace tdstore::store {

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The largest part sent as one SET (WriteTxn::Append). Redis holds a
// command's argument whole before it runs it; the default part
// (StoreOptions::default_part_bytes) is this size.
constexpr int64_t kMaxWholePartSetBytes = int64_t{64} << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<WriteTxn>> WriteTxn::Begin(DictStore* store, const DictRef& ref) {
  if (std::shared_ptr<const DictSchema> cached = store->Cached(ref); cached != nullptr) {
    // Proven current by the probe that rides with the first reservation
    // (Reserve), or replaced by a fresh load if it fails or refuses.
    std::unique_ptr<WriteTxn> txn = Begin(store, *cached);
    txn->unproven_ref_id_ = std::string(ref.id);
    return txn;
  }
  auto schema = store->Load(ref);
  if (!schema.ok()) return schema.status();
  return Begin(store, *std::move(schema));
}

absl::Status WriteTxn::LoadFreshSchema() {
  // Only before the first leaf: nothing checked so far depends on it.
  const std::string name = schema_.meta.name, id = std::move(unproven_ref_id_);
  unproven_ref_id_.clear();
  auto schema = store_->Load(DictRef(name, id));
  if (!schema.ok()) return schema.status();
  schema_ = *std::move(schema);
  bytes_after_commit_ = schema_.StoredBytes();
  return absl::OkStatus();
}

std::unique_ptr<WriteTxn> WriteTxn::Begin(DictStore* store, DictSchema schema) {
  return std::unique_ptr<WriteTxn>(new WriteTxn(store, std::move(schema)));
}

WriteTxn::WriteTxn(DictStore* store, DictSchema schema)
    : store_(store),
      schema_(std::move(schema)),
      last_touch_(std::chrono::steady_clock::now()),
      bytes_after_commit_(schema_.StoredBytes()) {}

WriteTxn::~WriteTxn() { Abort(); }

std::string WriteTxn::PendingRecordFor(const LeafRecord& record) const {
  PendingRecord pending;
  pending.expires_ms = NowMs() + store_->options().pending_timeout.count();
  pending.leaf = record;
  return EncodePendingRecord(pending);
}

absl::Status WriteTxn::Fail(absl::Status status) {
  Abort();
  return status;
}

absl::Status WriteTxn::CheckOneValueTotal(const LeafPath& path, const LeafRecord& leaf) const {
  if (!IsOneValue(leaf.kind, leaf.shape) || leaf.value.empty()) return absl::OkStatus();
  // The dict as this write leaves it: its one values but those this write
  // replaces, plus this write's. (Two writers at once may each pass it: the
  // bound is then twice the limit, which the messages still fit.)
  auto written = [&](const LeafPath& p) {
    if (p == path) return true;
    for (const PendingLeaf& other : leaves_) {
      if (other.leaf.path == p) return true;
    }
    return false;
  };
  // Only one values count: a ragged leaf's value is its cells' dtype name.
  auto one_value_bytes = [](const LeafRecord& r) {
    return IsOneValue(r.kind, r.shape) ? static_cast<int64_t>(r.value.size()) : int64_t{0};
  };
  int64_t total = one_value_bytes(leaf);
  for (const auto& [_, existing] : schema_.leaves) {
    if (!written(existing.path)) total += one_value_bytes(existing.record);
  }
  for (const PendingLeaf& other : leaves_) total += one_value_bytes(other.leaf.record);
  if (total > kMaxOneValueBytesPerDict) {
    return absl::InvalidArgumentError(StrCat(
        "leaf ", QuotedPath(path), ": the dict's one values would add up to ", total,
        " bytes, over the limit of ", kMaxOneValueBytesPerDict, " bytes per dict"));
  }
  return absl::OkStatus();
}

absl::Status WriteTxn::CheckReadyForLeaf() {
  if (done_) return absl::FailedPreconditionError("write transaction already finished");
  if (!leaves_.empty()) {
    const PendingLeaf& prev = leaves_.back();
    if (prev.written != prev.layout.total_bytes()) {
      return Fail(absl::InvalidArgumentError(
          StrCat("leaf ", QuotedPath(prev.leaf.path), ": header announced ",
                       prev.layout.total_bytes(), " bytes but ", prev.written, " arrived")));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteTxn::BeginLeaf(const LeafPath& path, const LeafRecord& leaf,
                                 int64_t byte_size) {
  if (auto s = CheckReadyForLeaf(); !s.ok()) return s;
  ahead_.reset();  // sent ahead as a write of one leaf: it is not
  if (!leaves_.empty() && leaves_.front().held) {
    // This leaf would take the write past the at-once limits: the leaves
    // held go first, stepwise, as if they had never been held, and this
    // one follows them on the schema their first reservation proved.
    LeafRecord record = leaf;
    record.in_record = {};
    auto layout = schema_.Layout(record);
    if (!layout.ok() || !Holds(*layout, byte_size)) {
      if (auto s = ReplayStepwise(/*fresh=*/false); !s.ok()) return s;
    }
  }
  if (!unproven_ref_id_.empty() && !leaves_.empty() && leaves_.front().held) {
    // Leaves held for the at-once path, on a cached schema no probe proved
    // yet. A refusal of this leaf may be the cache's age, and deciding
    // again must keep the leaves before it: they go stepwise on the schema
    // as it is now (which proves it), then this leaf is decided on it.
    absl::Status checked = CheckLeafOn(path, leaf, byte_size);
    if (checked.ok()) checked = CheckDictQuotaWith(byte_size, ReplacedBytes(path));
    if (!checked.ok()) {
      if (auto s = ReplayStepwise(/*fresh=*/true); !s.ok()) return s;
      return BeginLeafOn(path, leaf, byte_size);
    }
  }
  const bool first = leaves_.empty();
  absl::Status status = BeginLeafOn(path, leaf, byte_size);
  if (status.ok() || unproven_ref_id_.empty() || !first) return status;
  // Refused on a cached schema before its probe proved it current, or by
  // that probe (stale, or the name gone). Nothing was written and nothing
  // is reserved (the first leaf's abort had nothing to undo), and the
  // schema's age may be the reason: decide again on the schema as it is
  // now. A name that is really gone is NOT_FOUND from the load.
  done_ = false;
  if (auto s = LoadFreshSchema(); !s.ok()) return Fail(s);
  return BeginLeafOn(path, leaf, byte_size);
}

int64_t WriteTxn::ReplacedBytes(const LeafPath& path) const {
  const Leaf* replaced = schema_.Find(path);
  return replaced ? RecordBytes(replaced->record) : 0;
}

absl::Status WriteTxn::CheckDictQuotaWith(int64_t byte_size, int64_t replaced_bytes) const {
  // The dict quota counts the dict as the commit will leave it (a replaced
  // leaf's bytes go).
  return store_->CheckDictQuota(schema_.meta, bytes_after_commit_ + byte_size - replaced_bytes);
}

absl::Status WriteTxn::CheckLeafOn(const LeafPath& path, const LeafRecord& leaf,
                                   int64_t byte_size) const {
  if (auto s = CheckLeafHeader(schema_.meta.batch_shape, path, leaf, byte_size); !s.ok()) {
    return s;
  }
  for (const PendingLeaf& other : leaves_) {
    // A record (BeginRecord) is its leaves; its own bytes have no path.
    if (other.fields.empty()) {
      if (auto s = CheckDisjoint(other.leaf.path, path); !s.ok()) return s;
    }
    for (const Leaf& field : other.fields) {
      if (auto s = CheckDisjoint(field.path, path); !s.ok()) return s;
    }
  }
  if (auto s = CheckNesting(schema_, path); !s.ok()) return s;
  if (auto s = CheckOneValueTotal(path, leaf); !s.ok()) return s;
  const Leaf* replaced = schema_.Find(path);
  // A leaf outside the record (made after it formed) is a leaf like any
  // other; one in it is written by rows, its rows strided through every
  // block (store_checks.h).
  if (auto s = CheckNotRecordLeaf(schema_, path, replaced); !s.ok()) return s;
  // Early, before any data moves; the commit's script decides atomically.
  return CheckLockedLeafWrite(schema_, path, replaced, leaf, refuse_if_locked_);
}

absl::Status WriteTxn::BeginLeafOn(const LeafPath& path, const LeafRecord& leaf,
                                   int64_t byte_size) {
  // --- Validate the header against the dict before touching Redis. --------
  if (auto s = CheckLeafOn(path, leaf, byte_size); !s.ok()) return Fail(s);
  LeafRecord record = leaf;
  record.generation = 0;
  record.in_record = {};  // a whole leaf has rows of its own (a copy's source may not)
  absl::Status reserved = Reserve(path, std::move(record), byte_size, ReplacedBytes(path), {});
  if (reserved.ok() && leaves_.back().held) leaves_.back().asked = leaf;
  return reserved;
}

absl::Status WriteTxn::BeginRecord(const std::vector<Leaf>& fields) {
  if (auto s = CheckReadyForLeaf(); !s.ok()) return s;
  // Leaves held before a record go stepwise (BeginLeaf says why).
  if (!leaves_.empty() && leaves_.front().held) {
    if (auto s = ReplayStepwise(/*fresh=*/false); !s.ok()) return s;
  }
  // A record is formed from a schema just loaded (never seen from the cache).
  if (!unproven_ref_id_.empty()) {
    if (auto s = LoadFreshSchema(); !s.ok()) return Fail(s);
  }
  return BeginRecordOn(fields);
}

absl::Status WriteTxn::BeginRecordOn(const std::vector<Leaf>& fields) {
  const Shape& batch = schema_.meta.batch_shape;
  if (batch.empty() || fields.empty()) {
    return Fail(absl::InternalError("a record needs batch dims and leaves"));
  }
  if (schema_.meta.locked) return Fail(LockedError(schema_.meta.name, "add leaves"));
  std::vector<Leaf> checked;
  for (const Leaf& f : fields) {
    auto bytes = CheckNewLeaf(batch, f.path, f.record);
    if (!bytes.ok()) return Fail(bytes.status());
    for (const Leaf& other : checked) {
      if (auto s = CheckDisjoint(other.path, f.path); !s.ok()) return Fail(s);
    }
    if (auto s = CheckNesting(schema_, f.path); !s.ok()) return Fail(s);
    checked.push_back(f);
  }
  // Each leaf's row at the next free offset of the record (record_layout.h).
  auto placed = PlaceRecord(batch[0], std::move(checked));
  if (!placed.ok()) return Fail(placed.status());
  // The record is written as one uint8 leaf [rows, stride] (pending record,
  // blocks, quota), and committed as the leaves in it.
  absl::Status reserved = Reserve({}, LeafRecord{DType::kUInt8, {batch[0], placed->stride}, 0},
                                  placed->bytes, 0, std::move(placed->fields));
  if (reserved.ok() && leaves_.back().held) leaves_.back().asked_fields = fields;
  return reserved;
}

WriteTxn::PendingLeaf WriteTxn::Pending(Leaf leaf, BlockLayout layout, std::vector<Leaf> fields) {
  return PendingLeaf{std::move(leaf), std::move(layout), 0, std::move(fields),
                     /*held=*/false, LeafRecord{}, {}, /*zero=*/false, {}};
}

absl::Status WriteTxn::Reserve(const LeafPath& path, LeafRecord record, int64_t byte_size,
                               int64_t replaced_bytes, std::vector<Leaf> fields) {
  // A record is a uint8 [rows, stride] leaf whose rows are batch dim 0's
  // alone, whatever other batch dims the dict has: each leaf's row in it
  // spans those (BeginRecord).
  const std::vector<int64_t> record_rows = {
      fields.empty() ? 0 : schema_.meta.batch_shape.front()};
  auto layout = fields.empty()
                    ? schema_.Layout(record)
                    : BlockLayout::Make(record_rows, record.shape, 1, schema_.meta.rows_per_block,
                                        schema_.meta.part_bytes, 0, 0);
  if (!layout.ok()) return Fail(layout.status());

  // --- Quotas, before the generation exists. -------------------------------
  // The namespace counter also holds the replaced generation until its
  // blocks are deleted, as Redis does.
  if (auto s = CheckDictQuotaWith(byte_size, replaced_bytes); !s.ok()) return Fail(s);
  const int64_t after = bytes_after_commit_ + byte_size - replaced_bytes;
  if (Holds(*layout, byte_size)) {
    // The at-once path: the namespace reservation, the schema's proof and
    // the generation wait for Commit (write_at_once.lua).
    bytes_after_commit_ = after;
    leaves_.push_back(Pending(Leaf{path, record}, *std::move(layout), std::move(fields)));
    leaves_.back().held = true;
    return absl::OkStatus();
  }
  const std::string what =
      StrCat(fields.empty() ? StrCat("leaf ", QuotedPath(path), " of") : "the record of", " dict '",
             schema_.meta.name, "'");
  if (unproven_ref_id_.empty()) {
    if (auto s = store_->ReserveBytes(byte_size, what); !s.ok()) return Fail(s);
  } else {
    // A schema from the cache: the probe that proves it current costs no
    // round trip of its own, it rides with the reservation. Until it has
    // answered, every check above was made on a schema that may be old;
    // if it failed, BeginLeaf checks again on a fresh one.
    bool current = false;
    absl::Status s = store_->ProbeAndReserveBytes(schema_, byte_size, what, &current);
    if (current) unproven_ref_id_.clear();
    if (!s.ok()) return Fail(s);
  }
  unrecorded_reserved_ = byte_size;
  bytes_after_commit_ = after;

  // --- Reserve a generation, recorded as pending. ---------------------------
  if (auto s = DrainReplies(0); !s.ok()) return Fail(s);
  const std::string meta_key = store_->keys().Meta(schema_.meta.id);
  const std::string pending_key = store_->keys().Pending(schema_.meta.id);
  auto gen = store_->redis().Eval(GetScripts().begin_write, {meta_key, pending_key},
                                  {PendingRecordFor(record)});
  if (!gen.ok()) return Fail(gen.status());
  if (ErrorTag(*gen) == "TDNODICT") {
    return Fail(absl::NotFoundError(
        StrCat("dict '", schema_.meta.name, "' was deleted during the write")));
  }
  if (auto s = ReplyStatus(*gen, "reserve generation"); !s.ok()) return Fail(s);
  record.generation = gen->integer();
  // Recorded: from here the pending entry carries the reservation.
  unrecorded_reserved_ = 0;
  for (Leaf& f : fields) f.record.generation = record.generation;
  leaves_.push_back(Pending(Leaf{path, record}, *std::move(layout), std::move(fields)));
  return absl::OkStatus();
}

absl::Status WriteTxn::Append(std::string_view data) {
  return AppendGiven(data, nullptr, Given::kBorrowed);
}

absl::Status WriteTxn::AppendLent(std::string_view data) {
  return AppendGiven(data, nullptr, Given::kLent);
}

absl::Status WriteTxn::AppendOwned(std::string data) {
  return AppendGiven(data, &data, Given::kOwned);
}

absl::Status WriteTxn::AppendGiven(std::string_view data, std::string* owned, Given given) {
  if (done_) return absl::FailedPreconditionError("write transaction already finished");
  if (leaves_.empty()) {
    return Fail(absl::InvalidArgumentError("data arrived before any leaf header"));
  }
  const int64_t size = static_cast<int64_t>(data.size());
  if (leaves_.back().written + size > leaves_.back().layout.total_bytes()) {
    const PendingLeaf& cur = leaves_.back();
    return Fail(absl::InvalidArgumentError(
        StrCat("leaf ", QuotedPath(cur.leaf.path), ": more data than the ",
                     cur.layout.total_bytes(), " bytes its header announced")));
  }
  if (size == 0) return absl::OkStatus();
  if (leaves_.back().held) {
    if (given == Given::kLent) {
      leaves_.back().pieces.push_back({{}, data});
      leaves_.back().written += size;
      SendAhead(data);
      return absl::OkStatus();
    }
    // Bytes kept here are memory of ours, leased from the budget as every
    // buffer of call data is (the bound at once, on the first such piece).
    // Past the bound, or with no room in the budget right now, the write
    // goes stepwise, whose windows send them as they come.
    if (held_owned_bytes_ == 0 && !held_lease_) {
      held_lease_ = store_->budget().TryAcquire(kAtOnceMaxOwnedBytes);
    }
    if (held_lease_ && held_owned_bytes_ + size <= kAtOnceMaxOwnedBytes) {
      held_owned_bytes_ += size;
      HeldPiece piece;
      piece.owned = owned != nullptr ? std::move(*owned) : std::string(data);
      leaves_.back().pieces.push_back(std::move(piece));
      leaves_.back().written += size;
      return absl::OkStatus();
    }
    if (auto s = ReplayStepwise(/*fresh=*/false); !s.ok()) return s;
  }
  PendingLeaf& cur = leaves_.back();
  // Refresh the pending entries *before* sending: a write the sweeper has
  // already given up on must stop here, not recreate keys it deleted.
  if (auto s = TouchPendingIfDue(); !s.ok()) return Fail(s);
  if (!pipe_) {
    if (auto s = OpenPipeline(); !s.ok()) return Fail(s);
  }

  absl::Status status;
  const std::string& id = schema_.meta.id;
  const int64_t gen = cur.leaf.record.generation;
  const int64_t window_bytes = store_->options().window_bytes;
  // One window: a whole part as one SET, else a SETRANGE into the part.
  auto send = [&](const Segment& seg) {
    if (!status.ok()) return;
    const std::string key = store_->keys().BlockPart(id, seg.block, gen, seg.part);
    std::string_view bytes = data.substr(static_cast<size_t>(seg.leaf_offset - cur.written),
                                         static_cast<size_t>(seg.length));
    if (seg.length == cur.layout.part_size(seg.block, seg.part)) {
      // A whole part in one window: one SET. Redis keeps a large SET
      // argument as the value itself, where sizing the part and a
      // SETRANGE would zero-fill it and copy the window in.
      status = pipe_->Send(key, {"SET", key, bytes});
      if (status.ok()) status = DrainReplies(store_->options().pipeline_depth);
      return;
    }
    if (seg.offset_in_part == 0) {
      // Size the whole part once, before its first window: growing a
      // Redis string window by window reallocates (and copies) it again
      // and again, quadratic in the part size.
      const std::string last = StrCat(cur.layout.part_size(seg.block, seg.part) - 1);
      static const std::string_view kZero("\0", 1);
      status = pipe_->Send(key, {"SETRANGE", key, last, kZero});
      if (!status.ok()) return;
    }
    const std::string offset = StrCat(seg.offset_in_part);
    status = pipe_->Send(key, {"SETRANGE", key, offset, bytes});
    // Keep at most pipeline_depth windows in flight: bounded memory.
    if (status.ok()) status = DrainReplies(store_->options().pipeline_depth);
  };
  // Windows of at most window_bytes, except that a whole part in hand goes
  // as one SET however large (up to kMaxWholePartSetBytes). Lent bytes come
  // a leaf at a time from a SmallWrite (LeafWrite::AppendLent), and Redis
  // then takes each part as the seed's SET does: one command whose argument
  // becomes the value. In windows it would size the part (a zero-fill) and
  // copy every window in (a 2.5 MiB leaf: 4 SETRANGEs, 156 us of Redis
  // against one SET). Lent chunks (a leaf copied and sent in pieces) go in
  // windows where a piece ends inside a part: on a cluster that still beat
  // waiting for the last piece (docs/benchmarks.md, *A one-leaf write sent
  // ahead*).
  // Sent from the caller's memory either way (Connection::WriteDirect).
  cur.layout.ForEachSegment(
      cur.written, size, std::min(std::max(size, window_bytes), kMaxWholePartSetBytes),
      [&](const Segment& part) {
        if (part.length == cur.layout.part_size(part.block, part.part) || part.length <= window_bytes) {
          send(part);
        } else {
          cur.layout.ForEachSegment(part.leaf_offset, part.length, window_bytes, send);
        }
      });
  // The chunk's windows go to Redis now, not when the next chunk arrives:
  // a slow client must not leave data parked in our buffers.
  if (status.ok()) status = pipe_->Flush();
  if (!status.ok()) return Fail(status);
  cur.written += size;
  return absl::OkStatus();
}

absl::Status WriteTxn::ZeroFill() {
  if (done_) return absl::FailedPreconditionError("write transaction already finished");
  if (leaves_.empty() || leaves_.back().written != 0) {
    return Fail(absl::InternalError("ZeroFill needs a fresh leaf"));
  }
  PendingLeaf& cur = leaves_.back();
  const BlockLayout& layout = cur.layout;
  if (cur.held) {
    cur.zero = true;  // each part's last byte set at Commit, as below
    cur.written = layout.total_bytes();
    return absl::OkStatus();
  }
  if (!pipe_) {
    if (auto s = OpenPipeline(); !s.ok()) return Fail(s);
  }
  const std::string& id = schema_.meta.id;
  const int64_t gen = cur.leaf.record.generation;
  static const std::string_view kZero("\0", 1);
  for (int64_t b = 0; b < layout.block_count(); ++b) {
    for (int64_t p = 0; p < layout.part_count(b); ++p) {
      const std::string key = store_->keys().BlockPart(id, b, gen, p);
      const std::string last = StrCat(layout.part_size(b, p) - 1);
      absl::Status s = pipe_->Send(key, {"SETRANGE", key, last, kZero});
      if (s.ok()) s = DrainReplies(store_->options().pipeline_depth);
      if (!s.ok()) return Fail(s);
    }
  }
  cur.written = layout.total_bytes();
  return absl::OkStatus();
}

absl::Status WriteTxn::OpenPipeline() {
  const StoreOptions& options = store_->options();
  // Windows in flight plus the chunk being split: formatted commands sit in
  // the pipeline's buffer until Redis has them.
  auto lease = store_->budget().Acquire((options.pipeline_depth + 1) * options.window_bytes,
                                        "a whole-leaf write's window pipeline");
  if (!lease.ok()) return lease.status();
  pipe_lease_ = *std::move(lease);
  auto pipe = store_->redis().NewPipeline(options.pipeline_depth);
  if (!pipe.ok()) return pipe.status();
  pipe_ = *std::move(pipe);
  // Commands a cluster pipeline re-sends after a redirect run on other
  // connections; they need their own WAIT for --write-replicas to hold.
  if (options.write_replicas > 0) {
    pipe_->set_reissue_replicas(options.write_replicas, options.write_replicas_timeout);
  }
  return absl::OkStatus();
}

absl::Status WriteTxn::DrainReplies(int keep_outstanding) {
  if (!pipe_) return absl::OkStatus();
  while (pipe_->outstanding() > keep_outstanding) {
    auto reply = pipe_->Receive();
    if (!reply.ok()) return reply.status();
    if (auto s = ReplyStatus(*reply, "write block"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status WriteTxn::TouchPendingIfDue() {
  // A long upload keeps its pending entries fresh so the sweeper leaves it
  // alone; a third of the timeout leaves room for a slow round trip.
  auto now = std::chrono::steady_clock::now();
  if (now - last_touch_ < store_->options().pending_timeout / 3) return absl::OkStatus();
  last_touch_ = now;
  const std::string pending_key = store_->keys().Pending(schema_.meta.id);
  for (const PendingLeaf& p : leaves_) {
    auto reply = store_->redis().Eval(
        GetScripts().touch_pending, {pending_key},
        {StrCat(p.leaf.record.generation), PendingRecordFor(p.leaf.record)});
    if (!reply.ok()) return reply.status();
    if (auto s = ReplyStatus(*reply, "refresh pending write"); !s.ok()) return s;
    if (reply->integer() == 0) {
      return absl::AbortedError("the write was abandoned by the server (dict deleted or write "
                                "swept after the pending timeout); retry it");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CommitResult> WriteTxn::Commit(CommitMode mode) {
  if (done_) return absl::FailedPreconditionError("write transaction already finished");
  if (leaves_.empty()) {
    return Fail(absl::InvalidArgumentError("the write stream carried no leaf"));
  }
  const PendingLeaf& last = leaves_.back();
  if (last.written != last.layout.total_bytes()) {
    return Fail(absl::InvalidArgumentError(
        StrCat("leaf ", QuotedPath(last.leaf.path), ": header announced ",
                     last.layout.total_bytes(), " bytes but ", last.written, " arrived")));
  }
  if (leaves_.front().held) {
    auto at_once = CommitAtOnce(mode);
    if (!at_once.ok()) return at_once.status();
    if (at_once->has_value()) return **std::move(at_once);
    // Checked on an old schema: done again stepwise on a fresh one.
  }
  if (auto s = DrainReplies(0); !s.ok()) return Fail(s);
  const StoreOptions& options = store_->options();
  if (pipe_ && options.write_replicas > 0) {
    // The data must be on the replicas before the commit can point at it.
    if (auto s = pipe_->WaitReplicas(options.write_replicas, options.write_replicas_timeout);
        !s.ok()) {
      return Fail(s);
    }
  }

  // --- The commit: one script flips every leaf. ----------------------------
  const KeySchema& keys = store_->keys();
  const std::string& id = schema_.meta.id;
  std::vector<std::string> args;
  AppendCommitArgs(mode, &args);
  std::vector<std::string_view> argv(args.begin(), args.end());
  auto reply = store_->redis().EvalDurable(
      GetScripts().commit_leaves, {keys.Meta(id), keys.Leaves(id), keys.Pending(id)}, argv,
      options.write_replicas, options.write_replicas_timeout);
  if (!reply.ok()) {
    // No reply: the connection broke after the script was sent, or too few
    // replicas confirmed it. The commit may have run, so deleting our
    // blocks could destroy a visible leaf. Leave everything as it is: if
    // the commit ran, the leaves are visible and complete; if not, the
    // pending entries still name our generations and the sweeper deletes
    // their blocks once they expire.
    done_ = true;
    pipe_.reset();
    return OutcomeUnknown(StrCat(
        "the write's outcome is unknown (it may or may not be visible; retrying it is safe): ",
        reply.status().message()));
  }
  if (ErrorTag(*reply) == "TDSWEPT") {
    return Fail(absl::AbortedError(
        "the write took longer than the pending timeout and was swept; retry it"));
  }
  if (auto s = CommitRefusal(reply->view()); !s.ok()) return Fail(s);
  return AfterCommit(reply->view());
}

std::vector<const Leaf*> WriteTxn::LeavesCommitted() const {
  std::vector<const Leaf*> committed;
  for (const PendingLeaf& p : leaves_) {
    if (p.fields.empty()) committed.push_back(&p.leaf);
    for (const Leaf& f : p.fields) committed.push_back(&f);
  }
  return committed;
}

void WriteTxn::AppendCommitArgs(CommitMode mode, std::vector<std::string>* args) const {
  bool record = false;
  for (const PendingLeaf& p : leaves_) record = record || !p.fields.empty();
  const std::vector<const Leaf*> committed = LeavesCommitted();
  args->push_back(StrCat(committed.size()));
  args->push_back(record                               ? "record"
                  : mode == CommitMode::kCreateMissing ? "create"
                  : refuse_if_locked_                  ? "strict"
                                                       : "replace");
  for (const Leaf* leaf : committed) {
    args->push_back(EncodePath(leaf->path));
    args->push_back(EncodeLeafRecord(leaf->record));
    args->push_back(StrCat(leaf->record.generation));
  }
  args->push_back(store_->keys().SchemaChannel());
  args->push_back(schema_.meta.id);
}

absl::Status WriteTxn::CommitRefusal(redis::ReplyView reply) const {
  std::string_view tag = ErrorTag(reply);
  if (tag == "TDNODICT") {
    return absl::NotFoundError(
        StrCat("dict '", schema_.meta.name, "' was deleted during the write"));
  }
  if (tag == "TDLOCKED") {
    auto path = DecodePath(ErrorDetail(reply));
    return LockedError(schema_.meta.name,
                       StrCat(refuse_if_locked_ ? "replace leaf " : "add or reshape leaf ",
                              path.ok() ? QuotedPath(*path) : "?"));
  }
  if (tag == "TDBATCH") {
    // Stale, so that an indexed write's leaf creation plans again.
    return StaleError(StrCat("the batch size of dict '", schema_.meta.name,
                             "' (resized during the write)"));
  }
  if (tag == "TDCONFLICT") {
    std::string_view detail = ErrorDetail(reply);
    size_t nl = detail.find('\n');
    auto a = DecodePath(detail.substr(0, nl));
    auto b = DecodePath(nl == std::string_view::npos ? "" : detail.substr(nl + 1));
    return absl::FailedPreconditionError(StrCat(
        "cannot write leaf ", a.ok() ? QuotedPath(*a) : "?", ": it conflicts with leaf ",
        b.ok() ? QuotedPath(*b) : "?", " (a path cannot be both a leaf and a sub-dict)"));
  }
  return ReplyStatus(reply, "commit leaves");
}

CommitResult WriteTxn::AfterCommit(redis::ReplyView reply) {
  done_ = true;  // visible now: nothing to abort any more
  pipe_.reset();
  pipe_lease_.Release();
  const std::vector<const Leaf*> committed = LeavesCommitted();
  CommitResult result;
  result.version = reply[0].integer();
  std::set<int64_t> dropped;  // a record's kept leaves share one generation
  for (size_t i = 0; i < committed.size(); ++i) {
    std::string_view old = reply[i + 1].str();
    // Generations the script parked (ours that lost a create race, or the
    // one a leaf replaced) are deleted after the answer, not before it:
    // nothing can reach them any more, and their parked entries make sure
    // they go even if this daemon dies first (DictStore::RetireLater).
    if (old == "kept") {
      // Someone created this path (or the record) first; ours was parked
      // for deletion.
      if (dropped.insert(committed[i]->record.generation).second) {
        store_->RetireLater(schema_.meta, committed[i]->record);
      }
      continue;
    }
    result.written.push_back(*committed[i]);
    if (old.empty()) continue;
    auto record = DecodeLeafRecord(old);
    if (record.ok()) store_->RetireLater(schema_.meta, *record);
  }
  // The version moved one step: nothing but this commit changed the
  // schema, which is therefore known without reading it.
  if (result.version == schema_.meta.version + 1) {
    DictSchema after = schema_;
    after.meta.version = result.version;
    for (const Leaf& leaf : result.written) after.leaves[EncodePath(leaf.path)] = leaf;
    store_->Remember(after);
  }
  return result;
}

void WriteTxn::Abort() {
  ahead_.reset();  // nothing of it ran: Redis drops it with its connection
  if (done_) return;
  done_ = true;
  store_->ReleaseBytes(std::exchange(unrecorded_reserved_, 0));
  // SETRANGEs already sent must be finished before we delete: Redis could
  // otherwise run them after our UNLINKs and recreate keys nobody tracks.
  // Reading every reply proves they ran (error replies are fine here).
  bool settled = true;
  if (pipe_) {
    while (settled && pipe_->outstanding() > 0) settled = pipe_->Receive().ok();
    pipe_.reset();
  }
  pipe_lease_.Release();
  const std::string pending_key = store_->keys().Pending(schema_.meta.id);
  for (const PendingLeaf& p : leaves_) {
    if (p.held) continue;  // nothing of it reached Redis
    // Blocks first, then the entry: if we die in between, the sweeper still
    // knows what to delete.
    if (!store_->DeleteGeneration(schema_.meta, p.leaf.record).ok()) continue;
    const std::string gen = StrCat(p.leaf.record.generation);
    if (settled) {
      auto removed = store_->redis().Call(pending_key, {"HDEL", pending_key, gen});
      // Only if this HDEL removed the entry (the sweeper may have first).
      if (removed.ok() && removed->is_integer() && removed->integer() == 1) {
        store_->ReleaseBytes(RecordBytes(p.leaf.record));
      }
    } else {
      // The connection broke with commands in flight: a straggler may still
      // land. Keep the entry, due again after the pending timeout (far
      // longer than the I/O timeout), so the sweeper deletes what lands late.
      (void)store_->redis().Eval(GetScripts().touch_pending, {pending_key},
                                 {gen, PendingRecordFor(p.leaf.record)});
    }
  }
  leaves_.clear();
}

}  // namespace tdstore::store
