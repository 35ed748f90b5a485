// server/redis_store/dict_resize.h against a real redis-server or cluster: a
// resize keeps every old byte, new rows read zeros, Redis holds exactly the
// keys the new layout names, and refused, racing or interrupted resizes
// leave nothing wrong behind.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/block_layout.h"
#include "gtest/gtest.h"
#include "server/redis/make_client.h"
#include "server/redis_store/dict_resize.h"
#include "server/redis_store/dict_state.h"
#include "server/redis_store/dict_store.h"
#include "server/redis_store/leaf_reader.h"
#include "server/redis_store/leaf_writer.h"
#include "server/redis_store/schema_cache.h"
#include "tests/support/redis_suite_test.h"

namespace tdstore::store {
namespace {

using ::tdstore::testing::RedisSuiteTest;

class ResizeStoreTest : public RedisSuiteTest {
 protected:
  void SetUp() override {
    ns_ = TestNamespace("rs");
    auto client = redis::MakeRedisClient(redis_->url(), "", redis::ConnectOptions{});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    StoreOptions options;
    options.ns = ns_;
    options.window_bytes = 64;
    options.dict_quota_bytes = quota_;
    store_ = std::make_unique<DictStore>(client_.get(), options);
  }

  std::vector<std::string> DataKeys() const {
    std::vector<std::string> out;
    for (const std::string& k : redis_->Keys(ns_ + ":*")) {
      if (k.find("}:g") != std::string::npos) out.push_back(k);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  static std::string RandomBytes(size_t n, std::mt19937& rng) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  }

  absl::Status Write(const std::string& dict, const LeafPath& path, DType dtype,
                     const Shape& shape, const std::string& bytes) {
    auto txn = WriteTxn::Begin(store_.get(), dict);
    if (!txn.ok()) return txn.status();
    if (auto s = (*txn)->BeginLeaf(path, dtype, shape, bytes.size()); !s.ok()) return s;
    if (auto s = (*txn)->Append(bytes); !s.ok()) return s;
    return (*txn)->Commit().status();
  }

  std::string Read(const std::string& dict, const LeafPath& path) {
    auto schema = store_->LoadDict(dict);
    EXPECT_TRUE(schema.ok()) << schema.status();
    if (!schema.ok()) return "";
    const Leaf* leaf = schema->Find(path);
    EXPECT_NE(leaf, nullptr) << PathToDisplay(path);
    if (leaf == nullptr) return "";
    std::string out;
    auto s = ReadLeaf(*store_, *schema, *leaf, [&](std::string_view b) {
      out.append(b);
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }

  // The data keys the dict's current records name, each with the length
  // its layout gives it; compared with what Redis holds.
  void ExpectExactlyTheLayoutsKeys(const std::string& dict) {
    auto schema = store_->LoadDict(dict);
    ASSERT_TRUE(schema.ok()) << schema.status();
    std::map<std::string, int64_t> expected;
    for (const auto& [_, leaf] : schema->leaves) {
      auto layout = schema->Layout(leaf.record);
      ASSERT_TRUE(layout.ok()) << layout.status();
      for (int64_t b = 0; b < layout->block_count(); ++b) {
        for (int64_t p = 0; p < layout->part_count(b); ++p) {
          expected[store_->keys().BlockPart(schema->meta.id, b, leaf.record.generation, p)] =
              layout->part_size(b, p);
        }
      }
    }
    std::vector<std::string> want;
    for (const auto& [key, _] : expected) want.push_back(key);
    ASSERT_EQ(DataKeys(), want);
    for (const auto& [key, length] : expected) {
      EXPECT_EQ(std::stoll(redis_->Command({"STRLEN", key})[0]), length) << key;
    }
  }

  int64_t quota_ = 0;
  std::string ns_;
  std::unique_ptr<redis::RedisClient> client_;
  std::unique_ptr<DictStore> store_;
};

// The model: a leaf is its C-order bytes; resizing to n rows keeps the
// first min(old, n) rows' bytes and appends zero rows.
void ResizeModel(std::string& bytes, int64_t row_bytes, int64_t rows) {
  bytes.resize(static_cast<size_t>(row_bytes * rows), '\0');
}

TEST_F(ResizeStoreTest, RandomResizesKeepEveryOldByteAndZeroFillNewRows) {
  std::mt19937 rng(20261201);
  for (int round = 0; round < 8; ++round) {
    const std::string name = "d" + std::to_string(round);
    const int64_t rpb = 1 + rng() % 6, part = 1 + rng() % 40;
    int64_t rows = rng() % 25;
    const bool two_dims = round % 3 == 2;
    Shape batch = two_dims ? Shape{rows, 2} : Shape{rows};
    ASSERT_TRUE(store_->CreateDict(name, batch, rpb, part).ok());
    struct Model {
      LeafPath path;
      DType dtype;
      Shape element;
      std::string bytes;
      int64_t row_bytes;
    };
    const DType dtypes[] = {DType::kUInt8, DType::kFloat16, DType::kFloat32, DType::kInt64};
    std::vector<Model> leaves;
    for (int i = 0; i < 3; ++i) {
      Model m{{i == 2 ? std::string("n") : "x" + std::to_string(i)},
              dtypes[rng() % 4],
              {static_cast<int64_t>(rng() % 4)},
              "",
              0};
      if (i == 2) m.path.push_back("deep");
      m.row_bytes = DTypeSize(m.dtype) * m.element[0] * (two_dims ? 2 : 1);
      m.bytes = RandomBytes(static_cast<size_t>(m.row_bytes * rows), rng);
      Shape shape = batch;
      shape.insert(shape.end(), m.element.begin(), m.element.end());
      ASSERT_TRUE(Write(name, m.path, m.dtype, shape, m.bytes).ok());
      leaves.push_back(std::move(m));
    }
    for (int step = 0; step < 10; ++step) {
      const int64_t next = rng() % 40;
      auto resized = ResizeDict(*store_, name, next);
      ASSERT_TRUE(resized.ok()) << resized.status();
      rows = next;
      batch[0] = rows;
      EXPECT_EQ(resized->meta.batch_shape, batch);
      for (Model& m : leaves) {
        ResizeModel(m.bytes, m.row_bytes, rows);
        EXPECT_EQ(Read(name, m.path), m.bytes)
            << "round " << round << " step " << step << " leaf " << PathToDisplay(m.path)
            << " at " << rows << " rows";
      }
      ExpectExactlyTheLayoutsKeys(name);
      // Sometimes rewrite a leaf at the new size: later resizes must keep it.
      if (rng() % 3 == 0) {
        Model& m = leaves[rng() % leaves.size()];
        m.bytes = RandomBytes(m.bytes.size(), rng);
        Shape shape = batch;
        shape.insert(shape.end(), m.element.begin(), m.element.end());
        ASSERT_TRUE(Write(name, m.path, m.dtype, shape, m.bytes).ok());
      }
    }
    auto schema = store_->LoadDict(name);
    ASSERT_TRUE(schema.ok());
    auto used = store_->NamespaceUsedBytes();
    ASSERT_TRUE(used.ok());
    // Earlier rounds' dicts are deleted: the counter is this dict's bytes.
    EXPECT_EQ(*used, schema->StoredBytes()) << "the namespace counter drifted";
    ASSERT_TRUE(store_->DeleteDict(name).ok());
    EXPECT_TRUE(DataKeys().empty()) << "a deleted dict left blocks";
  }
}

TEST_F(ResizeStoreTest, AShrinkThenAGrowReadsZerosNotTheCutRows) {
  // 4 rows per block, 8-byte parts, int32 [N, 3]: rows are 12 bytes, so a
  // block of 48 bytes is cut in six parts and row ends fall inside parts.
  ASSERT_TRUE(store_->CreateDict("d", {10}, 4, 8).ok());
  std::mt19937 rng(3);
  const std::string bytes = RandomBytes(120, rng);
  ASSERT_TRUE(Write("d", {"x"}, DType::kInt32, {10, 3}, bytes).ok());
  ASSERT_TRUE(ResizeDict(*store_, "d", 5).ok());
  ASSERT_TRUE(ResizeDict(*store_, "d", 10).ok());
  std::string expected = bytes.substr(0, 60) + std::string(60, '\0');
  EXPECT_EQ(Read("d", {"x"}), expected);
  ExpectExactlyTheLayoutsKeys("d");
}

TEST_F(ResizeStoreTest, AWritePlannedBeforeAResizeCannotCommitTheOldShape) {
  ASSERT_TRUE(store_->CreateDict("d", {6}, 2, 100).ok());
  std::mt19937 rng(4);
  auto txn = WriteTxn::Begin(store_.get(), "d");
  ASSERT_TRUE(txn.ok());
  ASSERT_TRUE((*txn)->BeginLeaf({"late"}, DType::kUInt8, {6}, 6).ok());
  ASSERT_TRUE((*txn)->Append(RandomBytes(6, rng)).ok());
  ASSERT_TRUE(ResizeDict(*store_, "d", 9).ok());
  auto committed = (*txn)->Commit();
  EXPECT_EQ(committed.status().code(), absl::StatusCode::kAborted) << committed.status();
  EXPECT_TRUE(IsStale(committed.status()));
  auto schema = store_->LoadDict("d");
  ASSERT_TRUE(schema.ok());
  EXPECT_TRUE(schema->leaves.empty()) << "a leaf of the old shape became visible";
  EXPECT_TRUE(DataKeys().empty()) << "the refused write left blocks";
}

TEST_F(ResizeStoreTest, RefusedResizesChangeNothing) {
  ASSERT_TRUE(store_->CreateDict("d", {4}, 2, 100).ok());
  ASSERT_TRUE(store_->CreateDict("scalar", {}, 2, 100).ok());
  std::mt19937 rng(5);
  ASSERT_TRUE(Write("d", {"x"}, DType::kInt16, {4, 2}, RandomBytes(16, rng)).ok());
  auto snapshot = [&] {
    std::vector<std::string> out;
    for (const std::string& k : redis_->Keys(ns_ + ":*")) {
      out.push_back(k);
      for (const std::string& v : redis_->Command({"DUMP", k})) out.push_back(v);
    }
    return out;
  };
  const auto before = snapshot();
  EXPECT_EQ(ResizeDict(*store_, "d", -1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResizeDict(*store_, "scalar", 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResizeDict(*store_, "nope", 3).status().code(), absl::StatusCode::kNotFound);
  // Leaves too large at the new size.
  EXPECT_EQ(ResizeDict(*store_, "d", int64_t{1} << 62).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(snapshot(), before);

  ASSERT_TRUE(SetLocked(*store_, "d", true).ok());
  const auto locked = snapshot();
  auto refused = ResizeDict(*store_, "d", 8);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_NE(refused.status().message().find("locked"), std::string::npos);
  EXPECT_EQ(snapshot(), locked);
}

class ResizeQuotaTest : public ResizeStoreTest {
 protected:
  ResizeQuotaTest() { quota_ = 100; }
};

TEST_F(ResizeQuotaTest, AGrowPastTheDictQuotaChangesNothing) {
  ASSERT_TRUE(store_->CreateDict("d", {10}, 4, 16).ok());
  std::mt19937 rng(6);
  ASSERT_TRUE(Write("d", {"x"}, DType::kInt32, {10, 2}, RandomBytes(80, rng)).ok());
  const auto keys = DataKeys();
  auto refused = ResizeDict(*store_, "d", 13);  // 104 bytes > 100
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_EQ(DataKeys(), keys);
  auto schema = store_->LoadDict("d");
  ASSERT_TRUE(schema.ok());
  EXPECT_EQ(schema->meta.batch_shape, Shape{10});
  EXPECT_EQ(schema->meta.rows_high, 0);
  EXPECT_TRUE(ResizeDict(*store_, "d", 12).ok());  // 96 bytes fit
}

TEST_F(ResizeStoreTest, AResizeWaitsForAnotherAndTakesOverAnExpiredLease) {
  auto created = store_->CreateDict("d", {4}, 2, 100);
  ASSERT_TRUE(created.ok());
  const std::string meta = store_->keys().Meta(created->meta.id);
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  // Another resize's lease, live for 1.5 s more (its daemon died mid-way).
  redis_->Command({"HSET", meta, "resizing", "someone;" + std::to_string(now + 1500)});
  const auto start = std::chrono::steady_clock::now();
  auto resized = ResizeDict(*store_, "d", 7);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(resized.ok()) << resized.status();
  EXPECT_EQ(resized->meta.batch_shape, Shape{7});
  EXPECT_GE(waited, std::chrono::milliseconds(1000)) << "it did not wait for the live lease";
  EXPECT_EQ(redis_->Command({"HEXISTS", meta, "resizing"}), std::vector<std::string>{"0"})
      << "the lease was not released";
}

TEST_F(ResizeStoreTest, BlocksAGrowLeftBehindAreDeletedWithTheirGeneration) {
  auto created = store_->CreateDict("d", {4}, 2, 100);
  ASSERT_TRUE(created.ok());
  std::mt19937 rng(7);
  ASSERT_TRUE(Write("d", {"x"}, DType::kUInt8, {4}, RandomBytes(4, rng)).ok());
  auto schema = store_->LoadDict("d");
  ASSERT_TRUE(schema.ok());
  const int64_t gen = schema->leaves.begin()->second.record.generation;
  // What a grow to 40 rows does before its commit, by a daemon that then
  // died: rows_high raised, then new blocks sized.
  const std::string meta = store_->keys().Meta(created->meta.id);
  redis_->Command({"HSET", meta, "rows_high", "40"});
  const std::string stray = store_->keys().BlockPart(created->meta.id, 13, gen, 0);
  redis_->Command({"SETRANGE", stray, "1", std::string(1, '\0')});
  // Replacing the leaf retires the generation: every block to rows_high goes.
  ASSERT_TRUE(Write("d", {"x"}, DType::kUInt8, {4}, RandomBytes(4, rng)).ok());
  ExpectExactlyTheLayoutsKeys("d");
}

// A writer retires the generation it replaced with the schema it loaded at
// its start, which may predate a grow's prepare: the deletion reads
// rows_high again and still takes every block the grow sized.
TEST_F(ResizeStoreTest, DeletingAGenerationWithAStaleMetaStillTakesAGrowsBlocks) {
  auto created = store_->CreateDict("d", {4}, 2, 100);
  ASSERT_TRUE(created.ok());
  std::mt19937 rng(10);
  ASSERT_TRUE(Write("d", {"x"}, DType::kUInt8, {4}, RandomBytes(4, rng)).ok());
  auto stale = store_->LoadDict("d");
  ASSERT_TRUE(stale.ok());
  const LeafRecord record = stale->leaves.begin()->second.record;
  // A grow prepares (rows_high 40) and sizes a new block, then dies.
  redis_->Command({"HSET", store_->keys().Meta(created->meta.id), "rows_high", "40"});
  const std::string stray = store_->keys().BlockPart(created->meta.id, 17, record.generation, 0);
  redis_->Command({"SETRANGE", stray, "1", std::string(1, '\0')});
  ASSERT_EQ(stale->meta.rows_high, 0);
  ASSERT_TRUE(store_->DeleteGeneration(stale->meta, record).ok());
  EXPECT_TRUE(DataKeys().empty()) << "a block past the stale rows_high was left";
}

TEST_F(ResizeStoreTest, RacingResizesAndWritesEndConsistent) {
  ASSERT_TRUE(store_->CreateDict("d", {8}, 3, 20).ok());
  std::mt19937 rng(8);
  ASSERT_TRUE(Write("d", {"x"}, DType::kInt32, {8, 2}, RandomBytes(64, rng)).ok());
  ASSERT_TRUE(Write("d", {"y"}, DType::kUInt8, {8}, RandomBytes(8, rng)).ok());
  std::atomic<int> failures{0};
  auto resizer = [&](uint32_t seed) {
    std::mt19937 r(seed);
    for (int i = 0; i < 15; ++i) {
      auto s = ResizeDict(*store_, "d", 1 + r() % 30);
      // ABORTED (the dict kept changing) is an allowed outcome of a race.
      if (!s.ok() && !absl::IsAborted(s.status())) {
        ++failures;
        ADD_FAILURE() << s.status();
      }
    }
  };
  std::thread a(resizer, 1), b(resizer, 2);
  std::thread writer([&] {
    std::mt19937 r(9);
    for (int i = 0; i < 15; ++i) {
      auto schema = store_->LoadDict("d");
      if (!schema.ok()) continue;
      const int64_t n = schema->meta.batch_shape[0];
      // Refused (stale) when a resize lands first; that is the point.
      (void)Write("d", {"y"}, DType::kUInt8, {n}, RandomBytes(static_cast<size_t>(n), r));
    }
  });
  a.join();
  b.join();
  writer.join();
  EXPECT_EQ(failures.load(), 0);
  ExpectExactlyTheLayoutsKeys("d");
  auto schema = store_->LoadDict("d");
  ASSERT_TRUE(schema.ok());
  const int64_t n = schema->meta.batch_shape[0];
  EXPECT_EQ(Read("d", {"x"}).size(), static_cast<size_t>(n * 8));
  EXPECT_EQ(Read("d", {"y"}).size(), static_cast<size_t>(n));
}

}  // namespace
}  // namespace tdstore::store
