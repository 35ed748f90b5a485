// WritesBehind: a client's writes that have returned before tdstored
// applied them (Dict::write_counted_behind), sent in order by one thread.
//
// The contract, which every public call of the core keeps:
//   - A write behind is applied after every write behind queued before it,
//     and before any later call of the same client acts on data or state:
//     each public call of a Client, Dict or Appender first waits for them
//     (Settle). So a process reads its own writes, and a counter it bumps
//     behind never counts rows ahead of the rows themselves. The schema
//     reads (describe, batch_size, keys, keys_under, contains) do not wait:
//     a write behind only writes rows of leaves that exist, as they are,
//     which changes no schema (Dict::write_counted_behind checks that).
//   - A write behind that fails is never dropped silently: its error is
//     thrown by the client's next call (that call does nothing else), once,
//     as a WriteBehindError (core.h). The writes queued after it are not
//     sent; the error says how many.
//   - At most kMaxWrites writes and kMaxBytes bytes wait at once; queuing
//     past that waits for room. A client destroyed with writes queued sends
//     them first; a failure then, with no call left to throw it, is written
//     to stderr.
//   - In a forked child the parent's queue is not the child's: there
//     Enqueue refuses (the caller writes synchronously) and Settle returns.
#ifndef TDSTORE_CLIENT_CORE_SRC_WRITES_BEHIND_H_
#define TDSTORE_CLIENT_CORE_SRC_WRITES_BEHIND_H_

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "tdstore/core.h"

namespace tdstore::core {

class WritesBehind {
 public:
  static constexpr int kMaxWrites = 8;
  static constexpr int64_t kMaxBytes = 16 << 20;

  WritesBehind();
  ~WritesBehind();
  WritesBehind(const WritesBehind&) = delete;
  WritesBehind& operator=(const WritesBehind&) = delete;

  // Queues `write` (which owns everything it needs, `bytes` of it leaf
  // bytes) and returns, after waiting for room if the window is full.
  // Throws an earlier write's failure instead (queuing nothing). Returns
  // false, queuing nothing, where writes cannot go behind: bytes past
  // kMaxBytes, a forked child, or on the writer thread itself.
  bool Enqueue(std::function<void()> write, int64_t bytes);

  // Waits until every queued write is applied; throws the first failure
  // not yet thrown. Returns at once on the writer thread (its own calls)
  // and when nothing is queued.
  void Settle();

 private:
  void Work();
  // Throws and forgets `failure_`. Requires mu_.
  void ThrowFailure();

  const pid_t owner_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::pair<std::function<void()>, int64_t>> queue_;  // guarded by mu_
  int64_t queued_bytes_ = 0;                                      // guarded by mu_
  bool writing_ = false;  // the thread runs a write; guarded by mu_
  bool stop_ = false;     // guarded by mu_
  std::optional<WriteBehindError> failure_;  // guarded by mu_
  std::thread thread_;  // started by the first Enqueue; guarded by mu_
};

}  // namespace tdstore::core

#endif  // TDSTORE_CLIENT_CORE_SRC_WRITES_BEHIND_H_
