// RedisClient for one standalone Redis: a pool of blocking connections.
#include "server/redis/standalone_client.h"

#include <deque>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace tdstore::redis {
namespace {

// A pipeline on one leased connection. The connection goes back to the pool
// when the pipeline dies, but only in a known state: not broken and with
// every reply read off the socket (buffered replies we simply drop).
class StandalonePipeline : public Pipeline {
 public:
  StandalonePipeline(StandaloneClient* client, std::unique_ptr<Connection> conn,
                     int max_outstanding)
      : client_(client), conn_(std::move(conn)), max_outstanding_(max_outstanding) {}

  // Release() closes the connection instead of pooling it if it is broken
  // or still has replies on the wire (they would poison the next user).
  ~StandalonePipeline() override { client_->Release(std::move(conn_)); }

  absl::Status Send(std::string_view /*routing_key*/,
                    absl::Span<const std::string_view> argv) override {
    if (!failure_.ok()) return failure_;
    if (absl::Status s = MakeRoom(); !s.ok()) return s;
    if (absl::Status s = conn_->Append(argv); !s.ok()) return Fail(s);
    return absl::OkStatus();
  }

  absl::Status Flush() override {
    if (!failure_.ok()) return failure_;
    if (absl::Status s = conn_->Flush(); !s.ok()) return Fail(s);
    return absl::OkStatus();
  }

  absl::StatusOr<Reply> Receive() override {
    if (!failure_.ok()) return failure_;
    if (!buffered_.empty()) {
      Reply reply = std::move(buffered_.front());
      buffered_.pop_front();
      return reply;
    }
    if (conn_->pending() == 0) {
      return absl::FailedPreconditionError("Pipeline::Receive with no command outstanding");
    }
    absl::StatusOr<Reply> reply = conn_->GetReply();
    if (!reply.ok()) return Fail(reply.status());
    return reply;
  }

  int outstanding() const override {
    return conn_->pending() + static_cast<int>(buffered_.size());
  }

  absl::Status SendOpen(std::string_view /*routing_key*/, absl::Span<const std::string_view> head,
                        int64_t value_bytes, absl::Span<const std::string_view> tail) override {
    if (!failure_.ok()) return failure_;
    if (absl::Status s = MakeRoom(); !s.ok()) return s;
    absl::Status s = conn_->AppendOpen(head, value_bytes, tail);
    return s.ok() || s.code() != absl::StatusCode::kUnavailable ? s : Fail(s);
  }

  absl::Status SendValue(std::string_view bytes) override {
    if (!failure_.ok()) return failure_;
    absl::Status s = conn_->AppendValue(bytes);
    return s.ok() || s.code() != absl::StatusCode::kUnavailable ? s : Fail(s);
  }


  absl::Status WaitReplicas(int replicas, std::chrono::milliseconds timeout) override {
    if (!failure_.ok()) return failure_;
    if (outstanding() != 0) {
      return absl::FailedPreconditionError("WaitReplicas with replies outstanding");
    }
    return conn_->WaitReplicas(replicas, timeout);
  }

 private:
  // Keeps the window: reads (and buffers) the oldest replies until there
  // is room. Replies are read in order, so buffering keeps Receive()
  // ordered.
  absl::Status MakeRoom() {
    while (conn_->pending() >= max_outstanding_) {
      absl::StatusOr<Reply> reply = conn_->GetReply();
      if (!reply.ok()) return Fail(reply.status());
      buffered_.push_back(*std::move(reply));
    }
    return absl::OkStatus();
  }

  // A transport error leaves the stream in an unknown state: every later
  // call reports the same error.
  absl::Status Fail(absl::Status status) {
    failure_ = status;
    return status;
  }

  StandaloneClient* const client_;
  std::unique_ptr<Connection> conn_;
  const int max_outstanding_;
  std::deque<Reply> buffered_;
  absl::Status failure_;
};

}  // namespace

StandaloneClient::StandaloneClient(RedisAddress address, ConnectOptions options, int max_idle)
    : address_(std::move(address)), options_(options), max_idle_(max_idle) {}

StandaloneClient::~StandaloneClient() = default;

