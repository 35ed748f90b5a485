// WorkPool: threads for call work that blocks (a whole-leaf read streaming
// from Redis under gRPC flow control), off gRPC's callback threads.
//
//   WorkPool pool;
//   pool.Run([] { ... });   // on an idle thread, or on a new one
//
// Why a pool and not a thread per call: a new thread starts with a cold
// stack and its own malloc arena, so every buffer of its call was fresh
// pages. A thread per read made `td[100:356]` (327 KB over TCP) 1.6x
// slower than on the sync server's threads (tests/bench/
// paired_daemons_bench.py); kept threads reuse both.
//
// Threads are started as needed (one per job running at once, so at most
// the streams tdstored admits at a time, plus the ones being refused) and
// kept until the pool is destroyed, which waits for the running jobs.
// Thread-safe.
#ifndef TDSTORE_SERVER_SERVICE_WORK_POOL_H_
#define TDSTORE_SERVER_SERVICE_WORK_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tdstore::service {

class WorkPool {
 public:
  WorkPool() = default;
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Runs `job` on a thread of the pool; never waits for it. False, and
  // `job` dropped unrun, if it needed a new thread and none could start.
  [[nodiscard]] bool Run(std::function<void()> job);

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  int idle_ = 0;                            // guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  std::vector<std::thread> threads_;        // guarded by mu_
};

}  // namespace tdstore::service

#endif  // TDSTORE_SERVER_SERVICE_WORK_POOL_H_
