#include "server/redis_store/indexed_blocks.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "server/redis_store/redis_errors.h"
#include "server/redis_store/schema_cache.h"

namespace tdstore::store {
namespace {

// Block calls in flight at once. A 256-row sample of a 1M-row dict in the
// default layout touches 62 blocks: all of them go out together. The bound
// keeps what a huge sparse selection has formatted and on the wire (about
// a command per run) from growing with the selection.
constexpr size_t kBlocksInFlight = 64;

// KeyOffsetOrder merges up to this many ascending stretches of runs (a
// write's leaves); more (a sample's random rows) are sorted.
constexpr size_t kMergedStretches = 16;

}  // namespace

// A block key that is gone: its leaf was replaced or deleted meanwhile.
absl::Status StaleBlock(std::string_view key) {
  return StaleError(StrCat("block ", key, " (its leaf was replaced or deleted)"));
}

absl::StatusOr<std::map<int64_t, BlockWork>> GroupByBlock(
    const DictStore& store, const DictSchema& schema, const plan::ResolvedIndex& index,
    const std::vector<const Leaf*>& leaves, const std::vector<int64_t>* order) {
  std::map<int64_t, BlockWork> blocks;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const LeafRecord& record = leaves[i]->record;
    auto layout = schema.Layout(record);
    if (!layout.ok()) return layout.status();
    // Consecutive runs mostly fall in the block and part of the run before
    // (a sample of a 10,000-row buffer: all of them), so the last block and
    // key found are kept instead of two map lookups per run.
    BlockWork* work = nullptr;
    int64_t work_block = 0;
    int key = 0;
    int64_t key_part = 0;
    const std::vector<plan::PartRun> part_runs =
        plan::SplitRuns(plan::PlanRuns(index, CellBytes(schema, record), order), *layout);
    for (const plan::PartRun& r : part_runs) {
      if (work == nullptr || r.block != work_block) {
        work = &blocks[r.block];
        work_block = r.block;
        key = 0;
      }
      if (key == 0 || r.part != key_part) {
        auto [it, added] = work->key_numbers.emplace(std::make_pair(record.generation, r.part),
                                                     static_cast<int>(work->keys.size()) + 1);
        if (added) {
          work->keys.push_back(
              store.keys().BlockPart(schema.meta.id, r.block, record.generation, r.part));
        }
        key = it->second;
        key_part = r.part;
      }
      work->runs.push_back({i, key, r.offset_in_part, r.length, r.result_offset});
    }
  }
  return blocks;
}

void FinishScriptCommand(BlockCommand& cmd, const redis::Script& script, std::string numkeys) {
  cmd.script = &script;
  cmd.storage.push_back(std::move(numkeys));
  // `storage` must not reallocate from here on: views point into it.
  cmd.argv = {"EVALSHA", script.sha1(), cmd.storage.back()};
  cmd.argv.insert(cmd.argv.end(), cmd.keys.begin(), cmd.keys.end());
  cmd.argv.insert(cmd.argv.end(), cmd.args.begin(), cmd.args.end());
  cmd.routing_key = cmd.keys.front();
}

