#include "tests/bench/raw_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

#include "server/redis/cluster_slot.h"

namespace tdstore::bench {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() + 0 && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

int64_t InfoNumber(std::string_view info, std::string_view name) {
  const std::string needle = "\n" + std::string(name) + ":";
  const size_t pos = info.find(needle);
  if (pos == std::string_view::npos) return 0;
  return std::atoll(std::string(info.substr(pos + needle.size(), 32)).c_str());
}

double InfoDouble(std::string_view info, std::string_view name) {
  const std::string needle = "\n" + std::string(name) + ":";
  const size_t pos = info.find(needle);
  if (pos == std::string_view::npos) return 0;
  return std::atof(std::string(info.substr(pos + needle.size(), 32)).c_str());
}

std::string_view ReplyText(const redisReply* r) {
  return r->str != nullptr ? std::string_view(r->str, r->len) : std::string_view();
}

// Bytes of a bulk-string reply on the wire: "$<len>\r\n<data>\r\n".
int64_t BulkWireBytes(int64_t len) {
  return 1 + static_cast<int64_t>(std::to_string(len).size()) + 2 + len + 2;
}

}  // namespace

absl::StatusOr<RawRedisUrl> ParseRawRedisUrl(const std::string& url) {
  RawRedisUrl out;
  std::string_view rest = url;
  if (rest.rfind("unix://", 0) == 0) {  // a standalone Redis' socket, database 0
    rest.remove_prefix(7);
    if (rest.empty() || rest.find('?') != std::string_view::npos) {
      return absl::InvalidArgumentError("expected unix:///path/redis.sock, got '" + url + "'");
    }
    out.seeds.emplace_back(std::string(rest), 0);
    return out;
  }
  if (rest.rfind("redis://", 0) == 0) {
    rest.remove_prefix(8);
  } else if (rest.rfind("redis-cluster://", 0) == 0) {
    rest.remove_prefix(16);
    out.cluster = true;
  } else {
    return absl::InvalidArgumentError(
        "expected redis://host:port, unix:///path or redis-cluster://host:port,..., got '" + url +
        "'");
  }
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view cred = rest.substr(0, at);
    rest.remove_prefix(at + 1);
    const size_t colon = cred.find(':');
    if (colon == std::string_view::npos) {
      out.password = PercentDecode(cred);
    } else {
      out.user = PercentDecode(cred.substr(0, colon));
      out.password = PercentDecode(cred.substr(colon + 1));
    }
  }
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    if (rest.substr(slash) != "/" && rest.substr(slash) != "/0") {
      return absl::InvalidArgumentError("tdstore-bench supports database 0 only");
    }
    rest = rest.substr(0, slash);
  }
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view hp = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t colon = hp.rfind(':');
    if (colon == std::string_view::npos) {
      out.seeds.emplace_back(std::string(hp), 6379);
    } else {
      const int port = std::atoi(std::string(hp.substr(colon + 1)).c_str());
      if (port <= 0 || port > 65535) return absl::InvalidArgumentError("bad port in '" + url + "'");
      out.seeds.emplace_back(std::string(hp.substr(0, colon)), port);
    }
  }
  if (out.seeds.empty()) return absl::InvalidArgumentError("no host in '" + url + "'");
  return out;
}

absl::StatusOr<redisContext*> RawRedis::Open(const std::string& host, int port,
                                             const RawRedisUrl& url) {
  redisContext* ctx = port == 0 ? redisConnectUnix(host.c_str()) : redisConnect(host.c_str(), port);
  if (ctx == nullptr) return absl::UnavailableError("cannot allocate a hiredis context");
  if (ctx->err != 0) {
    std::string err = ctx->errstr;
    redisFree(ctx);
    return absl::UnavailableError(host + ":" + std::to_string(port) + ": " + err);
  }
  // The ideal on this host's transport: a loopback connection without the
  // pacing a BBR default adds (tdstored does the same by default,
  // server/redis/local_tcp.h; written apart here, as the rest of the file).
  if (port != 0) {
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    const bool loopback =
        getpeername(ctx->fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 &&
        ((peer.ss_family == AF_INET &&
          (ntohl(reinterpret_cast<sockaddr_in&>(peer).sin_addr.s_addr) >> 24) == 127) ||
         (peer.ss_family == AF_INET6 &&
          IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<sockaddr_in6&>(peer).sin6_addr)));
    if (loopback) setsockopt(ctx->fd, IPPROTO_TCP, TCP_CONGESTION, "reno", 4);
  }
  // Keep the reader's buffer between replies instead of freeing it whenever
  // it empties (hiredis' default for buffers over 16 KiB): a client moving
  // MiB-sized replies would otherwise reallocate it for each one.
  ctx->reader->maxbuf = 0;
  nodes_.push_back(ctx);
  if (!url.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!url.user.empty()) auth.push_back(url.user);
    auth.push_back(url.password);
    auto reply = Command(static_cast<int>(nodes_.size()) - 1, auth);
    if (!reply.ok()) return reply.status();
    if ((*reply)->type == REDIS_REPLY_ERROR) {
      return absl::PermissionDeniedError("AUTH: " + std::string(ReplyText(reply->get())));
    }
  }
  return ctx;
}

