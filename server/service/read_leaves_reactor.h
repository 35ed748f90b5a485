// ReadLeaves on gRPC's callback API: one call, from its request to OnDone.
//
// Why not the sync API, as the other calls: a sync handler runs on a
// thread of the sync server's pool, and gRPC's callback threads (there for
// WatchSchema and the health service) are the ones waiting in epoll. So
// every request was received on one thread and handed to another, and the
// answer's completion handed back: about 7 context switches per sample in
// tdstored, each ~18 us on the 2-vCPU machine (`perf bench sched pipe`),
// which made thread hand-offs, not code, the largest part of a sample's
// tdstored time (docs/benchmarks.md). On the callback API the thread that
// received the request runs the read: a 256-row sample answered 8% sooner
// (0.79 against 0.86 ms, tests/bench/call_cpu.py --op sample).
//
// Two ways to run a call's body (the read, writing frames to a FrameWriter):
//
//  - gathered, on the receiving thread: for a read whose whole answer is in
//    memory before its first frame goes out anyway (an indexed read,
//    bounded by max_indexed_bytes). Its frames are kept, then sent one after
//    another from the reactions, with no thread waiting on the client.
//  - on a thread of its own, each Write waiting until gRPC has taken the
//    frame (flow control reaches the store's reads, as on the sync API):
//    for a whole-leaf read, whose leaves stream from Redis in chunks and may
//    be far larger than memory should hold. Waiting on a callback thread
//    instead could stall every callback call, or deadlock once all of those
//    threads waited for write completions only they deliver.
//
// Either way the reactor keeps the call's StreamGuard lease (the body hands
// it over, see lease()) until the call is done, touching it whenever a
// frame was taken, so the idle watchdog cancels a client that stops reading
// in both forms; and `done` runs at OnDone (the service's in-flight count).
//
// Threads: gRPC calls the reactions; Write is for the body's thread only.
#ifndef TDSTORE_SERVER_SERVICE_READ_LEAVES_REACTOR_H_
#define TDSTORE_SERVER_SERVICE_READ_LEAVES_REACTOR_H_

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "server/service/leaf_streams.h"
#include "server/service/stream_guard.h"

namespace tdstore::service {

class ReadLeavesReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                                private FrameWriter {
 public:
  // The call's work: writes its frames to `out` and returns its status.
  // A lease it takes goes into `*lease`, for the reactor to keep.
  using Body = std::function<grpc::Status(FrameWriter& out,
                                          std::unique_ptr<StreamGuard::Lease>* lease)>;

  // Starts serving the call; gRPC owns the reactor (deleted at OnDone).
  // `gathered`: run `body` now, on this thread, and send its frames after
  // (see above); otherwise on a thread of its own.
  static ReadLeavesReactor* Start(Body body, bool gathered, std::function<void()> done);

  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  ReadLeavesReactor(std::function<void()> done) : done_(std::move(done)) {}

  // FrameWriter. Gathered: keeps the frame. Own thread: starts its write
  // and waits for OnWriteDone; false once the client is gone.
  bool Write(const grpc::ByteBuffer& frame, grpc::WriteOptions options) override;

  // Gathered: the next kept frame, or the status once all were sent.
  void SendNext();
  // Ends the call with the body's status. The last kept frame marked as
  // the stream's last goes with the status in one batch.
  void FinishWith(grpc::Status status);

  struct Frame {
    grpc::ByteBuffer bytes;
    grpc::WriteOptions options;
  };
  const std::function<void()> done_;
  std::unique_ptr<StreamGuard::Lease> lease_;
  bool gathered_ = false;
  // Gathered: the frames, the next to send, and the status after them.
  std::vector<Frame> frames_;
  size_t next_ = 0;
  grpc::Status status_;
  // Own thread: the frame being written and its completion.
  std::mutex mu_;
  std::condition_variable written_;
  bool writing_ = false;  // guarded by mu_
  bool write_ok_ = true;  // guarded by mu_
  grpc::ByteBuffer in_flight_;
};

}  // namespace tdstore::service

#endif  // TDSTORE_SERVER_SERVICE_READ_LEAVES_REACTOR_H_