// Sends the probe (if asked) and the blocks' commands on one pipeline,
// kBlocksInFlight blocks ahead, checks the probe's reply and hands each
// block's reply to `on_reply` in block order. A NOSCRIPT reply (Redis
// restarted or flushed its scripts) is redone through RedisClient::Eval,
// which loads the script and retries. With `version_after`, reads the
// schema version behind the last block (indexed_io.h).
absl::Status RunBlocks(const DictStore& store, const DictSchema& schema, bool probe,
                       std::vector<BlockCommand>& commands, bool writes,
                       const std::function<absl::Status(size_t, const redis::Reply&)>& on_reply,
                       std::optional<int64_t>* version_after) {
  if (commands.empty() && !probe) return absl::OkStatus();
  auto sends = [](const BlockCommand& c) {
    return c.transaction.empty() ? 1 : static_cast<int>(c.transaction.size()) + 2;
  };
  // Room for everything sent before the first reply is read: the probe,
  // the first kBlocksInFlight blocks and the version's HGET. One command
  // more than the window holds makes Send read a reply first, a round trip
  // on every call: the HGET was that one until the window counted it.
  int depth = kProbeCommands + 1;
  for (size_t i = 0; i < commands.size() && i < kBlocksInFlight; ++i) depth += sends(commands[i]);
  auto pipe = store.redis().NewPipeline(depth);
  if (!pipe.ok()) return pipe.status();
  const StoreOptions& o = store.options();
  const int replicas = writes ? o.write_replicas : 0;
  if (replicas > 0) (*pipe)->set_reissue_replicas(replicas, o.write_replicas_timeout);
  // Why the version may ride on this pipeline: one connection runs its
  // commands in the order sent, so an HGET sent behind the last block runs
  // after every block did. A cluster pipeline's blocks run on their nodes'
  // connections in no order with the meta's node: there the caller reads
  // the version once every reply is in.
  const bool read_version =
      version_after != nullptr && !commands.empty() && store.redis().pipelines_in_order();
  const std::string meta = read_version ? store.keys().Meta(schema.meta.id) : std::string();
  bool version_sent = false;
  bool redone = false;  // a block ran off the pipeline: after the HGET
  size_t sent = 0;
  auto send_block = [&](const BlockCommand& c) -> absl::Status {
    if (c.transaction.empty()) return (*pipe)->Send(c.routing_key, c.argv);
    if (auto s = (*pipe)->Send(c.routing_key, {"MULTI"}); !s.ok()) return s;
    for (const std::vector<std::string_view>& argv : c.transaction) {
      if (auto s = (*pipe)->Send(c.routing_key, argv); !s.ok()) return s;
    }
    return (*pipe)->Send(c.routing_key, {"EXEC"});
  };
  auto fill = [&](size_t received) -> absl::Status {
    while (sent < commands.size() && sent < received + kBlocksInFlight) {
      if (auto s = send_block(commands[sent++]); !s.ok()) return s;
    }
    if (read_version && !version_sent && sent == commands.size()) {
      version_sent = true;
      return (*pipe)->Send(meta, {"HGET", meta, kMetaVersion});
    }
    return absl::OkStatus();
  };
  if (probe) {
    if (auto s = SendProbe(**pipe, store.keys(), schema, schema.meta.name); !s.ok()) return s;
  }
  if (auto s = fill(0); !s.ok()) return s;
  if (probe) {
    absl::Status s = ReceiveProbe(**pipe, schema, schema.meta.name);
    if (!s.ok()) {
      // Writes sent behind a failed probe still run; they must be done
      // before the caller redoes the write, or they could land after it.
      if (writes) {
        while ((*pipe)->outstanding() > 0 && (*pipe)->Receive().ok()) {
        }
      }
      return s;
    }
  }
  for (size_t received = 0; received < commands.size(); ++received) {
    if (auto s = fill(received); !s.ok()) return s;
    const BlockCommand& c = commands[received];
    if (!c.transaction.empty()) {
      // MULTI's +OK and a +QUEUED per command come first. Anything else
      // (a cluster slot that moved: -MOVED, or a command re-issued on
      // another node) means the transaction did not run as one: do the
      // call again from a fresh plan.
      for (size_t i = 0; i <= c.transaction.size(); ++i) {
        auto ack = (*pipe)->Receive();
        if (!ack.ok()) return ack.status();
        if (!ack->is_status() || (ack->str() != "OK" && ack->str() != "QUEUED")) {
          // Refused as it was queued (out of memory, say): EXEC will
          // answer EXECABORT and run none of it. Said as what it is.
          const std::string_view tag = ErrorTag(*ack);
          if (ack->is_error() && tag != "MOVED" && tag != "ASK") {
            return ReplyStatus(*ack, "indexed block access");
          }
          return StaleError(StrCat("a block's transaction (", ack->str(), ")"));
        }
      }
    }
    auto reply = (*pipe)->Receive();
    if (!reply.ok()) return reply.status();
    if (!c.transaction.empty() && reply->is_error() && ErrorTag(*reply) != "EXECABORT") {
      // EXEC itself refused (Redis ran out of memory after the commands
      // were queued): none of it ran, and the connection may still be in
      // MULTI with the next blocks' commands queued. DISCARD ends it
      // either way; the replies behind are read, so the connection goes
      // back to the pool clean.
      const absl::Status refused = ReplyStatus(*reply, "indexed block access");
      if ((*pipe)->Send(c.routing_key, {"DISCARD"}).ok()) {
        while ((*pipe)->outstanding() > 0 && (*pipe)->Receive().ok()) {
        }
      }
      return refused;
    }
    if (!c.transaction.empty() && (reply->is_error() || reply->size() != c.transaction.size())) {
      return StaleError(StrCat("a block's transaction (EXEC: ", reply->str(), ")"));
    }
    if (c.script != nullptr && reply->is_error() && reply->str().substr(0, 8) == "NOSCRIPT") {
      redone = true;
      reply = store.redis().EvalDurable(*c.script, c.keys, c.args, replicas,
                                        o.write_replicas_timeout);
      if (!reply.ok()) return reply.status();
    }
    if (ErrorTag(*reply) == "TDSTALE") return StaleBlock(ErrorDetail(*reply));
    if (auto s = ReplyStatus(*reply, "indexed block access"); !s.ok()) return s;
    if (auto s = on_reply(received, *reply); !s.ok()) return s;
  }
  if (version_sent) {
    auto reply = (*pipe)->Receive();
    if (!reply.ok()) return reply.status();
    int64_t version = 0;
    // Nil (the dict was deleted meanwhile) or an error: left to the caller,
    // whose own read reports it.
    if (!redone && reply->is_string() && absl::SimpleAtoi(std::string(reply->str()), &version)) {
      *version_after = version;
    }
  }
  if (replicas > 0) return (*pipe)->WaitReplicas(replicas, o.write_replicas_timeout);
  return absl::OkStatus();
}

