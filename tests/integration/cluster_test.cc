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
#include "common/cluster_slot.h"
#include "server/redis/make_client.h"
#include "server/store/dict_store.h"
#include "server/store/indexed_access.h"
#include "server/store/leaf_reader.h"
#include "server/store/leaf_writer.h"
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

}  // namespace
}  // namespace tdstore::store
