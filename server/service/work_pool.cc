#include "server/service/work_pool.h"

#include <system_error>
#include <utility>

namespace tdstore::service {

WorkPool::~WorkPool() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    threads = std::move(threads_);
  }
  wake_.notify_all();
  for (std::thread& t : threads) t.join();
}

bool WorkPool::Run(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back(std::move(job));
  // A job queued is taken by an idle thread; with none idle (all running
  // jobs, or all woken for jobs queued before this one) one more starts.
  if (idle_ >= static_cast<int>(jobs_.size())) {
    wake_.notify_one();
    return true;
  }
  try {
    threads_.emplace_back([this] { Loop(); });
  } catch (const std::system_error&) {  // out of threads or memory
    jobs_.pop_back();
    return false;
  }
  return true;
}

void WorkPool::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ++idle_;
    wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    --idle_;
    // Queued jobs run even when stopping: each is a call gRPC waits for.
    if (jobs_.empty()) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    job = nullptr;  // what it captured goes before the next wait
    lock.lock();
  }
}

}  // namespace tdstore::service
