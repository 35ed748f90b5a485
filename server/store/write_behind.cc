#include "server/store/write_behind.h"

#include <utility>

namespace tdstore::store {

WriteBehind::WriteBehind(int64_t max_queued_bytes)
    : max_queued_bytes_(max_queued_bytes), worker_([this] { Work(); }) {}

WriteBehind::~WriteBehind() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    queue_.clear();
    queued_bytes_ = 0;
  }
  changed_.notify_all();
  worker_.join();
}

absl::Status WriteBehind::Push(Step step, int64_t bytes) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    // One step always fits, however large: the bound is on what waits.
    changed_.wait(lock, [&] {
      return !failed_.ok() || queue_.empty() || queued_bytes_ + bytes <= max_queued_bytes_;
    });
    if (!failed_.ok()) return failed_;
    queue_.push_back({std::move(step), bytes});
    queued_bytes_ += bytes;
  }
  changed_.notify_all();
  return absl::OkStatus();
}

absl::Status WriteBehind::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return !failed_.ok() || (queue_.empty() && !busy_); });
  return failed_;
}

void WriteBehind::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Queued next = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= next.bytes;
    busy_ = true;
    lock.unlock();
    changed_.notify_all();  // room for the next Push
    absl::Status status = std::move(next.step)();
    next.step = nullptr;  // free its data before reporting the step done
    lock.lock();
    busy_ = false;
    if (!status.ok()) {
      failed_ = std::move(status);
      queue_.clear();
      queued_bytes_ = 0;
    }
    changed_.notify_all();
    if (!failed_.ok()) {
      // Nothing more runs; wait to be destroyed.
      changed_.wait(lock, [&] { return stop_; });
      return;
    }
  }
}

}  // namespace tdstore::store
