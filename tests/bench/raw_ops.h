// The baseline: the ideal Redis work for each benchmark job, done by a plain
// hiredis client on the keys tdstore itself lays out
// (docs/storage-layout.md): the same blocks, parts and byte runs, computed
// with the same pure code (common/block_layout.h, server/redis_store/key_schema.h,
// common/index.h), minus everything a service adds (schema round trips,
// generations, commits, validation, gRPC).
//
//   bulk read/write   pipelined GETRANGE / SETRANGE windows of 1 MiB, 8 in
//                     flight (as tdstored does).
//   indexed read      per block touched: one GETRANGE (a single run) or one
//                     EVALSHA of a minimal GETRANGE script; every block's
//                     command in flight at once.
//   indexed write     per block touched: one SETRANGE (a single run) or one
//                     EVALSHA of a minimal SETRANGE script (no existence
//                     check); every block in flight at once.
//
// The layout (dict id, generations, block geometry) is read from Redis once,
// untimed, by LoadRawDict.
#ifndef TDSTORE_TESTS_BENCH_RAW_OPS_H_
#define TDSTORE_TESTS_BENCH_RAW_OPS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/block_layout.h"
#include "common/index.h"
#include "server/redis_store/key_schema.h"
#include "server/redis_store/leaf_record_text.h"
#include "tests/bench/raw_client.h"

namespace tdstore::bench {

struct RawLeaf {
  std::string name;  // encoded path
  LeafRecord record;
  BlockLayout layout;
  int64_t cell_bytes = 0;  // bytes per batch cell
};

struct RawDict {
  KeySchema keys{"td"};
  std::string name;
  std::string id;
  Shape batch_shape;
  std::vector<RawLeaf> leaves;

  // nullptr if absent.
  const RawLeaf* leaf(const std::string& name) const;
  // The key of part `part` of block `block` of `leaf` at `generation`
  // (-1: the leaf's current one).
  std::string PartKey(const RawLeaf& leaf, int64_t block, int64_t part,
                      int64_t generation = -1) const;
};

// Reads dict `name`'s layout as tdstored wrote it (catalog, meta, leaves).
absl::StatusOr<RawDict> LoadRawDict(RawRedis& redis, const std::string& ns,
                                    const std::string& name);

// Fresh, uninitialized memory (like a newly allocated result tensor).
using Buffer = std::unique_ptr<char[]>;
inline Buffer NewBuffer(int64_t bytes) {
  return Buffer(new char[static_cast<size_t>(bytes > 0 ? bytes : 1)]);
}

class RawOps {
 public:
  // Loads the scripts on every master: the baseline's two, and tdstored's
  // write_runs.lua from the source tree for the variants.
  static absl::StatusOr<std::unique_ptr<RawOps>> Make(RawRedis& redis);

  // How indexed reads and writes are done. The default is the ideal; the
  // other settings step towards the exact Redis work tdstored does, so a
  // scenario can attribute the gap between raw and tdstore:
  struct Variant {
    // tdstored's write_runs.lua (per-run checks, Lua number conversions)
    // instead of the minimal script; writes always go through the script,
    // as tdstored's do. Reads are the same in both variants.
    bool tdstore_scripts = false;
    // Block commands in flight at once; 0: all of them.
    int depth = 0;
    // Before the data, the schema reads tdstored does on every call: HGET
    // of the catalog, then HGETALL meta + HGETALL leaves pipelined.
    bool schema_reads = false;
  };
  Variant variant;

  // Whole leaves into `out[i]` (each leaves[i]->layout.total_bytes() long):
  // one pipeline of 1 MiB GETRANGE windows over all of them, 8 in flight.
  absl::Status GetLeaves(const RawDict& dict, const std::vector<const RawLeaf*>& leaves,
                         const std::vector<char*>& out);
  // A whole leaf from `data` into the keys of `generation`: 1 MiB SETRANGE
  // windows, 8 in flight. With `presize`, each part is first created at its
  // full size (one SETRANGE of its last byte, pipelined ahead of the
  // windows), so Redis allocates each value once instead of growing it
  // window by window.
  absl::Status PutLeaf(const RawDict& dict, const RawLeaf& leaf, int64_t generation,
                       const char* data, bool presize = true);
  // Deletes the keys PutLeaf wrote for `generation` (cleanup, untimed).
  absl::Status DeleteGeneration(const RawDict& dict, const RawLeaf& leaf, int64_t generation);

  // td[index] of `leaves` into out[i] (numel(result) * cell_bytes each).
  absl::Status ReadIndexed(const RawDict& dict, const plan::IndexSpec& index,
                           const std::vector<const RawLeaf*>& leaves,
                           const std::vector<char*>& out);
  // td[index] = values[i] (C-order bytes at the indexed shape) for `leaves`.
  absl::Status WriteIndexed(const RawDict& dict, const plan::IndexSpec& index,
                            const std::vector<const RawLeaf*>& leaves,
                            const std::vector<const char*>& values);

  // The dict's leaf names: one HKEYS.
  absl::StatusOr<int64_t> CountKeys(const RawDict& dict);

  RawRedis& redis() { return redis_; }

  static constexpr int64_t kWindowBytes = 1 << 20;
  static constexpr int kDepth = 8;

 private:
  explicit RawOps(RawRedis& redis) : redis_(redis) {}
  absl::Status SchemaReads(const RawDict& dict);

  RawRedis& redis_;
  std::string read_sha_, write_sha_;
  std::string td_write_sha_;
};

}  // namespace tdstore::bench

#endif  // TDSTORE_TESTS_BENCH_RAW_OPS_H_
