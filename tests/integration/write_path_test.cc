// The whole-leaf write's short paths (issue #33) against a real Redis,
// standalone and cluster: a small write goes at once (one MULTI ... EXEC)
// on a standalone Redis, checked on the schema it was planned on, and
// stepwise when it cannot; a write into a dict whose schema is cached
// proves it in the round trip of its first reservation and decides again
// on a fresh schema when it is stale; the generations a commit replaces go
// after the answer, on the store's retire worker, exactly once, also with
// the sweeper racing it; a broken write leaves nothing visible and nothing
// behind.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/redis/make_client.h"
#include "server/redis_store/dict_resize.h"
#include "server/redis_store/dict_state.h"
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

  // The data keys are exactly the parts of the leaves of dict "d" (ref)
  // as a_ loads it, and used_bytes counts them once.
  void ExpectOnlyTheLeavesOwnParts(const DictRef& ref) {
    auto schema = a_->LoadDict("d");
    ASSERT_TRUE(schema.ok());
    std::vector<std::string> parts;
    for (const auto& [_, leaf] : schema->leaves) {
      auto layout = schema->Layout(leaf.record);
      ASSERT_TRUE(layout.ok());
      for (int64_t b = 0; b < layout->block_count(); ++b) {
        for (int64_t p = 0; p < layout->part_count(b); ++p) {
          parts.push_back(a_->keys().BlockPart(ref.id, b, leaf.record.generation, p));
        }
      }
    }
    std::sort(parts.begin(), parts.end());
    EXPECT_EQ(DataKeys(), parts);
    EXPECT_EQ(UsedBytes(), schema->StoredBytes());
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


// On a standalone Redis a small write (several leaves, blocks of several
// parts, bytes appended in pieces) is one MULTI ... EXEC: no begin_write,
// reservation or commit script of its own, no pending entry; its
// generations leased ahead, a range per daemon. On a cluster the same
// writes go stepwise. Either way every leaf reads back as written, and
// only the last generations' keys stay.
TEST_F(WritePathTest, ASmallWriteGoesAtOnceOnAStandaloneRedis) {
  const bool standalone = redis_->cluster() == nullptr;
  a_->RetireInBackground();
  auto created = a_->CreateDict("d", {50}, 8, 64);  // 8 rows a block, parts of 64 bytes
  ASSERT_TRUE(created.ok());
  const DictRef ref("d", created->meta.id);
  std::mt19937 rng(11);
  std::map<std::string, std::string> expected;
  auto write_some = [&](int round) -> absl::Status {
    auto txn = WriteTxn::Begin(a_.get(), ref);
    if (!txn.ok()) return txn.status();
    for (int leaf = 0; leaf < 1 + round % 3; ++leaf) {
      const std::string name = "x" + std::to_string(rng() % 4);
      if (expected.count(name) && leaf > 0) continue;  // one write of a path per call
      const int64_t width = 1 + rng() % 20;
      const std::string bytes = RandomBytes(static_cast<size_t>(50 * width), rng());
      if (auto s = (*txn)->BeginLeaf({name}, DType::kUInt8, {50, width}, bytes.size()); !s.ok()) {
        return s;
      }
      for (size_t off = 0; off < bytes.size(); off += 37) {
        if (auto s = (*txn)->Append(std::string_view(bytes).substr(off, 37)); !s.ok()) return s;
      }
      expected[name] = bytes;
    }
    return (*txn)->Commit().status();
  };
  ASSERT_TRUE(write_some(0).ok());  // leases this daemon's generations
  // Every HINCRBY Redis runs (scripts' included): a stepwise write takes a
  // generation per leaf from the counter (begin_write.lua) and bumps the
  // version; at once only the version, the generations being leased (64 a
  // range: more than these rounds write). Retiring runs none.
  const int64_t hincrby = standalone ? ::tdstore::testing::CommandCalls(*redis_, "hincrby") : 0;
  for (int round = 1; round <= 12; ++round) {
    expected.clear();
    absl::Status written = write_some(round);
    ASSERT_TRUE(written.ok()) << written;
    for (const auto& [name, bytes] : expected) {
      EXPECT_EQ(*Read(a_.get(), "d", {name}), bytes) << name << " after round " << round;
    }
  }
  if (standalone) {
    EXPECT_EQ(::tdstore::testing::CommandCalls(*redis_, "hincrby") - hincrby, 12);
  }
  // The replaced generations go; only each leaf's own parts stay.
  ASSERT_TRUE(Eventually([&] { return PendingCount(std::string(ref.id)) == "0"; }));
  ExpectOnlyTheLeavesOwnParts(ref);
}

// A write held for the at-once path while another daemon changes the dict:
// checked again on the schema as it is at its commit. Another leaf added:
// it commits, and both leaves stay. Locked: refused. Deleted: NOT_FOUND.
// Refused or not, it leaves no part behind and its bytes uncounted.
TEST_F(WritePathTest, AWriteHeldWhileTheDictChangesIsDecidedOnTheDictAsItIs) {
  auto created = a_->CreateDict("d", {16}, 4, 1000);
  ASSERT_TRUE(created.ok());
  const DictRef ref("d", created->meta.id);
  ASSERT_TRUE(Write(a_.get(), ref, {"x"}, {16}, RandomBytes(16, 1)).ok());  // cached in a
  auto begun = [&](const LeafPath& path, const std::string& bytes) {
    auto txn = WriteTxn::Begin(a_.get(), ref);
    EXPECT_TRUE(txn.ok());
    EXPECT_TRUE((*txn)->BeginLeaf(path, DType::kUInt8, {16}, 16).ok());
    EXPECT_TRUE((*txn)->Append(bytes).ok());
    return *std::move(txn);
  };
  // Another leaf added meanwhile.
  const std::string x2 = RandomBytes(16, 2), y = RandomBytes(16, 3);
  auto txn = begun({"x"}, x2);
  ASSERT_TRUE(Write(b_.get(), DictRef("d"), {"y"}, {16}, y).ok());
  auto committed = txn->Commit();
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_EQ(*Read(a_.get(), "d", {"x"}), x2);
  EXPECT_EQ(*Read(a_.get(), "d", {"y"}), y);
  const int64_t used = UsedBytes();
  const std::vector<std::string> data = DataKeys();

  // Locked meanwhile: a new leaf is refused.
  txn = begun({"z"}, RandomBytes(16, 4));
  ASSERT_TRUE(SetLocked(*b_, DictRef("d"), true).ok());
  auto locked = txn->Commit();
  EXPECT_EQ(locked.status().code(), absl::StatusCode::kFailedPrecondition) << locked.status();
  txn.reset();
  ASSERT_TRUE(SetLocked(*b_, DictRef("d"), false).ok());
  EXPECT_EQ(a_->LoadDict("d")->Find({"z"}), nullptr);
  EXPECT_EQ(UsedBytes(), used);

  // Deleted meanwhile.
  txn = begun({"x"}, RandomBytes(16, 5));
  ASSERT_TRUE(b_->DeleteDict(DictRef("d")).ok());
  auto gone = txn->Commit();
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound) << gone.status();
  txn.reset();
  EXPECT_TRUE(DataKeys().empty());
  EXPECT_EQ(UsedBytes(), 0);
  (void)data;
}

