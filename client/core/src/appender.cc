// core::Appender: row writes over one AppendRows stream (core.h).
#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>

#include "client/core/src/client_impl.h"
#include "client/core/src/convert.h"
#include "client/core/src/errors.h"
#include "common/protocol_limits.h"
#include "tdstore/core.h"

namespace tdstore::core {

struct Appender::State {
  std::shared_ptr<Client::Impl> impl;
  v1::AppendRequest begin;         // sent first on every stream
  std::vector<int64_t> row_bytes;  // per leaf
  AppendOptions options;
  int64_t max_batch_rows = 1;

  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AppendRequest, v1::AppendAck>> stream;
  struct Sent {
    int64_t sequence, start_row, rows;
  };
  std::deque<Sent> in_flight;
  int64_t next_sequence = 1;
  int64_t rows_written = 0;

  // The batch being coalesced.
  v1::AppendRequest pending;
  int64_t pending_start = 0;
  int64_t pending_rows = 0;

  // The first failure not yet reported.
  std::optional<Error> failure;

  // Sends what is queued and waits until every batch is acknowledged;
  // throws the first failure not yet reported.
  void Flush() {
    SendPending();
    while (!in_flight.empty()) ReadAck();
    ThrowFailure();
  }

  void Record(Error error) {
    if (!failure) failure = std::move(error);
  }
  void ThrowFailure() {
    if (!failure) return;
    Error error = *std::move(failure);
    failure.reset();
    throw error;
  }

  void Open() {
    context = std::make_unique<grpc::ClientContext>();
    // A stream as long-lived as its writer: no deadline (the server cancels
    // one idle longer than its --idle-stream-timeout-ms; it is reopened).
    impl->Prepare(context.get(), std::chrono::system_clock::time_point::max());
    stream = impl->stub->AppendRows(context.get());
    if (!stream->Write(begin)) Closed();
  }

  // The stream ended (the server refused it, or it broke): throws its status.
  [[noreturn]] void Closed() {
    grpc::Status status = stream->Finish();
    RaiseSchemaFloor(impl->address, *context);
    stream.reset();
    int64_t unknown = 0;
    for (const Sent& sent : in_flight) unknown += sent.rows;
    in_flight.clear();
    if (status.ok()) status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream ended early");
    // Refused at its start (unknown dict, no right to it, ...): the server
    // says nothing was applied, so the rows in flight are known unwritten.
    if (unknown > 0 && !NothingApplied(*context)) {
      throw Error(StatusCode::kUnavailable,
                  "the append stream broke with " + std::to_string(unknown) +
                      " rows unacknowledged (they may or may not be written): " +
                      status.error_message());
    }
    impl->Fail(status);
  }

  // Receives the oldest acknowledgement.
  void ReadAck() {
    v1::AppendAck ack;
    if (!stream->Read(&ack)) Closed();
    const Sent sent = in_flight.front();
    in_flight.pop_front();
    if (ack.sequence() != sent.sequence) {
      throw Error(StatusCode::kDataLoss, "append acknowledgements out of order");
    }
    if (ack.code() == 0) {
      rows_written += sent.rows;
      return;
    }
    Record(Error(static_cast<StatusCode>(ack.code()),
                 "rows [" + std::to_string(sent.start_row) + ", " +
                     std::to_string(sent.start_row + sent.rows) +
                     ") were not written: " + ack.message()));
  }

