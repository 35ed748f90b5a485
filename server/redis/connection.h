// One blocking connection to one Redis server (hiredis).
//
// Commands may be pipelined: Append() queues a command without I/O,
// GetReply() flushes what is queued and returns the next reply in order.
//
// Error model: a Redis error reply (-ERR, -NOSCRIPT, ...) is a *successful*
// call returning a Reply with is_error(); only transport problems (refused,
// reset, timeout, protocol error) are UNAVAILABLE. After a transport error the
// connection is broken() and must be dropped: its pipeline state is unknown.
//
// Not thread-safe: one thread at a time (ConnectionPool hands them out).
#ifndef TDSTORE_SERVER_REDIS_CONNECTION_H_
#define TDSTORE_SERVER_REDIS_CONNECTION_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/redis/local_tcp.h"
#include "server/redis/redis_address.h"
#include "server/redis/redis_events.h"
#include "server/redis/reply.h"
#include "server/redis/resp_reader.h"

struct redisContext;
struct iovec;

namespace tdstore::redis {

struct ConnectOptions {
  std::chrono::milliseconds connect_timeout{2000};
  // Read/write timeout of every command; a stuck Redis turns into UNAVAILABLE.
  std::chrono::milliseconds io_timeout{30000};
  // Told about connects, replies, transport errors and script loads
  // (redis_events.h); null: nobody is. Not owned; must outlive every
  // connection opened with these options.
  RedisEvents* events = nullptr;
  // TCP congestion control of a connection to a Redis on this host
  // (local_tcp.h says why; PeerIsThisHost says what counts as this host).
  // Empty: the host's default. A connection to another host, or through a
  // unix socket, is never changed. Best effort, as keep-alive is: the
  // daemon checks the name once at launch (CheckCongestionControl).
  std::string local_congestion = kDefaultLocalCongestion;
};

class Connection {
 public:
  // Connects, then AUTH (when the address has a password) and SELECT (when
  // db != 0). UNAVAILABLE if Redis cannot be reached; PERMISSION_DENIED or
  // UNAUTHENTICATED if AUTH fails. Messages never contain the password.
  // Reports the attempt, and later this connection's traffic, to
  // options.events.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(const RedisAddress& address,
                                                          const ConnectOptions& options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // One command, one round trip (flushes anything appended before and
  // returns *this* command's reply only if nothing was pending: callers do
  // not mix Call with an unfinished pipeline). argv is copied before return.
  absl::StatusOr<Reply> Call(absl::Span<const std::string_view> argv);

  // Queues a command; no I/O, until the queued commands reach
  // kWriteAtBytes: then they are written (blocking, without reading
  // replies). argv is copied before return. A command with an argument of
  // kDirectArgBytes or more is the exception: it is written to the socket
  // at once (after whatever was queued before it), the large arguments
  // straight from argv's memory. Either way argv may go when Append returns.
  absl::Status Append(absl::Span<const std::string_view> argv);
  static constexpr size_t kDirectArgBytes = 64 * 1024;
  static constexpr size_t kWriteAtBytes = 1 << 20;
  // What the queue's buffer may keep once no reply is pending.
  static constexpr size_t kIdleOutputBytes = 64 << 10;
  // Writes every queued command to the socket (blocking) without reading.
  // Lets Redis start on a batch before the caller next needs a reply.
  absl::Status Flush();
  // Flushes queued commands and blocks for the next reply.
  absl::StatusOr<Reply> GetReply();
  // Commands appended whose replies have not been read.
  int pending() const { return pending_; }

  // A command whose one large argument, the value, arrives in pieces (a
  // whole-leaf write passed on to Redis while its client still copies it,
  // leaf_writer.h). AppendOpen writes what is queued, then the command up
  // to the value: `head`'s arguments and the value's length,
  // `value_bytes` (> 0). AppendValue writes the value's next bytes straight
  // from the caller's memory; with its last byte it writes `tail`'s
  // arguments too, which end the command, and the command is pending from
  // then on. Until then the connection is mid_command(): Append, Flush,
  // GetReply and AppendOpen fail FAILED_PRECONDITION, and one given back
  // so is closed, never pooled. Redis drops a half-received command with
  // its connection, and with it the MULTI it was queued in, if any.
  absl::Status AppendOpen(absl::Span<const std::string_view> head, int64_t value_bytes,
                          absl::Span<const std::string_view> tail);
  absl::Status AppendValue(std::string_view bytes);
  bool mid_command() const { return value_left_ > 0; }