std::vector<size_t> KeyOffsetOrder(const std::vector<BlockWork::Run>& runs) {
  // Sorted by value: each run's key and offset packed into one integer
  // beside its index, which also breaks ties in index order. Sorting the
  // indices through a comparator that looked both runs up cost about twice
  // as much: 181,000 against 86,000 instructions in a 256-row sample of a
  // record dict (768 runs: a row of three leaves; callgrind). Offsets of
  // 2^40 bytes or more (no part is that long) take the comparator.
  constexpr int kOffsetBits = 40;
  std::vector<size_t> order(runs.size());
  bool packs = true;
  for (const BlockWork::Run& r : runs) {
    packs = packs && r.key >= 0 && r.key < (1 << 23) && r.offset_in_part >= 0 &&
            r.offset_in_part < (int64_t{1} << kOffsetBits);
  }
  if (!packs) {
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return std::tie(runs[a].key, runs[a].offset_in_part) <
             std::tie(runs[b].key, runs[b].offset_in_part);
    });
    return order;
  }
  std::vector<std::pair<uint64_t, size_t>> keyed(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    keyed[i] = {(static_cast<uint64_t>(runs[i].key) << kOffsetBits) |
                    static_cast<uint64_t>(runs[i].offset_in_part),
                i};
  }
  // Why merge before sort: a write's runs come leaf by leaf, each leaf's
  // in result order, so rows written in order (an extend) are one
  // ascending stretch per leaf. Merging those stretches is a pass or two
  // where a sort is log2(runs) of them (11 for the 1,500 runs of an extend
  // of 500 rows of three leaves). The pairs are all distinct (the index),
  // so any correct ordering of them is this one.
  std::vector<size_t> stretch = {0};
  for (size_t i = 1; i < keyed.size() && stretch.size() <= kMergedStretches; ++i) {
    if (keyed[i] < keyed[i - 1]) stretch.push_back(i);
  }
  if (stretch.size() > kMergedStretches) {
    std::sort(keyed.begin(), keyed.end());
  } else {
    stretch.push_back(keyed.size());
    // Neighbours merged pairwise until one stretch is left.
    while (stretch.size() > 2) {
      std::vector<size_t> merged = {0};
      for (size_t s = 0; s + 2 < stretch.size(); s += 2) {
        std::inplace_merge(keyed.begin() + static_cast<std::ptrdiff_t>(stretch[s]),
                           keyed.begin() + static_cast<std::ptrdiff_t>(stretch[s + 1]),
                           keyed.begin() + static_cast<std::ptrdiff_t>(stretch[s + 2]));
        merged.push_back(stretch[s + 2]);
      }
      if (stretch.size() % 2 == 0) merged.push_back(stretch.back());  // an odd one out
      stretch = std::move(merged);
    }
  }
  for (size_t i = 0; i < keyed.size(); ++i) order[i] = keyed[i].second;
  return order;
}

