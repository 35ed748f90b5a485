// One blocking hiredis connection. See connection.h for the error model.
#include "server/redis/connection.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cctype>
#include <cstring>
#include <cerrno>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/str_cat.h"
#include "server/redis/local_tcp.h"
#include "server/redis/reply_objects.h"

namespace tdstore::redis {
namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// hiredis writes with write(2): on a socket the peer has closed that raises
// SIGPIPE, whose default action kills the daemon. Ignore it once, process
// wide, unless the program installed its own handler; the write then fails
// with EPIPE and becomes UNAVAILABLE like any other transport error.
void IgnoreSigpipeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current;
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
}

// Where a context is connected, for messages. Built from the context, not
// from the RedisAddress, so it cannot contain credentials.
std::string Where(const redisContext* ctx) {
  if (ctx->connection_type == REDIS_CONN_UNIX) {
    return std::string("unix://") + (ctx->unix_sock.path ? ctx->unix_sock.path : "?");
  }
  return std::string("redis://") + (ctx->tcp.host ? ctx->tcp.host : "?") + ":" +
         std::to_string(ctx->tcp.port);
}

// The sink of a connection nobody observes.
RedisNodeEvents* NoEvents() {
  static RedisNodeEvents* const none = new RedisNodeEvents();
  return none;
}

// The node's name for RedisEvents: "host:port" or the socket path, never
// the credentials.
std::string NodeName(const RedisAddress& address) {
  if (address.kind == RedisAddress::Kind::kUnix) return address.path;
  return address.host + ":" + std::to_string(address.port);
}

// SCRIPT LOAD, in any letter case.
bool IsScriptLoad(absl::Span<const std::string_view> argv) {
  auto equals = [](std::string_view a, std::string_view upper) {
    if (a.size() != upper.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::toupper(static_cast<unsigned char>(a[i])) != upper[i]) return false;
    }
    return true;
  };
  return argv.size() >= 2 && equals(argv[0], "SCRIPT") && equals(argv[1], "LOAD");
}

// Runs one command during Open(), before the Connection exists.
absl::StatusOr<Reply> Handshake(redisContext* ctx, const std::string& where,
                                const std::vector<std::string_view>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (std::string_view a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  void* raw = redisCommandArgv(ctx, static_cast<int>(argv.size()), ptrs.data(), lens.data());
  if (raw == nullptr) {
    // argv[0] is the command name; never the arguments (AUTH's password).
    return absl::UnavailableError(where + ": " + std::string(argv[0]) + ": " + ctx->errstr);
  }
  return Reply(static_cast<redisReply*>(raw));
}

// Maps an error reply to AUTH/SELECT/PING during Open(). Redis' messages
// never echo the password.
absl::Status HandshakeError(const std::string& where, std::string_view step, const Reply& reply) {
  const std::string message = where + ": " + std::string(step) + ": " + std::string(reply.str());
  if (reply.str().substr(0, 6) == "NOAUTH") return absl::UnauthenticatedError(message);
  if (step == "AUTH") return absl::PermissionDeniedError(message);  // WRONGPASS and the like
  if (step == "SELECT") return absl::InvalidArgumentError(message);
  return absl::UnavailableError(message);
}

}  // namespace

