// Test harness: a real Redis Cluster of redis-server children on loopback.
//
//   RedisClusterProcess cluster;              // 3 masters + 3 replicas
//   ASSERT_TRUE(cluster.Start().ok());        // a few seconds
//   cluster.url();        // "redis-cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
//   cluster.Command({"SET", "k", "v"});       // routed to the slot's master
//   cluster.KillNode(cluster.NodeIndexOfPort(cluster.MasterOfSlot(0)));
//   ASSERT_TRUE(cluster.WaitForClusterOk().ok());  // replica promoted
//
// Every node runs `redis-server --cluster-enabled yes` with no persistence
// (save "" / appendonly no), listens on 127.0.0.1 only, has its own directory
// (holding its nodes.conf and log) and dies with the test process
// (PR_SET_PDEATHSIG). The cluster is formed with `redis-cli --cluster
// create`; Start() returns once every node reports cluster_state:ok, all
// nodes agree on the owner of every one of the 16384 slots and every replica
// is in sync with its master. The destructor stops the nodes and removes
// their directories.
//
// Like RedisServerProcess it talks to the nodes with raw hiredis, never
// through server/redis/, so a bug in the code under test cannot hide behind
// the harness.
//
// Not thread-safe, except that the const query methods (Command, Keys, ...)
// may be called concurrently with each other. Start it from the test's main
// thread (PR_SET_PDEATHSIG follows the thread that forked).
#ifndef TDSTORE_TESTS_SUPPORT_REDIS_CLUSTER_H_
#define TDSTORE_TESTS_SUPPORT_REDIS_CLUSTER_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tdstore::testing {

struct RedisClusterOptions {
  // redis-cli --cluster create needs at least 3 masters.
  int masters = 3;
  int replicas_per_master = 1;
  // Non-empty: `requirepass` (user "default") on every node, and
  // `masterauth` so replicas can sync.
  std::string password;
  // Both non-empty: an extra ACL user with all rights on every node; the
  // harness, redis-cli and the replicas (`masteruser`) authenticate as it.
  std::string acl_user;
  std::string acl_password;
  std::string server_binary = "/usr/bin/redis-server";
  std::string cli_binary = "/usr/bin/redis-cli";
  // cluster-node-timeout: low so that failover takes ~2 s in tests.
  int node_timeout_ms = 1000;
  // Extra `--name value` arguments for every redis-server.
  std::vector<std::string> extra_args;
};

class RedisClusterProcess {
 public:
  explicit RedisClusterProcess(RedisClusterOptions options = {});
  ~RedisClusterProcess();
  RedisClusterProcess(const RedisClusterProcess&) = delete;
  RedisClusterProcess& operator=(const RedisClusterProcess&) = delete;

  // Starts masters * (1 + replicas_per_master) nodes, forms the cluster and
  // waits until it is fully up (see the top of the file). Ports are picked on
  // first start and kept across Stop()/Start(), which gives a fresh, empty
  // cluster on the same ports (like RedisServerProcess, whose data does not
  // survive a restart either). On failure everything started is stopped and
  // the error carries the tails of the logs.
  absl::Status Start();
  // SIGTERM to every node, SIGKILL to the ones still alive after 5 s; waits
  // for all and removes their directories. Idempotent.
  void Stop();
  bool running() const;

  // SIGKILL node i (fault tests); its directory and port are kept for
  // RestartNode. No-op when it is not running.
  void KillNode(int i);
  // Starts node i again on the same port and directory; it rejoins the
  // cluster from its nodes.conf (a former master comes back as a replica
  // of the node that replaced it). Returns once it answers; call
  // WaitForClusterOk() to wait for the cluster to settle.
  absl::Status RestartNode(int i);

  int node_count() const { return static_cast<int>(nodes_.size()); }
  int port(int i) const { return nodes_.at(i).port; }
  int bus_port(int i) const { return nodes_.at(i).bus_port; }
  bool node_running(int i) const { return nodes_.at(i).pid > 0; }
  pid_t node_pid(int i) const { return nodes_.at(i).pid; }
  const std::string& node_dir(int i) const { return nodes_.at(i).dir; }
  // The index of the node listening on `port`, or -1.
  int NodeIndexOfPort(int port) const;
  // The node's cluster id (CLUSTER MYID), "" when it does not answer.
  std::string NodeId(int i) const;

