// Tests of the Redis Cluster test harness itself (tests/support/
// redis_cluster.h, test_redis.h), against real redis-server processes: the
// failover and resharding tests of the daemon trust it to tell the truth.
#include <errno.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "server/redis/cluster_slot.h"
#include "gtest/gtest.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/test_redis.h"

namespace tdstore::testing {
namespace {

using Clock = std::chrono::steady_clock;
using Strings = std::vector<std::string>;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool ProcessGone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

// Whether a fresh connection to the port succeeds.
bool Listening(int port) {
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, timeval{1, 0});
  const bool ok = c != nullptr && c->err == 0;
  if (c != nullptr) redisFree(c);
  return ok;
}

// A key in `slot` ("k<i>" for the first i that hashes there).
std::string KeyInSlot(int slot, const std::string& prefix = "k") {
  for (int i = 0;; ++i) {
    std::string key = prefix + std::to_string(i);
    if (KeySlot(key) == slot) return key;
  }
}

bool Contains(const Strings& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string InfoField(const std::string& info, const std::string& name) {
  const size_t pos = info.find("\n" + name + ":");
  if (pos == std::string::npos) return "";
  const size_t begin = pos + name.size() + 2;
  return info.substr(begin, info.find('\r', begin) - begin);
}

TEST(RedisClusterProcessTest, RoutesFailsOverReshardsAndStops) {
  RedisClusterProcess cluster;
  auto t0 = Clock::now();
  absl::Status started = cluster.Start();
  ASSERT_TRUE(started.ok()) << started;
  std::cout << "[ timing ] 3+3 cluster start: " << SecondsSince(t0) << " s" << std::endl;

  // Topology: 6 nodes, 3 masters with one live replica each, all slots.
  ASSERT_EQ(cluster.node_count(), 6);
  const std::vector<int> masters = cluster.MasterPorts();
  ASSERT_EQ(masters.size(), 3u);
  for (int m : masters) {
    EXPECT_EQ(cluster.ReplicaPortsOf(m).size(), 1u) << m;
    EXPECT_GE(cluster.NodeIndexOfPort(m), 0);
  }
  std::set<int> ports;
  for (int i = 0; i < cluster.node_count(); ++i) {
    ports.insert(cluster.port(i));
    ports.insert(cluster.bus_port(i));
    EXPECT_TRUE(cluster.node_running(i));
    EXPECT_EQ(cluster.NodeId(i).size(), 40u);
  }
  EXPECT_EQ(ports.size(), 12u) << "client and bus ports must all differ";
  EXPECT_EQ(cluster.url(), "redis-cluster://127.0.0.1:" + std::to_string(masters[0]) +
                               ",127.0.0.1:" + std::to_string(masters[1]) + ",127.0.0.1:" +
                               std::to_string(masters[2]));
  std::vector<int> map = cluster.SlotMap();
  ASSERT_EQ(map.size(), 16384u);
  for (int s = 0; s < 16384; s += 97) EXPECT_EQ(cluster.MasterOfSlot(s), map[s]);
  EXPECT_EQ(std::set<int>(map.begin(), map.end()), std::set<int>(masters.begin(), masters.end()));

  // Keys land on the master owning their slot, and only there.
  Strings keys;
  std::map<int, int> per_master;
  for (int i = 0; i < 30; ++i) {
    const std::string key = "dict:{tag" + std::to_string(i) + "}:meta";
    keys.push_back(key);
    ASSERT_EQ(cluster.Command({"SET", key, "value" + std::to_string(i)}), Strings{"OK"});
  }
  for (int i = 0; i < 30; ++i) {
    const int owner = cluster.MasterOfSlot(KeySlot(keys[i]));
    ++per_master[owner];
    for (int m : masters) {
      EXPECT_EQ(Contains(cluster.KeysOnNode(cluster.NodeIndexOfPort(m), keys[i]), keys[i]),
                m == owner)
          << keys[i] << " on " << m << ", owner " << owner;
    }
    EXPECT_EQ(cluster.Command({"GET", keys[i]}), Strings{"value" + std::to_string(i)});
    // The owner answers, any other master redirects.
    const int other = masters[(std::find(masters.begin(), masters.end(), owner) - masters.begin() + 1) % 3];
    const Strings moved = cluster.CommandOnNode(cluster.NodeIndexOfPort(other), {"GET", keys[i]});
    ASSERT_EQ(moved.size(), 1u);
    EXPECT_EQ(moved[0].rfind("(error) MOVED " + std::to_string(KeySlot(keys[i])) + " ", 0), 0u)
        << moved[0];
  }
  EXPECT_EQ(per_master.size(), 3u) << "30 hash tags should hit every master";
  Strings sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(cluster.Keys("dict:*"), sorted);
  EXPECT_EQ(cluster.Command({"KEYS", "dict:*"}), sorted);
  EXPECT_EQ(cluster.Command({"DBSIZE"}), Strings{"30"});
  // Scripts go to every master.
  const Strings sha = cluster.Command({"SCRIPT", "LOAD", "return 1"});
  ASSERT_EQ(sha.size(), 1u);
  for (int m : masters) {
    EXPECT_EQ(cluster.CommandOnNode(cluster.NodeIndexOfPort(m), {"SCRIPT", "EXISTS", sha[0]}),
              Strings{"1"});
  }
  EXPECT_EQ(cluster.Command({"EVALSHA", sha[0], "1", keys[0]}), Strings{"1"});
  EXPECT_EQ(cluster.CommandOnNode(cluster.NodeIndexOfPort(masters[0]), {"SCRIPT", "FLUSH"}),
            Strings{"OK"});
  EXPECT_EQ(cluster.Command({"SCRIPT", "EXISTS", sha[0]}), Strings{"0"}) << "flushed on one master";
  // Bytes sent by the masters grow with what is read.
  const int64_t before_bytes = cluster.TotalNetOutputBytes();
  ASSERT_EQ(cluster.Command({"SET", "big", std::string(100000, 'x')}), Strings{"OK"});
  ASSERT_EQ(cluster.Command({"GET", "big"})[0].size(), 100000u);
  EXPECT_GE(cluster.TotalNetOutputBytes() - before_bytes, 100000);
  EXPECT_LT(cluster.TotalNetOutputBytes() - before_bytes, 150000) << "replication counted?";
  ASSERT_EQ(cluster.Command({"DEL", "big"}), Strings{"1"});

  // Failover: kill the master of keys[0]; its replica takes over.
  {
    const int slot = KeySlot(keys[0]);
    const int old_master = cluster.MasterOfSlot(slot);
    const std::vector<int> replicas = cluster.ReplicaPortsOf(old_master);
    ASSERT_EQ(replicas.size(), 1u);
    const int replica = replicas[0];
    // The replica has the key (SCAN needs no READONLY on a replica).
    const auto sync_deadline = Clock::now() + std::chrono::seconds(5);
    while (!Contains(cluster.KeysOnNode(cluster.NodeIndexOfPort(replica), keys[0]), keys[0]) &&
           Clock::now() < sync_deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(Contains(cluster.KeysOnNode(cluster.NodeIndexOfPort(replica), keys[0]), keys[0]));

    const int dead = cluster.NodeIndexOfPort(old_master);
    const pid_t dead_pid = cluster.node_pid(dead);
    t0 = Clock::now();
    cluster.KillNode(dead);
    EXPECT_FALSE(cluster.node_running(dead));
    EXPECT_TRUE(ProcessGone(dead_pid));
    absl::Status ok = cluster.WaitForClusterOk(std::chrono::seconds(10));
    ASSERT_TRUE(ok.ok()) << ok;
    const double failover = SecondsSince(t0);
    std::cout << "[ timing ] failover (kill master -> cluster ok): " << failover << " s"
              << std::endl;
    EXPECT_LT(failover, 10.0);
    EXPECT_EQ(cluster.MasterOfSlot(slot), replica);
    const std::vector<int> now_masters = cluster.MasterPorts();
    EXPECT_EQ(now_masters.size(), 3u);
    EXPECT_TRUE(std::count(now_masters.begin(), now_masters.end(), replica));
    EXPECT_FALSE(std::count(now_masters.begin(), now_masters.end(), old_master));
    // Routing recovers from the stale cached map (connection refused).
    EXPECT_EQ(cluster.Command({"GET", keys[0]}), Strings{"value0"});
    EXPECT_EQ(cluster.Command({"DBSIZE"}), Strings{"30"});
    EXPECT_EQ(cluster.Keys("dict:*"), sorted);

    // The old master comes back as a replica of its replacement.
    t0 = Clock::now();
    absl::Status restarted = cluster.RestartNode(dead);
    ASSERT_TRUE(restarted.ok()) << restarted;
    EXPECT_EQ(cluster.port(dead), old_master);
    // A restarted, failed-over master rejoins through gossip (an UPDATE from
    // its replacement); on a loaded machine that took more than 10 s once,
    // and once (a fresh-clone CI beside builds and benchmarks, 2026-12-04)
    // the replacement reported cluster_state:fail for all of 30 s. Gossip
    // converges eventually, with no bound Redis states: the wait is for
    // that, and when it runs out it now says what the node saw.
    ok = cluster.WaitForClusterOk(std::chrono::seconds(90));
    ASSERT_TRUE(ok.ok()) << ok;
    ok = cluster.WaitForReplicasInSync(std::chrono::seconds(30));
    ASSERT_TRUE(ok.ok()) << ok;
    std::cout << "[ timing ] restart of the old master -> in sync: " << SecondsSince(t0) << " s"
              << std::endl;
    EXPECT_EQ(cluster.ReplicaPortsOf(replica), std::vector<int>{old_master});
    const Strings role = cluster.CommandOnNode(dead, {"INFO", "replication"});
    ASSERT_EQ(role.size(), 1u);
    EXPECT_EQ(InfoField(role[0], "role"), "slave");
    EXPECT_EQ(cluster.MasterOfSlot(slot), replica);
  }

  // Resharding, after the failover: redis-cli moves the source's lowest
  // slots first; put a key in each of its 300 lowest slots and move 200.
  //
  // Why after: with the reshard first, a master killed about 2 s after it
  // imported the 200 slots, and restarted 80 ms after its replica's
  // promotion, left that replica (now master) without the last slot moved:
  // its CLUSTER NODES listed 0-5659, the others 0-5660, and its
  // cluster_state stayed fail for the whole 90 s wait (Redis 7.0.15: in a
  // fresh-clone CI, and twice in 33 runs beside two busy loops, 2026-12-05;
  // the same slot, 5660, each time). Every other node agreed
  // on the slot before the kill. The slot was lost in the replica's own
  // table as the restarted node's first PING arrived; no later gossip claims
  // it, so nothing repairs it short of redis-cli --cluster fix. tdstore's
  // own cluster tests do not reshard and fail over together.
  {
    const std::vector<int> now_masters = cluster.MasterPorts();
    ASSERT_EQ(now_masters.size(), 3u);
    const int from = now_masters[0], to = now_masters[1];
    map = cluster.SlotMap();
    std::map<int, std::string> slot_keys;  // slot -> key
    for (int s = 0; s < 16384 && slot_keys.size() < 300; ++s) {
      if (map[s] != from) continue;
      slot_keys[s] = KeyInSlot(s, "reshard:");
      ASSERT_EQ(cluster.Command({"RPUSH", slot_keys[s], "a", std::to_string(s)}), Strings{"2"});
    }
    t0 = Clock::now();
    absl::Status moved = cluster.MoveSlots(200, from, to);
    ASSERT_TRUE(moved.ok()) << moved;
    std::cout << "[ timing ] MoveSlots(200) with 300 keys: " << SecondsSince(t0) << " s"
              << std::endl;
    const std::vector<int> after = cluster.SlotMap();
    ASSERT_EQ(after.size(), 16384u);
    int moved_slots = 0, moved_keys = 0;
    for (int s = 0; s < 16384; ++s) {
      if (after[s] == map[s]) continue;
      EXPECT_EQ(map[s], from) << s;
      EXPECT_EQ(after[s], to) << s;
      EXPECT_EQ(cluster.MasterOfSlot(s), to);
      ++moved_slots;
    }
    EXPECT_EQ(moved_slots, 200);
    const Strings on_to = cluster.KeysOnNode(cluster.NodeIndexOfPort(to), "reshard:*");
    const Strings on_from = cluster.KeysOnNode(cluster.NodeIndexOfPort(from), "reshard:*");
    for (const auto& [s, key] : slot_keys) {
      EXPECT_EQ(cluster.Command({"LRANGE", key, "0", "-1"}), (Strings{"a", std::to_string(s)}))
          << key;
      EXPECT_EQ(Contains(on_to, key), after[s] == to) << key;
      EXPECT_EQ(Contains(on_from, key), after[s] == from) << key;
      moved_keys += after[s] == to;
    }
    EXPECT_GT(moved_keys, 0) << "no key was in a moved slot";
    for (int i = 0; i < 30; ++i) {
      EXPECT_EQ(cluster.Command({"GET", keys[i]}), Strings{"value" + std::to_string(i)});
    }
  }

  // Stop leaves no process, no listener and no directory.
  std::vector<pid_t> pids;
  std::vector<std::string> dirs;
  for (int i = 0; i < cluster.node_count(); ++i) {
    pids.push_back(cluster.node_pid(i));
    dirs.push_back(cluster.node_dir(i));
    EXPECT_TRUE(std::filesystem::exists(dirs.back()));
  }
  t0 = Clock::now();
  cluster.Stop();
  std::cout << "[ timing ] stop: " << SecondsSince(t0) << " s" << std::endl;
  EXPECT_FALSE(cluster.running());
  for (int i = 0; i < cluster.node_count(); ++i) {
    EXPECT_TRUE(ProcessGone(pids[i])) << pids[i];
    EXPECT_FALSE(Listening(cluster.port(i))) << cluster.port(i);
    EXPECT_FALSE(std::filesystem::exists(dirs[i])) << dirs[i];
  }
  cluster.Stop();  // idempotent
}

TEST(RedisClusterProcessTest, PasswordOnEveryNode) {
  RedisClusterOptions options;
  options.password = "s3cret pass/@";
  RedisClusterProcess cluster(options);
  absl::Status started = cluster.Start();  // replicas sync only with masterauth
  ASSERT_TRUE(started.ok()) << started;
  const std::vector<int> masters = cluster.MasterPorts();
  ASSERT_EQ(masters.size(), 3u);
  EXPECT_EQ(cluster.url().rfind("redis-cluster://:s3cret%20pass%2F%40@127.0.0.1:", 0), 0u)
      << cluster.url();
  for (int i = 0; i < cluster.node_count(); ++i) {
    redisContext* c = redisConnectWithTimeout("127.0.0.1", cluster.port(i), timeval{2, 0});
    ASSERT_TRUE(c != nullptr && c->err == 0);
    auto* reply = static_cast<redisReply*>(redisCommand(c, "PING"));
    ASSERT_NE(reply, nullptr);
    EXPECT_EQ(reply->type, REDIS_REPLY_ERROR);
    EXPECT_EQ(std::string(reply->str, reply->len).rfind("NOAUTH", 0), 0u);
    freeReplyObject(reply);
    reply = static_cast<redisReply*>(redisCommand(c, "AUTH %s", "wrong"));
    EXPECT_EQ(reply->type, REDIS_REPLY_ERROR);
    freeReplyObject(reply);
    reply = static_cast<redisReply*>(redisCommand(c, "AUTH %s", options.password.c_str()));
    EXPECT_EQ(reply->type, REDIS_REPLY_STATUS);
    freeReplyObject(reply);
    reply = static_cast<redisReply*>(redisCommand(c, "CLUSTER MYID"));
    EXPECT_EQ(reply->type, REDIS_REPLY_STRING);
    freeReplyObject(reply);
    redisFree(c);
    EXPECT_EQ(cluster.CommandOnNode(i, {"PING"}), Strings{"PONG"});
  }
  for (int i = 0; i < 10; ++i) {
    const std::string key = "{t" + std::to_string(i) + "}";
    ASSERT_EQ(cluster.Command({"SET", key, "v"}), Strings{"OK"});
    EXPECT_EQ(cluster.Command({"GET", key}), Strings{"v"});
  }
  EXPECT_EQ(cluster.Keys().size(), 10u);
  absl::Status moved = cluster.MoveSlots(5, masters[0], masters[2]);  // redis-cli authenticates
  EXPECT_TRUE(moved.ok()) << moved;
}

TEST(RedisClusterProcessTest, AclUserOnEveryNode) {
  RedisClusterOptions options;
  options.acl_user = "tdstore";
  options.acl_password = "acl-pw";
  options.password = "default-pw";  // the default user is locked away too
  RedisClusterProcess cluster(options);
  absl::Status started = cluster.Start();  // replicas sync only with masteruser
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_EQ(cluster.url().rfind("redis-cluster://tdstore:acl-pw@127.0.0.1:", 0), 0u)
      << cluster.url();
  for (int i = 0; i < cluster.node_count(); ++i) {
    EXPECT_EQ(cluster.CommandOnNode(i, {"ACL", "WHOAMI"}), Strings{"tdstore"});
  }
  ASSERT_EQ(cluster.Command({"SET", "k", "v"}), Strings{"OK"});
  EXPECT_EQ(cluster.Command({"GET", "k"}), Strings{"v"});
}

TEST(RedisClusterProcessTest, RejectsTooFewMasters) {
  RedisClusterOptions options;
  options.masters = 2;
  RedisClusterProcess cluster(options);
  EXPECT_EQ(cluster.Start().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TestRedisTest, PicksTheBackEndFromTheEnvironment) {
  setenv("TDSTORE_TEST_BACKEND", "cluster", 1);
  EXPECT_EQ(TestBackendName(), "cluster");
  EXPECT_EQ(MakeTestRedis()->backend(), "cluster");
  setenv("TDSTORE_TEST_BACKEND", "", 1);
  EXPECT_EQ(MakeTestRedis()->backend(), "standalone");
  unsetenv("TDSTORE_TEST_BACKEND");
  EXPECT_EQ(MakeTestRedis()->backend(), "standalone");
  setenv("TDSTORE_TEST_BACKEND", "bogus", 1);
  EXPECT_EQ(MakeTestRedis()->Start().code(), absl::StatusCode::kInvalidArgument);
  unsetenv("TDSTORE_TEST_BACKEND");
}

// The same calls mean the same on both back ends.
void ExerciseTestRedis(const std::string& backend) {
  SCOPED_TRACE(backend);
  std::unique_ptr<TestRedis> redis = MakeTestRedis(backend, {});
  EXPECT_EQ(redis->backend(), backend);
  auto t0 = Clock::now();
  absl::Status started = redis->Start();
  ASSERT_TRUE(started.ok()) << started;
  std::cout << "[ timing ] TestRedis(" << backend << ") start: " << SecondsSince(t0) << " s"
            << std::endl;
  const std::string url = redis->url();
  EXPECT_EQ(url.rfind(backend == "cluster" ? "redis-cluster://127.0.0.1:" : "redis://127.0.0.1:", 0),
            0u)
      << url;
  EXPECT_EQ(redis->node_count(), backend == "cluster" ? 6 : 1);
  EXPECT_EQ(backend == "cluster", redis->cluster() != nullptr);
  EXPECT_EQ(backend == "standalone", redis->standalone() != nullptr);

  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(redis->Command({"SET", "ns:{d" + std::to_string(i) + "}", std::to_string(i)}),
              Strings{"OK"});
  }
  EXPECT_EQ(redis->Keys("ns:*").size(), 20u);
  EXPECT_EQ(redis->Command({"GET", "ns:{d7}"}), Strings{"7"});
  EXPECT_EQ(redis->Command({"GET", "missing"}), Strings{"(nil)"});
  EXPECT_EQ(redis->Command({"DBSIZE"}), Strings{"20"});
  EXPECT_EQ(redis->Command({"INCR", "ns:{d1}"}), Strings{"2"});
  EXPECT_EQ(redis->Command({"LPUSH", "ns:{d1}", "x"})[0].rfind("(error) WRONGTYPE", 0), 0u);
  const int64_t bytes = redis->TotalNetOutputBytes();
  EXPECT_GT(bytes, 0);
  ASSERT_EQ(redis->Command({"SET", "blob", std::string(50000, 'b')}), Strings{"OK"});
  EXPECT_EQ(redis->Command({"GET", "blob"})[0].size(), 50000u);
  EXPECT_GE(redis->TotalNetOutputBytes() - bytes, 50000);
  EXPECT_EQ(redis->Command({"FLUSHALL"}), Strings{"OK"});
  EXPECT_TRUE(redis->Keys().empty());

  // Restart: same address, empty data.
  redis->Stop();
  started = redis->Start();
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_EQ(redis->url(), url);
  EXPECT_TRUE(redis->Keys().empty());
  EXPECT_EQ(redis->Command({"SET", "after", "restart"}), Strings{"OK"});
  redis->Stop();
  redis->Stop();
}

TEST(TestRedisTest, StandaloneAndClusterBehaveAlike) {
  ExerciseTestRedis("standalone");
  ExerciseTestRedis("cluster");
}

}  // namespace
}  // namespace tdstore::testing