Connection::Connection(redisContext* ctx)
    : ctx_(ctx), reader_(std::make_unique<RespReader>(ctx->fd)), events_(NoEvents()) {}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(const RedisAddress& address,
                                                             const ConnectOptions& options) {
  RedisNodeEvents* events =
      options.events != nullptr ? options.events->ForNode(NodeName(address)) : NoEvents();
  absl::StatusOr<std::unique_ptr<Connection>> conn = Connect(address, options);
  events->OnConnect(conn.ok());
  if (conn.ok()) (*conn)->events_ = events;  // from now on OnClose is due
  return conn;
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Connect(const RedisAddress& address,
                                                                const ConnectOptions& options) {
  IgnoreSigpipeOnce();
  // A non-positive connect timeout means "no timeout" (hiredis would treat
  // a zero timeval as "give up immediately").
  const bool timed = options.connect_timeout.count() > 0;
  redisContext* ctx = nullptr;
  if (address.kind == RedisAddress::Kind::kUnix) {
    ctx = timed ? redisConnectUnixWithTimeout(address.path.c_str(),
                                              ToTimeval(options.connect_timeout))
                : redisConnectUnix(address.path.c_str());
  } else {
    ctx = timed ? redisConnectWithTimeout(address.host.c_str(), address.port,
                                          ToTimeval(options.connect_timeout))
                : redisConnect(address.host.c_str(), address.port);
  }
  if (ctx == nullptr) {
    return absl::UnavailableError(address.Redacted() + ": cannot allocate a hiredis context");
  }
  // Every reply, the handshake's included, is built by tdstored's table
  // (reply_objects.h: long strings from a pool of warm mappings), and so
  // freed by Reply with FreeReplyObject, never freeReplyObject.
  if (ctx->reader != nullptr) ctx->reader->fn = ReplyObjectFunctions();
  // From here on the Connection owns ctx and frees it on every early return.
  std::unique_ptr<Connection> conn(new Connection(ctx));
  const std::string where = address.Redacted();
  if (ctx->err != 0) {
    return absl::UnavailableError(where + ": connect: " + ctx->errstr);
  }
  if (options.io_timeout.count() > 0 &&
      redisSetTimeout(ctx, ToTimeval(options.io_timeout)) != REDIS_OK) {
    return absl::UnavailableError(where + ": setting the I/O timeout: " + ctx->errstr);
  }
  if (address.kind == RedisAddress::Kind::kTcp) {
    // Detects a peer that vanished without closing (host down, network
    // partition) on idle pooled connections. Best effort.
    redisEnableKeepAlive(ctx);
    if (!options.local_congestion.empty() && PeerIsThisHost(ctx->fd)) {
      SetCongestionControl(ctx->fd, options.local_congestion).IgnoreError();
    }
  }

  if (!address.password.empty()) {
    std::vector<std::string_view> auth = {"AUTH"};
    if (!address.user.empty()) auth.push_back(address.user);
    auth.push_back(address.password);
    auto reply = Handshake(ctx, where, auth);
    if (!reply.ok()) return reply.status();
    if (reply->is_error()) return HandshakeError(where, "AUTH", *reply);
  }
  if (address.db != 0) {
    const std::string db = std::to_string(address.db);
    auto reply = Handshake(ctx, where, {"SELECT", db});
    if (!reply.ok()) return reply.status();
    if (reply->is_error()) return HandshakeError(where, "SELECT", *reply);
  }
  if (address.password.empty() && address.db == 0) {
    // Nothing above talked to the server yet. One PING proves it is a Redis
    // that accepts us: a password-protected one answers NOAUTH here, once,
    // instead of failing every later command with an error reply.
    auto reply = Handshake(ctx, where, {"PING"});
    if (!reply.ok()) return reply.status();
    if (reply->is_error()) return HandshakeError(where, "PING", *reply);
  }
  return conn;
}

Connection::~Connection() {
  if (ctx_ != nullptr) redisFree(ctx_);
  events_->OnClose();
}

absl::Status Connection::TransportError(std::string_view what) {
  if (!broken_) events_->OnTransportError();  // once: later calls just repeat it
  broken_ = true;
  return absl::UnavailableError(Where(ctx_) + ": " + std::string(what) + ": " +
                                (ctx_->err != 0 ? ctx_->errstr : "connection broken"));
}

absl::Status Connection::ReadFailed(const absl::Status& why) {
  if (!broken_) events_->OnTransportError();
  broken_ = true;
  return absl::UnavailableError(Where(ctx_) + ": " + std::string(why.message()));
}

absl::StatusOr<Reply> Connection::Call(absl::Span<const std::string_view> argv) {
  if (broken_) return TransportError("call");
  if (pending_ > 0) {
    // GetReply would return the reply of an older, pipelined command.
    return absl::FailedPreconditionError("Connection::Call with " + std::to_string(pending_) +
                                         " pipelined replies not yet read");
  }
  if (absl::Status s = Append(argv); !s.ok()) return s;
  absl::StatusOr<Reply> reply = GetReply();
  if (reply.ok() && !reply->is_error() && IsScriptLoad(argv)) events_->OnScriptLoad();
  return reply;
}

void AppendCommand(absl::Span<const std::string_view> argv, std::string* out) {
  // The command's exact length first, then one resize and plain copies:
  // appending it piece by piece (five appends per argument) was a fifth of
  // tdstored's time for a strided write's 16,670 SETRANGEs (perf).
  auto digits = [](size_t n) {
    size_t d = 1;
    for (; n >= 10; n /= 10) ++d;
    return d;
  };
  size_t add = 3 + digits(argv.size());
  for (std::string_view arg : argv) add += 5 + digits(arg.size()) + arg.size();
  const size_t at = out->size();
  if (out->capacity() < at + add) out->reserve(std::max(at + add, 2 * out->capacity()));
  out->resize(at + add);
  char* p = out->data() + at;
  auto put_count = [&p, &digits](char kind, size_t n) {
    *p++ = kind;
    p = std::to_chars(p, p + digits(n), n).ptr;
    *p++ = '\r';
    *p++ = '\n';
  };
  put_count('*', argv.size());
  for (std::string_view arg : argv) {
    put_count('$', arg.size());
    if (!arg.empty()) std::memcpy(p, arg.data(), arg.size());
    p += arg.size();
    *p++ = '\r';
    *p++ = '\n';
  }
}

void FormatCommand(absl::Span<const std::string_view> argv, std::string* out) {
  out->clear();
  AppendCommand(argv, out);
}

absl::Status Connection::Append(absl::Span<const std::string_view> argv) {
  if (broken_) return TransportError("append");
  if (mid_command()) return MidCommand("Append");
  if (argv.empty()) return absl::InvalidArgumentError("empty Redis command");
  for (std::string_view arg : argv) {
    if (arg.size() >= kDirectArgBytes) return WriteDirect(argv);
  }
  AppendCommand(argv, &out_);
  ++pending_;
  // Written as they come once a window's worth is queued: the buffer stays
  // small and warm, and Redis starts on a long pipeline or MULTI sooner.
  // Replies stay unread meanwhile, as with WriteDirect: Redis goes on
  // reading while its replies wait for us.
  if (out_.size() >= kWriteAtBytes) return Flush();
  return absl::OkStatus();
}

// hiredis would format a command into a buffer of its own (one copy of
// every argument) and append that to its output buffer (a second copy)
// before writing it. For a window of a leaf, a megabyte, those two copies
// cost more than sending it. So such a command goes out here, in RESP as
// hiredis would write it, with the large arguments taken from the caller's
// memory by writev. What is queued goes first, so Redis sees the commands
// in the order they were appended, and the replies are read by hiredis as
// usual. The socket is blocking with the I/O timeout
// (SO_SNDTIMEO), as hiredis' own writes are.
absl::Status Connection::WriteDirect(absl::Span<const std::string_view> argv) {
  if (absl::Status s = Flush(); !s.ok()) return s;
  // The small parts (counts, lengths, small arguments) in one string; each
  // piece of the message is a range of it or a large argument.
  std::string text = "*" + std::to_string(argv.size()) + "\r\n";
  struct Piece {
    const char* direct;  // a large argument, or null: text[at, at + len)
    size_t at, len;
  };
  std::vector<Piece> pieces;
  size_t text_from = 0;
  auto end_text = [&] {
    if (text.size() > text_from) pieces.push_back({nullptr, text_from, text.size() - text_from});
    text_from = text.size();
  };
  for (std::string_view arg : argv) {
    text += "$" + std::to_string(arg.size()) + "\r\n";
    if (arg.size() >= kDirectArgBytes) {
      end_text();
      pieces.push_back({arg.data(), 0, arg.size()});
    } else {
      text.append(arg.data(), arg.size());
    }
    text += "\r\n";
  }
  end_text();
  std::vector<iovec> iov;
  iov.reserve(pieces.size());
  for (const Piece& p : pieces) {
    const char* base = p.direct != nullptr ? p.direct : text.data() + p.at;
    iov.push_back({const_cast<char*>(base), p.len});
  }
  if (absl::Status s = WriteAll(std::move(iov)); !s.ok()) return s;
  ++pending_;
  return absl::OkStatus();
}

absl::Status Connection::MidCommand(std::string_view what) const {
  return absl::FailedPreconditionError(
      StrCat("Connection::", what, " in the middle of a command's value (",
                   value_left_, " bytes still to come)"));
}

absl::Status Connection::AppendOpen(absl::Span<const std::string_view> head, int64_t value_bytes,
                                    absl::Span<const std::string_view> tail) {
  if (broken_) return TransportError("append");
  if (mid_command()) return MidCommand("AppendOpen");
  if (head.empty() || value_bytes <= 0) {
    return absl::InvalidArgumentError("AppendOpen needs a command name and a value of > 0 bytes");
  }
  if (absl::Status s = Flush(); !s.ok()) return s;
  // The head is formatted as a whole command of head.size() + 1 +
  // tail.size() arguments, cut before the value: its own count replaced.
  std::string text = StrCat("*", head.size() + 1 + tail.size(), "\r\n");
  std::string args;
  AppendCommand(head, &args);
  text.append(args, args.find('\n') + 1, std::string::npos);
  text += StrCat("$", value_bytes, "\r\n");
  value_tail_ = "\r\n";
  if (!tail.empty()) {
    std::string rest;
    AppendCommand(tail, &rest);
    value_tail_.append(rest, rest.find('\n') + 1, std::string::npos);
  }
  if (absl::Status s = WriteAll({iovec{text.data(), text.size()}}); !s.ok()) return s;
  value_left_ = value_bytes;
  return absl::OkStatus();
}

absl::Status Connection::AppendValue(std::string_view bytes) {
  if (broken_) return TransportError("write");
  if (static_cast<int64_t>(bytes.size()) > value_left_) {
    return absl::InvalidArgumentError(StrCat("AppendValue of ", bytes.size(),
                                                   " bytes with ", value_left_, " to come"));
  }
  if (bytes.empty()) return absl::OkStatus();
  const bool last = static_cast<int64_t>(bytes.size()) == value_left_;
  std::vector<iovec> iov{iovec{const_cast<char*>(bytes.data()), bytes.size()}};
  if (last) iov.push_back(iovec{value_tail_.data(), value_tail_.size()});
  if (absl::Status s = WriteAll(std::move(iov)); !s.ok()) return s;
  value_left_ -= static_cast<int64_t>(bytes.size());
  if (last) ++pending_;
  return absl::OkStatus();
}

absl::Status Connection::WriteAll(std::vector<iovec> iov) {
  // writev may take part of it; go on from where it stopped.
  size_t first = 0;
  while (first < iov.size()) {
    const size_t count = std::min<size_t>(iov.size() - first, IOV_MAX);
    ssize_t n = writev(ctx_->fd, iov.data() + first, static_cast<int>(count));
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      return TransportError(err == EAGAIN || err == EWOULDBLOCK
                                ? std::string("write: timed out")
                                : std::string("write: ") + std::strerror(err));
    }
    for (size_t done = static_cast<size_t>(n); done > 0 && first < iov.size();) {
      const size_t take = std::min(done, iov[first].iov_len);
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + take;
      iov[first].iov_len -= take;
      done -= take;
      if (iov[first].iov_len == 0) ++first;
    }
  }
  return absl::OkStatus();
}

