// The store on a real Redis Cluster (3 masters + 3 replicas on loopback):
// data spreads over every master, resharding under load loses nothing, a
// master killed under load costs at most retryable errors — never wrong or
// torn data — and AUTH works on every node.
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/redis/cluster_slot.h"
#include "server/redis/make_client.h"
#include "server/redis_store/dict_store.h"
#include "server/redis_store/indexed_access.h"
#include "server/redis_store/leaf_reader.h"
#include "server/redis_store/leaf_writer.h"
#include "tests/support/redis_cluster.h"

namespace tdstore::store {
namespace {

using plan::IndexSpec;
using plan::IndexTerm;
using plan::ResolvedIndex;
using plan::ResolveIndex;

using ::tdstore::testing::RedisClusterOptions;
using ::tdstore::testing::RedisClusterProcess;
using Clock = std::chrono::steady_clock;

// A store over its own cluster.
struct Fixture {
  explicit Fixture(RedisClusterOptions options = {}, StoreOptions store_options = {})
      : cluster(std::move(options)) {
    absl::Status started = cluster.Start();
    EXPECT_TRUE(started.ok()) << started;
    auto made = redis::MakeRedisClient(cluster.url(), "", redis::ConnectOptions{});
    EXPECT_TRUE(made.ok()) << made.status();
    client = *std::move(made);
    store = std::make_unique<DictStore>(client.get(), store_options);
  }
  RedisClusterProcess cluster;
  std::unique_ptr<redis::RedisClient> client;
  std::unique_ptr<DictStore> store;
};

absl::Status WriteLeaf(DictStore* store, const std::string& dict, const LeafPath& path,
                       const Shape& shape, const std::string& bytes) {
  auto txn = WriteTxn::Begin(store, dict);
  if (!txn.ok()) return txn.status();
  if (auto s = (*txn)->BeginLeaf(path, DType::kUInt8, shape, bytes.size()); !s.ok()) return s;
  for (size_t at = 0; at < bytes.size(); at += 1 << 20) {
    if (auto s = (*txn)->Append(std::string_view(bytes).substr(at, 1 << 20)); !s.ok()) return s;
  }
  return (*txn)->Commit().status();
}

absl::StatusOr<std::string> ReadWholeLeaf(const DictStore& store, const std::string& dict,
                                          const LeafPath& path) {
  auto schema = store.LoadDict(dict);
  if (!schema.ok()) return schema.status();
  const Leaf* leaf = schema->Find(path);
  if (leaf == nullptr) return absl::NotFoundError("no leaf");
  std::string out;
  absl::Status s = ReadLeaf(store, *schema, *leaf, [&](std::string_view b) {
    out.append(b);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

// Version v of a leaf: every byte equals v, so a read that mixed two
// versions (a torn read) is visible at once.
std::string Version(int v, size_t n) { return std::string(n, static_cast<char>(v)); }
bool IsOneVersion(const std::string& bytes) {
  return bytes.find_first_not_of(bytes.empty() ? '\0' : bytes[0]) == std::string::npos;
}

int64_t NetOut(const RedisClusterProcess& cluster, int node) {
  std::string info = cluster.CommandOnNode(node, {"INFO", "stats"}).at(0);
  size_t at = info.find("total_net_output_bytes:");
  return at == std::string::npos ? -1 : std::stoll(info.substr(at + 23));
}

TEST(ClusterTest, OneDictSpreadsOverEveryMasterAndReadsFromAll) {
  Fixture f;
  // 64 blocks of 100 rows.
  ASSERT_TRUE(f.store->CreateDict("spread", {6400}, 100, 0).ok());
  std::string bytes(6400 * 64, '\0');
  std::mt19937 rng(1);
  for (char& c : bytes) c = static_cast<char>(rng());
  ASSERT_TRUE(WriteLeaf(f.store.get(), "spread", {"x"}, {6400, 64}, bytes).ok());
  const std::string id = f.store->LoadDict("spread")->meta.id;

  std::vector<int> masters = f.cluster.MasterPorts();
  ASSERT_EQ(masters.size(), 3u);
  std::vector<int64_t> before;
  for (int port : masters) {
    int node = f.cluster.NodeIndexOfPort(port);
    size_t keys = f.cluster.KeysOnNode(node, "td:{" + id + ".*").size();
    EXPECT_GT(keys, 5u) << "master " << port << " holds only " << keys << " of 64 blocks";
    before.push_back(NetOut(f.cluster, node));
  }
  auto back = ReadWholeLeaf(*f.store, "spread", {"x"});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, bytes);
  // Every master sent its share of the read.
  for (size_t i = 0; i < masters.size(); ++i) {
    int64_t sent = NetOut(f.cluster, f.cluster.NodeIndexOfPort(masters[i])) - before[i];
    EXPECT_GT(sent, 6400 * 64 / 10) << "master " << masters[i] << " sent " << sent;
  }
}

TEST(ClusterTest, ReshardingUnderLoadLosesNothing) {
  Fixture f;
  ASSERT_TRUE(f.store->CreateDict("hot", {2000}, 50, 0).ok());
  constexpr size_t kBytes = 2000 * 32;
  ASSERT_TRUE(WriteLeaf(f.store.get(), "hot", {"x"}, {2000, 32}, Version(1, kBytes)).ok());

  std::atomic<bool> stop{false};
  std::atomic<int> writes{0}, reads{0}, indexed{0};
  std::vector<std::string> errors;
  std::mutex errors_mu;
  auto record = [&](const std::string& e) {
    std::lock_guard<std::mutex> lock(errors_mu);
    errors.push_back(e);
  };
  std::thread writer([&] {
    for (int v = 2; !stop; v = v % 200 + 2) {
      absl::Status s = WriteLeaf(f.store.get(), "hot", {"x"}, {2000, 32}, Version(v, kBytes));
      if (!s.ok()) record("write: " + s.ToString());
      ++writes;
      // Indexed rows of another leaf, read back at once.
      std::string row = Version(v, 64);
      auto w = WriteIndexedLeaves(f.store.get(), "hot", {IndexTerm::Positions({v % 2000, 1999})},
                                  {{{"y"}, DType::kUInt8, {2, 32}, row}});
      if (!w.ok()) record("indexed write: " + w.status().ToString());
      auto r = ReadIndexedLeaves(*f.store, "hot", {IndexTerm::Positions({v % 2000, 1999})},
                                 {{"y"}});
      if (!r.ok()) {
        record("indexed read: " + r.status().ToString());
      } else if (r->leaves[0].bytes != row) {
        record("indexed read returned wrong bytes");
      }
      ++indexed;
    }
  });
  std::thread reader([&] {
    while (!stop) {
      auto bytes = ReadWholeLeaf(*f.store, "hot", {"x"});
      // ABORTED: the leaf was replaced mid-read (ordinary concurrency).
      if (!bytes.ok() && !absl::IsAborted(bytes.status())) {
        record("read: " + bytes.status().ToString());
      } else if (bytes.ok() && (bytes->size() != kBytes || !IsOneVersion(*bytes))) {
        record("read returned a torn or wrong leaf");
      }
      ++reads;
    }
  });
  std::vector<int> masters = f.cluster.MasterPorts();
  absl::Status moved = f.cluster.MoveSlots(3000, masters[0], masters[1]);
  EXPECT_TRUE(moved.ok()) << moved;
  moved = f.cluster.MoveSlots(3000, masters[1], masters[2]);
  EXPECT_TRUE(moved.ok()) << moved;
  stop = true;
  writer.join();
  reader.join();
  EXPECT_TRUE(errors.empty()) << errors.size() << " errors, first: " << errors.front();
  EXPECT_GT(writes.load(), 3);
  EXPECT_GT(reads.load(), 3);
  std::printf("resharding under load: %d writes, %d reads, %d indexed write+read pairs\n",
              writes.load(), reads.load(), indexed.load());
}

TEST(ClusterTest, MasterKilledUnderLoadCostsOnlyRetryableErrors) {
  StoreOptions options;
  options.write_replicas = 1;  // acknowledged writes survive the failover
  options.write_replicas_timeout = std::chrono::milliseconds(2000);
  Fixture f({}, options);
  ASSERT_TRUE(f.store->CreateDict("ha", {3000}, 100, 0).ok());
  constexpr size_t kBytes = 3000 * 16;
  ASSERT_TRUE(WriteLeaf(f.store.get(), "ha", {"x"}, {3000, 16}, Version(1, kBytes)).ok());

  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, retryable{0};
  std::vector<std::string> wrong;
  std::mutex mu;
  std::atomic<int64_t> last_success_ns{0};
  auto note = [&](const absl::Status& s) {
    if (s.ok()) {
      ++ok;
      last_success_ns = Clock::now().time_since_epoch().count();
    } else if (absl::IsUnavailable(s) || absl::IsAborted(s)) {
      ++retryable;
    } else {
      std::lock_guard<std::mutex> lock(mu);
      wrong.push_back(s.ToString());
    }
  };
  std::thread writer([&] {
    for (int v = 2; !stop; v = v % 200 + 2) {
      note(WriteLeaf(f.store.get(), "ha", {"x"}, {3000, 16}, Version(v, kBytes)));
    }
  });
  std::thread reader([&] {
    while (!stop) {
      auto bytes = ReadWholeLeaf(*f.store, "ha", {"x"});
      if (bytes.ok() && (bytes->size() != kBytes || !IsOneVersion(*bytes))) {
        std::lock_guard<std::mutex> lock(mu);
        wrong.push_back("a read returned a torn or wrong leaf");
      }
      note(bytes.status());
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // Kill the master that owns the dict's metadata: every call needs it.
  const int meta_master = f.cluster.MasterOfSlot(KeySlot("td:{1}:meta"));
  const auto killed_at = Clock::now();
  f.cluster.KillNode(f.cluster.NodeIndexOfPort(meta_master));
  absl::Status recovered = f.cluster.WaitForClusterOk(std::chrono::seconds(15));
  const auto cluster_ok_at = Clock::now();
  ASSERT_TRUE(recovered.ok()) << recovered;
  // Serving again: within the failover time plus a few seconds.
  const int ok_at_failover = ok.load();
  while (ok.load() < ok_at_failover + 5 && Clock::now() - cluster_ok_at < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop = true;
  writer.join();
  reader.join();
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " wrong results, first: " << wrong.front();
  EXPECT_GE(ok.load(), ok_at_failover + 5) << "not serving again 5 s after the failover";
  // The last acknowledged data is there and whole.
  auto final_bytes = ReadWholeLeaf(*f.store, "ha", {"x"});
  ASSERT_TRUE(final_bytes.ok()) << final_bytes.status();
  EXPECT_TRUE(IsOneVersion(*final_bytes));
  std::printf("failover: cluster ok %.1f s after the kill; %d ok calls, %d retryable errors\n",
              std::chrono::duration<double>(cluster_ok_at - killed_at).count(), ok.load(),
              retryable.load());
}

TEST(ClusterTest, AuthWorksOnEveryNode) {
  RedisClusterOptions options;
  options.password = "s3cret pass/@";
  RedisClusterProcess cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  // cluster.url() carries the credentials for every node.
  auto client = redis::MakeRedisClient(cluster.url(), "", redis::ConnectOptions{});
  ASSERT_TRUE(client.ok());
  DictStore store(client->get(), StoreOptions{});
  ASSERT_TRUE(store.CreateDict("a", {640}, 10, 0).ok());
  const std::string bytes = Version(7, 640 * 8);
  ASSERT_TRUE(WriteLeaf(&store, "a", {"x"}, {640, 8}, bytes).ok());  // 64 blocks: every node
  EXPECT_EQ(*ReadWholeLeaf(store, "a", {"x"}), bytes);

  // The wrong password: refused, and the password never shows.
  auto wrong = redis::MakeRedisClient(cluster.url(), "not-it", redis::ConnectOptions{});
  ASSERT_TRUE(wrong.ok());
  DictStore denied(wrong->get(), StoreOptions{});
  auto listed = denied.ListDicts();
  EXPECT_TRUE(absl::IsPermissionDenied(listed.status())) << listed.status();
  EXPECT_EQ(listed.status().message().find("not-it"), std::string::npos);
  EXPECT_EQ(listed.status().message().find("s3cret"), std::string::npos);
}


// --- ClusterClient routing (server/redis/cluster_client.h) ---

// The port of the first seed in a "redis-cluster://host:port,..." URL.
int FirstSeedPort(const std::string& url) {
  std::string rest = url.substr(url.find("://") + 3);
  rest = rest.substr(0, rest.find(','));
  return std::stoi(rest.substr(rest.rfind(':') + 1));
}

// A key whose slot's master is (owned_by_port != 0) or is not (avoid_port)
// the given one, per the harness' live view.
std::string KeyOwnedBy(const RedisClusterProcess& cluster, const std::string& prefix,
                       int owned_by_port, int avoid_port = 0) {
  for (int i = 0;; ++i) {
    std::string key = prefix + std::to_string(i);
    const int owner = cluster.MasterOfSlot(KeySlot(key));
    if (owned_by_port != 0 ? owner == owned_by_port : owner != avoid_port && owner != 0) {
      return key;
    }
  }
}

absl::StatusOr<std::string> RedisGet(redis::RedisClient* client, const std::string& key) {
  const std::string_view argv[] = {"GET", key};
  auto reply = client->Call(key, argv);
  if (!reply.ok()) return reply.status();
  if (reply->is_error()) return absl::InternalError(std::string(reply->str()));
  return std::string(reply->str());
}

absl::Status RedisSet(redis::RedisClient* client, const std::string& key,
                      const std::string& value) {
  const std::string_view argv[] = {"SET", key, value};
  auto reply = client->Call(key, argv);
  if (!reply.ok()) return reply.status();
  if (reply->is_error()) return absl::InternalError(std::string(reply->str()));
  return absl::OkStatus();
}

TEST(ClusterClientTest, FindsTheMapQuicklyWithTheFirstSeedKilled) {
  RedisClusterProcess cluster;
  ASSERT_TRUE(cluster.Start().ok());
  auto warm = redis::MakeRedisClient(cluster.url(), "", redis::ConnectOptions{});
  ASSERT_TRUE(warm.ok());
  std::vector<std::string> keys;
  for (int i = 0; i < 64; ++i) keys.push_back("seed-test-" + std::to_string(i));
  for (const std::string& key : keys) ASSERT_TRUE(RedisSet(warm->get(), key, "before").ok());

  const int seed_port = FirstSeedPort(cluster.url());
  const std::string elsewhere = KeyOwnedBy(cluster, "elsewhere-", 0, seed_port);
  cluster.KillNode(cluster.NodeIndexOfPort(seed_port));

  // A new client (its first refresh meets the dead seed first) and the warm
  // one (the node that answered last is dead): both serve the live masters'
  // slots at once.
  auto cold = redis::MakeRedisClient(cluster.url(), "", redis::ConnectOptions{});
  ASSERT_TRUE(cold.ok());
  for (redis::RedisClient* client : {cold->get(), warm->get()}) {
    const auto start = Clock::now();
    absl::Status set = RedisSet(client, elsewhere, "x");
    EXPECT_TRUE(set.ok()) << set;
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  }

  // After the failover every slot works again, on both, within seconds.
  ASSERT_TRUE(cluster.WaitForClusterOk(std::chrono::seconds(15)).ok());
  for (redis::RedisClient* client : {cold->get(), warm->get()}) {
    const auto start = Clock::now();
    for (const std::string& key : keys) {
      absl::Status set = RedisSet(client, key, "after");
      ASSERT_TRUE(set.ok()) << key << ": " << set;
      auto got = RedisGet(client, key);
      ASSERT_TRUE(got.ok()) << key << ": " << got.status();
      EXPECT_EQ(*got, "after");
    }
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  }
}

TEST(ClusterClientTest, ConcurrentCallsDuringMoveSlotsHaveNoErrors) {
  RedisClusterProcess cluster;
  ASSERT_TRUE(cluster.Start().ok());
  auto client = redis::MakeRedisClient(cluster.url(), "", redis::ConnectOptions{});
  ASSERT_TRUE(client.ok());
  redis::RedisClient* c = client->get();

  std::atomic<bool> stop{false};
  std::atomic<int> ops{0};
  std::vector<std::string> errors;
  std::mutex errors_mu;
  auto record = [&](const std::string& e) {
    std::lock_guard<std::mutex> lock(errors_mu);
    errors.push_back(e);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int n = 0; !stop; ++n) {
        // One write and read back, alone...
        const std::string key = "mv" + std::to_string(t) + ":" + std::to_string(n % 500);
        const std::string value = std::to_string(n);
        if (absl::Status s = RedisSet(c, key, value); !s.ok()) {
          record("set " + key + ": " + s.ToString());
        } else if (auto got = RedisGet(c, key); !got.ok()) {
          record("get " + key + ": " + got.status().ToString());
        } else if (*got != value) {
          record("get " + key + " returned " + *got + ", not " + value);
        }
        ++ops;
        // ...and 8 of each in one pipeline over every master.
        auto pipe = c->NewPipeline(4);
        if (!pipe.ok()) {
          record("pipeline: " + pipe.status().ToString());
          continue;
        }
        std::vector<std::string> pkeys;
        for (int i = 0; i < 8; ++i) {
          pkeys.push_back("mvp" + std::to_string(t) + ":" + std::to_string((n * 8 + i) % 700));
        }
        absl::Status s;
        for (const std::string& k : pkeys) {
          const std::string_view argv[] = {"SET", k, value};
          if (s.ok()) s = (*pipe)->Send(k, argv);
        }
        for (const std::string& k : pkeys) {
          const std::string_view argv[] = {"GET", k};
          if (s.ok()) s = (*pipe)->Send(k, argv);
        }
        if (s.ok()) s = (*pipe)->Flush();
        for (int i = 0; s.ok() && i < 16; ++i) {
          auto reply = (*pipe)->Receive();
          if (!reply.ok()) {
            s = reply.status();
          } else if (reply->is_error()) {
            s = absl::InternalError(std::string(reply->str()));
          } else if (i >= 8 && reply->str() != value) {
            s = absl::InternalError("pipelined GET " + pkeys[i - 8] + " returned " +
                                    std::string(reply->str()));
          }
        }
        if (!s.ok()) record("pipeline: " + s.ToString());
        ++ops;
      }
    });
  }
  std::vector<int> masters = cluster.MasterPorts();
  ASSERT_EQ(masters.size(), 3u);
  absl::Status moved = cluster.MoveSlots(2000, masters[0], masters[1]);
  EXPECT_TRUE(moved.ok()) << moved;
  moved = cluster.MoveSlots(2000, masters[1], masters[2]);
  EXPECT_TRUE(moved.ok()) << moved;
  stop = true;
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(errors.empty()) << errors.size() << " errors, first: " << errors.front();
  EXPECT_GT(ops.load(), 100);
  std::printf("8 threads during 2 reshards: %d operations, %zu errors\n", ops.load(),
              errors.size());
}

TEST(ClusterClientTest, ReissuedPipelineWritesAreCoveredByWait) {
  RedisClusterProcess cluster;
  ASSERT_TRUE(cluster.Start().ok());
  // Two clients whose maps go stale together.
  auto plain = redis::MakeRedisClient(cluster.url(), "", redis::ConnectOptions{});
  auto waiting = redis::MakeRedisClient(cluster.url(), "", redis::ConnectOptions{});
  ASSERT_TRUE(plain.ok() && waiting.ok());
  ASSERT_TRUE(RedisSet(plain->get(), "warm", "1").ok());
  ASSERT_TRUE(RedisSet(waiting->get(), "warm", "1").ok());

  std::vector<int> masters = cluster.MasterPorts();
  std::vector<int> before = cluster.SlotMap();
  ASSERT_TRUE(cluster.MoveSlots(200, masters[0], masters[1]).ok());
  std::vector<int> after = cluster.SlotMap();
  std::vector<std::string> moved_keys;  // keys the stale maps send to the old owner
  for (int i = 0; moved_keys.size() < 2; ++i) {
    std::string key = "reissue-" + std::to_string(i);
    const int slot = KeySlot(key);
    if (before[slot] == masters[0] && after[slot] == masters[1]) moved_keys.push_back(key);
  }

  auto write = [](redis::RedisClient* client, const std::string& key, bool set_reissue,
                  absl::Status* wait) -> absl::Status {
    auto pipe = client->NewPipeline(8);
    if (!pipe.ok()) return pipe.status();
    // A connection per node: commands for different nodes run in no set order.
    EXPECT_FALSE(client->pipelines_in_order());
    if (set_reissue) (*pipe)->set_reissue_replicas(1, std::chrono::milliseconds(2000));
    const std::string_view argv[] = {"SET", key, "v"};
    if (auto s = (*pipe)->Send(key, argv); !s.ok()) return s;
    auto reply = (*pipe)->Receive();  // MOVED, re-issued on the new owner
    if (!reply.ok()) return reply.status();
    if (reply->is_error()) return absl::InternalError(std::string(reply->str()));
    *wait = (*pipe)->WaitReplicas(1, std::chrono::milliseconds(2000));
    return absl::OkStatus();
  };
  // Without set_reissue_replicas the pipeline cannot vouch for the write.
  absl::Status wait;
  ASSERT_TRUE(write(plain->get(), moved_keys[0], false, &wait).ok());
  EXPECT_TRUE(absl::IsUnavailable(wait)) << wait;
  // With it, the re-issued write was waited for.
  ASSERT_TRUE(write(waiting->get(), moved_keys[1], true, &wait).ok());
  EXPECT_TRUE(wait.ok()) << wait;
  std::vector<int> replicas = cluster.ReplicaPortsOf(masters[1]);
  ASSERT_FALSE(replicas.empty());
  EXPECT_EQ(cluster.KeysOnNode(cluster.NodeIndexOfPort(replicas[0]), moved_keys[1]),
            std::vector<std::string>{moved_keys[1]});
}

TEST(ClusterClientTest, NoscriptIsLoadedWhereItCameFromEvenWithAMasterDown) {
  RedisClusterProcess cluster;
  ASSERT_TRUE(cluster.Start().ok());
  auto client = redis::MakeRedisClient(cluster.url(), "", redis::ConnectOptions{});
  ASSERT_TRUE(client.ok());
  const redis::Script script("echo", "return ARGV[1]");
  std::vector<int> masters = cluster.MasterPorts();
  const std::string key = KeyOwnedBy(cluster, "script-", masters[1]);
  const std::string_view keys[] = {key};
  const std::string_view args[] = {"hello"};
  auto first = (*client)->Eval(script, keys, args);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->str(), "hello");

  // Another master dies (its slots still map to it) and the script cache of
  // the key's master is flushed: the script is loaded there and runs.
  cluster.KillNode(cluster.NodeIndexOfPort(masters[0]));
  cluster.CommandOnNode(cluster.NodeIndexOfPort(masters[1]), {"SCRIPT", "FLUSH"});
  auto again = (*client)->Eval(script, keys, args);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->is_error()) << again->str();
  EXPECT_EQ(again->str(), "hello");
}

}  // namespace
}  // namespace tdstore::store
