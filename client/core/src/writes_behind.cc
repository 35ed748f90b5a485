// WritesBehind (writes_behind.h).
#include "client/core/src/writes_behind.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

namespace tdstore::core {

namespace {

// Set on a writer thread: the public calls its writes make (a write
// behind is an ordinary write, and one to an old tdstored adds its count
// with counter_add) must not wait for the queue they are draining.
thread_local bool on_writer_thread = false;

}  // namespace

WritesBehind::WritesBehind() : owner_(getpid()) {}

WritesBehind::~WritesBehind() {
  // A forked child never destroys its parent's clients (client.cc,
  // MakeImpl), so this runs in the owner only.
  std::unique_lock<std::mutex> lock(mu_);
  if (!thread_.joinable()) return;
  changed_.wait(lock, [this] { return (queue_.empty() && !writing_) || failure_.has_value(); });
  stop_ = true;
  changed_.notify_all();
  if (failure_) {
    std::fprintf(stderr,
                 "tdstore: a write that had returned (written behind) failed, and its client "
                 "was closed before any call could report it: %s\n",
                 failure_->what());
  }
  lock.unlock();
  thread_.join();
}

bool WritesBehind::Enqueue(std::function<void()> write, int64_t bytes) {
  if (on_writer_thread || bytes > kMaxBytes || getpid() != owner_) return false;
  std::unique_lock<std::mutex> lock(mu_);
  ThrowFailure();
  changed_.wait(lock, [this, bytes] {
    return failure_.has_value() ||
           (static_cast<int>(queue_.size()) < kMaxWrites && queued_bytes_ + bytes <= kMaxBytes);
  });
  ThrowFailure();
  if (!thread_.joinable()) thread_ = std::thread([this] { Work(); });
  queue_.emplace_back(std::move(write), bytes);
  queued_bytes_ += bytes;
  changed_.notify_all();
  return true;
}

void WritesBehind::Settle() {
  if (on_writer_thread || getpid() != owner_) return;
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [this] { return (queue_.empty() && !writing_) || failure_.has_value(); });
  ThrowFailure();
}

void WritesBehind::ThrowFailure() {
  if (!failure_) return;
  WriteBehindError error = *std::move(failure_);
  failure_.reset();
  changed_.notify_all();
  throw error;
}

void WritesBehind::Work() {
  on_writer_thread = true;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // After a failure the thread writes nothing more until a call has
    // thrown it: the writes queued after it were dropped with it.
    changed_.wait(lock, [this] { return stop_ || (!queue_.empty() && !failure_); });
    if (stop_) return;
    std::function<void()> write = std::move(queue_.front().first);
    writing_ = true;
    lock.unlock();
    // Whatever a write throws is kept for the next call: nothing may end
    // this thread, which would end the process and its queued writes.
    StatusCode code = StatusCode::kOk;
    std::string why;
    try {
      write();
    } catch (const Error& e) {
      code = e.code();
      why = e.message();
    } catch (const std::exception& e) {
      code = StatusCode::kInternal;
      why = e.what();
    } catch (...) {
      code = StatusCode::kInternal;
      why = "a write behind threw something that is not an exception";
    }
    write = nullptr;  // its bytes go now, not when the next write comes
    lock.lock();
    writing_ = false;
    queued_bytes_ -= queue_.front().second;
    queue_.pop_front();
    if (code != StatusCode::kOk) {
      // Why drop what follows: the writes applied stay a prefix of those
      // made, as they are for synchronous calls, so a caller that learns
      // of the failure knows every later write needs making again.
      const int64_t dropped = static_cast<int64_t>(queue_.size());
      queue_.clear();
      queued_bytes_ = 0;
      failure_.emplace(code,
                       why + " (a write that had returned before tdstored applied it, written "
                             "behind; " +
                           std::to_string(dropped) + " write(s) queued after it were not sent)",
                       dropped);
    }
    changed_.notify_all();
  }
}

}  // namespace tdstore::core
