#include "server/service/stream_guard.h"

#include <algorithm>

#include "common/str_cat.h"

namespace tdstore::service {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

StreamGuard::StreamGuard(int max_streams, std::chrono::milliseconds idle_timeout)
    : max_streams_(max_streams), idle_timeout_(idle_timeout) {
  watcher_ = std::thread([this] { Watch(); });
}

StreamGuard::~StreamGuard() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  watcher_.join();
}

absl::StatusOr<std::unique_ptr<StreamGuard::Lease>> StreamGuard::Enter(grpc::ServerContextBase* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int>(leases_.size()) >= max_streams_) {
    return absl::ResourceExhaustedError(
        StrCat("tdstored is serving its limit of ", max_streams_,
               " streams (--max-concurrent-streams); retry later"));
  }
  std::unique_ptr<Lease> lease(new Lease(this, ctx));
  leases_.insert(lease.get());
  return lease;
}

void StreamGuard::Release(Lease* lease) {
  std::lock_guard<std::mutex> lock(mu_);
  leases_.erase(lease);
}

void StreamGuard::Watch() {
  // Check a few times per timeout so a stream is cancelled at most ~25%
  // late, but never spin faster than every 10 ms.
  const auto period = std::max(std::chrono::milliseconds(10),
                               std::min(std::chrono::milliseconds(1000), idle_timeout_ / 4));
  const int64_t limit_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(idle_timeout_).count();
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    const int64_t now = NowNs();
    for (Lease* lease : leases_) {
      if (!lease->timed_out_ && now - lease->last_progress_ns_.load() > limit_ns) {
        lease->timed_out_ = true;
        // Safe under mu_: the Lease (and so its call) cannot end meanwhile,
        // since its destructor takes mu_ first.
        lease->ctx_->TryCancel();
      }
    }
  }
}

StreamGuard::Lease::Lease(StreamGuard* guard, grpc::ServerContextBase* ctx)
    : guard_(guard), ctx_(ctx), last_progress_ns_(NowNs()) {}

StreamGuard::Lease::~Lease() { guard_->Release(this); }

void StreamGuard::Lease::Touch() { last_progress_ns_.store(NowNs()); }

}  // namespace tdstore::service