WritePlan PlanWrite(const BlockWork& work) {
  WritePlan plan;
  // Key and offset order may only replace the index's order when no two
  // runs overlap: where an index selects a cell twice, write_runs.lua
  // applies the runs in index order, so that the last occurrence wins.
  plan.order.resize(work.runs.size());
  for (size_t i = 0; i < plan.order.size(); ++i) plan.order[i] = i;
  std::vector<size_t> sorted = KeyOffsetOrder(work.runs);
  plan.disjoint = true;
  for (size_t i = 1; i < sorted.size() && plan.disjoint; ++i) {
    const BlockWork::Run& prev = work.runs[sorted[i - 1]];
    const BlockWork::Run& cur = work.runs[sorted[i]];
    plan.disjoint = !(prev.key == cur.key && cur.offset_in_part < prev.offset_in_part + prev.length);
  }
  if (plan.disjoint) plan.order = std::move(sorted);
  for (size_t i = 0; i < plan.order.size();) {
    const BlockWork::Run& first = work.runs[plan.order[i]];
    WritePlan::Range range{first.key, first.offset_in_part, first.length, i, i + 1};
    while (range.last < plan.order.size() && work.runs[plan.order[range.last]].key == range.key &&
           work.runs[plan.order[range.last]].offset_in_part == range.offset + range.length) {
      range.length += work.runs[plan.order[range.last++]].length;
    }
    plan.ranges.push_back(range);
    i = range.last;
  }
  return plan;
}

// The bytes of the runs plan.order[first, last), back to back: viewed in
// place where they lie so in one leaf's value (a step slice's rows of a
// leaf, a contiguous slice), else gathered into a new string of `gathered`
// (a deque: the views of earlier ones stay valid). A view is copied once,
// by hiredis into the command or by the connection's writev to the socket.
std::string_view RangeBytes(const BlockWork& work, const WritePlan& plan,
                            const std::vector<IndexedValue>& values, size_t first, size_t last,
                            std::deque<std::string>& gathered) {
  const BlockWork::Run& head = work.runs[plan.order[first]];
  int64_t end = head.result_offset + head.length;
  size_t k = first + 1;
  while (k < last && work.runs[plan.order[k]].leaf == head.leaf &&
         work.runs[plan.order[k]].result_offset == end) {
    end += work.runs[plan.order[k++]].length;
  }
  if (k == last) {
    return values[head.leaf].bytes.substr(static_cast<size_t>(head.result_offset),
                                          static_cast<size_t>(end - head.result_offset));
  }
  // Room for all of it first (reserved, not sized: sizing would zero it):
  // appending run by run regrew the string about 30 times per extend of
  // 500 rows of a record dict, and those regrowths' copies were 17% of
  // tdstored's instructions in it (callgrind).
  size_t total = 0;
  for (k = first; k < last; ++k) total += static_cast<size_t>(work.runs[plan.order[k]].length);
  std::string& out = gathered.emplace_back();
  out.reserve(total);
  for (k = first; k < last; ++k) {
    const BlockWork::Run& r = work.runs[plan.order[k]];
    out.append(values[r.leaf].bytes.data() + r.result_offset, static_cast<size_t>(r.length));
  }
  return out;
}

// The outcome of a GuardedWrite block from its EXEC reply: the guard's
// TDSTALE as a stale block; any other error reply (none is expected once
// the guard let the SETRANGEs write) as that error.
absl::Status GuardedWriteStatus(const redis::ReplyView& exec, size_t from, size_t count) {
  const redis::ReplyView guard = exec[from];
  if (ErrorTag(guard) == "TDSTALE") return StaleBlock(ErrorDetail(guard));
  for (size_t i = from; i < from + count; ++i) {
    if (auto s = ReplyStatus(exec[i], "indexed block write"); !s.ok()) return s;
  }
  return absl::OkStatus();
}
absl::Status GuardedWriteStatus(const redis::Reply& exec) {
  return GuardedWriteStatus(exec.view(), 0, exec.size());
}

}  // namespace tdstore::store
