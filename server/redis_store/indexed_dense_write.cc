#include "server/redis_store/indexed_dense_write.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/str_cat.h"
#include "server/redis_store/redis_errors.h"
#include "server/redis_store/schema_cache.h"

namespace tdstore::store {
namespace {

// The fewest ranges of a key written as one span (WriteCovered): a few
// SETRANGEs cost Redis less than moving a span twice.
constexpr size_t kMinCoverRanges = 64;
// The most span bytes one write covers. Its spans go in one MULTI, which
// Redis holds whole until EXEC; beyond this a write goes range by range,
// a transaction per block, as before.
constexpr int64_t kMaxCoverBytes = 64 << 20;

}  // namespace

absl::StatusOr<bool> WriteCovered(const DictStore& store, const DictSchema& schema, bool probe,
                                  const std::map<int64_t, BlockWork>& blocks,
                                  const std::vector<WritePlan>& plans,
                                  const std::vector<IndexedValue>& values,
                                  std::optional<int64_t>* version_after) {
  struct Span {
    size_t block = 0;  // into `works`
    int key = 0;       // 1-based, as BlockWork::Run::key
    int64_t begin = 0, end = 0;
    std::vector<size_t> ranges;  // its key's, into plans[block].ranges, in order
    redis::Reply read;           // its bytes, patched in place
  };
  std::vector<const BlockWork*> works;
  std::vector<Span> spans;
  // The window holds either round trip's commands: the probe, WATCH and
  // the GETRANGEs; or MULTI, every transaction's commands (a guard, a
  // release and a SETRANGE per range or span), EXEC and the version's
  // HGET. So nothing is read before all of one is sent.
  size_t writes = 3;
  for (const auto& [block, work] : blocks) {
    const WritePlan& plan = plans[works.size()];
    works.push_back(&work);
    writes += 2 + plan.ranges.size();
    struct KeyRanges {
      std::vector<size_t> ranges;
      int64_t bytes = 0, begin = INT64_MAX, end = 0;
    };
    std::vector<KeyRanges> per_key(work.keys.size() + 1);
    for (size_t i = 0; i < plan.ranges.size(); ++i) {
      const WritePlan::Range& r = plan.ranges[i];
      KeyRanges& k = per_key[static_cast<size_t>(r.key)];
      k.ranges.push_back(i);
      k.bytes += r.length;
      k.begin = std::min(k.begin, r.offset);
      k.end = std::max(k.end, r.offset + r.length);
    }
    for (size_t key = 1; key < per_key.size(); ++key) {
      KeyRanges& k = per_key[key];
      if (k.ranges.size() >= kMinCoverRanges && k.end - k.begin <= kCoverFactor * k.bytes) {
        writes -= k.ranges.size() - 1;
        spans.push_back(
            {works.size() - 1, static_cast<int>(key), k.begin, k.end, std::move(k.ranges), {}});
      }
    }
  }
  int64_t span_bytes = 0;
  for (const Span& span : spans) span_bytes += span.end - span.begin;
  if (spans.empty() || span_bytes > kMaxCoverBytes) return false;
  const size_t reads = kProbeCommands + 1 + spans.size();
  std::vector<BlockCommand> commands(works.size());
  const std::string meta = store.keys().Meta(schema.meta.id);
  const StoreOptions& o = store.options();
  auto pipe = store.redis().NewPipeline(static_cast<int>(std::max(reads, writes)));
  if (!pipe.ok()) return pipe.status();
  if (o.write_replicas > 0) (*pipe)->set_reissue_replicas(o.write_replicas, o.write_replicas_timeout);
  // Until EXEC, leaving means UNWATCH first: the connection goes back to
  // the pool, where a watch would abort someone else's transaction.
  auto unwatch = [&](absl::Status why) -> absl::Status {
    while ((*pipe)->outstanding() > 0) {
      if (auto r = (*pipe)->Receive(); !r.ok()) return why;  // broken: not pooled
    }
    if ((*pipe)->Send(meta, {"UNWATCH"}).ok()) (void)(*pipe)->Receive();
    return why;
  };

  if (probe) {
    if (auto s = SendProbe(**pipe, store.keys(), schema, schema.meta.name); !s.ok()) return s;
  }
  std::vector<std::string_view> watch = {"WATCH"};
  std::vector<std::string> range_text;  // GETRANGE's numbers
  range_text.reserve(2 * spans.size());
  for (const Span& span : spans) {
    watch.push_back(works[span.block]->keys[static_cast<size_t>(span.key - 1)]);
  }
  if (auto s = (*pipe)->Send(meta, watch); !s.ok()) return s;
  for (const Span& span : spans) {
    const std::string& key = works[span.block]->keys[static_cast<size_t>(span.key - 1)];
    const std::string_view from = range_text.emplace_back(StrCat(span.begin));
    const std::string_view to = range_text.emplace_back(StrCat(span.end - 1));
    if (auto s = (*pipe)->Send(key, {"GETRANGE", key, from, to}); !s.ok()) return s;
  }
  if (probe) {
    if (absl::Status s = ReceiveProbe(**pipe, schema, schema.meta.name); !s.ok()) {
      return unwatch(s);
    }
  }
  {
    auto watched = (*pipe)->Receive();
    if (!watched.ok()) return watched.status();
    if (auto s = ReplyStatus(*watched, "WATCH"); !s.ok()) return unwatch(s);
  }
  for (Span& span : spans) {
    auto read = (*pipe)->Receive();
    if (!read.ok()) return read.status();
    const std::string& key = works[span.block]->keys[static_cast<size_t>(span.key - 1)];
    if (auto s = ReplyStatus(*read, "GETRANGE"); !s.ok()) return unwatch(s);
    if (!read->is_string() || static_cast<int64_t>(read->str().size()) != span.end - span.begin) {
      return unwatch(StaleBlock(key));  // gone or short: a generation replaced
    }
    span.read = *std::move(read);
    // The ranges' runs, in the plan's order: where an index selects a cell
    // twice, the last occurrence wins, as with a SETRANGE per range.
    char* bytes = span.read.mutable_str();
    const BlockWork& work = *works[span.block];
    const WritePlan& plan = plans[span.block];
    for (size_t range : span.ranges) {
      const WritePlan::Range& r = plan.ranges[range];
      for (size_t i = r.first; i < r.last; ++i) {
        const BlockWork::Run& run = work.runs[plan.order[i]];
        std::memcpy(bytes + (run.offset_in_part - span.begin),
                    values[run.leaf].bytes.data() + run.result_offset,
                    static_cast<size_t>(run.length));
      }
    }
  }

  // The transactions, as GuardedWrite makes them, each key with a span as
  // one SETRANGE of it.
  std::vector<std::vector<KeyCover>> covers(works.size());
  for (size_t b = 0; b < works.size(); ++b) covers[b].resize(works[b]->keys.size());
  for (const Span& span : spans) {
    covers[span.block][static_cast<size_t>(span.key - 1)] = {span.begin, span.read.str()};
  }
  for (size_t b = 0; b < works.size(); ++b) {
    const BlockWork& work = *works[b];
    const WritePlan& plan = plans[b];
    BlockCommand& cmd = commands[b];
    cmd.storage.reserve(2 * work.keys.size() + 4 * plan.ranges.size() + 2);
    for (const std::string& k : work.keys) cmd.keys.push_back(cmd.storage.emplace_back(k));
    GuardedWrite(cmd, plan, [&](size_t first, size_t last) {
      return RangeBytes(work, plan, values, first, last, cmd.gathered);
    }, covers[b]);
  }
  size_t queued = 0;
  if (auto s = (*pipe)->Send(meta, {"MULTI"}); !s.ok()) return s;
  for (const BlockCommand& cmd : commands) {
    for (const std::vector<std::string_view>& argv : cmd.transaction) {
      if (auto s = (*pipe)->Send(cmd.routing_key, argv); !s.ok()) return s;
      ++queued;
    }
  }
  if (auto s = (*pipe)->Send(meta, {"EXEC"}); !s.ok()) return s;
  const bool read_version = version_after != nullptr;
  if (read_version) {
    if (auto s = (*pipe)->Send(meta, {"HGET", meta, kMetaVersion}); !s.ok()) return s;
  }
  absl::Status refused = absl::OkStatus();
  for (size_t i = 0; i <= queued; ++i) {
    auto ack = (*pipe)->Receive();
    if (!ack.ok()) return ack.status();
    if (refused.ok() && (!ack->is_status() || (ack->str() != "OK" && ack->str() != "QUEUED"))) {
      // Refused as it was queued: EXEC answers EXECABORT and runs none of it.
      refused = ReplyStatus(*ack, "indexed block write");
      if (refused.ok()) refused = absl::InternalError("an indexed write's MULTI was not acknowledged");
    }
  }
  auto exec = (*pipe)->Receive();
  if (!exec.ok()) return exec.status();
  std::optional<int64_t> version;
  if (read_version) {
    auto reply = (*pipe)->Receive();
    if (!reply.ok()) return reply.status();
    int64_t v = 0;
    if (reply->is_string() && absl::SimpleAtoi(std::string(reply->str()), &v)) version = v;
  }
  if (!refused.ok()) return refused;
  if (exec->is_nil()) return false;  // a watched key changed: nothing ran
  if (exec->is_error() && ErrorTag(*exec) != "EXECABORT") {
    // EXEC itself refused (a Redis before 6.2 says -BUSY, say): the
    // connection may still be in MULTI, its keys watched. DISCARD ends
    // both, as in RunBlocks, before the connection goes back to the pool.
    const absl::Status s = ReplyStatus(*exec, "indexed block write");
    if ((*pipe)->Send(meta, {"DISCARD"}).ok()) (void)(*pipe)->Receive();
    return s;
  }
  if (auto s = ReplyStatus(*exec, "indexed block write"); !s.ok()) return s;
  if (exec->size() != queued) return StaleError(StrCat("an indexed write's EXEC: ", exec->str()));
  size_t from = 0;
  for (const BlockCommand& cmd : commands) {
    if (auto s = GuardedWriteStatus(exec->view(), from, cmd.transaction.size()); !s.ok()) return s;
    from += cmd.transaction.size();
  }
  if (version && version_after != nullptr) *version_after = version;
  if (o.write_replicas > 0) {
    if (auto s = (*pipe)->WaitReplicas(o.write_replicas, o.write_replicas_timeout); !s.ok()) return s;
  }
  return true;
}

}  // namespace tdstore::store
