#include "server/service/read_leaves_reactor.h"

#include <thread>
#include <utility>

namespace tdstore::service {

ReadLeavesReactor* ReadLeavesReactor::Start(Body body, bool gathered,
                                            std::function<void()> done) {
  auto* reactor = new ReadLeavesReactor(std::move(done));
  reactor->gathered_ = gathered;
  if (gathered) {
    reactor->FinishWith(body(*reactor, &reactor->lease_));
    return reactor;
  }
  // Detached: the thread's last touch of the reactor is FinishWith, after
  // which OnDone may delete it at any time.
  std::thread([reactor, body = std::move(body)] {
    reactor->FinishWith(body(*reactor, &reactor->lease_));
  }).detach();
  return reactor;
}

bool ReadLeavesReactor::Write(const grpc::ByteBuffer& frame, grpc::WriteOptions options) {
  // The stream's last message is held for FinishWith in both forms: gRPC
  // sends it with the status, so its write would not complete before then.
  if (gathered_ || options.is_last_message()) {
    frames_.push_back({frame, options});
    return true;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!write_ok_) return false;
  writing_ = true;
  in_flight_ = frame;
  lock.unlock();
  StartWrite(&in_flight_, options);
  lock.lock();
  written_.wait(lock, [this] { return !writing_; });
  return write_ok_;
}

void ReadLeavesReactor::OnWriteDone(bool ok) {
  if (lease_ != nullptr && ok) lease_->Touch();
  if (gathered_) {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    SendNext();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    write_ok_ = ok;
  }
  written_.notify_one();
}

void ReadLeavesReactor::FinishWith(grpc::Status status) {
  status_ = std::move(status);
  if (!gathered_) {
    // Own thread: every frame but a last one is written already.
    if (!frames_.empty()) {
      StartWriteAndFinish(&frames_.back().bytes, frames_.back().options, status_);
    } else {
      Finish(status_);
    }
    return;
  }
  SendNext();
}

void ReadLeavesReactor::SendNext() {
  if (next_ == frames_.size()) {
    Finish(status_);
    return;
  }
  Frame& frame = frames_[next_++];
  if (next_ == frames_.size() && frame.options.is_last_message()) {
    StartWriteAndFinish(&frame.bytes, frame.options, status_);
  } else {
    StartWrite(&frame.bytes, frame.options);
  }
}

void ReadLeavesReactor::OnDone() {
  lease_.reset();  // before the call's context goes (the watchdog may use it)
  if (done_) done_();
  delete this;
}

}  // namespace tdstore::service