  bool broken() const { return broken_; }

  // The TCP congestion control this connection sends with
  // (ConnectOptions::local_congestion). FAILED_PRECONDITION through a unix
  // socket. For tests and diagnostics.
  absl::StatusOr<std::string> TcpCongestion() const;

  // For an idle connection (nothing pending): whether the server closed it
  // (restart, failover, idle timeout) or sent something unasked. Either way
  // it must not carry a command: one sent there would fail after sending,
  // with its fate unknown. A non-blocking poll(2), no read.
  bool ClosedByPeer() const;

  // For a connection in subscribe mode (SUBSCRIBE sent with Append): the
  // next thing Redis sent, be it a pushed message or the reply to a command
  // sent since, waiting up to `timeout` for it, or until `wake_fd` (if >= 0)
  // becomes readable. nullopt when the time ran out, the wake fd fired or
  // only part of a reply has arrived; UNAVAILABLE (broken) if the
  // connection failed. Flushes queued commands first.
  absl::StatusOr<std::optional<Reply>> NextPushed(std::chrono::milliseconds timeout,
                                                  int wake_fd = -1);

  // WAIT replicas timeout: blocks until `replicas` replicas acknowledged
  // every write sent on this connection. Requires pending() == 0.
  // UNAVAILABLE if fewer confirm in time or the connection breaks.
  absl::Status WaitReplicas(int replicas, std::chrono::milliseconds timeout);

 private:
  explicit Connection(redisContext* ctx);
  // Open() without the reporting.
  static absl::StatusOr<std::unique_ptr<Connection>> Connect(const RedisAddress& address,
                                                             const ConnectOptions& options);
  absl::Status TransportError(std::string_view what);
  // The reader failed (resp_reader.h): broken, said with where.
  absl::Status ReadFailed(const absl::Status& why);
  // Append for a command with large arguments: see Append.
  absl::Status WriteDirect(absl::Span<const std::string_view> argv);

  redisContext* ctx_;
  // Reads the replies (hiredis' reader reads only Open's handshake).
  std::unique_ptr<RespReader> reader_;
  // Where this connection reports; a no-op sink until Open() succeeded.
  RedisNodeEvents* events_;
  int pending_ = 0;
  bool broken_ = false;
  // While mid_command(): the value's bytes still to come, and the RESP of
  // the command's end (the value's CRLF and the tail's arguments).
  int64_t value_left_ = 0;
  std::string value_tail_;
  // FAILED_PRECONDITION naming `what`, while mid_command().
  absl::Status MidCommand(std::string_view what) const;
  // Writes all of `iov` to the socket (blocking, with the I/O timeout).
  absl::Status WriteAll(std::vector<iovec> iov);

  // The commands queued and not yet written, in RESP. Why not hiredis'
  // output buffer: Append copied each command into it a second time, and
  // it grew by reallocation to hold a whole pipeline. A strided write's
  // 16,670 SETRANGEs in one MULTI made it 5.5 MB of fresh pages per call
  // (page faults and realloc copies: most of tdstored's time for
  // td[::3] = v, perf). This one is written out at kWriteAtBytes and keeps
  // its capacity while the pipeline runs. hiredis' own stays empty past
  // the handshake.
  std::string out_;
};

// `argv` as a RESP command (an array of bulk strings), appended to `*out`,
// byte for byte as hiredis' redisFormatCommandArgv writes it.
void AppendCommand(absl::Span<const std::string_view> argv, std::string* out);
// The same into `*out`, replaced.
// Why not hiredis: 0.14 formats each length through sdscatfmt, a printf
// of its own; a sample's 256 GETRANGEs spent more there than in writing
// them to the socket (perf, tdstored).
void FormatCommand(absl::Span<const std::string_view> argv, std::string* out);

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_CONNECTION_H_
