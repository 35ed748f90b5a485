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
//   - At most kMaxWrites writes and kMaxBytes bytes wait at once (a joined
//     write counts once); queuing past that waits for room. A client
//     destroyed with writes queued sends them first; a failure then, with
//     no call left to throw it, is written to stderr.
//   - In a forked child the parent's queue is not the child's: there
//     Enqueue refuses (the caller writes synchronously) and Settle returns.
//   - Writes queued one after another may go as one call (QueuedWrite::
//     Join): when the writer thread finds several waiting, as a trainer
//     that extends faster than one write a round trip makes it find them.
//     A joined write has the effect of the writes in their order; if it
//     fails, all of them failed, and the error counts the ones after the
//     first as dropped.
#ifndef TDSTORE_CLIENT_CORE_SRC_WRITES_BEHIND_H_
#define TDSTORE_CLIENT_CORE_SRC_WRITES_BEHIND_H_

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "tdstore/core.h"

namespace tdstore::core {

// One write waiting in a WritesBehind queue; it owns everything it needs.
class QueuedWrite {
 public:
  virtual ~QueuedWrite() = default;
  // Applies the write, and every write it joined; throws what a failed
  // call throws (core::Error).
  virtual void Apply() = 0;
  // Takes `next`, the write queued right after this one, into this one, so
  // that Apply has the effect of applying this write and then `next`. False
  // if it cannot, and nothing changes. Runs on the writer thread.
  virtual bool Join(QueuedWrite& next) {
    (void)next;
    return false;
  }
};

class WritesBehind {
 public:
  static constexpr int kMaxWrites = 32;
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
  bool Enqueue(std::unique_ptr<QueuedWrite> write, int64_t bytes);
  // A write that joins no other.
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
  struct Queued {
    std::unique_ptr<QueuedWrite> write;
    int64_t bytes;
  };
  // Waiting writes, and first the one the thread is applying, which holds
  // any it joined (their bytes added to its own); the thread pops it when
  // done. Guarded by mu_; only the thread removes entries.
  std::deque<Queued> queue_;
  int64_t queued_bytes_ = 0;                 // guarded by mu_
  bool writing_ = false;                     // the thread runs a write; guarded by mu_
  bool stop_ = false;                        // guarded by mu_
  std::optional<WriteBehindError> failure_;  // guarded by mu_
  std::thread thread_;                       // started by the first Enqueue; guarded by mu_
};

}  // namespace tdstore::core

#endif  // TDSTORE_CLIENT_CORE_SRC_WRITES_BEHIND_H_