// A write that outgrows the at-once limits on the way (a second leaf past
// at_once_max_bytes, or more than kAtOnceMaxOwnedBytes handed over) goes
// stepwise from its first leaf, with the bytes held so far.
TEST_F(WritePathTest, AWriteOutgrowingTheAtOnceLimitsGoesStepwise) {
  options_.at_once_max_bytes = 1000;
  std::unique_ptr<DictStore> store = NewStore();
  auto created = store->CreateDict("d", {100}, 64, 1 << 20);
  ASSERT_TRUE(created.ok());
  const DictRef ref("d", created->meta.id);
  const std::string x = RandomBytes(600, 1), y = RandomBytes(600, 2);
  {
    auto txn = WriteTxn::Begin(store.get(), ref);
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE((*txn)->BeginLeaf({"x"}, DType::kUInt8, {100, 6}, 600).ok());
    ASSERT_TRUE((*txn)->AppendLent(x).ok());
    ASSERT_TRUE((*txn)->BeginLeaf({"y"}, DType::kUInt8, {100, 6}, 600).ok());  // 1200 > 1000
    ASSERT_TRUE((*txn)->Append(y).ok());
    auto committed = (*txn)->Commit();
    ASSERT_TRUE(committed.ok()) << committed.status();
  }
  EXPECT_EQ(*Read(store.get(), "d", {"x"}), x);
  EXPECT_EQ(*Read(store.get(), "d", {"y"}), y);

  // Handed over: 3 MiB in pieces of 512 KiB, past the 1 MiB kept here.
  options_.at_once_max_bytes = StoreOptions().at_once_max_bytes;
  store = NewStore();
  const int64_t width = 3 * (int64_t{1} << 20) / 100;
  const std::string big = RandomBytes(static_cast<size_t>(100 * width), 3);
  auto txn = WriteTxn::Begin(store.get(), ref);
  ASSERT_TRUE(txn.ok());
  ASSERT_TRUE((*txn)->BeginLeaf({"big"}, DType::kUInt8, {100, width}, big.size()).ok());
  for (size_t off = 0; off < big.size(); off += 512 << 10) {
    ASSERT_TRUE((*txn)->AppendOwned(big.substr(off, 512 << 10)).ok());
  }
  auto committed = (*txn)->Commit();
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_EQ(*Read(store.get(), "d", {"big"}), big);
}

