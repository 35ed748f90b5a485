// Fault cases of the store on a standalone redis-server that lets us stall
// it (DEBUG SLEEP): a commit whose reply is lost, an abort with writes still
// in flight, deletions cut short, and names left without meta. Each checks
// that nothing visible is destroyed and no key is left untracked.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/redis/make_client.h"
#include "server/redis/redis_address.h"
#include "server/redis_store/dict_store.h"
#include "server/redis_store/leaf_reader.h"
#include "server/redis_store/leaf_writer.h"
#include "server/redis_store/lua_scripts.h"
#include "server/redis_store/sweeper.h"
#include "tests/support/redis_server.h"

namespace tdstore::store {
namespace {

using ::tdstore::testing::RedisServerOptions;
using ::tdstore::testing::RedisServerProcess;

class StoreFaultsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    RedisServerOptions options;
    options.extra_args = {"--enable-debug-command", "yes"};
    redis_ = new RedisServerProcess(options);
    ASSERT_TRUE(redis_->Start().ok());
  }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }
  void SetUp() override {
    ns_ = std::string("f") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    redis::ConnectOptions quick;
    quick.io_timeout = std::chrono::milliseconds(300);  // shorter than the stalls below
    auto client = redis::MakeRedisClient(redis_->url(), "", quick);
    ASSERT_TRUE(client.ok());
    client_ = *std::move(client);
    StoreOptions options;
    options.ns = ns_;
    store_ = std::make_unique<DictStore>(client_.get(), options);
  }
  std::vector<std::string> Keys() const { return redis_->Keys(ns_ + ":*"); }
  // Stalls Redis for `ms` on a connection of its own, from another thread.
  std::thread Stall(int ms) {
    return std::thread([ms] { redis_->Command({"DEBUG", "SLEEP", std::to_string(ms / 1000.0)}); });
  }

  // One whole leaf "obs" of `bytes` (float64 [64]) written into `dict`.
  static absl::Status WriteOnce(DictStore& store, const std::string& dict,
                                const std::string& bytes) {
    auto txn = WriteTxn::Begin(&store, dict);
    if (!txn.ok()) return txn.status();
    if (auto s = (*txn)->BeginLeaf({"obs"}, DType::kFloat64, {64}, bytes.size()); !s.ok()) {
      return s;
    }
    if (auto s = (*txn)->Append(bytes); !s.ok()) return s;
    return (*txn)->Commit().status();
  }

  static RedisServerProcess* redis_;
  std::string ns_;
  std::unique_ptr<redis::RedisClient> client_;
  std::unique_ptr<DictStore> store_;
};

RedisServerProcess* StoreFaultsTest::redis_ = nullptr;

TEST_F(StoreFaultsTest, CommitWhoseReplyIsLostKeepsTheCommittedLeaf) {
  // The stepwise commit (commit_leaves.lua) and the at-once one (MULTI ...
  // EXEC with write_at_once.lua): either way a commit that ran stays.
  for (const int64_t at_once_max_bytes : {int64_t{0}, StoreOptions().at_once_max_bytes}) {
    SCOPED_TRACE(at_once_max_bytes == 0 ? "stepwise" : "at once");
    StoreOptions options = store_->options();
    options.at_once_max_bytes = at_once_max_bytes;
    DictStore store(client_.get(), options);
    const std::string dict = at_once_max_bytes == 0 ? "stepwise" : "at_once";
    // As tdstored does at start: the commit script must be known to Redis, or
    // the stalled EVALSHA would only answer NOSCRIPT.
    ASSERT_TRUE(PreloadScripts(*client_).ok());
    ASSERT_TRUE(store.CreateDict(dict, {64}, 16, 1000).ok());
    // Idle pooled connections, so the commit goes out at once on one of them
    // instead of waiting to connect.
    {
      std::vector<std::thread> warm;
      for (int i = 0; i < 4; ++i) warm.emplace_back([&] { (void)store.LoadDict(dict); });
      for (std::thread& t : warm) t.join();
    }
    const std::string bytes(64 * 8, 'x');
    // A first write: the at-once path's generations are leased (a round trip
    // of their own, which the stall must not meet).
    ASSERT_TRUE(WriteOnce(store, dict, std::string(64 * 8, 'w')).ok());
    // The stall must be in force when the commit goes out and the commit must
    // reach Redis before the reply times out. On a loaded machine either may
    // miss (the stalling thread is late: the commit succeeds; or the commit
    // leaves after the timeout started: its outcome is unknown and it never
    // ran, which is also a correct answer). So try with growing lead times
    // until a commit's reply is lost *and* the commit ran: this generation,
    // not an earlier attempt's, is the visible leaf.
    absl::Status commit;
    absl::StatusOr<DictSchema> schema = absl::UnknownError("no attempt");
    const Leaf* leaf = nullptr;
    for (int lead_ms : {100, 300, 700, 1000, 1500}) {
      auto txn = WriteTxn::Begin(&store, dict);
      ASSERT_TRUE(txn.ok());
      ASSERT_TRUE((*txn)->BeginLeaf({"obs"}, DType::kFloat64, {64}, bytes.size()).ok());
      ASSERT_TRUE((*txn)->Append(bytes).ok());
      auto earlier = store.LoadDict(dict);
      ASSERT_TRUE(earlier.ok());
      const Leaf* earlier_leaf = earlier->Find({"obs"});
      const int64_t earlier_gen = earlier_leaf ? earlier_leaf->record.generation : -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the data is in
      std::thread stall = Stall(lead_ms + 900);
      std::this_thread::sleep_for(std::chrono::milliseconds(lead_ms));
      // The commit script runs after the stall, but its reply comes too late.
      commit = (*txn)->Commit().status();
      stall.join();
      if (commit.ok()) continue;  // the stall came too late
      EXPECT_EQ(commit.code(), absl::StatusCode::kUnavailable) << commit;
      EXPECT_NE(commit.message().find("outcome is unknown"), std::string::npos) << commit;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      schema = store.LoadDict(dict);
      ASSERT_TRUE(schema.ok());
      leaf = schema->Find({"obs"});
      if (leaf != nullptr && leaf->record.generation != earlier_gen) break;
      leaf = nullptr;  // the commit never reached Redis in time: try again
    }
    // The commit ran: the leaf is visible and whole (before the fix, the
    // writer deleted the blocks of the leaf it had just made visible).
    ASSERT_NE(leaf, nullptr) << "no attempt had its commit run with its reply lost";
    std::string back;
    ASSERT_TRUE(ReadLeaf(store, *schema, *leaf, [&](std::string_view b) {
                  back.append(b);
                  return absl::OkStatus();
                }).ok());
    EXPECT_EQ(back, bytes);
    // And no sweep can take it away: its pending entry is gone.
    Sweeper sweeper(&store);
    ASSERT_TRUE(sweeper.SweepOnce(std::numeric_limits<int64_t>::max()).ok());
    back.clear();
    ASSERT_TRUE(ReadLeaf(store, *schema, *leaf, [&](std::string_view b) {
                  back.append(b);
                  return absl::OkStatus();
                }).ok());
    EXPECT_EQ(back, bytes);
  }
}