  void SendPending() {
    if (pending_rows == 0) return;
    if (stream == nullptr) Open();
    while (static_cast<int>(in_flight.size()) >= options.window) ReadAck();
    v1::RowBatch* batch = pending.mutable_batch();
    batch->set_sequence(next_sequence++);
    batch->set_start_row(pending_start);
    batch->set_rows(pending_rows);
    if (!stream->Write(pending)) {
      // An idle stream the server closed: reopen it once, when nothing is
      // in flight whose fate that would hide.
      if (!in_flight.empty()) Closed();
      (void)stream->Finish();
      Open();
      if (!stream->Write(pending)) Closed();
    }
    in_flight.push_back({batch->sequence(), pending_start, pending_rows});
    for (std::string& rows : *batch->mutable_leaf_rows()) rows.clear();
    pending_rows = 0;
  }
};

Appender::Appender(std::unique_ptr<State> state) : state_(std::move(state)) {}
Appender::Appender(Appender&&) noexcept = default;
Appender& Appender::operator=(Appender&&) noexcept = default;

Appender::~Appender() {
  if (state_ == nullptr) return;
  try {
    // Its own rows only: a write behind's failure is for a call that can
    // throw it, not for this one, which could not report it.
    state_->Flush();
    if (state_->stream != nullptr) {
      state_->stream->WritesDone();
      (void)state_->stream->Finish();
    }
  } catch (...) {
    // Documented: a destructor cannot report; flush() does.
  }
}

void Appender::append(int64_t start_row, int64_t rows, const std::vector<const void*>& leaf_rows) {
  State& s = *state_;
  s.impl->writes_behind.Settle();
  s.ThrowFailure();
  if (leaf_rows.size() != s.row_bytes.size()) {
    throw Error(StatusCode::kInvalidArgument,
                "append got rows of " + std::to_string(leaf_rows.size()) +
                    " leaves; the appender writes " + std::to_string(s.row_bytes.size()));
  }
  if (rows < 0 || start_row < 0) {
    throw Error(StatusCode::kInvalidArgument, "append needs a start row and a row count >= 0");
  }
  for (int64_t done = 0; done < rows;) {
    const int64_t at = start_row + done;
    if (s.pending_rows > 0 &&
        (at != s.pending_start + s.pending_rows || s.pending_rows == s.max_batch_rows)) {
      s.SendPending();
    }
    if (s.pending_rows == 0) s.pending_start = at;
    const int64_t n = std::min(rows - done, s.max_batch_rows - s.pending_rows);
    v1::RowBatch* batch = s.pending.mutable_batch();
    for (size_t i = 0; i < leaf_rows.size(); ++i) {
      const char* from = static_cast<const char*>(leaf_rows[i]) + done * s.row_bytes[i];
      batch->mutable_leaf_rows(static_cast<int>(i))->append(from, static_cast<size_t>(n * s.row_bytes[i]));
    }
    s.pending_rows += n;
    done += n;
    if (s.pending_rows == s.max_batch_rows) s.SendPending();
  }
  s.ThrowFailure();
}

void Appender::flush() {
  state_->impl->writes_behind.Settle();
  state_->Flush();
}

int64_t Appender::rows_written() const { return state_->rows_written; }

const std::vector<int64_t>& Appender::row_bytes() const { return state_->row_bytes; }

Appender Dict::appender(const std::vector<Key>& leaves, const AppendOptions& options) const {
  impl_->writes_behind.Settle();
  if (leaves.empty()) throw Error(StatusCode::kInvalidArgument, "an appender needs a leaf");
  if (options.batch_rows < 1 || options.window < 1) {
    throw Error(StatusCode::kInvalidArgument, "AppendOptions: batch_rows and window must be >= 1");
  }
  const DictInfo info = describe();
  if (info.batch_size.empty()) {
    throw Error(StatusCode::kInvalidArgument,
                "dict '" + name_ + "' has no batch dim to append rows along");
  }
  auto state = std::make_unique<Appender::State>();
  state->impl = impl_;
  state->options = options;
  v1::AppendBegin* begin = state->begin.mutable_begin();
  begin->set_dict(name_);
  begin->set_dict_id(id_);
  int64_t bytes_per_row = 0;
  for (const Key& key : leaves) {
    auto leaf = std::find_if(info.leaves.begin(), info.leaves.end(),
                             [&](const LeafMeta& m) { return m.path == key; });
    if (leaf == info.leaves.end()) {
      throw Error(StatusCode::kNotFound,
                  "dict '" + name_ + "' has no leaf '" + key.str() + "' to append to");
    }
    const int64_t rows = std::max<int64_t>(1, info.batch_size[0]);
    state->row_bytes.push_back(leaf->byte_size / rows);
    bytes_per_row += state->row_bytes.back();
    ToProto(key, begin->add_leaves());
    state->pending.mutable_batch()->add_leaf_rows();
  }
  // A batch must fit one message (with room for its framing).
  if (bytes_per_row > kMaxMessageBytes - (64 << 10)) {
    throw Error(StatusCode::kInvalidArgument,
                "a row of " + std::to_string(bytes_per_row) +
                    " bytes does not fit one append message; write such rows with an indexed "
                    "write instead");
  }
  const int64_t fit = (kMaxMessageBytes - (64 << 10)) / std::max<int64_t>(1, bytes_per_row);
  state->max_batch_rows = std::max<int64_t>(1, std::min(options.batch_rows, fit));
  return Appender(std::move(state));
}

}  // namespace tdstore::core
