// Dicts in Redis: the catalog, each dict's meta record and leaf registry,
// and deleting generations' blocks. The data path lives next door:
// leaf_writer.h (whole-leaf writes) and leaf_reader.h (whole-leaf reads).
//
// Key layout: common/key_schema.h and docs/storage-layout.md.
//
// Errors: NOT_FOUND (no such dict or leaf), ALREADY_EXISTS, INVALID_ARGUMENT
// (bad name, shape, layout), UNAVAILABLE (Redis unreachable; retryable),
// DATA_LOSS (Redis holds records tdstore did not write), INTERNAL (an
// unexpected Redis error). A call that fails with INVALID_ARGUMENT,
// NOT_FOUND or ALREADY_EXISTS has changed nothing.
//
// Thread-safe: one DictStore serves every RPC thread.
#ifndef TDSTORE_SERVER_STORE_DICT_STORE_H_
#define TDSTORE_SERVER_STORE_DICT_STORE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/key_schema.h"
#include "common/path.h"
#include "common/shape.h"
#include "server/redis/redis_client.h"
#include "server/store/schema.h"
#include "server/store/store_options.h"

namespace tdstore::store {

// Catalog fields starting with this record deletions in progress (dict
// names cannot start with '/').
inline constexpr char kDeletingPrefix[] = "/deleting/";

class DictStore {
 public:
  // `redis` must outlive the store.
  DictStore(redis::RedisClient* redis, StoreOptions options);

  const StoreOptions& options() const { return options_; }
  const KeySchema& keys() const { return keys_; }
  redis::RedisClient& redis() const { return *redis_; }

  // Creates an empty dict. rows_per_block / part_bytes of 0 take the
  // defaults. ALREADY_EXISTS if the name is taken.
  absl::StatusOr<DictSchema> CreateDict(std::string_view name, const Shape& batch_shape,
                                        int64_t rows_per_block, int64_t part_bytes);

  // The current schema of a dict (two round trips: catalog, then meta and
  // leaves pipelined). NOT_FOUND if there is no such dict.
  absl::StatusOr<DictSchema> LoadDict(std::string_view name) const;

  // Every dict name, sorted.
  absl::StatusOr<std::vector<std::string>> ListDicts();

  // Removes the dict from the catalog, then every key it owns: meta, leaf
  // registry, pending writes and all data blocks. The deletion is recorded
  // in the catalog first, so one cut short (Redis failure, daemon killed) is
  // finished by the sweeper (FinishDelete). A catalog entry whose meta is
  // missing is simply removed.
  absl::Status DeleteDict(std::string_view name);

  // Completes the deletion of dict `id` recorded by DeleteDict: marks its
  // meta deleting (writers stop), deletes every block of every committed and
  // pending generation, then the registry, the meta and the record.
  // Idempotent.
  absl::Status FinishDelete(const std::string& id);

  // Ids whose deletion was recorded but not finished (for the sweeper).
  absl::StatusOr<std::vector<std::string>> ListDeletingIds();

  // Renames atomically in the catalog. NOT_FOUND / ALREADY_EXISTS.
  absl::StatusOr<DictSchema> RenameDict(std::string_view name, std::string_view new_name);

  // Removes leaves (each path a leaf or a nested prefix) and their blocks.
  // NOT_FOUND naming the first path that matches nothing; then nothing is
  // removed. Returns the removed leaves' paths, sorted.
  absl::StatusOr<std::vector<LeafPath>> DeleteLeaves(std::string_view name,
                                                     const std::vector<LeafPath>& paths);

  // Deletes every key of one generation of one leaf (pipelined UNLINKs).
  // Deleting keys that are already gone is fine.
  absl::Status DeleteGeneration(const DictSchema& schema, const LeafRecord& record);
  absl::Status DeleteGeneration(const DictMeta& meta, const LeafRecord& record);

  // For a generation the scripts parked in the pending hash as garbage (a
  // replaced or deleted leaf): deletes its blocks, then its pending entry.
  absl::Status DropRetired(const DictMeta& meta, const LeafRecord& record);

  // The ids of every dict in the catalog (for the sweeper).
  absl::StatusOr<std::vector<std::string>> ListDictIds();
  // Schema by id; NOT_FOUND if its meta is gone.
  absl::StatusOr<DictSchema> LoadDictById(const std::string& id) const;

 private:
  absl::StatusOr<std::string> LookupId(std::string_view name) const;

  redis::RedisClient* const redis_;
  const StoreOptions options_;
  const KeySchema keys_;
};

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_STORE_DICT_STORE_H_
