#include "server/service/schema_watch_stream.h"

#include <utility>

#include "server/service/proto_convert.h"

namespace tdstore::service {

SchemaWatchStream::SchemaWatchStream(store::Store* store, const v1::WatchSchemaRequest& req,
                                     const grpc::Status& refusal)
    : store_(store) {
  std::unique_lock<std::mutex> lock(shared_->mu);
  shared_->stream = this;
  if (!refusal.ok()) {
    finish_ = refusal;
    Advance(std::move(lock));
    return;
  }
  std::weak_ptr<Shared> weak = shared_;
  // The listener runs on the watch's thread and must not block: Push only
  // queues, and starts a write that gRPC completes elsewhere.
  auto token = store_->Watch({req.dict(), req.dict_id()},
                             [weak](const absl::StatusOr<store::DictSchema>& schema) {
                               std::shared_ptr<Shared> shared = weak.lock();
                               if (shared == nullptr) return;
                               std::unique_lock<std::mutex> lock(shared->mu);
                               if (shared->stream == nullptr) return;
                               shared->stream->Push(schema, std::move(lock));
                             });
  // The first event needs this lock, so it cannot arrive before token_ is
  // set.
  if (!token.ok()) {
    finish_ = ToGrpc(token.status());
    Advance(std::move(lock));
    return;
  }
  token_ = *token;
}

void SchemaWatchStream::Push(const absl::StatusOr<store::DictSchema>& schema,
                             std::unique_lock<std::mutex> lock) {
  if (finish_.has_value()) return;  // already final
  if (schema.ok()) {
    v1::SchemaEvent event;
    ToProto(*schema, event.mutable_info());
    next_ = std::move(event);  // replaces an older one not yet sent
  } else if (absl::IsNotFound(schema.status())) {
    v1::SchemaEvent event;
    event.set_gone(true);
    next_ = std::move(event);
    finish_ = grpc::Status::OK;
  } else {
    next_.reset();  // the copy it would describe can no longer be trusted
    finish_ = ToGrpc(schema.status());
  }
  Advance(std::move(lock));
}

void SchemaWatchStream::Advance(std::unique_lock<std::mutex> lock) {
  if (writing_ || finished_) return;
  if (next_.has_value()) {
    in_flight_ = *std::move(next_);
    next_.reset();
    writing_ = true;
    lock.unlock();
    StartWrite(&in_flight_);
    return;
  }
  if (finish_.has_value()) {
    finished_ = true;
    const grpc::Status status = *finish_;
    lock.unlock();
    Finish(status);
  }
}

void SchemaWatchStream::OnWriteDone(bool ok) {
  std::unique_lock<std::mutex> lock(shared_->mu);
  writing_ = false;
  if (!ok && !finish_.has_value()) {
    // The client went away mid-write: there is nobody left to tell.
    next_.reset();
    finish_ = grpc::Status(grpc::StatusCode::CANCELLED, "the watch stream broke");
  }
  Advance(std::move(lock));
}

void SchemaWatchStream::OnCancel() {
  std::unique_lock<std::mutex> lock(shared_->mu);
  if (!finish_.has_value()) {
    next_.reset();
    finish_ = grpc::Status::CANCELLED;
  }
  Advance(std::move(lock));
}

void SchemaWatchStream::OnDone() {
  if (token_.has_value()) store_->Unwatch(*token_);
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->stream = nullptr;
  }
  delete this;
}

}  // namespace tdstore::service
