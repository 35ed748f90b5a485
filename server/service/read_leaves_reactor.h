// ReadLeaves on gRPC's callback API: one call, from its request to OnDone.
//
// Why not the sync API, as the other calls: a sync handler runs on a
// thread of the sync server's pool, and gRPC's callback threads (there for
// WatchSchema and the health service) are the ones waiting in epoll. So
// every request was received on one thread and handed to another before
// the read could start: a wake-up and a context switch (~18 us each on the
// 2-vCPU machine, `perf bench sched pipe`) on the path of every answer. On
// the callback API the thread that received a sample's request reads it
// and sends the answer itself. A 256-row sample over the unix socket was
// answered in 0.81 instead of 0.90 ms (tests/bench/call_cpu.py --op
// sample, medians of 3 alternated runs). The switches per call did not
// fall (gRPC finishes the call on other threads, after the answer left):
// what moved is the wait before the answer (docs/benchmarks.md, *A sample
// served where it is received*).
//
// Two ways to run a call's body (the read, writing frames to a FrameWriter):
//
//  - gathered, on the receiving thread: for a read whose whole answer is in
//    memory before its first frame goes out anyway, and bounded small (an
//    indexed read by at most 4,096 positions: a sample). Its frames are
//    queued and sent one after another from the reactions.
//  - on a WorkPool thread, for every other read: a whole-leaf read streams
//    from Redis in chunks and may be far larger than memory should hold.
//    Its frames are queued the same way, but Write waits while more than
//    kWindowBytes are queued, so flow control reaches the store's reads as
//    it did on the sync API. Blocking a callback thread instead could stall
//    every callback call, or deadlock once all of them waited for write
//    completions only they deliver.
//
// Either way the reactor keeps the call's StreamGuard lease (the body hands
// it over) until the call is done, touching it whenever a frame was sent,
// so the idle watchdog cancels a client that stops reading; and `done` runs
// at OnDone (the service's in-flight count).
//
// Threads: gRPC runs the reactions; Write and FinishWith come from the
// body's thread; the queue's mutex orders them.
#ifndef TDSTORE_SERVER_SERVICE_READ_LEAVES_REACTOR_H_
#define TDSTORE_SERVER_SERVICE_READ_LEAVES_REACTOR_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "grpcpp/grpcpp.h"
#include "server/service/leaf_streams.h"
#include "server/service/stream_guard.h"
#include "server/service/work_pool.h"

namespace tdstore::service {

class ReadLeavesReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                                private FrameWriter {
 public:
  // The call's work: writes its frames to `out` and returns its status.
  // A lease it takes goes into `*lease`, for the reactor to keep.
  using Body = std::function<grpc::Status(FrameWriter& out,
                                          std::unique_ptr<StreamGuard::Lease>* lease)>;
  // Bytes a body on a pool thread may have queued before Write waits: the
  // HTTP/2 window tdstored grants a stream (main.cc), so that a client
  // reading at full speed never waits for the store.
  static constexpr size_t kWindowBytes = size_t{4} << 20;

  // Starts serving the call; gRPC owns the reactor (deleted at OnDone).
  // `gathered`: runs `body` now, on this thread; otherwise on `pool` (if
  // the pool cannot start a thread, the call ends RESOURCE_EXHAUSTED).
  static ReadLeavesReactor* Start(Body body, bool gathered, WorkPool* pool,
                                  std::function<void()> done);

  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  explicit ReadLeavesReactor(bool gathered, std::function<void()> done)
      : gathered_(gathered), done_(std::move(done)) {}

  // FrameWriter: queues the frame and starts its write if none is in
  // flight. False once the client is gone. The stream's last message is
  // held for FinishWith: gRPC sends it with the status.
  bool Write(const grpc::ByteBuffer& frame, grpc::WriteOptions options) override;
  // The body is done: the call ends with `status` once its frames are sent.
  void FinishWith(grpc::Status status);
  // Starts the next write, or the end of the call, if it is due and nothing
  // is in flight. Takes mu_ (AdvanceLocked: is given it held); gRPC is
  // called without it, and nothing of the reactor is touched after.
  void Advance();
  void AdvanceLocked(std::unique_lock<std::mutex> lock);

  struct Frame {
    grpc::ByteBuffer bytes;
    grpc::WriteOptions options;
  };
  const bool gathered_;
  const std::function<void()> done_;
  std::unique_ptr<StreamGuard::Lease> lease_;  // set by the body, before its first Write

  std::mutex mu_;
  std::condition_variable drained_;  // queued_bytes_ fell, or a write failed
  // Frames not yet sent; the front one is in flight while writing_. A deque:
  // pushing at the back leaves the front's bytes where gRPC reads them.
  std::deque<Frame> queue_;          // guarded by mu_
  size_t queued_bytes_ = 0;          // guarded by mu_
  bool writing_ = false;             // guarded by mu_
  bool failed_ = false;              // a write failed: the client is gone
  bool body_done_ = false;           // guarded by mu_; status_ is set
  bool finish_started_ = false;      // guarded by mu_
  grpc::Status status_;              // guarded by mu_
};

}  // namespace tdstore::service

#endif  // TDSTORE_SERVER_SERVICE_READ_LEAVES_REACTOR_H_
