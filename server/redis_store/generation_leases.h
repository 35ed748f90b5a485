// Generations a daemon takes from a dict's counter ahead of its writes, so
// that a write can name its parts' keys before it runs: WriteTxn's at-once
// path (leaf_writer.h) sends the parts and their commit in one round trip.
//
//   auto first = leases.Take(meta, 2);  // generations *first, *first + 1
//
// Why in ranges: the counter (the meta's next_gen) lives in Redis, and a
// round trip for each write's generation would cost what the at-once path
// saves. lease_generations.lua takes kLeasedPerTrip at a time. The counter
// only grows (begin_write.lua takes from it too), so a leased generation is
// this daemon's alone: used in any order or never (a gap) is safe, and a
// range lost with the daemon costs nothing.
//
// Thread-safe. Memory: one range per dict written, all dropped past
// kMaxDicts (each dict's next write then leases anew).
#ifndef TDSTORE_SERVER_REDIS_STORE_GENERATION_LEASES_H_
#define TDSTORE_SERVER_REDIS_STORE_GENERATION_LEASES_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "server/redis/redis_client.h"
#include "server/redis_store/key_schema.h"
#include "server/store/schema.h"

namespace tdstore::store {

class GenerationLeases {
 public:
  static constexpr int64_t kLeasedPerTrip = 64;
  static constexpr size_t kMaxDicts = 4096;

  // `redis` and `keys` must outlive this.
  GenerationLeases(redis::RedisClient* redis, const KeySchema* keys)
      : redis_(redis), keys_(keys) {}

  // The first of `count` (1 .. kLeasedPerTrip) consecutive generations of
  // dict `meta`, from the range held, else from a new one (one round trip).
  // NOT_FOUND if the dict is deleted (its meta is never recreated).
  absl::StatusOr<int64_t> Take(const DictMeta& meta, int64_t count);

 private:
  struct Range {
    int64_t next = 0;  // the next generation to hand out
    int64_t end = 0;   // one past the last
  };
  redis::RedisClient* const redis_;
  const KeySchema* const keys_;
  std::mutex mu_;
  std::unordered_map<std::string, Range> ranges_;  // by dict id; guarded by mu_
};

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_GENERATION_LEASES_H_