absl::Status Connection::WaitReplicas(int replicas, std::chrono::milliseconds timeout) {
  if (replicas <= 0) return absl::OkStatus();
  const std::string n = std::to_string(replicas);
  const std::string ms = std::to_string(timeout.count());
  const std::string_view argv[] = {"WAIT", n, ms};
  absl::StatusOr<Reply> reply = Call(argv);
  if (!reply.ok()) return reply.status();
  if (reply->is_error()) {
    return absl::UnavailableError("WAIT failed: " + std::string(reply->str()));
  }
  if (reply->integer() < replicas) {
    return absl::UnavailableError("only " + std::to_string(reply->integer()) + " of " + n +
                                  " replicas confirmed the write within " + ms + " ms");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Connection::TcpCongestion() const {
  if (ctx_->connection_type != REDIS_CONN_TCP) {
    return absl::FailedPreconditionError("not a TCP connection");
  }
  return CongestionControl(ctx_->fd);
}

bool Connection::ClosedByPeer() const {
  if (broken_) return true;
  if (pending_ > 0) return false;  // replies due: readable is expected
  pollfd p{};
  p.fd = ctx_->fd;
  p.events = POLLIN;
  // Readable with nothing asked means EOF (or stray data); POLLHUP/POLLERR a
  // dead socket.
  return poll(&p, 1, 0) != 0;
}

absl::Status Connection::Flush() {
  if (broken_) return TransportError("write");
  if (mid_command()) return MidCommand("Flush");
  if (out_.empty()) return absl::OkStatus();
  absl::Status written = WriteAll({iovec{out_.data(), out_.size()}});
  out_.clear();
  // Kept for the rest of the pipeline (GetReply lets it go at the end),
  // unless a command of many arguments grew it far past a window.
  if (out_.capacity() > 4 * kWriteAtBytes) std::string().swap(out_);
  return written;
}

absl::StatusOr<std::optional<Reply>> Connection::NextPushed(std::chrono::milliseconds timeout,
                                                             int wake_fd) {
  if (absl::Status s = Flush(); !s.ok()) return s;
  // A reply already parsed from an earlier read comes first: the socket
  // may have nothing more to say.
  auto take_buffered = [&]() -> absl::StatusOr<std::optional<Reply>> {
    absl::StatusOr<std::optional<Reply>> reply = reader_->Buffered();
    if (!reply.ok()) return ReadFailed(reply.status());
    if (!reply->has_value()) return std::nullopt;
    if (pending_ > 0) --pending_;
    events_->OnReply();
    return reply;
  };
  auto buffered = take_buffered();
  if (!buffered.ok() || buffered->has_value()) return buffered;
  pollfd p[2]{};
  p[0].fd = ctx_->fd;
  p[0].events = POLLIN;
  p[1].fd = wake_fd;  // poll ignores a negative fd
  p[1].events = POLLIN;
  int ready = poll(p, 2, static_cast<int>(timeout.count()));
  if (ready < 0 && errno != EINTR) return TransportError("poll");
  if (ready <= 0 || (p[0].revents == 0)) return std::nullopt;
  if (absl::Status s = reader_->ReadSome(); !s.ok()) return ReadFailed(s);
  return take_buffered();
}

absl::StatusOr<Reply> Connection::GetReply() {
  if (broken_) return TransportError("read");
  if (mid_command()) return MidCommand("GetReply");
  if (pending_ == 0) {
    // Reading now would block until the I/O timeout for nothing.
    return absl::FailedPreconditionError("Connection::GetReply with no command pending");
  }
  // Flush everything queued first, even when an older reply is already
  // buffered (redisGetReply alone would not), so Redis starts on the
  // whole window while we consume replies.
  if (absl::Status s = Flush(); !s.ok()) return s;
  absl::StatusOr<Reply> reply = reader_->Next();
  if (!reply.ok()) return ReadFailed(reply.status());
  --pending_;
  // The pipeline is done: a buffer a long one grew (up to about two
  // windows) is not kept by an idle pooled connection.
  if (pending_ == 0 && out_.capacity() > kIdleOutputBytes) std::string().swap(out_);
  events_->OnReply();
  return reply;
}

}  // namespace tdstore::redis
