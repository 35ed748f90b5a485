// The baseline's Redis client: plain blocking hiredis, one connection per
// master, commands routed by cluster slot (server/redis/cluster_slot.h), and a
// pipeline that keeps a bounded number of commands in flight.
//
// Written for tdstore-bench only. It shares no code with server/redis/ on
// purpose: the baseline must not inherit the daemon's choices (or bugs).
//
//   auto raw = RawRedis::Connect("redis://127.0.0.1:6379");
//   RawPipeline pipe(**raw);
//   pipe.Send(key, argv);                 // routed by key
//   RawReply reply = pipe.Receive();      // oldest first
//
// Not thread-safe: one RawRedis per thread.
#ifndef TDSTORE_TESTS_BENCH_RAW_CLIENT_H_
#define TDSTORE_TESTS_BENCH_RAW_CLIENT_H_

#include <hiredis/hiredis.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tdstore::bench {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RawReply = std::unique_ptr<redisReply, ReplyDeleter>;

// A parsed redis:// or redis-cluster:// URL (the forms tdstored accepts),
// or unix:///path/redis.sock. TLS is not supported here.
struct RawRedisUrl {
  bool cluster = false;
  // host, port; for unix:///path/redis.sock the one seed is (path, 0).
  std::vector<std::pair<std::string, int>> seeds;
  std::string user, password;
};
absl::StatusOr<RawRedisUrl> ParseRawRedisUrl(const std::string& url);

// An argv for redisAppendCommandArgv, pointing into strings the caller keeps
// alive until the command is sent (hiredis copies them then).
class Argv {
 public:
  Argv& Add(std::string_view s) {
    ptrs_.push_back(s.data());
    lens_.push_back(s.size());
    return *this;
  }
  void Clear() {
    ptrs_.clear();
    lens_.clear();
  }
  int size() const { return static_cast<int>(ptrs_.size()); }
  const char** ptrs() { return ptrs_.data(); }
  const size_t* lens() const { return lens_.data(); }

 private:
  std::vector<const char*> ptrs_;
  std::vector<size_t> lens_;
};

// Redis' own counters, summed over the masters.
struct RedisCounters {
  int64_t net_input_bytes = 0;   // from clients (replication excluded)
  int64_t net_output_bytes = 0;  // to clients (replication excluded)
  double cpu_seconds = 0;        // used_cpu_user + used_cpu_sys
};

class RawRedis {
 public:
  static absl::StatusOr<std::unique_ptr<RawRedis>> Connect(const std::string& url);
  ~RawRedis();
  RawRedis(const RawRedis&) = delete;
  RawRedis& operator=(const RawRedis&) = delete;

  int node_count() const { return static_cast<int>(nodes_.size()); }
  bool cluster() const { return cluster_; }
  // The connection serving `key` (0 on standalone).
  int NodeFor(std::string_view key) const;
  redisContext* node(int i) { return nodes_[static_cast<size_t>(i)]; }

  // One command on one node, waiting for its reply. Error replies come back
  // as replies; a transport failure is UNAVAILABLE.
  absl::StatusOr<RawReply> Command(int node, Argv& argv);
  absl::StatusOr<RawReply> Command(int node, const std::vector<std::string>& argv);
  // One command on the node serving `key`.
  absl::StatusOr<RawReply> KeyCommand(std::string_view key, const std::vector<std::string>& argv);

  // A command on every master; OK unless one fails or answers an error.
  absl::Status CommandOnEveryNode(const std::vector<std::string>& argv);

  // Objects Redis is still freeing in its background thread (UNLINK, lazy
  // free), summed over the masters: INFO memory lazyfree_pending_objects.
  absl::StatusOr<int64_t> LazyfreePending();
  // Keys of every master, summed (DBSIZE).
  absl::StatusOr<int64_t> KeyCount();

  // SCRIPT LOAD on every master; the script's SHA1.
  absl::StatusOr<std::string> LoadScript(const std::string& body);

  // INFO stats + cpu of every master, summed.
  absl::StatusOr<RedisCounters> Counters();
  // Bytes of the last Counters() replies (which the next Counters() counts
  // as output): subtract them from a delta.
  int64_t last_counters_reply_bytes() const { return last_counters_reply_bytes_; }

 private:
  RawRedis() = default;
  absl::Status LoadSlots(const RawRedisUrl& url);
  absl::StatusOr<redisContext*> Open(const std::string& host, int port, const RawRedisUrl& url);

  bool cluster_ = false;
  std::vector<redisContext*> nodes_;
  std::vector<uint16_t> slot_node_;  // cluster: slot -> index into nodes_
  int64_t last_counters_reply_bytes_ = 0;
};

// Commands on any nodes of a RawRedis, replies in sending order. The caller
// bounds what is in flight (send while outstanding() < depth, then Receive).
class RawPipeline {
 public:
  explicit RawPipeline(RawRedis& redis) : redis_(redis), dirty_(redis.node_count(), false) {}

  // Queues argv for the node serving routing_key (copied before return).
  absl::Status Send(std::string_view routing_key, Argv& argv) {
    return SendTo(redis_.NodeFor(routing_key), argv);
  }
  absl::Status SendTo(int node, Argv& argv);
  // Sends everything queued, then returns the reply of the oldest command
  // not yet received. Error replies are replies; UNAVAILABLE if the
  // transport broke.
  absl::StatusOr<RawReply> Receive();
  int outstanding() const { return static_cast<int>(order_.size()); }

 private:
  RawRedis& redis_;
  std::deque<int> order_;    // node of each outstanding command
  std::vector<bool> dirty_;  // node has unsent output
};

}  // namespace tdstore::bench

#endif  // TDSTORE_TESTS_BENCH_RAW_CLIENT_H_
