// RedisClient for Redis Cluster: routes every command by its key's slot.
//
// Debian's hiredis 0.14 has no cluster support, so routing lives here:
//  - the slot map comes from CLUSTER SLOTS of any reachable node (seeds
//    first, then every node seen), refreshed on MOVED, CLUSTERDOWN and
//    connection failures;
//  - each master gets its own StandaloneClient (a connection pool);
//  - MOVED: refresh the map and retry on the new owner; ASK: send ASKING and
//    the command on one connection to the target; TRYAGAIN (a multi-key
//    command during a slot migration) and CLUSTERDOWN (failover in progress):
//    back off and retry, within ClusterOptions::retry_window;
//  - a pipeline keeps one sub-pipeline per node, so the nodes of one RPC work
//    concurrently; replies still come back in send order, and a redirected
//    command is re-issued transparently.
//
// A command whose connection breaks *after* it was sent is not retried (it
// may have been applied): the call fails UNAVAILABLE and the map is
// refreshed, so the next call reaches the new master after a failover.
//
// Thread-safe; pipelines belong to one thread and must not outlive the
// client.
#ifndef TDSTORE_SERVER_REDIS_CLUSTER_CLIENT_H_
#define TDSTORE_SERVER_REDIS_CLUSTER_CLIENT_H_

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/redis/connection.h"
#include "server/redis/redis_address.h"
#include "server/redis/redis_client.h"
#include "server/redis/standalone_client.h"

namespace tdstore::redis {

struct ClusterOptions {
  // How long a call keeps retrying redirects, TRYAGAIN, CLUSTERDOWN and
  // unreachable nodes before it fails UNAVAILABLE. Covers a failover when
  // cluster-node-timeout is small; clients retry idempotent calls beyond it.
  std::chrono::milliseconds retry_window{5000};
  // Most redirects one command follows before giving up.
  int max_redirects = 16;
};

class ClusterClient : public RedisClient {
 public:
  // Does not connect; the first call discovers the slot map.
  ClusterClient(std::vector<RedisAddress> seeds, ConnectOptions options,
                ClusterOptions cluster_options = {});
  ~ClusterClient() override;

  absl::StatusOr<Reply> Call(std::string_view routing_key,
                             absl::Span<const std::string_view> argv) override;
  absl::StatusOr<Reply> Eval(const Script& script, absl::Span<const std::string_view> keys,
                             absl::Span<const std::string_view> args) override;
  absl::StatusOr<Reply> EvalDurable(const Script& script, absl::Span<const std::string_view> keys,
                                    absl::Span<const std::string_view> args, int replicas,
                                    std::chrono::milliseconds timeout) override;
  absl::StatusOr<std::unique_ptr<Pipeline>> NewPipeline(int max_outstanding) override;
  std::string Describe() const override;

  // Reads CLUSTER SLOTS again. UNAVAILABLE if no known node answers.
  absl::Status RefreshSlots();
  // "host:port" of every master in the current map, sorted.
  std::vector<std::string> Masters() const;
  absl::StatusOr<std::vector<Reply>> CallOnEveryMaster(
      absl::Span<const std::string_view> argv) override;

  // One node, as the pipeline and the routing loop see it.
  struct Node {
    std::string name;  // "host:port"
    std::unique_ptr<StandaloneClient> pool;
  };
  // The node that owns `slot`, discovering the map if needed.
  absl::StatusOr<Node*> NodeForSlot(int slot);
  // Runs argv, routed by routing_key, following redirects (see above).
  // With replicas > 0, a successful reply is followed by WAIT on the same
  // connection (UNAVAILABLE if fewer replicas confirm in wait_timeout).
  absl::StatusOr<Reply> RoutedCall(std::string_view routing_key,
                                   absl::Span<const std::string_view> argv, int replicas = 0,
                                   std::chrono::milliseconds wait_timeout = {});

 private:
  Node* NodeNamed(const std::string& host, int port);  // creates on first use; mu_ held
  absl::Status RefreshSlotsLocked();

  const std::vector<RedisAddress> seeds_;
  const ConnectOptions options_;
  const ClusterOptions cluster_options_;
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Node>> nodes_;  // never shrinks
  std::array<Node*, 16384> slots_{};
  bool have_map_ = false;
};

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_CLUSTER_CLIENT_H_
