// WriteTxn's at-once path (leaf_writer.h): a small whole-leaf write held
// until Commit, then sent in one round trip; and the way back to the
// stepwise path when it cannot go at once.
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "common/str_cat.h"
#include "server/redis_store/leaf_record_text.h"
#include "server/redis_store/leaf_writer.h"
#include "server/redis_store/lua_scripts.h"
#include "server/redis_store/redis_errors.h"
#include "server/store/store_checks.h"

namespace tdstore::store {
namespace {

// The bytes [offset, offset + length) of a held leaf, whose pieces follow
// one another from offset 0: a view of the one piece that holds them, or
// of a copy joined from several (kept in `joined`).
std::string_view HeldBytes(const std::vector<WriteTxn::HeldPiece>& pieces, int64_t offset,
                           int64_t length, std::deque<std::string>& joined) {
  std::string* out = nullptr;
  int64_t at = 0;  // the leaf offset of the piece looked at
  for (const WriteTxn::HeldPiece& piece : pieces) {
    const std::string_view bytes = piece.bytes();
    const int64_t end = at + static_cast<int64_t>(bytes.size());
    if (end > offset && at < offset + length) {
      const int64_t from = std::max(offset, at), to = std::min(offset + length, end);
      const std::string_view wanted = bytes.substr(static_cast<size_t>(from - at),
                                                   static_cast<size_t>(to - from));
      if (out == nullptr && from == offset && to == offset + length) return wanted;
      if (out == nullptr) out = &joined.emplace_back();
      out->append(wanted);
    }
    at = end;
  }
  return out == nullptr ? std::string_view() : std::string_view(*out);
}

// claim_generations.lua's EVAL for the parts `part_keys` of the
// generations first..last, its arguments in `text` where they are not.
std::vector<std::string_view> ClaimCommand(std::string_view meta, std::string_view hold,
                                           const std::vector<std::string_view>& part_keys,
                                           int64_t first, int64_t last,
                                           std::deque<std::string>& text) {
  std::vector<std::string_view> claim{"EVAL", GetScripts().claim_generations.body(),
                                      text.emplace_back(StrCat(2 + part_keys.size())), meta,
                                      hold};
  claim.insert(claim.end(), part_keys.begin(), part_keys.end());
  claim.push_back(text.emplace_back(StrCat(first)));
  claim.push_back(text.emplace_back(StrCat(last)));
  return claim;
}

}  // namespace

bool WriteTxn::Holds(const BlockLayout& layout, int64_t byte_size) const {
  if (!may_hold_ || (!leaves_.empty() && !leaves_.front().held)) return false;
  const StoreOptions& options = store_->options();
  // A cluster spreads the parts over other slots than the meta's, which
  // neither a MULTI nor a script may span; replicas confirm through WAIT
  // on each write's own connection.
  if (options.write_replicas > 0 || !store_->redis().pipelines_in_order()) return false;
  const int64_t max_bytes = options.at_once_max_bytes;
  if (max_bytes <= 0 || byte_size > max_bytes) return false;
  int64_t bytes = byte_size;
  int parts = 0;
  bool whole = true;  // every part sent as one command
  auto count = [&](const BlockLayout& l) {
    l.ForEachSegment(0, l.total_bytes(), max_bytes, [&](const Segment& seg) {
      ++parts;
      whole = whole && seg.length == l.part_size(seg.block, seg.part);
    });
  };
  count(layout);
  for (const PendingLeaf& p : leaves_) {
    bytes += p.layout.total_bytes();
    count(p.layout);
  }
  return whole && parts <= kAtOnceMaxParts && bytes <= max_bytes;
}

absl::Status WriteTxn::ReplayStepwise(bool fresh) {
  may_hold_ = false;
  ahead_.reset();
  std::vector<PendingLeaf> held = std::exchange(leaves_, {});
  held_owned_bytes_ = 0;
  // Released when this returns, once the bytes held have been sent.
  std::optional<MemoryBudget::Lease> held_lease = std::exchange(held_lease_, std::nullopt);
  const std::string id = schema_.meta.id;
  const Shape batch = schema_.meta.batch_shape;
  for (int attempt = 0;; ++attempt) {
    if (fresh) {
      unproven_ref_id_ = id;  // what LoadFreshSchema loads by
      if (auto s = LoadFreshSchema(); !s.ok()) return Fail(s);
      if (schema_.meta.batch_shape != batch) {
        // As commit_leaves.lua's TDBATCH says it: stale, so that an
        // indexed write's leaf creation plans again.
        return Fail(StaleError(StrCat("the batch size of dict '", schema_.meta.name,
                                      "' (resized during the write)")));
      }
    } else {
      bytes_after_commit_ = schema_.StoredBytes();
    }
    // Each leaf begun as its caller began it, checked again (on the fresh
    // schema if there is one), then its bytes, sent now. A cached schema
    // not proven yet is proven by the first reservation, as in BeginLeaf,
    // and a refusal on it is decided again once on a fresh one.
    const bool unproven = !unproven_ref_id_.empty();
    absl::Status status;
    for (const PendingLeaf& h : held) {
      status = h.fields.empty() ? BeginLeafOn(h.leaf.path, h.asked, h.layout.total_bytes())
                                : BeginRecordOn(h.asked_fields);
      if (status.ok() && h.zero) status = ZeroFill();
      for (size_t i = 0; status.ok() && i < h.pieces.size(); ++i) {
        status = Append(h.pieces[i].bytes());
      }
      if (!status.ok()) break;
    }
    if (status.ok() || !unproven || attempt > 0) return status;
    done_ = false;  // the refusal aborted what was begun; begin again
    fresh = true;
  }
}

absl::StatusOr<std::optional<CommitResult>> WriteTxn::CommitAtOnce(CommitMode mode) {
  // A proposal of generations that claim_generations.lua finds taken is
  // made again past Redis' counter, once; then the write goes stepwise.
  for (int attempt = 0;; ++attempt) {
    int64_t counter = 0;
    auto sent = SendAtOnce(mode, &counter);
    if (!sent.ok() || sent->has_value() || counter < 0) return sent;
    store_->generation_hints().Saw(schema_.meta.id, counter);
    if (attempt == 1) {
      if (auto s = ReplayStepwise(/*fresh=*/false); !s.ok()) return s;
      return std::optional<CommitResult>();
    }
  }
}

void WriteTxn::SendAhead(std::string_view data) {
  PendingLeaf& leaf = leaves_.front();
  const int64_t from = leaf.written - static_cast<int64_t>(data.size());
  if (!ahead_) {
    // Worth it only for bytes that come in pieces: a leaf whose first
    // piece is all of it goes at Commit, as any held write.
    if (expected_leaves_ != 1 || leaves_.size() != 1 || leaf.zero || !leaf.fields.empty() ||
        from != 0 || leaf.written == leaf.layout.total_bytes()) {
      return;
    }
    // Room for MULTI, the claim, the parts, the commit and EXEC.
    auto pipe = store_->redis().NewPipeline(kAtOnceMaxParts + 4);
    if (!pipe.ok()) return;
    const int64_t gen = store_->generation_hints().Propose(schema_.meta.id, 1);
    leaf.leaf.record.generation = gen;
    const KeySchema& keys = store_->keys();
    std::deque<std::string> text;
    std::vector<std::string_view> part_keys;
    leaf.layout.ForEachSegment(
        0, leaf.layout.total_bytes(), store_->options().at_once_max_bytes,
        [&](const Segment& seg) {
          part_keys.push_back(
              text.emplace_back(keys.BlockPart(schema_.meta.id, seg.block, gen, seg.part)));
        });
    const std::string meta = keys.Meta(schema_.meta.id), hold = keys.AtOnceHold(schema_.meta.id);
    absl::Status sent = (*pipe)->Send(meta, {"MULTI"});
    if (sent.ok()) sent = (*pipe)->Send(meta, ClaimCommand(meta, hold, part_keys, gen, gen, text));
    if (!sent.ok()) return;  // the pipeline closes its connection
    ahead_ = *std::move(pipe);
    ahead_bytes_ = 0;
  }
  // A piece that was not lent (held as a copy) came between: what went
  // ahead stays short of the leaf, and Commit sends the write whole.
  if (ahead_bytes_ != from) return;
  // Each part's SET opens at its first byte; the value's last byte ends it.
  const int64_t to = leaf.written;
  const int64_t gen = leaf.leaf.record.generation;
  absl::Status sent;
  leaf.layout.ForEachSegment(
      0, leaf.layout.total_bytes(), store_->options().at_once_max_bytes, [&](const Segment& seg) {
        const int64_t end = seg.leaf_offset + seg.length;
        if (!sent.ok() || end <= ahead_bytes_ || seg.leaf_offset >= to) return;
        if (ahead_bytes_ == seg.leaf_offset) {
          const std::string key =
              store_->keys().BlockPart(schema_.meta.id, seg.block, gen, seg.part);
          sent = ahead_->SendOpen(key, {"SET", key}, seg.length, {"NX"});
        }
        const int64_t n = std::min(end, to) - ahead_bytes_;
        if (sent.ok()) {
          sent = ahead_->SendValue(data.substr(static_cast<size_t>(ahead_bytes_ - from),
                                               static_cast<size_t>(n)));
        }
        if (sent.ok()) ahead_bytes_ += n;
      });
  if (!sent.ok()) ahead_.reset();
}

absl::StatusOr<std::optional<CommitResult>> WriteTxn::SendAtOnce(CommitMode mode,
                                                                  int64_t* counter) {
  *counter = -1;
  const KeySchema& keys = store_->keys();
  const StoreOptions& options = store_->options();
  const std::string& id = schema_.meta.id;
  // Sent ahead, with its generation: MULTI, the claim and every part.
  std::unique_ptr<redis::Pipeline> ahead = std::move(ahead_);
  if (ahead && ahead_bytes_ != leaves_.front().layout.total_bytes()) ahead.reset();
  int64_t gen = ahead ? leaves_.front().leaf.record.generation
                      : store_->generation_hints().Propose(
                            id, static_cast<int64_t>(leaves_.size()));
  const int64_t first = gen;
  int64_t bytes = 0;
  for (PendingLeaf& p : leaves_) {
    p.leaf.record.generation = gen;
    for (Leaf& f : p.fields) f.record.generation = gen;
    ++gen;
    bytes += p.layout.total_bytes();
  }

  // Each part as one command: its bytes in a SET ... NX, or for a ZeroFill
  // a SETRANGE of its last byte (Redis pads with zeros). A part that
  // claim_generations.lua held is a hash: neither writes it.
  static const std::string_view kZero("\0", 1);
  std::deque<std::string> text;  // keys, numbers and joined bytes the commands point into
  std::vector<std::vector<std::string_view>> writes;
  std::vector<std::string_view> part_keys, part_lengths;
  for (const PendingLeaf& p : leaves_) {
    p.layout.ForEachSegment(0, p.layout.total_bytes(), options.at_once_max_bytes,
                            [&](const Segment& seg) {
      const std::string_view key = text.emplace_back(
          keys.BlockPart(id, seg.block, p.leaf.record.generation, seg.part));
      part_keys.push_back(key);
      part_lengths.push_back(text.emplace_back(StrCat(seg.length)));
      if (ahead) {
        return;  // sent
      } else if (p.zero) {
        writes.push_back({"SETRANGE", key, text.emplace_back(StrCat(seg.length - 1)), kZero});
      } else {
        writes.push_back(
            {"SET", key, HeldBytes(p.pieces, seg.leaf_offset, seg.length, text), "NX"});
      }
    });
  }
  const std::string meta = keys.Meta(id), leaves = keys.Leaves(id), pending = keys.Pending(id),
                    catalog = keys.Catalog(), used = keys.UsedBytes(),
                    hold = keys.AtOnceHold(id);
  const std::vector<std::string_view> claim =
      ClaimCommand(meta, hold, part_keys, first, gen - 1, text);
  // The name is checked as the probe would (schema_cache.h) when the
  // schema came from the cache and no probe proved it yet.
  std::vector<std::string> args{unproven_ref_id_.empty() ? std::string() : schema_.meta.name,
                                id, StrCat(schema_.meta.version), StrCat(bytes),
                                StrCat(options.namespace_quota_bytes)};
  AppendCommitArgs(mode, &args);
  const std::string numkeys = StrCat(6 + part_keys.size());
  std::vector<std::string_view> eval{"EVAL", GetScripts().write_at_once.body(), numkeys,
                                     meta, leaves, pending, catalog, used, hold};
  eval.insert(eval.end(), part_keys.begin(), part_keys.end());
  eval.insert(eval.end(), args.begin(), args.end());
  eval.insert(eval.end(), part_lengths.begin(), part_lengths.end());

  // MULTI, the claim, the parts, the commit, EXEC: one round trip. Until
  // EXEC is sent nothing can have run (Redis drops the transaction of a
  // connection that breaks); from then on a broken connection leaves the
  // outcome unknown.
  const size_t queued_commands = part_keys.size() + 2;
  absl::StatusOr<std::unique_ptr<redis::Pipeline>> pipe = std::move(ahead);
  absl::Status sent;
  if (*pipe == nullptr) {
    pipe = store_->redis().NewPipeline(static_cast<int>(queued_commands) + 2);
    if (!pipe.ok()) return Fail(pipe.status());
    sent = (*pipe)->Send(meta, {"MULTI"});
    if (sent.ok()) sent = (*pipe)->Send(meta, claim);
    for (size_t i = 0; sent.ok() && i < writes.size(); ++i) sent = (*pipe)->Send(meta, writes[i]);
  }
  if (sent.ok()) sent = (*pipe)->Send(meta, eval);
  if (!sent.ok()) return Fail(sent);
  auto unknown = [&](const absl::Status& why) -> absl::Status {
    done_ = true;
    return OutcomeUnknown(StrCat(
        "the write's outcome is unknown (it may or may not be visible; retrying it is safe): ",
        why.message()));
  };
  if (auto s = (*pipe)->Send(meta, {"EXEC"}); !s.ok()) return unknown(s);
  if (auto s = (*pipe)->Flush(); !s.ok()) return unknown(s);
  absl::Status queued;
  for (size_t i = 0; i < queued_commands + 1; ++i) {  // MULTI's +OK, then a +QUEUED each
    auto ack = (*pipe)->Receive();
    if (!ack.ok()) return unknown(ack.status());
    if (queued.ok() && (!ack->is_status() || (ack->str() != "OK" && ack->str() != "QUEUED"))) {
      // Refused as it was queued (out of memory, say): EXEC runs none of it.
      queued = ReplyStatus(*ack, "a whole-leaf write's transaction");
      if (queued.ok()) queued = absl::InternalError("a MULTI command was not queued");
    }
  }
  auto exec = (*pipe)->Receive();
  if (!exec.ok()) return unknown(exec.status());
  if (!queued.ok()) return Fail(queued);
  if (auto s = ReplyStatus(*exec, "a whole-leaf write's transaction"); !s.ok()) return Fail(s);
  if (exec->size() != queued_commands) {
    return Fail(absl::InternalError(StrCat("a whole-leaf write's EXEC answered ", exec->size(),
                                           " replies for ", queued_commands, " commands")));
  }
  const redis::ReplyView reply = (*exec)[queued_commands - 1];
  const std::string_view tag = ErrorTag(reply);
  if (tag == "TDGEN") {
    // The generations were not free (another writer passed them, or this
    // daemon's guess was old): nothing was written, and what the claim
    // held is gone. The caller proposes again past the counter.
    if (!absl::SimpleAtoi(std::string(ErrorDetail(reply)), counter) || *counter < 0) {
      return Fail(absl::InternalError(StrCat("a write's generations were not claimed: ",
                                             reply.str())));
    }
    return std::optional<CommitResult>();
  }
  if (tag == "TDSTALE") {
    // Checked on a schema that changed since: nothing was written (the
    // script deleted the parts). Decide again on the schema as it is now.
    if (auto s = ReplayStepwise(/*fresh=*/true); !s.ok()) return s;
    return std::optional<CommitResult>();
  }
  if (tag == "TDQUOTA") {
    int64_t stored = 0;
    (void)absl::SimpleAtoi(std::string(ErrorDetail(reply)), &stored);
    return Fail(NamespaceQuotaError(options, stored, bytes,
                                    StrCat("the write into dict '", schema_.meta.name, "'")));
  }
  if (tag == "TDSHORT") {
    return Fail(absl::UnavailableError(StrCat(
        "a part of the write did not reach Redis whole (", ErrorDetail(reply),
        "); nothing was written")));
  }
  if (auto s = CommitRefusal(reply); !s.ok()) return Fail(s);
  return std::optional<CommitResult>(AfterCommit(reply));
}

}  // namespace tdstore::store
