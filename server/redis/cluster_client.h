// RedisClient for Redis Cluster: routes every command by its key's slot.
//
// Debian's hiredis 0.14 has no cluster support, so routing lives here:
//  - the slot map comes from CLUSTER SLOTS, refreshed on MOVED, CLUSTERDOWN
//    and connection failures. A refresh asks the node that answered last,
//    then the other nodes it knows (masters, their replicas), then the seeds;
//    it prefers an answer covering all 16384 slots and takes a partial one
//    (a node being reset or joining) only when no node gives a full one. It
//    runs without holding the client's lock, one refresh at a time: other
//    threads keep routing with the current map meanwhile (or, before the
//    first map, wait for it);
//  - each master gets its own StandaloneClient (a connection pool); a node
//    that leaves the map (a dead master after a failover) is dropped with its
//    pool once no call or pipeline uses it any more;
//  - MOVED: the slot goes to the new owner at once, the map is refreshed and
//    the MOVED target reapplied on top (a lagging node's view must not put
//    the old owner back); ASK: ASKING and the command on one connection to
//    the target; TRYAGAIN (a multi-key command during a slot migration) and
//    CLUSTERDOWN (failover in progress): back off and retry. The first
//    redirect of a command is followed at once, later ones after the same
//    back-off (20 ms doubling to 500 ms); everything within
//    ClusterOptions::retry_window;
//  - a pipeline keeps one sub-pipeline per node, so the nodes of one RPC work
//    concurrently; replies still come back in send order, and a redirected
//    command is re-issued transparently (see Pipeline::set_reissue_replicas
//    for --write-replicas). Commands of one slot stay on one node while any
//    of them is outstanding, so they run (and are re-issued) in send order
//    even when the map changes mid-pipeline; commands of different slots
//    have no order between them.
//
// A command whose connection breaks *after* it was sent is not retried (it
// may have been applied), whether it went to the slot's owner or to an ASK
// target: the call fails UNAVAILABLE and the map is refreshed, so the next
// call reaches the new master after a failover. Only a failure to connect
// (nothing sent) is retried; a refused AUTH is returned at once.
//
// Thread-safe; pipelines belong to one thread and must not outlive the
// client.
#ifndef TDSTORE_SERVER_REDIS_CLUSTER_CLIENT_H_
#define TDSTORE_SERVER_REDIS_CLUSTER_CLIENT_H_

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
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
  // Most redirects one command follows before giving up (the first at once,
  // later ones after a growing back-off, so retry_window usually ends the
  // call first).
  int max_redirects = 16;
  // I/O timeout of CLUSTER SLOTS (capped by ConnectOptions::io_timeout): a
  // hung node delays a refresh by this much, not by the command timeout.
  std::chrono::milliseconds slots_io_timeout{2000};
};

class ClusterClient : public RedisClient {
 public:
  // Does not connect; the first call discovers the slot map.
  ClusterClient(std::vector<RedisAddress> seeds, ConnectOptions options,
                ClusterOptions cluster_options = {});
  ~ClusterClient() override;

  absl::StatusOr<Reply> Call(std::string_view routing_key,
                             absl::Span<const std::string_view> argv) override;
  // On NOSCRIPT, loads the script on the node that answered NOSCRIPT and
  // retries (a few times, should the slot move meanwhile).
  absl::StatusOr<Reply> Eval(const Script& script, absl::Span<const std::string_view> keys,
                             absl::Span<const std::string_view> args) override;
  absl::StatusOr<Reply> EvalDurable(const Script& script, absl::Span<const std::string_view> keys,
                                    absl::Span<const std::string_view> args, int replicas,
                                    std::chrono::milliseconds timeout) override;
  absl::StatusOr<std::unique_ptr<Pipeline>> NewPipeline(int max_outstanding) override;
  bool pipelines_in_order() const override { return false; }  // a connection per node
  std::string Describe() const override;
  // Tries the nodes it knows (masters first), then the seeds.
  absl::StatusOr<std::unique_ptr<Connection>> ConnectForSubscribe() override;