  // Ports of the masters that are alive, as a live node sees them in
  // CLUSTER NODES (flag master, not fail), sorted.
  std::vector<int> MasterPorts() const;
  // Ports of the live replicas of the master on `master_port`, sorted.
  std::vector<int> ReplicaPortsOf(int master_port) const;
  // Port of the master owning `slot` according to a live node's CLUSTER
  // SLOTS (queried now, not cached); 0 when unknown.
  int MasterOfSlot(int slot) const;
  // The whole map, slot -> master port (16384 entries, 0: unassigned), as a
  // live node's CLUSTER SLOTS gives it now; empty when no node answers.
  std::vector<int> SlotMap() const;

  // Waits until every live node reports cluster_state:ok with all 16384
  // slots assigned, every live node's CLUSTER SLOTS maps each slot to the
  // same master, that master is a live node, and every live node's CLUSTER
  // NODES shows every live node healthy (no fail/fail?/handshake flag) in
  // the role it claims itself. DeadlineExceeded with the last unmet
  // condition otherwise.
  absl::Status WaitForClusterOk(std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // Waits until every live replica has master_link_status:up.
  absl::Status WaitForReplicasInSync(
      std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

  // "redis-cluster://[creds@]127.0.0.1:P1,127.0.0.1:P2,..." with the masters
  // at start as seed nodes and percent-encoded credentials when set.
  std::string url() const;

  // Runs a command the way a cluster client would and returns the reply
  // flattened to strings, as RedisServerProcess::Command does: a keyed
  // command goes to the master owning its key's slot (CRC16 with hash tags,
  // from a cached slot map), following MOVED and ASK redirects. Commands on
  // the whole data set are sent to every live master: FLUSHALL, FLUSHDB,
  // SCRIPT and FUNCTION (SCRIPT EXISTS answers 1 only where every master
  // has the script), DBSIZE (summed) and KEYS (merged, sorted). Other
  // key-less commands go to one live master.
  std::vector<std::string> Command(const std::vector<std::string>& argv) const;
  // Runs a command on node i as is (no routing, no redirects).
  std::vector<std::string> CommandOnNode(int i, const std::vector<std::string>& argv) const;

  // Keys matching a glob (SCAN) over every live master, sorted.
  std::vector<std::string> Keys(const std::string& pattern = "*") const;
  // Keys matching a glob on node i alone (a replica holds its master's).
  std::vector<std::string> KeysOnNode(int i, const std::string& pattern = "*") const;

  // Resharding: moves `count` slots from one master to another with
  // `redis-cli --cluster reshard`, then waits for every node to agree.
  absl::Status MoveSlots(int count, int from_master_port, int to_master_port);

  // Bytes the live masters sent to clients: INFO stats
  // total_net_output_bytes - total_net_repl_output_bytes (Redis 7 counts
  // the replication stream in the total), summed. Comparable with a
  // standalone server's total_net_output_bytes, which has no replicas.
  int64_t TotalNetOutputBytes() const;

 private:
  struct Node {
    int port = 0;
    int bus_port = 0;
    pid_t pid = -1;
    std::string dir;
  };

  absl::Status StartOnce();
  // Starts the given nodes (picking their ports first when asked) and waits
  // until each answers.
  absl::Status LaunchNodes(const std::vector<int>& which, bool pick_ports, bool truncate_logs);
  absl::Status RunCli(std::vector<std::string> args, std::chrono::seconds timeout,
                      const std::string& what) const;
  std::vector<std::string> CliAuthArgs() const;
  std::string LogTails(size_t lines) const;
  // Empty when the cluster is up; else what is not.
  std::string ClusterProblem() const;
  std::string ReplicaProblem() const;
  // ClusterProblem + ReplicaProblem + the topology Start() asked for.
  std::string StartProblem() const;
  void SetPid(int i, pid_t pid);
  int AnyLiveMaster() const;
  std::vector<int> LivePorts() const;
  bool IsLivePort(int port) const;
  // The slot -> master port map from some live node; empty when none answers.
  std::vector<int> FetchSlotMap() const;
  int CachedOwner(int slot, bool refresh) const;
  std::vector<std::string> Routed(int slot, const std::vector<std::string>& argv) const;
  std::vector<std::string> OnPort(int port, const std::vector<std::string>& argv) const;

  RedisClusterOptions options_;
  std::string base_dir_;
  std::vector<Node> nodes_;
  std::vector<int> seed_ports_;  // masters right after Start()

  // Guards nodes_[i].pid against queries from other threads; only the
  // (single) driving thread writes it.
  mutable std::mutex pid_mu_;
  mutable std::mutex cache_mu_;
  mutable std::vector<int> slot_cache_;  // slot -> master port; empty: unknown
};

}  // namespace tdstore::testing

#endif  // TDSTORE_TESTS_SUPPORT_REDIS_CLUSTER_H_
