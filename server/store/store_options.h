// Tunables of the store layer. Defaults are what tdstored uses unless a flag
// says otherwise, and written only here: tdstored --help reads them back
// (server/daemon_config.cc).
#ifndef TDSTORE_SERVER_STORE_STORE_OPTIONS_H_
#define TDSTORE_SERVER_STORE_STORE_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace tdstore::store {

struct StoreOptions {
  // Prefix of every Redis key (server/redis_store/key_schema.h).
  std::string ns = "td";
  // Block layout of dicts created without explicit options.
  int64_t default_rows_per_block = 16384;
  int64_t default_part_bytes = 64ll << 20;
  // Largest GETRANGE/SETRANGE moved in one command. About 1 MiB is where
  // Redis' throughput flattens out on our machines (DESIGN.md section 4).
  int64_t window_bytes = 1 << 20;
  // Commands in flight per pipeline: enough to hide a round trip, small
  // enough that a stream holds at most depth x window bytes.
  int pipeline_depth = 8;
  // The largest whole-leaf write sent in one round trip, on a standalone
  // Redis without write_replicas (WriteTxn's at-once path,
  // server/redis_store/leaf_writer.h); 0 sends every write stepwise. No
  // flag sets it: the tests choose a path with it.
  int64_t at_once_max_bytes = int64_t{64} << 20;
  // Most bytes one indexed read or write may select (summed over leaves):
  // indexed calls gather their result in memory, so this bounds it.
  int64_t max_indexed_bytes = 256ll << 20;
  // Dicts the namespace may hold: CreateDict beyond it is RESOURCE_EXHAUSTED.
  // Checked before creating, so concurrent creates may overshoot by the
  // number racing (a quota against runaway scripts, not an exact count).
  int64_t max_dicts = 100000;
  // Quotas on stored bytes (0: none). A dict may hold at most
  // dict_quota_bytes of leaves; the namespace at most namespace_quota_bytes
  // of generations (committed, being written, or replaced and not yet
  // deleted). Checked before anything is written (dict_store.h, *Quotas*).
  int64_t dict_quota_bytes = 0;
  int64_t namespace_quota_bytes = 0;
  // Bytes tdstored may buffer for all calls together (memory_budget.h), and
  // how long a call waits for its share before RESOURCE_EXHAUSTED.
  int64_t memory_budget_bytes = int64_t{2} << 30;
  std::chrono::milliseconds memory_budget_wait{10000};
  // Durability: with write_replicas > 0 every write (data and commit) waits
  // for that many replicas to acknowledge it (Redis WAIT) and fails
  // UNAVAILABLE if they do not within write_replicas_timeout.
  int write_replicas = 0;
  std::chrono::milliseconds write_replicas_timeout{1000};
  // A write not committed within this time after its last progress is
  // considered abandoned; the sweeper deletes its blocks.
  std::chrono::milliseconds pending_timeout{std::chrono::minutes(5)};
};

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_STORE_STORE_OPTIONS_H_
