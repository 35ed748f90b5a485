#include "server/redis_store/indexed_io.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "common/str_cat.h"
#include "server/redis_store/lua_scripts.h"
#include "server/redis_store/redis_errors.h"
#include "server/redis_store/schema_cache.h"

namespace tdstore::store {

namespace {

// A block key that is gone: its leaf was replaced or deleted meanwhile.
absl::Status StaleBlock(std::string_view key) {
  return StaleError(StrCat("block ", key, " (its leaf was replaced or deleted)"));
}

// Everything one storage block contributes to a call: the part keys it
// touches (numbered from 1, as the scripts want) and the runs, grouped by
// leaf, each leaf's runs in result order.
struct BlockWork {
  struct Run {
    size_t leaf = 0;
    int key = 0;  // 1-based index into keys
    int64_t offset_in_part = 0;
    int64_t length = 0;
    int64_t result_offset = 0;
  };
  std::vector<std::string> keys;
  // (generation, part) -> key. A record dict's leaves share their
  // generation, so all of a row's leaves are runs of one key.
  std::map<std::pair<int64_t, int64_t>, int> key_numbers;
  std::vector<Run> runs;
};

absl::StatusOr<std::map<int64_t, BlockWork>> GroupByBlock(const DictStore& store,
                                                          const DictSchema& schema,
                                                          const plan::ResolvedIndex& index,
                                                          const std::vector<const Leaf*>& leaves) {
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
    for (const plan::PartRun& r : plan::SplitRuns(plan::PlanRuns(index, CellBytes(schema, record)), *layout)) {
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

// One block's command, owning the strings its argv points into.
struct BlockCommand {
  std::vector<std::string> storage;
  std::vector<std::string_view> keys;  // for a script: its KEYS
  std::vector<std::string_view> args;  // for a script: its ARGV
  std::vector<std::string_view> argv;  // the whole command
  // Instead of argv: commands run as one transaction, MULTI ... EXEC; the
  // block's reply is EXEC's array of their replies.
  std::vector<std::vector<std::string_view>> transaction;
  // Runs' bytes gathered into one argument (deque: elements never move).
  std::deque<std::string> gathered;
  std::string_view routing_key;
  const redis::Script* script = nullptr;  // null: a plain command
};

void FinishScriptCommand(BlockCommand& cmd, const redis::Script& script, std::string numkeys) {
  cmd.script = &script;
  cmd.storage.push_back(std::move(numkeys));
  // `storage` must not reallocate from here on: views point into it.
  cmd.argv = {"EVALSHA", script.sha1(), cmd.storage.back()};
  cmd.argv.insert(cmd.argv.end(), cmd.keys.begin(), cmd.keys.end());
  cmd.argv.insert(cmd.argv.end(), cmd.args.begin(), cmd.args.end());
  cmd.routing_key = cmd.keys.front();
}

// Block calls in flight at once. A 256-row sample of a 1M-row dict in the
// default layout touches 62 blocks: all of them go out together. The bound
// keeps what a huge sparse selection has formatted and on the wire (about
// a command per run) from growing with the selection.
constexpr size_t kBlocksInFlight = 64;

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

// How a read fetches one key's runs within a block: each run by itself, or
// one range covering them all, the runs cut out of it here. Covering wins
// when the range is dense, as a step slice's rows are: one GETRANGE of a
// range costs Redis far less than a call per run (td[::3] of [10000, 64]
// f32: 5 covering ranges in 31 ms, 16,670 GETRANGEs in 210 ms, through
// redis-py). It also wins for a small leaf sampled at many rows (a replay
// buffer's reward: 256 random rows of a 40 KB block), where a call per row
// costs more than moving the whole block once: each call saved is worth
// kRunCostBytes of moved bytes (a GETRANGE inside MULTI costs Redis and
// tdstored about 1-2 us, a byte moved about 0.5 ns over its four copies).
//
// So a key's runs are covered if the range moves at most kCoverFactor times
// the runs' bytes, or if what it moves beyond that is at most kRunCostBytes
// per run and fits what is left of the read's allowance (CoverAllowance),
// which bounds the memory a read can hold beyond kCoverFactor times its
// selection.
constexpr int64_t kCoverFactor = 4;
constexpr int64_t kRunCostBytes = 2048;
constexpr int64_t kMaxCoverExtraBytes = 8 << 20;

struct Fetch {
  int key = 0;  // 1-based, as BlockWork::Run::key
  int64_t offset = 0;
  int64_t length = 0;
};

// The fetches of one block's runs; `fetch_of[i]` is the fetch run i is cut
// from. `*allowance` is what the read may still move beyond kCoverFactor
// times its selection; covering ranges take from it. Runs of a key that is
// not covered are fetched as they lie: runs that touch or overlap are one
// fetch (a record dict's row: every leaf's run of it, one GETRANGE).
std::vector<Fetch> PlanFetches(const BlockWork& work, std::vector<size_t>* fetch_of,
                               int64_t* allowance) {
  // The runs in key and offset order: each key's runs are then one stretch,
  // and the runs of a key that is not covered are fetched in this order.
  std::vector<size_t> order(work.runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const BlockWork::Run& x = work.runs[a];
    const BlockWork::Run& y = work.runs[b];
    return std::tie(x.key, x.offset_in_part) < std::tie(y.key, y.offset_in_part);
  });
  // Per key (numbered from 1): the span its runs reach, their bytes and the
  // GETRANGEs they need when not covered. Runs that touch or overlap are
  // one call: a record dict's row is a run per leaf but one GETRANGE, so
  // counting runs would price a 256-row sample of 3 leaves as 768 calls and
  // cover far more than the calls it saves are worth.
  struct KeyRuns {
    int64_t begin = 0, end = 0;  // the span, [begin, end)
    int64_t bytes = 0;
    int64_t calls = 0;
    size_t covering = SIZE_MAX;  // its covering fetch, if it has one
  };
  std::vector<KeyRuns> per_key(work.keys.size() + 1);
  for (size_t n = 0; n < order.size(); ++n) {
    const BlockWork::Run& r = work.runs[order[n]];
    KeyRuns& k = per_key[static_cast<size_t>(r.key)];
    const int64_t end = r.offset_in_part + r.length;
    if (n == 0 || work.runs[order[n - 1]].key != r.key) {  // the key's first run
      k.begin = r.offset_in_part;
      k.end = end;
      k.calls = 1;
    } else if (r.offset_in_part > k.end) {
      ++k.calls;
    }
    k.end = std::max(k.end, end);
    k.bytes += r.length;
  }
  std::vector<Fetch> fetches;
  for (size_t key = 1; key < per_key.size(); ++key) {
    KeyRuns& k = per_key[key];
    if (k.calls == 0) continue;  // no run of this key
    const int64_t beyond = (k.end - k.begin) - kCoverFactor * k.bytes;
    bool cover = beyond <= 0;
    if (!cover && k.calls > 1 && beyond <= kRunCostBytes * (k.calls - 1) && beyond <= *allowance) {
      *allowance -= beyond;
      cover = true;
    }
    if (cover) {
      k.covering = fetches.size();
      fetches.push_back({static_cast<int>(key), k.begin, k.end - k.begin});
    }
  }
  fetch_of->assign(work.runs.size(), 0);
  for (size_t i : order) {
    const BlockWork::Run& r = work.runs[i];
    const size_t covering = per_key[static_cast<size_t>(r.key)].covering;
    if (covering != SIZE_MAX) {
      (*fetch_of)[i] = covering;
      continue;
    }
    Fetch* last = fetches.empty() ? nullptr : &fetches.back();
    if (last != nullptr && last->key == r.key && r.offset_in_part <= last->offset + last->length) {
      last->length = std::max(last->length, r.offset_in_part + r.length - last->offset);
    } else {
      fetches.push_back({r.key, r.offset_in_part, r.length});
    }
    (*fetch_of)[i] = fetches.size() - 1;
  }
  return fetches;
}

// How write_runs.lua writes one block's runs. `order` is the order it
// applies them in. `ranges` are consecutive runs (in that order) of one key
// that touch, joined: a record dict's consecutive rows of every leaf are one
// range, one SETRANGE instead of one per leaf and row.
struct WritePlan {
  struct Range {
    int key = 0;  // 1-based, as BlockWork::Run::key
    int64_t offset = 0;
    int64_t length = 0;
    size_t first = 0, last = 0;  // its runs: order[first, last)
  };
  std::vector<size_t> order;  // into BlockWork::runs
  std::vector<Range> ranges;
  // No two runs overlap: `order` is key and offset order, and ranges may
  // be sent as strided groups (write_runs.lua writes groups first).
  bool disjoint = false;
};

WritePlan PlanWrite(const BlockWork& work) {
  WritePlan plan;
  // Key and offset order may only replace the index's order when no two
  // runs overlap: where an index selects a cell twice, write_runs.lua
  // applies the runs in index order, so that the last occurrence wins.
  plan.order.resize(work.runs.size());
  for (size_t i = 0; i < plan.order.size(); ++i) plan.order[i] = i;
  std::vector<size_t> sorted = plan.order;
  std::stable_sort(sorted.begin(), sorted.end(), [&](size_t a, size_t b) {
    const BlockWork::Run& x = work.runs[a];
    const BlockWork::Run& y = work.runs[b];
    return std::tie(x.key, x.offset_in_part) < std::tie(y.key, y.offset_in_part);
  });
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

// The fewest ranges sent as one strided group. A group saves Redis parsing
// three arguments per run, but its script cuts each run out with
// string.sub: measured (Redis CPU per call, 5 x 1,000 runs of 256 bytes),
// groups of 2-3 runs cost more than single runs, 8 about the same, 16 and
// more less (1,000: 12 -> 8.8 ms).
constexpr size_t kMinGroupRuns = 16;

// What guard_runs.lua appends to a key it moves aside.
constexpr char kHoldSuffix[] = ":tdstore-held";

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
  std::string& out = gathered.emplace_back();
  for (k = first; k < last; ++k) {
    const BlockWork::Run& r = work.runs[plan.order[k]];
    out.append(values[r.leaf].bytes.substr(static_cast<size_t>(r.result_offset),
                                           static_cast<size_t>(r.length)));
  }
  return out;
}

// A key's ranges written as one: its span's bytes as read, patched with
// the ranges (WriteCovered).
struct KeyCover {
  int64_t begin = 0;
  std::string_view bytes;  // empty: the key is written range by range
};

// A block's write as one transaction (WriteIndexed: standalone Redis):
// guard_runs.lua, a SETRANGE per range of `plan` in its order (so where an
// index selects a cell twice the last occurrence wins), release_runs.lua.
// `bytes_of(first, last)` are the bytes of plan.order[first, last). A key
// with a cover in `covers` (by key number - 1; empty: none) is one
// SETRANGE of its cover instead.
template <typename BytesOf>
void GuardedWrite(BlockCommand& cmd, const WritePlan& plan, BytesOf&& bytes_of,
                  const std::vector<KeyCover>& covers = {}) {
  std::vector<int64_t> reach(cmd.keys.size(), 0);
  for (const WritePlan::Range& r : plan.ranges) {
    int64_t& k = reach[static_cast<size_t>(r.key - 1)];
    k = std::max(k, r.offset + r.length);
  }
  // Per range its offset; per key its reach; numkeys for both scripts:
  // WriteIndexed reserved room for them, so `storage` does not reallocate
  // (views point into it).
  const Scripts& scripts = GetScripts();
  const std::string_view numkeys = cmd.storage.emplace_back(StrCat(cmd.keys.size()));
  std::vector<std::string_view> guard = {"EVAL", scripts.guard_runs.body(), numkeys};
  guard.insert(guard.end(), cmd.keys.begin(), cmd.keys.end());
  for (int64_t r : reach) guard.push_back(cmd.storage.emplace_back(StrCat(r)));
  guard.push_back(kHoldSuffix);
  cmd.transaction.push_back(std::move(guard));
  std::vector<bool> covered(covers.size(), false);
  for (const WritePlan::Range& r : plan.ranges) {
    const size_t k = static_cast<size_t>(r.key - 1);
    if (k < covers.size() && !covers[k].bytes.empty()) {
      if (!covered[k]) {
        covered[k] = true;
        cmd.transaction.push_back({"SETRANGE", cmd.keys[k],
                                   cmd.storage.emplace_back(StrCat(covers[k].begin)),
                                   covers[k].bytes});
      }
      continue;
    }
    cmd.transaction.push_back({"SETRANGE", cmd.keys[k],
                               cmd.storage.emplace_back(StrCat(r.offset)),
                               bytes_of(r.first, r.last)});
  }
  std::vector<std::string_view> release = {"EVAL", scripts.release_runs.body(), numkeys};
  release.insert(release.end(), cmd.keys.begin(), cmd.keys.end());
  release.push_back(kHoldSuffix);
  cmd.transaction.push_back(std::move(release));
  cmd.routing_key = cmd.keys.front();
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

// The fewest ranges of a key written as one span (WriteCovered): a few
// SETRANGEs cost Redis less than moving a span twice.
constexpr size_t kMinCoverRanges = 64;
// The most span bytes one write covers. Its spans go in one MULTI, which
// Redis holds whole until EXEC; beyond this a write goes range by range,
// a transaction per block, as before.
constexpr int64_t kMaxCoverBytes = 64 << 20;

// Standalone Redis: a key whose ranges are many and dense (a step slice's
// rows, td[::3] = v) is written as one range. Its span is read, patched here
// with the ranges and written back: 2 round trips in all, where a SETRANGE
// per range had Redis run 3,334 commands per leaf of td[::3] = v on
// [10000, 64] f32 (16,670 for five leaves: 11-17 ms of Redis CPU, which
// bounded the call; the seed reads and writes the span too).
//
// Why that loses no other write: the spans are read after WATCH on their
// keys, and the blocks' transactions (guard_runs.lua, the SETRANGEs,
// release_runs.lua, as GuardedWrite makes them) run in one MULTI/EXEC. If
// anyone wrote a watched key in between (another row of the span, a
// generation's delete), EXEC runs nothing and the caller writes range by
// range instead. The seed's read-modify-write has no such check: rows
// written by another client in between are overwritten with old bytes.
//
// Memory: a span moves at most kCoverFactor times its ranges' bytes, so
// the spans read fit the write's lease (indexed_access.cc, kWriteCopies).
//
// `plans` are the blocks' PlanWrite, in `blocks`' order. Returns true when
// written; false, having written nothing, when no key qualifies or a
// watched key changed. A stale probe or block is an error, as in
// RunBlocks.
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

}  // namespace

int64_t CoverAllowance(int64_t runs) {
  return std::min(kMaxCoverExtraBytes, kRunCostBytes * std::max<int64_t>(runs, 0));
}

int64_t IndexedReadMemory(int64_t selected, int64_t runs) {
  return (1 + kCoverFactor) * selected + CoverAllowance(runs);
}

absl::StatusOr<std::vector<std::string>> ReadIndexed(const DictStore& store,
                                                     const DictSchema& schema,
                                                     const plan::ResolvedIndex& index,
                                                     const std::vector<const Leaf*>& leaves,
                                                     bool probe,
                                                     std::optional<int64_t>* version_after) {
  std::vector<std::string> out(leaves.size());
  const int64_t cells = static_cast<int64_t>(index.cells.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    out[i].resize(static_cast<size_t>(cells * CellBytes(schema, leaves[i]->record)));
  }
  auto blocks = GroupByBlock(store, schema, index, leaves);
  if (!blocks.ok()) return blocks.status();
  // What IndexedReadMemory leased for covering ranges beyond kCoverFactor.
  int64_t allowance = CoverAllowance(cells * static_cast<int64_t>(leaves.size()));

  // Each block's fetches are read as one: a single GETRANGE, or GETRANGEs
  // in one MULTI/EXEC (all in the block's slot), so every leaf's rows of a
  // block are read as of one moment.
  std::vector<BlockCommand> commands;
  std::vector<const BlockWork*> works;
  std::vector<std::vector<Fetch>> fetches;
  std::vector<std::vector<size_t>> fetch_of;
  commands.reserve(blocks->size());
  for (const auto& [block, work] : *blocks) {
    BlockCommand& cmd = commands.emplace_back();
    works.push_back(&work);
    fetch_of.emplace_back();
    fetches.push_back(PlanFetches(work, &fetch_of.back(), &allowance));
    cmd.storage.reserve(work.keys.size() + 2 * fetches.back().size());
    for (const std::string& k : work.keys) cmd.storage.push_back(k);
    // `storage` does not reallocate from here on: views point into it.
    for (const Fetch& f : fetches.back()) {
      const std::string_view key = cmd.storage[static_cast<size_t>(f.key - 1)];
      const std::string_view start = cmd.storage.emplace_back(StrCat(f.offset));
      const std::string_view end = cmd.storage.emplace_back(StrCat(f.offset + f.length - 1));
      cmd.transaction.push_back({"GETRANGE", key, start, end});
    }
    cmd.routing_key = cmd.storage[0];
    if (cmd.transaction.size() == 1) cmd.argv = std::move(cmd.transaction[0]), cmd.transaction.clear();
  }

  auto status = RunBlocks(store, schema, probe, commands, false, [&](size_t i, const redis::Reply& reply) {
    const std::vector<Fetch>& f = fetches[i];
    auto fetched = [&](size_t n) {
      return commands[i].transaction.empty() ? reply.str() : reply[n].str();
    };
    for (size_t n = 0; n < f.size(); ++n) {
      if (static_cast<int64_t>(fetched(n).size()) != f[n].length) {
        return StaleBlock(works[i]->keys[static_cast<size_t>(f[n].key - 1)]);
      }
    }
    const std::vector<BlockWork::Run>& runs = works[i]->runs;
    for (size_t r = 0; r < runs.size(); ++r) {
      const Fetch& from = f[fetch_of[i][r]];
      std::memcpy(out[runs[r].leaf].data() + runs[r].result_offset,
                  fetched(fetch_of[i][r]).data() + (runs[r].offset_in_part - from.offset),
                  static_cast<size_t>(runs[r].length));
    }
    return absl::OkStatus();
  }, version_after);
  if (!status.ok()) return status;
  return out;
}

absl::Status WriteIndexed(const DictStore& store, const DictSchema& schema,
                          const plan::ResolvedIndex& index, const std::vector<IndexedValue>& values,
                          bool probe, std::optional<int64_t>* version_after) {
  std::vector<const Leaf*> leaves;
  for (const IndexedValue& v : values) leaves.push_back(v.leaf);
  auto blocks = GroupByBlock(store, schema, index, leaves);
  if (!blocks.ok()) return blocks.status();

  // A block's write must refuse, writing nothing, when one of its keys is
  // gone or short (a generation replaced meanwhile): SETRANGE alone would
  // create the key. On standalone Redis the bytes go as plain SETRANGEs in
  // a MULTI between guard_runs.lua and release_runs.lua, which keep that
  // rule without a byte passing through Lua (guard_runs.lua says why). A
  // cluster pipeline re-issues a redirected command outside its MULTI, so
  // there every block is one write_runs.lua call, even with a single run.
  const bool guarded = store.redis().pipelines_in_order();
  std::vector<WritePlan> plans;
  plans.reserve(blocks->size());
  for (const auto& [block, work] : *blocks) plans.push_back(PlanWrite(work));
  if (guarded) {
    absl::StatusOr<bool> covered =
        WriteCovered(store, schema, probe, *blocks, plans, values, version_after);
    if (!covered.ok() || *covered) return covered.status();
  }
  std::vector<BlockCommand> commands;
  commands.reserve(blocks->size());
  for (const auto& [block, work] : *blocks) {
    BlockCommand& cmd = commands.emplace_back();
    const WritePlan& plan = plans[commands.size() - 1];
    // Per range at most 4 numbers (a group's); the keys, the group count
    // and numkeys. `storage` must not reallocate: views point into it.
    // GuardedWrite's numbers fit too: a key's reach, an offset per range.
    cmd.storage.reserve(2 * work.keys.size() + 4 * plan.ranges.size() + 2);
    for (const std::string& k : work.keys) cmd.keys.push_back(cmd.storage.emplace_back(k));
    auto bytes_of = [&](size_t first, size_t last) {
      return RangeBytes(work, plan, values, first, last, cmd.gathered);
    };
    if (guarded) {
      GuardedWrite(cmd, plan, bytes_of);
      continue;
    }
    // write_runs.lua's arguments: the group count, the groups, then the
    // single ranges. Ranges of one key and length at a fixed stride, at
    // least kMinGroupRuns of them, form a group: a step slice's rows of a
    // leaf are one group, one argument of bytes instead of three per row.
    std::vector<std::string_view> groups;
    std::vector<std::string_view> singles;
    int64_t group_count = 0;
    for (size_t i = 0; i < plan.ranges.size();) {
      const WritePlan::Range& head = plan.ranges[i];
      size_t j = i + 1;
      if (plan.disjoint && j < plan.ranges.size()) {
        const int64_t stride = plan.ranges[j].offset - head.offset;
        while (j < plan.ranges.size() && plan.ranges[j].key == head.key &&
               plan.ranges[j].length == head.length &&
               plan.ranges[j].offset - plan.ranges[j - 1].offset == stride) {
          ++j;
        }
        if (j - i >= kMinGroupRuns) {
          groups.push_back(cmd.storage.emplace_back(StrCat(head.key)));
          groups.push_back(cmd.storage.emplace_back(StrCat(head.offset)));
          groups.push_back(cmd.storage.emplace_back(StrCat(stride)));
          groups.push_back(cmd.storage.emplace_back(StrCat(head.length)));
          groups.push_back(bytes_of(head.first, plan.ranges[j - 1].last));
          ++group_count;
          i = j;
          continue;
        }
        j = i + 1;
      }
      singles.push_back(cmd.storage.emplace_back(StrCat(head.key)));
      singles.push_back(cmd.storage.emplace_back(StrCat(head.offset)));
      singles.push_back(bytes_of(head.first, head.last));
      i = j;
    }
    cmd.args.push_back(cmd.storage.emplace_back(StrCat(group_count)));
    cmd.args.insert(cmd.args.end(), groups.begin(), groups.end());
    cmd.args.insert(cmd.args.end(), singles.begin(), singles.end());
    FinishScriptCommand(cmd, GetScripts().write_runs, StrCat(work.keys.size()));
  }
  return RunBlocks(store, schema, probe, commands, true, [&](size_t i, const redis::Reply& reply) {
    if (commands[i].transaction.empty()) return absl::OkStatus();  // write_runs.lua's 1
    return GuardedWriteStatus(reply);
  }, version_after);
}

}  // namespace tdstore::store