// Two daemons writing one leaf in turn, each from generations it leased:
// every commit has a generation of its own, the last one reads back, and
// once the replaced ones are gone only its parts stay.
TEST_F(WritePathTest, TwoDaemonsWritingAtOnceNeverShareAGeneration) {
  a_->RetireInBackground();
  b_->RetireInBackground();
  auto created = a_->CreateDict("d", {32}, 8, 16);
  ASSERT_TRUE(created.ok());
  const DictRef ref("d", created->meta.id);
  std::set<int64_t> generations;
  std::string last;
  for (int i = 0; i < 40; ++i) {
    DictStore* store = i % 2 == 0 ? a_.get() : b_.get();
    last = RandomBytes(64, static_cast<uint32_t>(100 + i));
    absl::Status written = Write(store, ref, {"x"}, {32, 2}, last);
    ASSERT_TRUE(written.ok()) << written;
    auto schema = store->LoadDict("d");
    ASSERT_TRUE(schema.ok());
    EXPECT_TRUE(generations.insert(schema->Find({"x"})->record.generation).second)
        << "generation " << schema->Find({"x"})->record.generation << " committed twice";
    EXPECT_EQ(*Read(store, "d", {"x"}), last);
  }
  ASSERT_TRUE(Eventually([&] { return PendingCount(std::string(ref.id)) == "0"; }));
  auto schema = a_->LoadDict("d");
  ASSERT_TRUE(schema.ok());
  const int64_t gen = schema->Find({"x"})->record.generation;
  for (const std::string& key : DataKeys()) {
    EXPECT_NE(key.find(":g" + std::to_string(gen) + ":"), std::string::npos) << key;
  }
  EXPECT_EQ(DataKeys().size(), 4u);  // 4 blocks of one 16-byte part
}

