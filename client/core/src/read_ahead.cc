// The library's read-ahead threads (core.h, RunOnReadAheadThread): one pool
// per process, started on first use.
//
// Why process-wide rather than per Client: a task holds a copy of its Dict,
// so it keeps the Client's state alive until it finishes. A pool owned by
// that state could then be destroyed by its own worker (the task's copy
// being the last one), which would have to join itself. A pool that
// outlives every Client has no such cycle.
//
// Why the pid check: a process that forks (Python's DataLoader workers do)
// copies the pool's memory but not its threads. A child that finds the pool
// started by another pid starts its own, leaving the parent's queue alone.
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "tdstore/core.h"

namespace tdstore::core {

namespace {

class ReadAheadPool {
 public:
  void Run(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      const pid_t me = getpid();
      if (owner_ != me) {
        // First use in this process (or the first after a fork): the
        // threads listed, if any, belong to the parent.
        for (std::thread& t : threads_) {
          if (t.joinable()) t.detach();
        }
        threads_.clear();
        queue_.clear();
        owner_ = me;
        for (int i = 0; i < kReadAheadThreads; ++i) threads_.emplace_back([this] { Work(); });
      }
      queue_.push_back(std::move(task));
    }
    wake_.notify_one();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [this] { return !queue_.empty(); });
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();  // a packaged task: its exceptions go to its future
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  pid_t owner_ = 0;
};

// Never destroyed, on purpose: its threads wait for work until the process
// exits, and destroying it then would race with the static destructors
// (gRPC's) that a task still running may use.
ReadAheadPool& Pool() {
  static ReadAheadPool* pool = new ReadAheadPool();
  return *pool;
}

}  // namespace

void RunOnReadAheadThread(std::function<void()> task) { Pool().Run(std::move(task)); }

std::future<void> Dict::read_async(std::vector<Key> paths, std::shared_ptr<ReadSink> sink,
                                   std::optional<Index> index) const {
  if (sink == nullptr) throw Error(StatusCode::kInvalidArgument, "read_async needs a sink");
  return ReadAhead([dict = *this, paths = std::move(paths), sink = std::move(sink),
                    index = std::move(index)] {
    ReadOptions options;
    if (index) options.index = &*index;
    dict.read(paths, *sink, options);
  });
}

}  // namespace tdstore::core