absl::StatusOr<std::unique_ptr<Connection>> StandaloneClient::Acquire() {
  while (true) {
    std::unique_ptr<Connection> conn;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (idle_.empty()) break;
      conn = std::move(idle_.back());
      idle_.pop_back();
    }
    // An idle connection the server has closed meanwhile (it restarted or
    // died in a failover) would fail the command after sending it, when it
    // can no longer be retried: close it and try the next (outside the lock).
    if (!conn->ClosedByPeer()) return conn;
  }
  // Connect outside the lock: a slow or unreachable Redis must not stall
  // threads that could reuse an idle connection.
  return Connection::Open(address_, options_);
}

absl::StatusOr<std::unique_ptr<Connection>> StandaloneClient::ConnectForSubscribe() {
  return Connection::Open(address_, options_);
}

void StandaloneClient::Release(std::unique_ptr<Connection> conn) {
  if (conn == nullptr) return;
  if (conn->broken()) {
    // A transport error usually means the server went away (restart,
    // failover): the idle connections to it are dead too, and reusing each
    // of them would fail one more call. Drop them all; new ones are cheap.
    std::vector<std::unique_ptr<Connection>> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      dropped.swap(idle_);
    }
    return;  // `conn` and `dropped` close outside the lock
  }
  // Replies still on the wire, or a command half sent: close it.
  if (conn->pending() > 0 || conn->mid_command()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int>(idle_.size()) < max_idle_) idle_.push_back(std::move(conn));
}

absl::StatusOr<Reply> StandaloneClient::Call(std::string_view /*routing_key*/,
                                             absl::Span<const std::string_view> argv) {
  absl::StatusOr<std::unique_ptr<Connection>> conn = Acquire();
  if (!conn.ok()) return conn.status();
  absl::StatusOr<Reply> reply = (*conn)->Call(argv);
  Release(*std::move(conn));
  return reply;
}

absl::StatusOr<Reply> StandaloneClient::Eval(const Script& script,
                                             absl::Span<const std::string_view> keys,
                                             absl::Span<const std::string_view> args) {
  return EvalDurable(script, keys, args, 0, std::chrono::milliseconds(0));
}

absl::StatusOr<Reply> StandaloneClient::EvalDurable(const Script& script,
                                                    absl::Span<const std::string_view> keys,
                                                    absl::Span<const std::string_view> args,
                                                    int replicas,
                                                    std::chrono::milliseconds timeout) {
  const std::string numkeys = std::to_string(keys.size());
  std::vector<std::string_view> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back("EVALSHA");
  argv.push_back(script.sha1());
  argv.push_back(numkeys);
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());

  absl::StatusOr<std::unique_ptr<Connection>> conn = Acquire();
  if (!conn.ok()) return conn.status();
  absl::StatusOr<Reply> reply = (*conn)->Call(argv);
  if (reply.ok() && reply->is_error() && reply->str().substr(0, 8) == "NOSCRIPT") {
    // The server lost its script cache (restart, SCRIPT FLUSH). Load on the
    // same connection and retry once; a second NOSCRIPT is returned as is.
    const std::string_view load[] = {"SCRIPT", "LOAD", script.body()};
    absl::StatusOr<Reply> loaded = (*conn)->Call(load);
    if (!loaded.ok() || loaded->is_error()) {
      reply = std::move(loaded);
    } else {
      reply = (*conn)->Call(argv);
    }
  }
  if (replicas > 0 && reply.ok() && !reply->is_error()) {
    if (absl::Status s = (*conn)->WaitReplicas(replicas, timeout); !s.ok()) reply = s;
  }
  Release(*std::move(conn));
  return reply;
}

absl::StatusOr<std::vector<Reply>> StandaloneClient::CallOnEveryMaster(
    absl::Span<const std::string_view> argv) {
  absl::StatusOr<Reply> reply = Call("", argv);
  if (!reply.ok()) return reply.status();
  std::vector<Reply> replies;
  replies.push_back(*std::move(reply));
  return replies;
}

absl::StatusOr<std::unique_ptr<Pipeline>> StandaloneClient::NewPipeline(int max_outstanding) {
  if (max_outstanding < 1) {
    return absl::InvalidArgumentError("pipeline max_outstanding must be >= 1, got " +
                                      std::to_string(max_outstanding));
  }
  absl::StatusOr<std::unique_ptr<Connection>> conn = Acquire();
  if (!conn.ok()) return conn.status();
  return std::make_unique<StandalonePipeline>(this, *std::move(conn), max_outstanding);
}

std::string StandaloneClient::Describe() const { return "standalone " + address_.Redacted(); }

}  // namespace tdstore::redis
