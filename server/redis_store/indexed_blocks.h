// The pieces of an indexed call that indexed_io.cc (reads, and writes
// range by range) and indexed_dense_write.cc (dense writes as spans)
// share: its runs grouped by storage block, the block commands and the
// pipeline that runs them, and a block write's plan and transaction.
// Internal to the Redis store: indexed_io.h is the door.
//
// Thread-safe as far as the store is; one call per thread.
#ifndef TDSTORE_SERVER_REDIS_STORE_INDEXED_BLOCKS_H_
#define TDSTORE_SERVER_REDIS_STORE_INDEXED_BLOCKS_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/str_cat.h"
#include "server/redis/reply.h"
#include "server/redis/script.h"
#include "server/redis_store/dict_store.h"
#include "server/redis_store/indexed_io.h"
#include "server/redis_store/lua_scripts.h"
#include "server/store/indexed_plan.h"
#include "server/store/schema.h"

namespace tdstore::store {

// A range fetched or written as one moves at most this many times the
// bytes it selects: a read's covering GETRANGE (indexed_io.cc), a dense
// write's span (indexed_dense_write.cc).
inline constexpr int64_t kCoverFactor = 4;

// A block key that is gone: its leaf was replaced or deleted meanwhile.
absl::Status StaleBlock(std::string_view key);

// Everything one storage block contributes to a call: the part keys it
// touches (numbered from 1, as the scripts want) and the runs, grouped by
// leaf, each leaf's runs in result order (or in GroupByBlock's `order`).
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

// The runs of `leaves` at `index`, by block. With `order` (plan::AscendingCells,
// for a read), each leaf's runs come in that order rather than result order.
absl::StatusOr<std::map<int64_t, BlockWork>> GroupByBlock(
    const DictStore& store, const DictSchema& schema, const plan::ResolvedIndex& index,
    const std::vector<const Leaf*>& leaves, const std::vector<int64_t>* order = nullptr);

// The indices of `runs` in (key, offset) order, runs that tie in index
// order (a stable sort): the order a read fetches a block's runs in, and a
// write applies disjoint ones in.
std::vector<size_t> KeyOffsetOrder(const std::vector<BlockWork::Run>& runs);

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

void FinishScriptCommand(BlockCommand& cmd, const redis::Script& script, std::string numkeys);

// Sends the probe (if asked) and the blocks' commands on one pipeline,
// kBlocksInFlight blocks ahead, checks the probe's reply and hands each
// block's reply to `on_reply` in block order. A NOSCRIPT reply (Redis
// restarted or flushed its scripts) is redone through RedisClient::Eval,
// which loads the script and retries. With `version_after`, reads the
// schema version behind the last block (indexed_io.h).
absl::Status RunBlocks(const DictStore& store, const DictSchema& schema, bool probe,
                       std::vector<BlockCommand>& commands, bool writes,
                       const std::function<absl::Status(size_t, const redis::Reply&)>& on_reply,
                       std::optional<int64_t>* version_after);

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

WritePlan PlanWrite(const BlockWork& work);

// The bytes of the runs plan.order[first, last), back to back: viewed in
// place where they lie so in one leaf's value (a step slice's rows of a
// leaf, a contiguous slice), else gathered into a new string of `gathered`
// (a deque: the views of earlier ones stay valid). A view is copied once,
// by hiredis into the command or by the connection's writev to the socket.
std::string_view RangeBytes(const BlockWork& work, const WritePlan& plan,
                            const std::vector<IndexedValue>& values, size_t first, size_t last,
                            std::deque<std::string>& gathered);

// What guard_runs.lua appends to a key it moves aside.
inline constexpr char kHoldSuffix[] = ":tdstore-held";

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
absl::Status GuardedWriteStatus(const redis::ReplyView& exec, size_t from, size_t count);
absl::Status GuardedWriteStatus(const redis::Reply& exec);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_INDEXED_BLOCKS_H_