// Generations are proposed by each daemon and claimed inside the write's
// own transaction. A proposal that meets a generation in use (here: Redis'
// counter set back behind a committed leaf, as a Redis that lost its last
// writes would be, so that the first free-looking proposal names that
// leaf's keys) writes nothing there: the leaf keeps its bytes, nothing is
// left moved aside, and the write commits on a generation past both.
TEST_F(WritePathTest, AProposalMeetingAGenerationInUseNeverWritesIt) {
  if (redis_->cluster() != nullptr) GTEST_SKIP() << "a cluster writes stepwise";
  auto created = a_->CreateDict("d", {16}, 8, 1000);
  ASSERT_TRUE(created.ok());
  const DictRef ref("d", created->meta.id);
  const std::string y = RandomBytes(16, 1);
  ASSERT_TRUE(Write(a_.get(), ref, {"y"}, {16}, y).ok());
  const int64_t y_gen = a_->LoadDict("d")->Find({"y"})->record.generation;
  const std::string meta = ns_ + ":{" + std::string(ref.id) + "}:meta";
  redis_->Command({"HSET", meta, "next_gen", "0"});
  std::unique_ptr<DictStore> c = NewStore();  // its first proposal: generation 1
  ASSERT_EQ(y_gen, 1) << "the test needs y on the first generation a new daemon proposes";
  const std::string x = RandomBytes(16, 2);
  absl::Status written = Write(c.get(), ref, {"x"}, {16}, x);
  ASSERT_TRUE(written.ok()) << written;
  auto schema = c->LoadDict("d");
  ASSERT_TRUE(schema.ok());
  EXPECT_NE(schema->Find({"x"})->record.generation, y_gen);
  EXPECT_EQ(*Read(c.get(), "d", {"y"}), y);
  EXPECT_EQ(*Read(c.get(), "d", {"x"}), x);
  for (const std::string& key : Keys()) {
    EXPECT_EQ(key.find("at_once"), std::string::npos) << key;
  }
}

// A later leaf of a write whose first leaves are held, on a cached schema
// no probe proved yet: refused by the dict as it really is, the call fails
// and nothing of it stays (not its first leaf either); refused only by the
// cache's age, the leaves go stepwise on a fresh schema and the write
// commits whole.
TEST_F(WritePathTest, ALaterLeafRefusedOnACachedSchemaKeepsTheWriteWhole) {
  options_.dict_quota_bytes = 1000;
  std::unique_ptr<DictStore> a = NewStore();
  std::unique_ptr<DictStore> b = NewStore();
  auto created = a->CreateDict("d", {100}, 64, 1 << 20);
  ASSERT_TRUE(created.ok());
  const DictRef ref("d", created->meta.id);
  ASSERT_TRUE(Write(a.get(), ref, {"a"}, {100}, RandomBytes(100, 1)).ok());  // cached in a
  const int64_t used = UsedBytes();
  const std::vector<std::string> data = DataKeys();

  // Over the dict quota: 100 + 600 + 400 > 1000.
  {
    auto txn = WriteTxn::Begin(a.get(), ref);
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE((*txn)->BeginLeaf({"x"}, DType::kUInt8, {100, 6}, 600).ok());
    ASSERT_TRUE((*txn)->Append(RandomBytes(600, 2)).ok());
    absl::Status refused = (*txn)->BeginLeaf({"y"}, DType::kUInt8, {100, 4}, 400);
    EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
    EXPECT_FALSE((*txn)->Commit().ok());
  }
  auto schema = a->LoadDict("d");
  ASSERT_TRUE(schema.ok());
  EXPECT_EQ(schema->Find({"x"}), nullptr) << "the first leaf of a refused write was kept";
  EXPECT_EQ(schema->Find({"y"}), nullptr);
  EXPECT_EQ(DataKeys(), data);
  EXPECT_EQ(UsedBytes(), used);

  // Refused by the cache only: b removes "a", which a's cache still has,
  // so "a/z" looks like a conflict to a until it checks again.
  ASSERT_TRUE(a->Load(ref).ok());
  ASSERT_TRUE(b->DeleteLeaves(DictRef("d"), {{"a"}}).ok());
  const std::string x = RandomBytes(300, 3), z = RandomBytes(100, 4);
  {
    auto txn = WriteTxn::Begin(a.get(), ref);
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE((*txn)->BeginLeaf({"x"}, DType::kUInt8, {100, 3}, 300).ok());
    ASSERT_TRUE((*txn)->Append(x).ok());
    absl::Status begun = (*txn)->BeginLeaf({"a", "z"}, DType::kUInt8, {100}, 100);
    ASSERT_TRUE(begun.ok()) << begun;
    ASSERT_TRUE((*txn)->Append(z).ok());
    auto committed = (*txn)->Commit();
    ASSERT_TRUE(committed.ok()) << committed.status();
  }
  EXPECT_EQ(*Read(a.get(), "d", {"x"}), x);
  EXPECT_EQ(*Read(a.get(), "d", {"a", "z"}), z);
}

