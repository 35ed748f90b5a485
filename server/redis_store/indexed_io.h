// Indexed reads and writes: td[index] and td[index] = values, moving only
// the selected bytes.
//
// The index is resolved once (common/index.h) into the selected batch cells;
// each leaf's cells become byte runs split at part boundaries; the runs of
// *all* leaves are grouped by storage block, and each block is served by one
// call: for a read, a plain GETRANGE when the block needs one range, else
// its GETRANGEs in one MULTI/EXEC; for a write on standalone Redis, a
// SETRANGE per range in one MULTI/EXEC between guard_runs.lua and
// release_runs.lua (no byte through Lua), on a cluster write_runs.lua with
// every run of every leaf in that block (runs at a fixed stride, as a step
// slice's rows, as one group: one argument of bytes, sent in place).
// So all selected rows of all leaves within one block are read or written
// atomically together; rows in different blocks are not (a reader may see
// block 1 before and block 2 after a concurrent write). Every block call of
// a request goes out on one pipeline at once: their commands and replies
// are bounded by the selection (max_indexed_bytes), which the caller has
// leased already, so there is nothing to gain from holding some back.
//
// With `probe`, the pipeline starts with the schema probe (schema_cache.h);
// a schema it finds stale fails the call with IsStale() before any result
// is used. For a write the block calls behind the probe may have run:
// the caller redoes the write from a fresh schema (see schema_cache.h).
//
// Writes never create keys: guard_runs.lua (or write_runs.lua) checks every
// key exists and is long enough, and answers "stale" instead, the block
// unwritten. A stale block (the leaf was
// replaced or deleted since the schema was read) fails the call with
// IsStale(status); callers refresh the schema and retry once.
//
// With `version_after`, the dict's schema version is read on the same
// pipeline, sent behind the last block's command: Redis runs one
// connection's commands in order, so it is read after every block took
// effect, without a round trip of its own (store_values.h, VersionAfter).
// Only a pipeline whose commands run in order (standalone Redis) can; on a
// cluster, or when a block had to be redone off the pipeline (NOSCRIPT),
// `*version_after` stays unset and the caller reads the version afterwards.
//
// Thread-safe as far as the store is; one call per thread.
#ifndef TDSTORE_SERVER_REDIS_STORE_INDEXED_IO_H_
#define TDSTORE_SERVER_REDIS_STORE_INDEXED_IO_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/index.h"
#include "server/redis_store/dict_store.h"
#include "server/store/indexed_plan.h"
#include "server/store/schema.h"
#include "server/redis_store/schema_cache.h"

namespace tdstore::store {

// Reads the selected cells of each leaf; returns one C-order buffer per leaf
// (same order as `leaves`), each IndexedShape() in size.
absl::StatusOr<std::vector<std::string>> ReadIndexed(const DictStore& store,
                                                     const DictSchema& schema,
                                                     const plan::ResolvedIndex& index,
                                                     const std::vector<const Leaf*>& leaves,
                                                     bool probe = false,
                                                     std::optional<int64_t>* version_after = nullptr);

// What a read of `selected` bytes in `runs` runs (cells x leaves) may hold
// at once: the result, and the fetched ranges it is cut from. Those move up
// to 4x the selected bytes when the runs are dense (a step slice's rows:
// one covering GETRANGE beats a call per run), plus CoverAllowance(runs)
// where one range replaces many calls for a small leaf (a sample's rows of
// a reward leaf).
int64_t IndexedReadMemory(int64_t selected, int64_t runs);
// At most 2 KiB per run, and 8 MiB per read.
int64_t CoverAllowance(int64_t runs);

// One leaf's new values: C-order bytes at exactly IndexedShape().
struct IndexedValue {
  const Leaf* leaf = nullptr;
  std::string_view bytes;
};

// Writes the values into the selected cells. Where the index selects a cell
// more than once, the last occurrence in result order wins (torch leaves
// this undefined).
absl::Status WriteIndexed(const DictStore& store, const DictSchema& schema,
                          const plan::ResolvedIndex& index, const std::vector<IndexedValue>& values,
                          bool probe = false, std::optional<int64_t>* version_after = nullptr);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_INDEXED_IO_H_
