// WriteBehind: runs a whole-leaf put's store steps on a worker thread, in
// order, so that the handler thread receives and parses the next chunk from
// gRPC while the one before goes to Redis.
//
//   WriteBehind behind(4 << 20);
//   behind.Push([&txn, bytes = std::move(data)] { return txn->Append(bytes); },
//               size);                       // blocks while 4 MiB are queued
//   ...
//   if (auto s = behind.Wait(); !s.ok()) ...  // every step has run
//   txn->Commit();                            // back on the handler thread
//
// Why: the handler used to do both in turn. On a 2 GiB put (tdstore-bench
// --scenario b) it spent 40% of the call in Read() and 57% in
// WriteTxn::Append, and each side sat idle while the other worked.
//
// Memory: steps queued but not yet run hold at most `max_queued_bytes` of
// data (counted as their Push said), plus the one running; Push waits
// beyond that, and gRPC's flow control then holds the client back.
//
// Errors: the first step that fails stops the worker. That Push or Wait, and
// every later one, returns its status; steps queued after it are dropped
// without running. The destructor drops what is queued and waits for the
// running step (which the store bounds by its Redis I/O timeout).
//
// Threads: Push and Wait from one thread, the owner's. Steps run on the
// worker one at a time; whatever they touched may be used by the owner
// again once Wait returned (the queue's mutex orders it).
#ifndef TDSTORE_SERVER_STORE_WRITE_BEHIND_H_
#define TDSTORE_SERVER_STORE_WRITE_BEHIND_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"

namespace tdstore::store {

// How WriteLeaves uses it: a put starts a worker at its first data chunk
// of at least kWriteBehindMinChunkBytes (a thread costs tens of µs, which a
// small put would feel), with a queue of kWriteBehindQueueBytes leased from
// the memory budget (no lease, no worker: the put runs as before).
inline constexpr int64_t kWriteBehindMinChunkBytes = 256 << 10;
inline constexpr int64_t kWriteBehindQueueBytes = 4 << 20;

class WriteBehind {
 public:
  using Step = absl::AnyInvocable<absl::Status() &&>;

  explicit WriteBehind(int64_t max_queued_bytes);
  ~WriteBehind();
  WriteBehind(const WriteBehind&) = delete;
  WriteBehind& operator=(const WriteBehind&) = delete;

  // Queues `step`, which carries `bytes` of data. Returns the first failed
  // step's status, if any has failed (and then `step` is dropped).
  absl::Status Push(Step step, int64_t bytes);
  // Waits until every pushed step has run; the first failure, if any.
  absl::Status Wait();

 private:
  struct Queued {
    Step step;
    int64_t bytes;
  };
  void Work();

  const int64_t max_queued_bytes_;
  std::mutex mu_;
  std::condition_variable changed_;  // queue, busy_, failed_ or stop_
  std::deque<Queued> queue_;
  int64_t queued_bytes_ = 0;
  bool busy_ = false;  // a step is running
  bool stop_ = false;
  absl::Status failed_;
  std::thread worker_;  // last: started once the members above exist
};

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_STORE_WRITE_BEHIND_H_
