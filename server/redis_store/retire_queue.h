// RetireQueue: drops the generations a commit retired after the write has
// been answered, on a worker thread of its own.
//
//   RetireQueue queue([&](const DictMeta& m, const LeafRecord& r) {
//     return dicts.DropRetired(m, r);
//   });
//   if (!queue.Push(meta, old_record)) dicts.DropRetired(meta, old_record);
//
// Why: deleting a replaced generation costs a whole-leaf write three Redis
// round trips (its blocks' UNLINKs, the HDEL of its parked entry, the
// release of its bytes), which the writer does not need to wait for: the
// commit script has already parked the generation in the dict's pending
// hash as expired (commit_leaves.lua, lib/park.lua), so from that moment on
// no reader can reach it and someone will delete it.
//
// Exactly once, and no leak: the drop (DictStore::DropRetired) deletes the
// blocks, then removes the parked entry, and returns the bytes only if its
// HDEL removed the entry. The sweeper claims the same expired entries with
// a compare-and-set (claim_pending.lua), so whichever of the two removes
// the entry returns the bytes, once. If tdstored dies with generations
// queued, their entries stay parked and the next sweep of any daemon on the
// Redis drops them (sweeper.h). A drop that fails is logged and left to the
// sweeper too. A daemon killed between a drop's HDEL and its release
// leaves the counter high by that generation (two slots, so not one atomic
// step: refusing early, never late, as for every removal,
// docs/storage-layout.md, *Quota accounting*); the worker drops one
// generation at a time, so a crash costs at most one.
//
// Bounded: at most `max_queued` generations wait (each holds Redis memory
// until dropped). Push refuses beyond it and the caller drops the
// generation itself, as every commit did before this queue existed.
//
// Thread-safe. The destructor (or Stop) drops what is still queued, then
// joins the worker; each drop is bounded by the Redis I/O timeout.
#ifndef TDSTORE_SERVER_REDIS_STORE_RETIRE_QUEUE_H_
#define TDSTORE_SERVER_REDIS_STORE_RETIRE_QUEUE_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "server/store/leaf_record.h"
#include "server/store/schema.h"

namespace tdstore::store {

class RetireQueue {
 public:
  using Drop = std::function<absl::Status(const DictMeta& meta, const LeafRecord& record)>;
  static constexpr size_t kDefaultMaxQueued = 256;

  explicit RetireQueue(Drop drop, size_t max_queued = kDefaultMaxQueued);
  ~RetireQueue();
  RetireQueue(const RetireQueue&) = delete;
  RetireQueue& operator=(const RetireQueue&) = delete;

  // Queues the drop of `record`'s generation of the dict `meta` describes.
  // False when the queue is full or stopped: the caller drops it itself.
  bool Push(const DictMeta& meta, const LeafRecord& record);
  // Drops everything queued, then ends the worker. Push refuses from now on.
  void Stop();

 private:
  struct Item {
    DictMeta meta;
    LeafRecord record;
  };
  void Work();

  const Drop drop_;
  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable changed_;  // queue_ or stop_
  std::deque<Item> queue_;
  bool stop_ = false;
  std::thread worker_;  // last: started once the members above exist
};

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_RETIRE_QUEUE_H_
