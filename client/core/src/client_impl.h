// core::Client::Impl: the state every copy of a Client and every Dict it
// opened share — one gRPC channel and stub, the address and the options.
// Immutable after construction but for the shared-memory arena, which its
// own mutex guards, and the writes behind, which guard themselves, so any
// thread may use it.
#ifndef TDSTORE_CLIENT_CORE_SRC_CLIENT_IMPL_H_
#define TDSTORE_CLIENT_CORE_SRC_CLIENT_IMPL_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/impl/rpc_method.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "client/core/src/retry.h"
#include "client/core/src/schema_copies.h"
#include "client/core/src/schema_floors.h"
#include "client/core/src/shm_arena.h"
#include "client/core/src/writes_behind.h"
#include "tdstore/core.h"
#include "tdstore/v1/tdstore.grpc.pb.h"

namespace tdstore::core {

struct Client::Impl {
  Impl(std::string address, ClientOptions options);

  // Sets the call's deadline and adds the bearer token, if any.
  void Prepare(grpc::ClientContext* context,
               std::chrono::system_clock::time_point deadline) const;
  // Throws the tdstore::Error for a failed call.
  [[noreturn]] void Fail(const grpc::Status& status) const;
  // Before an attempt of a call that may be repeated only if nothing was
  // applied (Retrier::kOnlyIfNothingApplied): waits, within the retry
  // window, for the channel to be connected.
  //
  // Why: on a channel that is not connected, gRPC fails a call at once with
  // UNAVAILABLE without sending it. Such a failure carries no trailing
  // metadata, so "nothing applied" cannot be told from "lost after it was
  // applied", and the call would not be repeated: a CreateDict made while
  // tdstored is starting, restarting or too busy to finish a handshake
  // would fail although nothing happened. Waiting for the connection first
  // leaves only calls that were sent to fail that way. Returns at once on a
  // connected channel; on a window's end, the attempt is made and fails as
  // before.
  void AwaitConnected(const Retrier& retry) const;
  // Prepare + unary call, retried as `safety` allows (retry.h), + Fail on
  // error: the shape of most RPCs. Every attempt's reply raises the floor
  // of the schema copies of the dict it names (schema_floors.h).
  template <typename Request, typename Response>
  void Call(grpc::Status (v1::TdStore::Stub::*method)(grpc::ClientContext*, const Request&,
                                                       Response*),
            const Request& request, Response* response, Retrier::Safety safety) const {
    Retrier retry(options);
    for (;;) {
      if (safety == Retrier::kOnlyIfNothingApplied) AwaitConnected(retry);
      grpc::ClientContext context;
      Prepare(&context, retry.deadline());
      grpc::Status status = (stub.get()->*method)(&context, request, response);
      RaiseSchemaFloor(address, context);
      if (status.ok()) return;
      if (!retry.Again(status, safety, context)) Fail(status);
    }
  }

  // The same-host data path: the arena a call takes spans of, lent on
  // first use; null when the call's bytes go over the socket (see
  // ClientOptions::shared_memory_bytes). After a failed lend, or a tdstored
  // that offers none, the next try is 30 s later; after a tdstored that
  // could not be asked, 1 s later.
  // `*rings` (if given): which calls the tdstored holding the region takes
  // through a ring of a few spans reused, so that bytes larger than any
  // span still cross through shared memory.
  struct ShmRings {
    bool write = false;  // WriteLeavesShared (capability shared_memory_chunks)
    bool read = false;   // ReadLeavesShared (capability shared_memory_read_chunks)
    // WriteLeaves with shm_data chunks lent to the call's end (capability
    // shared_memory_lent_chunks): one span, copied into and sent in pieces.
    bool lent_chunks = false;
  };
  std::shared_ptr<ShmArena> SharedMemory(ShmRings* rings = nullptr) const;
  // Stops using `arena` (if it is still the current one): its call ended
  // without tdstored's answer, or tdstored no longer holds it. The next
  // SharedMemory() lends a new region; with `back_off`, not before 30 s.
  void RetireSharedMemory(const ShmArena* arena, bool back_off = false) const;

  const std::string address;
  const ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::TdStore::Stub> stub;
  // ReadLeaves and WriteLeaves called with raw frames (leaf_stream_calls.cc
  // says why), in place of the stub's: the same RPCs on the wire.
  std::unique_ptr<grpc::internal::RpcMethod> read_leaves_raw;
  std::unique_ptr<grpc::internal::RpcMethod> write_leaves_raw;
  std::unique_ptr<grpc::internal::RpcMethod> write_leaves_shared_raw;
  std::unique_ptr<grpc::internal::RpcMethod> read_leaves_shared_raw;
  mutable std::mutex shm_mu;
  mutable std::shared_ptr<ShmArena> shm_arena;  // guarded by shm_mu
  mutable ShmRings shm_rings;  // its tdstored's capabilities; guarded by shm_mu
  mutable std::chrono::steady_clock::time_point shm_next_try;  // guarded by shm_mu
  // Watched schema copies (null when options.watch_schemas is off).
  // Declared last: its streams end before the stub and channel go.
  std::unique_ptr<SchemaCopies> schemas;
  // Writes returned before tdstored applied them (Dict::write_counted_behind).
  // Every public call waits for them first (writes_behind.h). Declared
  // after everything its writes use: destroyed first, it sends what is
  // queued while the channel and the schema copies are still there.
  mutable WritesBehind writes_behind;
};

}  // namespace tdstore::core

#endif  // TDSTORE_CLIENT_CORE_SRC_CLIENT_IMPL_H_
