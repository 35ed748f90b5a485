// Keeps streaming calls (ReadLeaves, WriteLeaves) from pinning tdstored:
// at most `max_streams` run at once, and one that makes no progress for
// `idle_timeout` is cancelled.
//
// Why a watchdog: the synchronous gRPC API blocks a handler in Read() or
// Write() for as long as the client stays silent or stops reading, and has
// no per-message timeout. Cancelling the call (ServerContext::TryCancel)
// wakes that handler: Read()/Write() return false, IsCancelled() is true,
// and a write in progress aborts (nothing visible, its blocks deleted). The
// client sees CANCELLED.
//
//   auto lease = guard.Enter(ctx);          // RESOURCE_EXHAUSTED when full
//   if (!lease.ok()) return ToGrpc(lease.status());
//   while (reader->Read(&msg)) { (*lease)->Touch(); ... }
//
// Thread-safe: handlers on any thread Enter/Touch; one internal thread
// watches.
#ifndef TDSTORE_SERVER_SERVICE_STREAM_GUARD_H_
#define TDSTORE_SERVER_SERVICE_STREAM_GUARD_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"

namespace tdstore::service {

class StreamGuard {
 public:
  class Lease;

  // Starts the watchdog thread.
  StreamGuard(int max_streams, std::chrono::milliseconds idle_timeout);
  // Stops the watchdog; every Lease must be gone by then.
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

  // A slot for one stream of call `ctx`, released when the Lease dies.
  // RESOURCE_EXHAUSTED when max_streams streams are in progress.
  absl::StatusOr<std::unique_ptr<Lease>> Enter(grpc::ServerContextBase* ctx);

  class Lease {
   public:
    ~Lease();
    // Call after every message received or sent: the stream is alive.
    void Touch();
    // True once the watchdog cancelled this stream for idling.
    bool timed_out() const { return timed_out_.load(); }

   private:
    friend class StreamGuard;
    Lease(StreamGuard* guard, grpc::ServerContextBase* ctx);
    StreamGuard* const guard_;
    grpc::ServerContextBase* const ctx_;
    std::atomic<int64_t> last_progress_ns_;
    std::atomic<bool> timed_out_{false};
  };

 private:
  void Watch();
  void Release(Lease* lease);

  const int max_streams_;
  const std::chrono::milliseconds idle_timeout_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::set<Lease*> leases_;  // guarded by mu_
  std::thread watcher_;
};

}  // namespace tdstore::service

#endif  // TDSTORE_SERVER_SERVICE_STREAM_GUARD_H_