// A write whose stream breaks halfway, by a cached schema: nothing visible,
// its blocks and pending entry gone, its reservation returned. Stepwise,
// its first windows were in Redis; at once, nothing of it ever was.
TEST_F(WritePathTest, ABrokenWriteLeavesNothingVisibleNorBehind) {
  for (const int64_t at_once_max_bytes : {int64_t{0}, StoreOptions().at_once_max_bytes}) {
    const bool at_once = at_once_max_bytes > 0 && redis_->cluster() == nullptr;
    SCOPED_TRACE(at_once ? "at once" : "stepwise");
    for (const std::string& k : Keys()) redis_->Command({"DEL", k});
    options_.at_once_max_bytes = at_once_max_bytes;
    std::unique_ptr<DictStore> store = NewStore();
    store->RetireInBackground();
    auto created = store->CreateDict("d", {100}, 10, 64);
    ASSERT_TRUE(created.ok());
    const DictRef ref("d", created->meta.id);
    ASSERT_TRUE(Write(store.get(), ref, {"x"}, {100, 4}, RandomBytes(400, 1)).ok());
    ASSERT_TRUE(Eventually([&] { return PendingCount(std::string(ref.id)) == "0"; }));
    const std::vector<std::string> before = DataKeys();
    {
      auto txn = WriteTxn::Begin(store.get(), ref);
      ASSERT_TRUE(txn.ok());
      ASSERT_TRUE((*txn)->BeginLeaf({"x"}, DType::kUInt8, {100, 32}, 3200).ok());
      ASSERT_TRUE((*txn)->Append(RandomBytes(1600, 2)).ok());  // half the leaf
      if (at_once) {
        EXPECT_EQ(DataKeys(), before);
      } else {
        EXPECT_GT(DataKeys().size(), before.size());
      }
    }  // the stream broke: aborted
    EXPECT_EQ(DataKeys(), before);
    EXPECT_EQ(PendingCount(std::string(ref.id)), "0");
    EXPECT_EQ(UsedBytes(), 400);
    auto schema = store->LoadDict("d");
    ASSERT_TRUE(schema.ok());
    EXPECT_EQ(schema->Find({"x"})->record.shape, (Shape{100, 4}));
  }
}

