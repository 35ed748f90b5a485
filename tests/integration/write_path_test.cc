// The whole-leaf write's short path (issue #33) against a real Redis,
// standalone and cluster: a write into a dict whose schema is cached
// proves it in the round trip of its first reservation and decides again
// on a fresh schema when it is stale; the generations a commit replaces go
// after the answer, on the store's retire worker, exactly once, also with
// the sweeper racing it; a broken write leaves nothing visible and nothing
// behind.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/redis/make_client.h"
#include "server/redis_store/dict_resize.h"
#include "server/redis_store/dict_store.h"
#include "server/redis_store/leaf_reader.h"
#include "server/redis_store/leaf_writer.h"
#include "server/redis_store/sweeper.h"
#include "tests/support/redis_suite_test.h"

namespace tdstore::store {
namespace {

using ::tdstore::testing::RedisSuiteTest;

class WritePathTest : public RedisSuiteTest {
 protected:
  void SetUp() override {
    ns_ = TestNamespace("w");
    for (const std::string& k : Keys()) redis_->Command({"DEL", k});
    options_.ns = ns_;
    options_.window_bytes = 64;  // many windows even for small leaves
    options_.pipeline_depth = 3;
    a_ = NewStore();
    b_ = NewStore();
  }

  // A store of its own client: another daemon on the same Redis.
  std::unique_ptr<DictStore> NewStore() {
    auto client = redis::MakeRedisClient(redis_->url(), "", redis::ConnectOptions{});
    EXPECT_TRUE(client.ok()) << client.status();
    clients_.push_back(*std::move(client));
    return std::make_unique<DictStore>(clients_.back().get(), options_);
  }