absl::StatusOr<std::unique_ptr<RawRedis>> RawRedis::Connect(const std::string& url_text) {
  // A write to a closed socket must fail, not kill the benchmark.
  signal(SIGPIPE, SIG_IGN);
  auto url = ParseRawRedisUrl(url_text);
  if (!url.ok()) return url.status();
  std::unique_ptr<RawRedis> redis(new RawRedis());
  redis->cluster_ = url->cluster;
  if (!url->cluster) {
    auto ctx = redis->Open(url->seeds[0].first, url->seeds[0].second, *url);
    if (!ctx.ok()) return ctx.status();
    return redis;
  }
  if (auto s = redis->LoadSlots(*url); !s.ok()) return s;
  return redis;
}

absl::Status RawRedis::LoadSlots(const RawRedisUrl& url) {
  absl::Status last = absl::UnavailableError("no seed answered");
  for (const auto& [host, port] : url.seeds) {
    auto seed = Open(host, port, url);
    if (!seed.ok()) {
      last = seed.status();
      continue;
    }
    auto reply = Command(static_cast<int>(nodes_.size()) - 1, {"CLUSTER", "SLOTS"});
    // The seed connection is reopened below as a master if it is one.
    redisFree(nodes_.back());
    nodes_.pop_back();
    if (!reply.ok()) {
      last = reply.status();
      continue;
    }
    const redisReply* r = reply->get();
    if (r->type != REDIS_REPLY_ARRAY) return absl::InternalError("CLUSTER SLOTS: unexpected reply");
    slot_node_.assign(kClusterSlots, 0);
    std::vector<std::pair<std::string, int>> masters;
    for (size_t i = 0; i < r->elements; ++i) {
      const redisReply* range = r->element[i];
      if (range->elements < 3) continue;
      const int64_t first = range->element[0]->integer;
      const int64_t last_slot = range->element[1]->integer;
      const redisReply* master = range->element[2];
      std::pair<std::string, int> hp(std::string(ReplyText(master->element[0])),
                                     static_cast<int>(master->element[1]->integer));
      if (hp.first.empty()) hp.first = host;
      size_t index = 0;
      while (index < masters.size() && masters[index] != hp) ++index;
      if (index == masters.size()) masters.push_back(hp);
      for (int64_t s = first; s <= last_slot && s < kClusterSlots; ++s) {
        slot_node_[static_cast<size_t>(s)] = static_cast<uint16_t>(index);
      }
    }
    for (const auto& [mhost, mport] : masters) {
      auto ctx = Open(mhost, mport, url);
      if (!ctx.ok()) return ctx.status();
    }
    return absl::OkStatus();
  }
  return last;
}

RawRedis::~RawRedis() {
  for (redisContext* ctx : nodes_) redisFree(ctx);
}

int RawRedis::NodeFor(std::string_view key) const {
  if (!cluster_) return 0;
  return slot_node_[static_cast<size_t>(KeySlot(key))];
}

absl::StatusOr<RawReply> RawRedis::Command(int node, Argv& argv) {
  redisContext* ctx = nodes_[static_cast<size_t>(node)];
  void* raw = redisCommandArgv(ctx, argv.size(), argv.ptrs(), argv.lens());
  if (raw == nullptr) return absl::UnavailableError(std::string("redis: ") + ctx->errstr);
  return RawReply(static_cast<redisReply*>(raw));
}

absl::StatusOr<RawReply> RawRedis::Command(int node, const std::vector<std::string>& args) {
  Argv argv;
  for (const std::string& a : args) argv.Add(a);
  return Command(node, argv);
}

absl::StatusOr<RawReply> RawRedis::KeyCommand(std::string_view key,
                                              const std::vector<std::string>& args) {
  return Command(NodeFor(key), args);
}

