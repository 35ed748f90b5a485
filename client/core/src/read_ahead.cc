// The library's read-ahead threads (core.h, RunOnReadAheadThread): one pool
// per process, started on first use.
//
// Why process-wide rather than per Client: a task holds a copy of its Dict,
// so it keeps the Client's state alive until it finishes. A pool owned by
// that state could then be destroyed by its own worker (the task's copy
// being the last one), which would have to join itself. A pool that
// outlives every Client has no such cycle.
//
// Why a fork handler: a process that forks (Python's DataLoader workers,
// subprocesses) copies the pool's memory but not its threads, and may copy
// its mutex locked by a thread that does not exist in the child. The child
// must not touch that pool at all: the handler, which runs in the child
// before anything else does, forgets it (leaks it), and the child's first
// read ahead makes a fresh one.
#include <pthread.h>

#include <atomic>
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
      if (threads_.empty()) {
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
      // ReadAhead's tasks hand their exceptions to their futures; one that
      // escapes a bare task has no one to go to, and must not end the process.
      try {
        task();
      } catch (...) {
      }
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;  // never joined: see Pool()
};

// This process's pool, or null before its first read ahead.
std::atomic<ReadAheadPool*> g_pool{nullptr};

// In a forked child, before anything else runs: the parent's pool is not
// this process's (see the top of the file).
void ForgetPoolInChild() { g_pool.store(nullptr); }

// Pools are never destroyed, on purpose: their threads wait for work until
// the process exits, and destroying one then would race with the static
// destructors (gRPC's) that a task still running may use.
ReadAheadPool& Pool() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, ForgetPoolInChild);
    return true;
  }();
  (void)registered;
  ReadAheadPool* pool = g_pool.load();
  if (pool == nullptr) {
    // A pool starts no thread until its first task: one that loses the
    // race below is deleted unused.
    auto* fresh = new ReadAheadPool();
    if (g_pool.compare_exchange_strong(pool, fresh)) {
      pool = fresh;
    } else {
      delete fresh;
    }
  }
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