  // Reads CLUSTER SLOTS again. If another thread is refreshing already,
  // waits for that refresh and returns its outcome. UNAVAILABLE if no known
  // node answers (PERMISSION_DENIED / UNAUTHENTICATED if they refuse AUTH).
  absl::Status RefreshSlots();
  // For error paths: like RefreshSlots, but when another thread is already
  // refreshing and a map is in hand, returns OK at once (the running refresh
  // will do).
  absl::Status RefreshSlotsIfIdle();
  // "host:port" of every master in the current map, sorted.
  std::vector<std::string> Masters() const;
  absl::StatusOr<std::vector<Reply>> CallOnEveryMaster(
      absl::Span<const std::string_view> argv) override;

  // One node, as the pipeline and the routing loop see it. Shared: a node
  // dropped from the map lives on while a call or pipeline still holds it.
  struct Node : std::enable_shared_from_this<Node> {
    std::string name;  // "host:port"
    RedisAddress address;
    std::unique_ptr<StandaloneClient> pool;
  };
  // The node that owns `slot`, discovering the map if needed.
  absl::StatusOr<std::shared_ptr<Node>> NodeForSlot(int slot);
  // Runs argv, routed by routing_key, following redirects (see above).
  // With replicas > 0, a successful reply is followed by WAIT on the same
  // connection (UNAVAILABLE if fewer replicas confirm in wait_timeout).
  absl::StatusOr<Reply> RoutedCall(std::string_view routing_key,
                                   absl::Span<const std::string_view> argv, int replicas = 0,
                                   std::chrono::milliseconds wait_timeout = {});

 private:
  struct FetchedMap;

  // RoutedCall that also tells which node gave the final reply (null when
  // none did).
  absl::StatusOr<Reply> RoutedCallVia(std::string_view routing_key,
                                      absl::Span<const std::string_view> argv, int replicas,
                                      std::chrono::milliseconds wait_timeout,
                                      std::shared_ptr<Node>* answered_by);
  // wait_for_running: see RefreshSlots (true) and RefreshSlotsIfIdle (false).
  absl::Status Refresh(bool wait_for_running);
  // CLUSTER SLOTS of one node, on a connection of its own (bounded timeout).
  absl::StatusOr<FetchedMap> FetchSlots(const Node& node) const;
  // Installs `fetched` as the map, reapplies pending MOVED targets and drops
  // the nodes nothing refers to any more. mu_ held; the dropped nodes go to
  // *dropped so that they are destroyed after the lock is released.
  void InstallLocked(const FetchedMap& fetched, std::vector<std::shared_ptr<Node>>* dropped);
  // A MOVED reply: slot now belongs to host:port.
  void NoteMoved(int slot, const std::string& host, int port);
  // OK once a map is in hand (discovering it if needed).
  absl::Status EnsureMap();
  // Every distinct master of the map, discovering the map if needed.
  absl::StatusOr<std::vector<std::shared_ptr<Node>>> MasterNodes();
  std::shared_ptr<Node> NodeNamed(const std::string& host, int port);  // creates; mu_ held

  const std::vector<RedisAddress> seeds_;
  const ConnectOptions options_;
  const ClusterOptions cluster_options_;

  mutable std::mutex mu_;
  // Every node the client knows: the map's masters, their replicas, the
  // seeds and redirect targets not yet confirmed by a refresh.
  std::map<std::string, std::shared_ptr<Node>> nodes_;
  std::array<Node*, 16384> slots_{};  // each one held by nodes_
  bool have_map_ = false;
  // MOVED targets seen since the last installed map, by slot: reapplied on
  // top of the next one.
  std::map<int, std::pair<std::string, int>> moved_;
  std::string last_answered_;  // the node whose CLUSTER SLOTS made the map
  // One refresh at a time: refreshing_ while one runs; refreshes_done_
  // counts finished ones, last_refresh_ is the outcome of the latest.
  bool refreshing_ = false;
  uint64_t refreshes_done_ = 0;
  absl::Status last_refresh_;
  std::condition_variable refresh_done_;
};

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_CLUSTER_CLIENT_H_