  std::vector<std::string> Keys() const { return redis_->Keys(ns_ + ":*"); }
  std::vector<std::string> DataKeys() const {
    std::vector<std::string> out;
    for (const std::string& k : Keys()) {
      if (k.find("}:g") != std::string::npos) out.push_back(k);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string PendingCount(const std::string& id) const {
    return redis_->Command({"HLEN", ns_ + ":{" + id + "}:pending"}).at(0);
  }
  int64_t UsedBytes() const {
    const std::string v = redis_->Command({"GET", ns_ + ":used_bytes"}).at(0);
    return v.empty() || v == "(nil)" ? 0 : std::stoll(v);
  }

  static std::string RandomBytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  }

  // One uint8 leaf `path` of `bytes`, through `store`, by the dict's id
  // (so a cached schema is used when there is one).
  absl::Status Write(DictStore* store, const DictRef& ref, const LeafPath& path,
                     const Shape& shape, const std::string& bytes) {
    auto txn = WriteTxn::Begin(store, ref);
    if (!txn.ok()) return txn.status();
    if (auto s = (*txn)->BeginLeaf(path, DType::kUInt8, shape, bytes.size()); !s.ok()) return s;
    for (size_t off = 0; off < bytes.size(); off += 100) {
      if (auto s = (*txn)->Append(std::string_view(bytes).substr(off, 100)); !s.ok()) return s;
    }
    return (*txn)->Commit().status();
  }

  absl::StatusOr<std::string> Read(DictStore* store, const std::string& dict,
                                   const LeafPath& path) {
    auto schema = store->LoadDict(dict);
    if (!schema.ok()) return schema.status();
    const Leaf* leaf = schema->Find(path);
    if (leaf == nullptr) return absl::NotFoundError("no leaf");
    std::string out;
    auto s = ReadLeaf(*store, *schema, *leaf, [&](std::string_view b) {
      out.append(b);
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    return out;
  }

  // Polls `done` until it holds or 20 s pass; whether it held.
  template <typename Done>
  static bool Eventually(Done done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }

  std::string ns_;
  StoreOptions options_;
  std::vector<std::unique_ptr<redis::RedisClient>> clients_;
  std::unique_ptr<DictStore> a_, b_;
};

// Daemon a caches the schema; daemon b changes it. a's next write must see
// b's change, decide on it, and never commit from the stale picture.
TEST_F(WritePathTest, ACachedSchemaIsProvenOrReloadedBeforeTheWriteUsesIt) {
  auto created = a_->CreateDict("d", {8}, 2, 1000);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string id = created->meta.id;
  const DictRef ref("d", id);
  ASSERT_TRUE(a_->Load(ref).ok());  // cached in a
  ASSERT_TRUE(Write(a_.get(), ref, {"x"}, {8}, RandomBytes(8, 1)).ok());

  // 1. Current: the write uses the cache and commits, also when Redis
  //    forgot its scripts (the reservation rides a pipeline: NOSCRIPT is
  //    answered by loading it and reserving again).
  redis_->Command({"SCRIPT", "FLUSH"});
  const std::string x2 = RandomBytes(8, 2);
  ASSERT_TRUE(Write(a_.get(), ref, {"x"}, {8}, x2).ok());
  EXPECT_EQ(*Read(a_.get(), "d", {"x"}), x2);

  // 2. Stale, the header still fine: b adds a leaf; a's write of x commits
  //    and b's leaf stays.
  ASSERT_TRUE(Write(b_.get(), DictRef("d"), {"y"}, {8}, RandomBytes(8, 3)).ok());
  const std::string x3 = RandomBytes(8, 4);
  ASSERT_TRUE(Write(a_.get(), ref, {"x"}, {8}, x3).ok());
  auto schema = a_->LoadDict("d");
  ASSERT_TRUE(schema.ok());
  EXPECT_EQ(schema->leaves.size(), 2u);
  EXPECT_EQ(*Read(a_.get(), "d", {"x"}), x3);

  // 3. Stale, and the cached schema would refuse the header: b grows the
  //    dict to 16 rows; a's [16] leaf is right for the dict as it is now.
  ASSERT_TRUE(a_->Load(ref).ok());
  ASSERT_TRUE(ResizeDict(*b_, DictRef("d"), 16).ok());
  const std::string z = RandomBytes(16, 5);
  absl::Status grown = Write(a_.get(), ref, {"z"}, {16}, z);
  ASSERT_TRUE(grown.ok()) << grown;
  EXPECT_EQ(*Read(a_.get(), "d", {"z"}), z);
  //    ...and the old size, accepted by nothing now, is refused.
  EXPECT_EQ(Write(a_.get(), ref, {"z"}, {8}, RandomBytes(8, 6)).code(),
            absl::StatusCode::kInvalidArgument);

  // 4. Gone: b deletes the dict; a's write is NOT_FOUND and writes nothing.
  ASSERT_TRUE(a_->Load(ref).ok());
  ASSERT_TRUE(b_->DeleteDict(DictRef("d")).ok());
  absl::Status gone = Write(a_.get(), ref, {"x"}, {16}, RandomBytes(16, 7));
  EXPECT_EQ(gone.code(), absl::StatusCode::kNotFound) << gone;
  EXPECT_TRUE(DataKeys().empty());
  EXPECT_EQ(UsedBytes(), 0);
}

// The generation a commit replaced goes after the answer, on the retire
// worker: its blocks, its parked entry, and its bytes from the namespace
// counter, once.
TEST_F(WritePathTest, AReplacedGenerationGoesAfterTheCommitWithItsBytes) {
  a_->RetireInBackground();
  auto created = a_->CreateDict("d", {8}, 2, 1000);
  ASSERT_TRUE(created.ok());
  const DictRef ref("d", created->meta.id);
  ASSERT_TRUE(Write(a_.get(), ref, {"x"}, {8, 8}, RandomBytes(64, 1)).ok());
  const std::vector<std::string> first = DataKeys();
  ASSERT_EQ(first.size(), 4u);
  const std::string v2 = RandomBytes(64, 2);
  ASSERT_TRUE(Write(a_.get(), ref, {"x"}, {8, 8}, v2).ok());
  // The answer may come before the drop: wait for it, bounded.
  EXPECT_TRUE(Eventually([&] {
    return DataKeys().size() == 4u && PendingCount(std::string(ref.id)) == "0" && UsedBytes() == 64;
  })) << "left: " << DataKeys().size() << " blocks, " << PendingCount(std::string(ref.id))
      << " pending, " << UsedBytes() << " bytes counted";
  for (const std::string& k : DataKeys()) {
    EXPECT_EQ(std::count(first.begin(), first.end(), k), 0) << "old block survived: " << k;
  }
  EXPECT_EQ(*Read(a_.get(), "d", {"x"}), v2);
}

// Many replacements retired in the background while another daemon's
// sweeper claims the same parked entries: every old block goes, and the
// counter ends at exactly what the dict holds (no byte returned twice or
// never).
TEST_F(WritePathTest, RetiredGenerationsAreReturnedOnceWithTheSweeperRacing) {
  a_->RetireInBackground();
  auto created = a_->CreateDict("d", {64}, 4, 40);  // 16 blocks, 2 parts each
  ASSERT_TRUE(created.ok());
  const DictRef ref("d", created->meta.id);
  Sweeper sweeper(b_.get());
  std::atomic<bool> stop{false};
  // On the real clock, as tdstored's: it claims the parked (expired)
  // entries of retired generations, never a live write's.
  std::thread sweeping([&] {
    while (!stop) {
      (void)sweeper.SweepOnce(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
    }
  });
  std::string last;
  for (int i = 0; i < 40; ++i) {
    last = RandomBytes(64 * 12, i);
    absl::Status s = Write(a_.get(), ref, {i % 2 ? "x" : "y"}, {64, 12}, last);
    ASSERT_TRUE(s.ok()) << s;
  }
  stop = true;
  sweeping.join();
  auto schema = a_->LoadDict("d");
  ASSERT_TRUE(schema.ok());
  size_t blocks = 0;
  for (const auto& [_, leaf] : schema->leaves) {
    blocks += 32;
    (void)leaf;
  }
  EXPECT_TRUE(Eventually([&] {
    return DataKeys().size() == blocks && PendingCount(std::string(ref.id)) == "0" &&
           UsedBytes() == schema->StoredBytes();
  })) << "left: " << DataKeys().size() << " blocks for " << blocks << ", "
      << PendingCount(std::string(ref.id)) << " pending, " << UsedBytes() << " bytes counted for "
      << schema->StoredBytes();
}

// A write whose stream breaks halfway, by a cached schema: nothing visible,
// its blocks and pending entry gone, its reservation returned.
TEST_F(WritePathTest, ABrokenWriteLeavesNothingVisibleNorBehind) {
  a_->RetireInBackground();
  auto created = a_->CreateDict("d", {100}, 10, 64);
  ASSERT_TRUE(created.ok());
  const DictRef ref("d", created->meta.id);
  ASSERT_TRUE(Write(a_.get(), ref, {"x"}, {100, 4}, RandomBytes(400, 1)).ok());
  ASSERT_TRUE(Eventually([&] { return PendingCount(std::string(ref.id)) == "0"; }));
  const std::vector<std::string> before = DataKeys();
  {
    auto txn = WriteTxn::Begin(a_.get(), ref);
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE((*txn)->BeginLeaf({"x"}, DType::kUInt8, {100, 32}, 3200).ok());
    ASSERT_TRUE((*txn)->Append(RandomBytes(1600, 2)).ok());  // half the leaf
    EXPECT_GT(DataKeys().size(), before.size());
  }  // the stream broke: aborted
  EXPECT_EQ(DataKeys(), before);
  EXPECT_EQ(PendingCount(std::string(ref.id)), "0");
  EXPECT_EQ(UsedBytes(), 400);
  auto schema = a_->LoadDict("d");
  ASSERT_TRUE(schema.ok());
  EXPECT_EQ(schema->Find({"x"})->record.shape, (Shape{100, 4}));
}

}  // namespace
}  // namespace tdstore::store