TEST_F(StoreFaultsTest, AbortWithWritesInFlightLeavesNoUntrackedKeys) {
  ASSERT_TRUE(store_->CreateDict("d", {1024}, 64, 1 << 20).ok());
  const std::vector<std::string> before = Keys();
  {
    auto txn = WriteTxn::Begin(store_.get(), "d");
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE((*txn)->BeginLeaf({"x"}, DType::kFloat32, {1024, 256}, 1 << 20).ok());
    std::thread stall = Stall(800);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // Windows queue up behind the stall; the reply wait times out.
    absl::Status s = (*txn)->Append(std::string(512 << 10, 'y'));
    stall.join();
    (void)s;
  }  // aborted here, possibly with SETRANGEs still queued in Redis
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Whatever landed late is still tracked by a pending entry: a sweep
  // after its expiry removes it, and then nothing is left.
  Sweeper sweeper(store_.get());
  auto swept = sweeper.SweepOnce(std::numeric_limits<int64_t>::max());
  ASSERT_TRUE(swept.ok()) << swept.status();
  std::vector<std::string> after = Keys();
  EXPECT_EQ(after, before);
}

TEST_F(StoreFaultsTest, DeletionCutShortIsFinishedByTheSweeper) {
  ASSERT_TRUE(store_->CreateDict("keep", {4}, 2, 100).ok());
  ASSERT_TRUE(store_->CreateDict("d", {40}, 4, 100).ok());
  auto txn = WriteTxn::Begin(store_.get(), "d");
  ASSERT_TRUE((*txn)->BeginLeaf({"x"}, DType::kUInt8, {40, 3}, 120).ok());
  ASSERT_TRUE((*txn)->Append(std::string(120, 'z')).ok());
  ASSERT_TRUE((*txn)->Commit().ok());
  const std::string id = store_->LoadDict("d")->meta.id;
  // A deletion that got as far as unpublishing (as if tdstored died there).
  const std::string catalog = ns_ + ":catalog";
  redis_->Command({"HDEL", catalog, "d"});
  redis_->Command({"HSET", catalog, std::string(kDeletingPrefix) + id, id});
  EXPECT_EQ(store_->LoadDict("d").status().code(), absl::StatusCode::kNotFound);
  auto listed = store_->ListDicts();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed, std::vector<std::string>{"keep"});

  Sweeper sweeper(store_.get());
  ASSERT_TRUE(sweeper.SweepOnce(0).ok());
  for (const std::string& k : Keys()) {
    EXPECT_EQ(k.find("{" + id), std::string::npos) << "left behind: " << k;
  }
  EXPECT_TRUE(redis_->Command({"HGET", catalog, std::string(kDeletingPrefix) + id})[0] == "(nil)");
}

TEST_F(StoreFaultsTest, NameWithoutMetaCanBeDeletedAndReused) {
  // A published name whose meta is missing (a create cut short).
  redis_->Command({"HSET", ns_ + ":catalog", "ghost", "999"});
  EXPECT_EQ(store_->LoadDict("ghost").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->CreateDict("ghost", {1}, 0, 0).status().code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(store_->DeleteDict("ghost").ok());
  EXPECT_TRUE(store_->CreateDict("ghost", {1}, 0, 0).ok());
}

TEST_F(StoreFaultsTest, RenameDoesNotResurrectADeletedDictsMeta) {
  ASSERT_TRUE(store_->CreateDict("a", {1}, 0, 0).ok());
  const std::string id = store_->LoadDict("a")->meta.id;
  ASSERT_TRUE(store_->RenameDict("a", "b").ok());
  ASSERT_TRUE(store_->DeleteDict("b").ok());
  for (const std::string& k : Keys()) {
    EXPECT_EQ(k.find("{" + id + "}"), std::string::npos) << "left behind: " << k;
  }
}

TEST(RedisUrlSecrets, AMalformedUrlNeverEchoesThePassword) {
  // The host was forgotten: "hunter2" lands where the port goes.
  auto parsed = redis::ParseRedisUrl("redis://admin:hunter2");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message().find("hunter2"), std::string::npos)
      << parsed.status().message();
}

}  // namespace
}  // namespace tdstore::store
