// WritesBehind (writes_behind.h).
#include "client/core/src/writes_behind.h"

#include <unistd.h>

#include <cstdio>
#include <utility>
#include <vector>

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

namespace {

// A write that is a function, and joins no other.
class FunctionWrite final : public QueuedWrite {
 public:
  explicit FunctionWrite(std::function<void()> write) : write_(std::move(write)) {}
  void Apply() override { write_(); }

 private:
  std::function<void()> write_;
};

}  // namespace

bool WritesBehind::Enqueue(std::function<void()> write, int64_t bytes) {
  return Enqueue(std::make_unique<FunctionWrite>(std::move(write)), bytes);
}

bool WritesBehind::Enqueue(std::unique_ptr<QueuedWrite> write, int64_t bytes) {
  if (on_writer_thread || bytes > kMaxBytes || getpid() != owner_) return false;
  std::unique_lock<std::mutex> lock(mu_);
  ThrowFailure();
  changed_.wait(lock, [this, bytes] {
    return failure_.has_value() ||
           (static_cast<int>(queue_.size()) < kMaxWrites && queued_bytes_ + bytes <= kMaxBytes);
  });
  ThrowFailure();
  if (!thread_.joinable()) thread_ = std::thread([this] { Work(); });
  queue_.push_back({std::move(write), bytes});
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
    // The writes waiting now. Pointers, taken under the lock: the caller's
    // thread may push more meanwhile, which moves no element.
    std::vector<QueuedWrite*> waiting;
    for (const Queued& q : queue_) waiting.push_back(q.write.get());
    writing_ = true;
    lock.unlock();
    // Why join: each write is a call to tdstored and its round trips to
    // Redis, and a caller that queues faster than that (torchrl's extends
    // of 500 rows: 0.1-0.2 ms apart, against about 1 ms a write while the
    // trainer's thread holds the other core) fills the window and then
    // waits for a call per write. The writes waiting go as one call.
    size_t joined = 1;
    try {
      while (joined < waiting.size() && waiting[0]->Join(*waiting[joined])) ++joined;
    } catch (...) {
      // Out of memory in a join: what joined so far goes; the rest waits.
    }
    if (joined > 1) {
      // The joined writes are the first one's now: they leave the window
      // (their bytes stay counted in the first's until it is applied), so
      // the caller queues on while the joined call runs.
      lock.lock();
      for (size_t i = 1; i < joined; ++i) queue_.front().bytes += queue_[i].bytes;
      queue_.erase(queue_.begin() + 1, queue_.begin() + static_cast<std::ptrdiff_t>(joined));
      changed_.notify_all();
      lock.unlock();
    }
    // Whatever a write throws is kept for the next call: nothing may end
    // this thread, which would end the process and its queued writes.
    StatusCode code = StatusCode::kOk;
    std::string why;
    try {
      waiting[0]->Apply();
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
    lock.lock();
    writing_ = false;
    queued_bytes_ -= queue_.front().bytes;
    queue_.pop_front();  // its bytes go now, not when the next write comes
    if (code != StatusCode::kOk) {
      // Why drop what follows: the writes applied stay a prefix of those
      // made, as they are for synchronous calls, so a caller that learns
      // of the failure knows every later write needs making again.
      const int64_t sent_with_it = static_cast<int64_t>(joined) - 1;
      const int64_t dropped = static_cast<int64_t>(queue_.size()) + sent_with_it;
      std::string what =
          why + " (a write that had returned before tdstored applied it, written behind; ";
      if (sent_with_it > 0) {
        what += std::to_string(sent_with_it) +
                " write(s) queued after it went in the same call and failed with it, and ";
      }
      what += std::to_string(queue_.size()) + " write(s) queued after it were not sent)";
      queue_.clear();
      queued_bytes_ = 0;
      failure_.emplace(code, std::move(what), dropped);
    }
    changed_.notify_all();
  }
}

}  // namespace tdstore::core
