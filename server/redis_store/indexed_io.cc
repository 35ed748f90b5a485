#include "server/redis_store/indexed_io.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <tuple>
#include <utility>

#include "common/str_cat.h"
#include "server/redis_store/indexed_blocks.h"
#include "server/redis_store/indexed_dense_write.h"
#include "server/redis_store/lua_scripts.h"
#include "server/redis_store/redis_errors.h"

namespace tdstore::store {

namespace {

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
// selection. The same price joins runs of a key that is not covered: one
// less than kRunCostBytes past the fetch before it is read with it.
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
// not covered are fetched as they lie, except that runs that touch or
// overlap are one fetch (a record dict's row: every leaf's run of it, one
// GETRANGE), and so are runs less than kRunCostBytes apart while the
// allowance lasts.
std::vector<Fetch> PlanFetches(const BlockWork& work, std::vector<size_t>* fetch_of,
                               int64_t* allowance) {
  // The runs in key and offset order: each key's runs are then one stretch,
  // and the runs of a key that is not covered are fetched in this order.
  const std::vector<size_t> order = KeyOffsetOrder(work.runs);
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
    // A run less than kRunCostBytes past the fetch before it (of its key)
    // joins that fetch, the gap read and dropped: a call saved is worth
    // the bytes (a 256-row sample of 5,000 rows of 276 bytes: 166 fetches
    // instead of 237). The gap comes out of the allowance.
    Fetch* last = fetches.empty() ? nullptr : &fetches.back();
    const int64_t gap = last == nullptr ? 0 : r.offset_in_part - (last->offset + last->length);
    const bool joins = last != nullptr && last->key == r.key &&
                       (gap <= 0 || (gap <= kRunCostBytes && gap <= *allowance));
    if (joins) {
      if (gap > 0) *allowance -= gap;
      last->length = std::max(last->length, r.offset_in_part + r.length - last->offset);
    } else {
      fetches.push_back({r.key, r.offset_in_part, r.length});
    }
    (*fetch_of)[i] = fetches.size() - 1;
  }
  return fetches;
}

// The fewest ranges sent as one strided group. A group saves Redis parsing
// three arguments per run, but its script cuts each run out with
// string.sub: measured (Redis CPU per call, 5 x 1,000 runs of 256 bytes),
// groups of 2-3 runs cost more than single runs, 8 about the same, 16 and
// more less (1,000: 12 -> 8.8 ms).
constexpr size_t kMinGroupRuns = 16;

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
  // Each leaf's runs in leaf order: PlanFetches then merges a stretch per
  // leaf instead of sorting all their runs (a 256-row sample of a record
  // dict of three leaves: 256 cells sorted once, not 768 runs). The order
  // (8 bytes a cell) is held only while GroupByBlock runs.
  auto blocks = [&] {
    const std::vector<int64_t> ascending = plan::AscendingCells(index);
    return GroupByBlock(store, schema, index, leaves, ascending.empty() ? nullptr : &ascending);
  }();
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
