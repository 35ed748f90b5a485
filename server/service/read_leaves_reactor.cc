#include "server/service/read_leaves_reactor.h"

#include <utility>

namespace tdstore::service {

ReadLeavesReactor* ReadLeavesReactor::Start(Body body, bool gathered, WorkPool* pool,
                                            std::function<void()> done) {
  auto* reactor = new ReadLeavesReactor(gathered, std::move(done));
  if (gathered) {
    reactor->FinishWith(body(*reactor, &reactor->lease_));
    return reactor;
  }
  // The job's last touch of the reactor is FinishWith, after which OnDone
  // may delete it at any time.
  const bool queued = pool->Run([reactor, body = std::move(body)] {
    reactor->FinishWith(body(*reactor, &reactor->lease_));
  });
  if (!queued) {
    reactor->FinishWith(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                     "tdstored cannot start a thread for this read; retry later"));
  }
  return reactor;
}

bool ReadLeavesReactor::Write(const grpc::ByteBuffer& frame, grpc::WriteOptions options) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_) return false;
    queue_.push_back({frame, options});
    queued_bytes_ += queue_.back().bytes.Length();
  }
  Advance();
  // Gathered: its bytes are in memory already. A last message is held for
  // the status, so waiting for it to drain would never end.
  if (gathered_ || options.is_last_message()) return true;
  std::unique_lock<std::mutex> lock(mu_);
  drained_.wait(lock, [this] { return failed_ || queued_bytes_ <= kWindowBytes; });
  return !failed_;
}

void ReadLeavesReactor::FinishWith(grpc::Status status) {
  // One critical section from the flag to the decision: once body_done_ is
  // visible unlocked, an OnWriteDone on another thread may finish the call
  // and OnDone delete the reactor, so this thread must not lock again.
  std::unique_lock<std::mutex> lock(mu_);
  status_ = std::move(status);
  body_done_ = true;
  AdvanceLocked(std::move(lock));
}

void ReadLeavesReactor::OnWriteDone(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_bytes_ -= queue_.front().bytes.Length();
    queue_.pop_front();
    writing_ = false;
    if (!ok) failed_ = true;
  }
  if (ok && lease_ != nullptr) lease_->Touch();
  drained_.notify_all();
  Advance();
}

void ReadLeavesReactor::Advance() { AdvanceLocked(std::unique_lock<std::mutex>(mu_)); }

void ReadLeavesReactor::AdvanceLocked(std::unique_lock<std::mutex> lock) {
  if (writing_ || finish_started_) return;
  if (failed_) {
    // The client is gone: what is queued is dropped. The call still has to
    // be finished, once the body has seen a failed Write and returned.
    if (!body_done_) return;
    finish_started_ = true;
    lock.unlock();
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
    return;
  }
  if (!queue_.empty()) {
    Frame& next = queue_.front();
    if (next.options.is_last_message()) {
      if (!body_done_) return;  // it goes with the status
      finish_started_ = true;
      const grpc::Status status = status_;
      lock.unlock();
      StartWriteAndFinish(&next.bytes, next.options, status);
      return;
    }
    writing_ = true;
    lock.unlock();
    StartWrite(&next.bytes, next.options);
    return;
  }
  if (!body_done_) return;
  finish_started_ = true;
  const grpc::Status status = status_;
  lock.unlock();
  Finish(status);
}

void ReadLeavesReactor::OnDone() {
  lease_.reset();  // before the call's context goes (the watchdog may use it)
  if (done_) done_();
  delete this;
}

}  // namespace tdstore::service
