// One WatchSchema call: the schema events of one dict, pushed to the
// client as the store's watch reports them (store/store.h, Store::Watch).
//
// A callback-API stream, not a sync handler: a watch is open for as long
// as the client keeps the dict, mostly idle, and must not hold one of the
// sync server's threads. Only the newest event waits to be sent: a client
// that reads slowly skips the versions in between, never a change (each
// event is the whole schema). The stream ends after a final event: gone
// (the dict was deleted or renamed: a `gone` event, then OK) or
// unavailable (the subscription was lost or tdstored stops: UNAVAILABLE,
// so the client stops trusting its copy and may watch again).
//
// Thread-safe; gRPC owns the object and deletes it in OnDone.
#ifndef TDSTORE_SERVER_SERVICE_SCHEMA_WATCH_STREAM_H_
#define TDSTORE_SERVER_SERVICE_SCHEMA_WATCH_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "server/store/store.h"
#include "tdstore/v1/tdstore.grpc.pb.h"

namespace tdstore::service {

class SchemaWatchStream final : public grpc::ServerWriteReactor<v1::SchemaEvent> {
 public:
  // Starts watching `req`'s dict through `store`, or, when `refusal` is not
  // OK (the prologue refused the call), finishes at once with it.
  SchemaWatchStream(store::Store* store, const v1::WatchSchemaRequest& req,
                    const grpc::Status& refusal);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // What the store's watch hands on, shared with its listener so that a
  // call arriving after this stream is gone finds nothing to write to.
  struct Shared {
    std::mutex mu;
    SchemaWatchStream* stream = nullptr;  // null once OnDone ran
  };
  // The store's listener: queues the event and sends it if idle. `lock`
  // holds shared_->mu.
  void Push(const absl::StatusOr<store::DictSchema>& schema, std::unique_lock<std::mutex> lock);
  // Starts the next write, or the finish, unless one is in flight. Takes
  // shared_->mu held and releases it before calling into gRPC: gRPC may
  // run OnWriteDone or OnDone (which deletes this) inline, so nothing
  // touches the object after that call.
  void Advance(std::unique_lock<std::mutex> lock);

  store::Store* const store_;
  const std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  std::optional<uint64_t> token_;  // set before any event can arrive

  // Guarded by shared_->mu.
  bool writing_ = false;
  bool finished_ = false;
  std::optional<v1::SchemaEvent> next_;   // the newest event not yet sent
  std::optional<grpc::Status> finish_;    // sent once next_ and the write are done
  v1::SchemaEvent in_flight_;             // what StartWrite is sending
};

}  // namespace tdstore::service

#endif  // TDSTORE_SERVER_SERVICE_SCHEMA_WATCH_STREAM_H_