// A write said to be of one leaf (ExpectLeaves), whose bytes come lent in
// pieces, is sent ahead: Redis holds its transaction open (MULTI) before
// the last piece comes. On random leaves, parts and pieces it commits
// whole and reads back; broken off half-way it leaves nothing, not even
// an open transaction; with its generation found taken, the dict changed
// meanwhile, or a second leaf after all, it still commits what was asked,
// from the bytes it held.
TEST_F(WritePathTest, AOneLeafWriteSentAheadCommitsWholeOrNotAtAll) {
  if (redis_->cluster() != nullptr) GTEST_SKIP() << "a cluster writes stepwise";
  a_->RetireInBackground();
  auto created = a_->CreateDict("d", {40}, 8, 96);  // 5 blocks, parts of <= 96 bytes
  ASSERT_TRUE(created.ok());
  const DictRef ref("d", created->meta.id);
  const std::string meta = ns_ + ":{" + std::string(ref.id) + "}:meta";
  // Connections in a transaction (CLIENT LIST's multi=N, N >= 0).
  auto open_transactions = [&] {
    const std::string list = redis_->Command({"CLIENT", "LIST"}).at(0);
    int open = 0;
    for (size_t at = list.find(" multi="); at != std::string::npos;
         at = list.find(" multi=", at + 1)) {
      if (list.compare(at + 7, 2, "-1") != 0) ++open;
    }
    return open;
  };
  std::mt19937 rng(5);
  std::map<std::string, std::string> expected;
  ASSERT_TRUE(Write(a_.get(), ref, {"x"}, {40, 3}, RandomBytes(120, 1)).ok());
  expected["x"] = RandomBytes(120, 1);
  for (int round = 0; round < 40; ++round) {
    const int mode = round % 5;
    SCOPED_TRACE("round " + std::to_string(round) + ", mode " + std::to_string(mode));
    ASSERT_TRUE(Eventually([&] { return PendingCount(std::string(ref.id)) == "0"; }));
    const std::vector<std::string> before = DataKeys();
    const int64_t width = 1 + rng() % 40;
    const std::string bytes = RandomBytes(static_cast<size_t>(40 * width), rng());
    std::vector<size_t> cuts = {0, bytes.size()};
    for (int k = 1 + rng() % 5; k > 0; --k) cuts.push_back(1 + rng() % (bytes.size() - 1));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    auto txn = WriteTxn::Begin(a_.get(), ref);
    ASSERT_TRUE(txn.ok());
    (*txn)->ExpectLeaves(1);
    ASSERT_TRUE((*txn)->BeginLeaf({"x"}, DType::kUInt8, {40, width}, bytes.size()).ok());
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      ASSERT_TRUE(
          (*txn)->AppendLent(std::string_view(bytes).substr(cuts[i], cuts[i + 1] - cuts[i])).ok());
      if (i == 0) {
        // Written to Redis' socket; Redis may read another client's
        // CLIENT LIST before it: polled until it shows.
        EXPECT_TRUE(Eventually([&] { return open_transactions() == 1; })) << "not sent ahead";
        if (mode == 1) break;
      }
      if (i == 0 && mode == 2) redis_->Command({"HINCRBY", meta, "next_gen", "1000"});
      if (i == 0 && mode == 3) {
        const std::string y = RandomBytes(40, rng());
        ASSERT_TRUE(Write(b_.get(), DictRef("d"), {"y"}, {40}, y).ok());
        expected["y"] = y;
      }
    }
    if (mode == 1) {
      txn->reset();  // the stream broke: aborted
      EXPECT_TRUE(Eventually([&] { return open_transactions() == 0; }));
      EXPECT_EQ(DataKeys(), before);
      EXPECT_EQ(*Read(a_.get(), "d", {"x"}), expected["x"]);
      continue;
    }
    const std::string z = RandomBytes(40 * 2, rng());
    if (mode == 4) {
      ASSERT_TRUE((*txn)->BeginLeaf({"z"}, DType::kUInt8, {40, 2}, z.size()).ok());
      ASSERT_TRUE((*txn)->AppendLent(z).ok());
      expected["z"] = z;
    }
    auto committed = (*txn)->Commit();
    ASSERT_TRUE(committed.ok()) << committed.status();
    expected["x"] = bytes;
    // A transaction left behind (mode 4 closed its connection) is gone
    // once Redis has read the close.
    EXPECT_TRUE(Eventually([&] { return open_transactions() == 0; }));
    for (const auto& [name, want] : expected) {
      EXPECT_EQ(*Read(a_.get(), "d", {name}), want) << name;
    }
    if (mode == 2) {
      const int64_t gen = a_->LoadDict("d")->Find({"x"})->record.generation;
      EXPECT_GT(gen, 1000) << "committed on the generation found taken";
    }
  }
  // Only the leaves' own parts stay, counted once; nothing held aside.
  ASSERT_TRUE(Eventually([&] { return PendingCount(std::string(ref.id)) == "0"; }));
  ExpectOnlyTheLeavesOwnParts(ref);
  for (const std::string& key : Keys()) {
    EXPECT_EQ(key.find("at_once"), std::string::npos) << key;
  }
}

}  // namespace
}  // namespace tdstore::store