absl::Status RawRedis::CommandOnEveryNode(const std::vector<std::string>& argv) {
  for (int i = 0; i < node_count(); ++i) {
    auto reply = Command(i, argv);
    if (!reply.ok()) return reply.status();
    if ((*reply)->type == REDIS_REPLY_ERROR) {
      return absl::InternalError(argv[0] + ": " + std::string(ReplyText(reply->get())));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> RawRedis::LazyfreePending() {
  int64_t pending = 0;
  for (int i = 0; i < node_count(); ++i) {
    auto reply = Command(i, {"INFO", "memory"});
    if (!reply.ok()) return reply.status();
    if ((*reply)->type != REDIS_REPLY_STRING) return absl::InternalError("INFO memory: unexpected reply");
    pending += InfoNumber(ReplyText(reply->get()), "lazyfree_pending_objects");
  }
  return pending;
}

absl::StatusOr<int64_t> RawRedis::KeyCount() {
  int64_t keys = 0;
  for (int i = 0; i < node_count(); ++i) {
    auto reply = Command(i, {"DBSIZE"});
    if (!reply.ok()) return reply.status();
    if ((*reply)->type != REDIS_REPLY_INTEGER) return absl::InternalError("DBSIZE: unexpected reply");
    keys += (*reply)->integer;
  }
  return keys;
}

absl::StatusOr<std::string> RawRedis::LoadScript(const std::string& body) {
  std::string sha;
  for (int i = 0; i < node_count(); ++i) {
    auto reply = Command(i, {"SCRIPT", "LOAD", body});
    if (!reply.ok()) return reply.status();
    if ((*reply)->type != REDIS_REPLY_STRING) {
      return absl::InternalError("SCRIPT LOAD: " + std::string(ReplyText(reply->get())));
    }
    sha = std::string(ReplyText(reply->get()));
  }
  return sha;
}

absl::StatusOr<RedisCounters> RawRedis::Counters() {
  RedisCounters out;
  int64_t reply_bytes = 0;
  for (int i = 0; i < node_count(); ++i) {
    auto reply = Command(i, {"INFO", "stats", "cpu"});
    if (!reply.ok()) return reply.status();
    if ((*reply)->type != REDIS_REPLY_STRING) {
      return absl::InternalError("INFO: unexpected reply");
    }
    const std::string_view info = ReplyText(reply->get());
    out.net_input_bytes += InfoNumber(info, "total_net_input_bytes") -
                           InfoNumber(info, "total_net_repl_input_bytes");
    out.net_output_bytes += InfoNumber(info, "total_net_output_bytes") -
                            InfoNumber(info, "total_net_repl_output_bytes");
    out.cpu_seconds += InfoDouble(info, "used_cpu_user") + InfoDouble(info, "used_cpu_sys");
    reply_bytes += BulkWireBytes(static_cast<int64_t>(info.size()));
  }
  last_counters_reply_bytes_ = reply_bytes;
  return out;
}

absl::Status RawPipeline::SendTo(int node, Argv& argv) {
  redisContext* ctx = redis_.node(node);
  if (redisAppendCommandArgv(ctx, argv.size(), argv.ptrs(), argv.lens()) != REDIS_OK) {
    return absl::UnavailableError(std::string("redis: ") + ctx->errstr);
  }
  order_.push_back(node);
  dirty_[static_cast<size_t>(node)] = true;
  return absl::OkStatus();
}

absl::StatusOr<RawReply> RawPipeline::Receive() {
  if (order_.empty()) return absl::FailedPreconditionError("Receive with nothing outstanding");
  // Everything queued goes out first, on every node, so all nodes work while
  // we wait for the oldest reply.
  for (size_t i = 0; i < dirty_.size(); ++i) {
    if (!dirty_[i]) continue;
    redisContext* ctx = redis_.node(static_cast<int>(i));
    int done = 0;
    while (!done) {
      if (redisBufferWrite(ctx, &done) != REDIS_OK) {
        return absl::UnavailableError(std::string("redis write: ") + ctx->errstr);
      }
    }
    dirty_[i] = false;
  }
  const int node = order_.front();
  order_.pop_front();
  redisContext* ctx = redis_.node(node);
  void* raw = nullptr;
  if (redisGetReply(ctx, &raw) != REDIS_OK || raw == nullptr) {
    return absl::UnavailableError(std::string("redis read: ") + ctx->errstr);
  }
  return RawReply(static_cast<redisReply*>(raw));
}

}  // namespace tdstore::bench
