// The daemon's door to Redis: commands, scripts and pipelines, routed by key.
//
// The store layer talks only to RedisClient and Pipeline, never to a raw
// connection, so the same store code serves standalone Redis today and Redis
// Cluster later (a cluster client routes each command by its routing key's
// hash slot; the standalone client ignores the key).
//
// Error model (all calls): a transport failure or a Redis that cannot be
// reached is UNAVAILABLE (retryable). An error reply from Redis is not a
// failed call: it comes back as a Reply with is_error(), and the caller
// decides what it means (server/redis_store/redis_errors.h).
//
// Thread safety: RedisClient is thread-safe; each Pipeline belongs to one
// thread at a time and must not outlive the client that made it.
#ifndef TDSTORE_SERVER_REDIS_REDIS_CLIENT_H_
#define TDSTORE_SERVER_REDIS_REDIS_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/redis/connection.h"
#include "server/redis/reply.h"
#include "server/redis/script.h"

namespace tdstore::redis {

// Commands sent in order whose replies are read in order. At most
// `max_outstanding` commands wait for replies at any time: Send() blocks
// reading (and buffering) older replies when the window is full, so memory
// stays bounded whatever the pipeline's length.
class Pipeline {
 public:
  virtual ~Pipeline() = default;

  // Queues argv (copied before return) for the node serving routing_key.
  virtual absl::Status Send(std::string_view routing_key,
                            absl::Span<const std::string_view> argv) = 0;
  // Sends every queued command now, without waiting for replies. Send()
  // only queues; call Flush() when a batch is complete so Redis works on it
  // while the caller does something else (e.g. waits for more data).
  virtual absl::Status Flush() = 0;
  // The reply of the oldest command not yet received. Error replies come
  // back as a Reply with is_error(), not as a failed status; a failed status
  // means the transport broke and the pipeline is unusable.
  virtual absl::StatusOr<Reply> Receive() = 0;
  // Commands sent whose replies have not been Received.
  virtual int outstanding() const = 0;

  // A command whose one large argument, the value, arrives in pieces, on
  // the node serving routing_key (Connection::AppendOpen says how): SendOpen
  // sends what is queued and the command up to the value (`head`'s
  // arguments, then the value's length, value_bytes > 0), SendValue the
  // value's next bytes from the caller's memory, and with its last byte
  // `tail`'s arguments; the command is outstanding from then on. Until
  // then the pipeline carries nothing else (FAILED_PRECONDITION). A
  // pipeline destroyed before the value is whole closes its connection,
  // and Redis drops the half-received command and the MULTI it was in.
  // Only where pipelines_in_order() (RedisClient): a cluster pipeline
  // re-issues redirected commands, which it cannot do with bytes it did
  // not keep, and answers UNIMPLEMENTED.
  virtual absl::Status SendOpen(std::string_view routing_key,
                                absl::Span<const std::string_view> head, int64_t value_bytes,
                                absl::Span<const std::string_view> tail) = 0;
  virtual absl::Status SendValue(std::string_view bytes) = 0;

  // Makes every write sent on this pipeline durable on `replicas` replicas:
  // sends WAIT on each connection the pipeline used. Requires outstanding()
  // == 0. UNAVAILABLE if fewer replicas confirm within `timeout`.
  virtual absl::Status WaitReplicas(int replicas, std::chrono::milliseconds timeout) = 0;

  // For a pipeline that will end with WaitReplicas(replicas, timeout); call
  // it right after NewPipeline, with the same values. A cluster pipeline
  // re-issues a redirected command (MOVED, ASK, TRYAGAIN, CLUSTERDOWN) on
  // its own, on another connection, which its WaitReplicas cannot cover:
  // with this set, each re-issued command is followed at once by WAIT
  // replicas timeout on its own connection (Receive() then fails UNAVAILABLE
  // if fewer confirm). Without it, WaitReplicas(n > 0) fails UNAVAILABLE if
  // any command was re-issued. Re-issued reads are waited for too (a WAIT
  // with no write is cheap while the replicas are connected), so set it on
  // pipelines whose writes need WAIT only. A standalone pipeline never
  // re-issues: no-op.
  virtual void set_reissue_replicas(int /*replicas*/, std::chrono::milliseconds /*timeout*/) {}
};

class RedisClient {
 public:
  virtual ~RedisClient() = default;

  // Runs one command on the node serving routing_key. Error replies are
  // returned as a Reply with is_error().
  virtual absl::StatusOr<Reply> Call(std::string_view routing_key,
                                     absl::Span<const std::string_view> argv) = 0;

  // EVALSHA script with keys and args (all keys must share one slot; keys[0]
  // routes). On NOSCRIPT, loads the script and retries once. An error reply
  // raised by the script comes back as a Reply with is_error().
  virtual absl::StatusOr<Reply> Eval(const Script& script,
                                     absl::Span<const std::string_view> keys,
                                     absl::Span<const std::string_view> args) = 0;

  // Runs a key-less command (SCRIPT LOAD, PING, INFO) on every master:
  // one reply per master (standalone: exactly one).
  virtual absl::StatusOr<std::vector<Reply>> CallOnEveryMaster(
      absl::Span<const std::string_view> argv) = 0;

  // Eval, then WAIT replicas timeout on the same connection (WAIT covers the
  // writes of its own connection only). replicas == 0 is plain Eval.
  // UNAVAILABLE if fewer replicas confirm in time (the script did run).
  virtual absl::StatusOr<Reply> EvalDurable(const Script& script,
                                            absl::Span<const std::string_view> keys,
                                            absl::Span<const std::string_view> args,
                                            int replicas, std::chrono::milliseconds timeout) = 0;

  // A new pipeline; see Pipeline.
  virtual absl::StatusOr<std::unique_ptr<Pipeline>> NewPipeline(int max_outstanding) = 0;
  // True if Redis runs a pipeline's commands in the order they were sent,
  // whatever their keys: one connection to one server (standalone). A
  // cluster pipeline sends each node's commands on that node's own
  // connection, and commands for different nodes run in no set order; it
  // also re-issues a redirected command on its own, outside any MULTI.
  virtual bool pipelines_in_order() const = 0;

  // A connection of the caller's own, outside every pool, for a subscriber:
  // to the server, or to any cluster node that answers (a PUBLISH reaches
  // every node of a cluster, replicas included). UNAVAILABLE if none does.
  virtual absl::StatusOr<std::unique_ptr<Connection>> ConnectForSubscribe() = 0;

  // "standalone redis://host:port" or similar, for logs and health output
  // (never contains a password).
  virtual std::string Describe() const = 0;
};

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_REDIS_CLIENT_H_
