// server/store against a real redis-server: dict lifecycle, whole-leaf
// writes and reads across blocks and parts, generations, aborts, the sweeper,
// and every rejected request leaving Redis unchanged.
#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/redis/redis_address.h"
#include "server/redis/standalone_client.h"
#include "server/redis_store/dict_store.h"
#include "server/redis_store/leaf_reader.h"
#include "server/redis_store/leaf_writer.h"
#include "server/redis_store/sweeper.h"
#include "server/redis/make_client.h"
#include "tests/support/redis_suite_test.h"

namespace tdstore::store {
namespace {

using ::tdstore::testing::RedisSuiteTest;

class StoreTest : public RedisSuiteTest {
 protected:
  void SetUp() override {
    // A namespace per test keeps tests independent within one Redis.
    ns_ = TestNamespace("t");
    auto client = redis::MakeRedisClient(redis_->url(), "", redis::ConnectOptions{});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    StoreOptions options;
    options.ns = ns_;
    options.window_bytes = 64;  // many windows even for small leaves
    options.pipeline_depth = 3;
    store_ = std::make_unique<DictStore>(client_.get(), options);
  }

  std::vector<std::string> Keys() const { return redis_->Keys(ns_ + ":*"); }
  std::vector<std::string> DataKeys() const {
    std::vector<std::string> out;
    for (const std::string& k : Keys()) {
      if (k.find("}:g") != std::string::npos) out.push_back(k);
    }
    return out;
  }
  // Every key and its DUMP: a byte-exact picture of what the store holds.
  // The one exception is the meta's generation counter (next_gen), which a
  // rejected write may have advanced; it is compared field by field.
  std::vector<std::string> Snapshot() const {
    std::vector<std::string> out;
    for (const std::string& k : Keys()) {
      out.push_back(k);
      if (k.size() > 5 && k.compare(k.size() - 5, 5, ":meta") == 0) {
        std::vector<std::string> fields = redis_->Command({"HGETALL", k});
        for (size_t i = 0; i + 1 < fields.size(); i += 2) {
          if (fields[i] != "next_gen") out.push_back(fields[i] + "=" + fields[i + 1]);
        }
        continue;
      }
      for (const std::string& v : redis_->Command({"DUMP", k})) out.push_back(v);
    }
    return out;
  }

  static std::string RandomBytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  }

  // Writes leaves in one transaction, `chunk` bytes per Append.
  absl::Status Write(const std::string& dict,
                     const std::vector<std::tuple<LeafPath, DType, Shape, std::string>>& leaves,
                     size_t chunk = 37) {
    auto txn = WriteTxn::Begin(store_.get(), dict);
    if (!txn.ok()) return txn.status();
    for (const auto& [path, dtype, shape, bytes] : leaves) {
      if (auto s = (*txn)->BeginLeaf(path, dtype, shape, bytes.size()); !s.ok()) return s;
      for (size_t off = 0; off < bytes.size(); off += chunk) {
        if (auto s = (*txn)->Append(std::string_view(bytes).substr(off, chunk)); !s.ok()) return s;
      }
    }
    return (*txn)->Commit().status();
  }

  absl::StatusOr<std::string> Read(const std::string& dict, const LeafPath& path) {
    auto schema = store_->LoadDict(dict);
    if (!schema.ok()) return schema.status();
    const Leaf* leaf = schema->Find(path);
    if (leaf == nullptr) return absl::NotFoundError("no leaf");
    std::string out;
    auto s = ReadLeaf(*store_, *schema, *leaf, [&](std::string_view b) {
      out.append(b);
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    return out;
  }

  std::string ns_;
  std::unique_ptr<redis::RedisClient> client_;
  std::unique_ptr<DictStore> store_;
};

TEST_F(StoreTest, CreateDescribeListRenameDelete) {
  auto created = store_->CreateDict("a", {10, 2}, 4, 100);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->meta.batch_shape, (Shape{10, 2}));
  EXPECT_EQ(created->meta.rows_per_block, 4);
  EXPECT_EQ(created->meta.part_bytes, 100);
  EXPECT_EQ(store_->CreateDict("a", {3}, 0, 0).status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(store_->CreateDict("b", {}, 0, 0).ok());

  auto names = store_->ListDicts();
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"a", "b"}));

  auto renamed = store_->RenameDict("a", "c");
  ASSERT_TRUE(renamed.ok()) << renamed.status();
  EXPECT_EQ(renamed->meta.id, created->meta.id);
  EXPECT_EQ(store_->LoadDict("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->RenameDict("c", "b").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->RenameDict("zz", "y").status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(store_->DeleteDict("c").ok());
  EXPECT_EQ(store_->DeleteDict("c").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->LoadDict("c").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, BadNamesAndShapesAreRejected) {
  EXPECT_EQ(store_->CreateDict("", {1}, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->CreateDict(std::string(200, 'x'), {1}, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->CreateDict("has space", {1}, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->CreateDict("neg", {-1}, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Keys().empty()) << "a rejected create wrote keys";
}

TEST_F(StoreTest, RoundTripAcrossBlocksAndParts) {
  // 10 rows of 3 x int32 = 12 bytes/row; 4 rows/block = blocks of 48, 48
  // and 24 bytes, cut into 20-byte parts: 3, 3 and 2 parts.
  auto dict = store_->CreateDict("d", {10}, 4, 20);
  ASSERT_TRUE(dict.ok());
  std::string bytes = RandomBytes(120, 1);
  ASSERT_TRUE(Write("d", {{{"x"}, DType::kInt32, {10, 3}, bytes}}).ok());
  auto back = Read("d", {"x"});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, bytes);

  std::vector<std::string> data = DataKeys();
  EXPECT_EQ(data.size(), 3u + 3u + 2u);
  // Every data key carries its block's hash tag {id.b}.
  for (const std::string& k : data) {
    EXPECT_NE(k.find("{" + dict->meta.id + "."), std::string::npos) << k;
  }
  // Redis values never exceed part_bytes.
  for (const std::string& k : data) {
    EXPECT_LE(std::stoll(redis_->Command({"STRLEN", k})[0]), 20) << k;
  }
}

TEST_F(StoreTest, RandomGeometriesRoundTrip) {
  std::mt19937 rng(7);
  for (int round = 0; round < 30; ++round) {
    const std::string name = "r" + std::to_string(round);
    int64_t rows = rng() % 20;
    int64_t rpb = 1 + rng() % 7;
    int64_t part = 1 + rng() % 50;
    Shape batch = (round % 5 == 0) ? Shape{} : Shape{rows};
    ASSERT_TRUE(store_->CreateDict(name, batch, rpb, part).ok());
    Shape shape = batch;
    shape.push_back(rng() % 4);
    shape.push_back(1 + rng() % 3);
    const DType dtypes[] = {DType::kUInt8, DType::kFloat16, DType::kFloat32, DType::kComplex128};
    DType dtype = dtypes[rng() % 4];
    int64_t n = DTypeSize(dtype);
    for (int64_t d : shape) n *= d;
    std::string bytes = RandomBytes(n, round);
    ASSERT_TRUE(Write(name, {{{"leaf"}, dtype, shape, bytes}}, 1 + rng() % 90).ok());
    auto back = Read(name, {"leaf"});
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, bytes) << "round " << round;
  }
}

TEST_F(StoreTest, ReplacingALeafDeletesTheOldGeneration) {
  ASSERT_TRUE(store_->CreateDict("d", {8}, 2, 1000).ok());
  std::string v1 = RandomBytes(64, 1), v2 = RandomBytes(64, 2);
  ASSERT_TRUE(Write("d", {{{"x"}, DType::kFloat64, {8}, v1}}).ok());
  std::vector<std::string> first = DataKeys();
  ASSERT_EQ(first.size(), 4u);
  ASSERT_TRUE(Write("d", {{{"x"}, DType::kFloat64, {8}, v2}}).ok());
  std::vector<std::string> second = DataKeys();
  ASSERT_EQ(second.size(), 4u);
  for (const std::string& k : first) {
    EXPECT_EQ(std::count(second.begin(), second.end(), k), 0) << "old block survived: " << k;
  }
  EXPECT_EQ(*Read("d", {"x"}), v2);
  EXPECT_EQ(redis_->Command({"HLEN", ns_ + ":{" + store_->LoadDict("d")->meta.id + "}:pending"})[0],
            "0");
}

TEST_F(StoreTest, MultiLeafWriteAndNestedPaths) {
  ASSERT_TRUE(store_->CreateDict("d", {4}, 3, 1000).ok());
  std::string a = RandomBytes(16, 1), b = RandomBytes(4, 2), c = RandomBytes(32, 3);
  ASSERT_TRUE(Write("d", {{{"obs"}, DType::kFloat32, {4}, a},
                          {{"next", "done"}, DType::kBool, {4}, b},
                          {{"next", "obs"}, DType::kInt64, {4}, c}})
                  .ok());
  auto schema = store_->LoadDict("d");
  ASSERT_TRUE(schema.ok());
  EXPECT_EQ(schema->leaves.size(), 3u);
  EXPECT_EQ(schema->meta.version, 1);
  EXPECT_EQ(schema->Classify({"next"}), DictSchema::PathKind::kNode);
  EXPECT_EQ(schema->Classify({"next", "obs"}), DictSchema::PathKind::kLeaf);
  EXPECT_EQ(schema->Classify({"nope"}), DictSchema::PathKind::kAbsent);
  EXPECT_EQ(schema->Keys(false, false), (std::vector<LeafPath>{{"next"}, {"obs"}}));
  EXPECT_EQ(schema->Keys(false, true), (std::vector<LeafPath>{{"obs"}}));
  EXPECT_EQ(schema->Keys(true, true),
            (std::vector<LeafPath>{{"next", "done"}, {"next", "obs"}, {"obs"}}));
  EXPECT_EQ(schema->Keys(true, false),
            (std::vector<LeafPath>{{"next"}, {"next", "done"}, {"next", "obs"}, {"obs"}}));
  EXPECT_EQ(*Read("d", {"next", "obs"}), c);

  // A leaf cannot become a sub-dict, nor a sub-dict a leaf.
  EXPECT_EQ(Write("d", {{{"obs", "x"}, DType::kBool, {4}, b}}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Write("d", {{{"next"}, DType::kBool, {4}, b}}).code(),
            absl::StatusCode::kFailedPrecondition);

  auto removed = store_->DeleteLeaves("d", {{"next"}});
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->paths, (std::vector<LeafPath>{{"next", "done"}, {"next", "obs"}}));
  auto after = store_->LoadDict("d");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(removed->version, after->meta.version);
  EXPECT_EQ(DataKeys().size(), 2u);  // only obs' two blocks remain
  EXPECT_EQ(store_->DeleteLeaves("d", {{"next"}}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, RejectedWritesLeaveRedisUnchanged) {
  ASSERT_TRUE(store_->CreateDict("d", {4}, 2, 1000).ok());
  ASSERT_TRUE(Write("d", {{{"keep"}, DType::kInt16, {4}, RandomBytes(8, 9)}}).ok());
  const std::vector<std::string> before = Snapshot();

  struct Case {
    const char* what;
    LeafPath path;
    DType dtype;
    Shape shape;
    int64_t announced;
    size_t sent;
    absl::StatusCode code;
    std::string message_part;
  };
  const Case cases[] = {
      {"batch shape mismatch", {"x"}, DType::kFloat32, {5, 2}, 40, 40,
       absl::StatusCode::kInvalidArgument, "[5, 2]"},
      {"batch shape mismatch names batch", {"x"}, DType::kFloat32, {3}, 12, 12,
       absl::StatusCode::kInvalidArgument, "[4]"},
      {"byte count", {"x"}, DType::kFloat32, {4}, 15, 15, absl::StatusCode::kInvalidArgument,
       "byte count"},
      {"too little data", {"x"}, DType::kFloat32, {4}, 16, 10,
       absl::StatusCode::kInvalidArgument, "arrived"},
      {"too much data", {"x"}, DType::kFloat32, {4}, 16, 20, absl::StatusCode::kInvalidArgument,
       "more data"},
      {"negative dim", {"x"}, DType::kFloat32, {4, -1}, 0, 0,
       absl::StatusCode::kInvalidArgument, ""},
      {"unknown dtype", {"x"}, DType::kUnspecified, {4}, 0, 0,
       absl::StatusCode::kInvalidArgument, "dtype"},
      {"empty path", {}, DType::kFloat32, {4}, 16, 16, absl::StatusCode::kInvalidArgument, ""},
      {"empty component", {"a", ""}, DType::kFloat32, {4}, 16, 16,
       absl::StatusCode::kInvalidArgument, ""},
      {"long component", {std::string(300, 'a')}, DType::kFloat32, {4}, 16, 16,
       absl::StatusCode::kInvalidArgument, ""},
  };
  for (const Case& c : cases) {
    // A good leaf first, so a rejection must also undo work already done.
    auto txn = WriteTxn::Begin(store_.get(), "d");
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE((*txn)->BeginLeaf({"good"}, DType::kUInt8, {4, 3}, 12).ok());
    ASSERT_TRUE((*txn)->Append(RandomBytes(12, 3)).ok());
    absl::Status s = (*txn)->BeginLeaf(c.path, c.dtype, c.shape, c.announced);
    if (s.ok()) s = (*txn)->Append(RandomBytes(c.sent, 4));
    if (s.ok()) s = (*txn)->Commit().status();
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s;
    EXPECT_NE(s.message().find(c.message_part), std::string::npos) << c.what << ": " << s;
    txn->reset();
    EXPECT_EQ(Snapshot(), before) << c.what << " changed Redis";
  }
  EXPECT_EQ(Write("nodict", {{{"x"}, DType::kBool, {1}, "a"}}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(StoreTest, AbortedWriteLeavesNoKeys) {
  // Stepwise, the first windows are in Redis when it is aborted; at once,
  // nothing of it ever is.
  for (const int64_t at_once_max_bytes : {int64_t{0}, StoreOptions().at_once_max_bytes}) {
    const bool at_once = at_once_max_bytes > 0 && redis_->cluster() == nullptr;
    SCOPED_TRACE(at_once ? "at once" : "stepwise");
    StoreOptions options = store_->options();
    options.at_once_max_bytes = at_once_max_bytes;
    DictStore store(client_.get(), options);
    const std::string dict = at_once_max_bytes > 0 ? "at_once" : "stepwise";
    ASSERT_TRUE(store.CreateDict(dict, {100}, 10, 64).ok());
    const std::vector<std::string> before = Snapshot();
    {
      auto txn = WriteTxn::Begin(&store, dict);
      ASSERT_TRUE(txn.ok());
      ASSERT_TRUE((*txn)->BeginLeaf({"x"}, DType::kFloat32, {100, 8}, 3200).ok());
      ASSERT_TRUE((*txn)->Append(RandomBytes(1600, 1)).ok());  // half the leaf
      EXPECT_EQ(DataKeys().empty(), at_once);
    }  // destroyed without Commit: aborted
    EXPECT_EQ(Snapshot(), before);
    EXPECT_EQ(store.LoadDict(dict)->leaves.size(), 0u);
  }
}

TEST_F(StoreTest, SweeperRemovesAbandonedWrites) {
  StoreOptions options = store_->options();
  options.pending_timeout = std::chrono::milliseconds(1);
  options.at_once_max_bytes = 0;  // stepwise: a write in progress is in Redis
  DictStore store(client_.get(), options);
  ASSERT_TRUE(store.CreateDict("d", {100}, 10, 64).ok());
  const std::vector<std::string> before = Snapshot();

  // A writer that "dies": its transaction is neither committed nor aborted
  // (deliberately leaked, as if the daemon were killed).
  auto txn = WriteTxn::Begin(&store, "d");
  ASSERT_TRUE(txn.ok());
  ASSERT_TRUE((*txn)->BeginLeaf({"x"}, DType::kFloat32, {100, 8}, 3200).ok());
  ASSERT_TRUE((*txn)->Append(RandomBytes(1000, 1)).ok());
  WriteTxn* leaked = txn->release();
  (void)leaked;
  ASSERT_FALSE(DataKeys().empty());

  Sweeper sweeper(&store);
  // Before the expiry nothing is swept...
  auto none = sweeper.SweepOnce(0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0);
  // ...after it, the generation is claimed and its blocks deleted.
  auto swept = sweeper.SweepOnce(std::numeric_limits<int64_t>::max());
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_EQ(*swept, 1);
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(StoreTest, SweptWriteCannotCommit) {
  StoreOptions options = store_->options();
  options.at_once_max_bytes = 0;  // stepwise: only its writes have pending entries
  DictStore store(client_.get(), options);
  ASSERT_TRUE(store.CreateDict("d", {4}, 10, 64).ok());
  auto txn = WriteTxn::Begin(&store, "d");
  ASSERT_TRUE(txn.ok());
  ASSERT_TRUE((*txn)->BeginLeaf({"x"}, DType::kFloat32, {4}, 16).ok());
  ASSERT_TRUE((*txn)->Append(RandomBytes(16, 1)).ok());
  Sweeper sweeper(&store);
  ASSERT_EQ(*sweeper.SweepOnce(std::numeric_limits<int64_t>::max()), 1);
  EXPECT_EQ((*txn)->Commit().status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(store.LoadDict("d")->leaves.size(), 0u);
  EXPECT_TRUE(DataKeys().empty());
}

// A dict built before it gets its name (CreateDict with publish = false):
// no one can open or list it; publishing gives it its name with every leaf
// in place, or fails if the name was taken meanwhile; and one whose builder
// died is swept once its record has expired and no write into it is alive.
TEST_F(StoreTest, AnUnpublishedDictIsInvisibleUntilPublishedAndSweptIfAbandoned) {
  // What the store holds, less the id counter (ids are never given back).
  auto held = [&] {
    std::vector<std::string> v = Snapshot();
    auto it = std::find(v.begin(), v.end(), ns_ + ":next_dict_id");
    if (it != v.end()) v.erase(it, it + 2);
    return v;
  };
  auto built = store_->CreateDict("d", {4}, 2, 100, 0, /*publish=*/false);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(store_->LoadDict("d").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_->ListDicts()->empty());
  auto txn = WriteTxn::Begin(store_.get(), *built);
  ASSERT_TRUE(txn->BeginLeaf({"x"}, DType::kUInt8, {4}, 4).ok());
  ASSERT_TRUE(txn->Append("abcd").ok());
  ASSERT_TRUE(txn->Commit().ok());
  EXPECT_EQ(store_->LoadDict("d").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store_->PublishDict("d", built->meta.id).ok());
  auto read = Read("d", {"x"});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "abcd");

  // The name taken while the other dict was being built: nothing of it stays.
  ASSERT_TRUE(Write("d", {{{"y"}, DType::kUInt8, {4}, "wxyz"}}).ok());
  const std::vector<std::string> with_y = held();
  EXPECT_EQ(store_->CreateDict("d", {4}, 2, 100, 0, /*publish=*/false).status().code(),
            absl::StatusCode::kAlreadyExists);  // checked at the start too
  EXPECT_EQ(held(), with_y);
  auto late = store_->CreateDict("e", {4}, 2, 100, 0, /*publish=*/false);
  ASSERT_TRUE(late.ok());
  ASSERT_TRUE(store_->CreateDict("e", {2}, 0, 0).ok());
  auto txn2 = WriteTxn::Begin(store_.get(), *late);
  ASSERT_TRUE(txn2->BeginLeaf({"z"}, DType::kUInt8, {4}, 4).ok());
  ASSERT_TRUE(txn2->Append("0123").ok());
  ASSERT_TRUE(txn2->Commit().ok());
  EXPECT_EQ(store_->PublishDict("e", late->meta.id).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(store_->DeleteDict("e").ok());
  EXPECT_EQ(held(), with_y) << "the unpublished namesake left keys";

  // A sweeper that listed d's creation just before d was published must
  // leave d alone: the creation record decides.
  ASSERT_TRUE(store_->AbandonDict(built->meta.id).ok());
  EXPECT_EQ(held(), with_y) << "abandoning a published dict changed it";

  // A builder that died mid-write: kept while its write is alive...
  StoreOptions options = store_->options();
  options.pending_timeout = std::chrono::milliseconds(60000);
  options.at_once_max_bytes = 0;  // stepwise: a write in progress is in Redis
  DictStore store(client_.get(), options);
  auto orphan = store.CreateDict("f", {4}, 2, 100, 0, /*publish=*/false);
  ASSERT_TRUE(orphan.ok());
  auto dying = WriteTxn::Begin(&store, *orphan);
  ASSERT_TRUE(dying->BeginLeaf({"x"}, DType::kUInt8, {4}, 4).ok());
  ASSERT_TRUE(dying->Append("abcd").ok());
  WriteTxn* leaked = dying.release();
  (void)leaked;
  const std::string record = std::string(kCreatingPrefix) + orphan->meta.id;
  redis_->Command({"HSET", ns_ + ":catalog", record, "1"});  // expired long ago
  Sweeper sweeper(&store);
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  auto kept = sweeper.SweepOnce(now);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, 0);
  EXPECT_EQ(redis_->Command({"HEXISTS", ns_ + ":catalog", record}),
            std::vector<std::string>{"1"});
  // ...and swept, every key of it, once nothing of it is alive.
  auto swept = sweeper.SweepOnce(std::numeric_limits<int64_t>::max());
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_EQ(held(), with_y) << "the abandoned dict left keys";
  EXPECT_EQ(store.PublishDict("f", orphan->meta.id).code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(store.ListDicts().ok());
  EXPECT_EQ(*store.ListDicts(), std::vector<std::string>{"d"});
}

TEST_F(StoreTest, DeleteDictRemovesEveryKey) {
  ASSERT_TRUE(store_->CreateDict("keep", {2}, 1, 1000).ok());
  ASSERT_TRUE(Write("keep", {{{"x"}, DType::kInt8, {2}, "ab"}}).ok());
  const std::vector<std::string> before = Keys();
  ASSERT_TRUE(store_->CreateDict("d", {30}, 4, 16).ok());
  ASSERT_TRUE(Write("d", {{{"x"}, DType::kInt32, {30, 2}, RandomBytes(240, 1)},
                          {{"y", "z"}, DType::kUInt8, {30}, RandomBytes(30, 2)}})
                  .ok());
  // And a write in progress, which the delete must clean up too.
  auto txn = WriteTxn::Begin(store_.get(), "d");
  ASSERT_TRUE((*txn)->BeginLeaf({"w"}, DType::kUInt8, {30}, 30).ok());
  ASSERT_TRUE((*txn)->Append(RandomBytes(30, 3)).ok());
  ASSERT_TRUE(store_->DeleteDict("d").ok());
  EXPECT_EQ((*txn)->Commit().status().code(), absl::StatusCode::kNotFound);
  std::vector<std::string> after = Keys();
  // The id counter is the only key a delete leaves behind.
  after.erase(std::remove(after.begin(), after.end(), ns_ + ":next_dict_id"), after.end());
  std::vector<std::string> expected = before;
  expected.erase(std::remove(expected.begin(), expected.end(), ns_ + ":next_dict_id"),
                 expected.end());
  EXPECT_EQ(after, expected);
}

// Quotas (dict_store.h): <ns>:used_bytes follows every generation through
// commit, replacement, abort and deletion, and a write over a quota is
// refused before Redis changes at all.
TEST_F(StoreTest, UsedBytesFollowGenerationsAndQuotasRefuseBeforeWriting) {
  // Stepwise (a write reserves its bytes as it begins) and at once (its
  // commit reserves them), with the same refusals.
  for (const int64_t at_once_max_bytes : {int64_t{0}, StoreOptions().at_once_max_bytes}) {
    // (A cluster writes stepwise whatever the option says.)
    const bool at_once = at_once_max_bytes > 0 && redis_->cluster() == nullptr;
    SCOPED_TRACE(at_once ? "at once" : "stepwise");
    StoreOptions options;
    options.ns = ns_;
    options.namespace_quota_bytes = 1000;
    options.dict_quota_bytes = 600;
    options.at_once_max_bytes = at_once_max_bytes;
    DictStore store(client_.get(), options);
    auto used = [&] { return *store.NamespaceUsedBytes(); };
    auto write = [&](const std::string& dict, const LeafPath& path, int64_t n) {
      auto txn = WriteTxn::Begin(&store, dict);
      if (!txn.ok()) return txn.status();
      if (auto s = (*txn)->BeginLeaf(path, DType::kUInt8, {n}, n); !s.ok()) return s;
      if (auto s = (*txn)->Append(RandomBytes(static_cast<size_t>(n), 7)); !s.ok()) return s;
      return (*txn)->Commit().status();
    };
    ASSERT_TRUE(store.CreateDict("d", {}, 4, 64).ok());
    ASSERT_TRUE(write("d", {"x"}, 300).ok());
    EXPECT_EQ(used(), 300);
    ASSERT_TRUE(write("d", {"x"}, 400).ok());  // replaced: the old 300 are returned
    EXPECT_EQ(used(), 400);
    {
      auto txn = WriteTxn::Begin(&store, "d");
      ASSERT_TRUE((*txn)->BeginLeaf({"y"}, DType::kUInt8, {100}, 100).ok());
      // Stepwise, reserved while written; at once, only by its commit.
      EXPECT_EQ(used(), at_once ? 400 : 500);
      ASSERT_TRUE((*txn)->Append(RandomBytes(50, 1)).ok());
    }  // aborted
    EXPECT_EQ(used(), 400);

    const std::vector<std::string> before = Snapshot();
    absl::Status s = write("d", {"y"}, 300);  // the dict would hold 700 > 600
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_NE(std::string(s.message()).find("--dict-quota-bytes"), std::string::npos) << s;
    EXPECT_EQ(Snapshot(), before);

    ASSERT_TRUE(store.CreateDict("e", {}, 4, 64).ok());
    ASSERT_TRUE(write("e", {"z"}, 500).ok());
    EXPECT_EQ(used(), 900);
    const std::vector<std::string> with_e = Snapshot();
    s = write("d", {"w"}, 200);  // d may hold 600, but the namespace would hold 1100 > 1000
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_NE(std::string(s.message()).find("--namespace-quota-bytes"), std::string::npos) << s;
    EXPECT_EQ(Snapshot(), with_e);
    auto created = store.CreateDict("f", {}, 4, 64, /*schema_bytes=*/200);
    EXPECT_EQ(created.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(Snapshot(), with_e);

    ASSERT_TRUE(store.DeleteLeaves("d", {{"x"}}).ok());
    EXPECT_EQ(used(), 500);
    ASSERT_TRUE(store.DeleteDict("e").ok());
    EXPECT_EQ(used(), 0);
    ASSERT_TRUE(store.DeleteDict("d").ok());
    EXPECT_EQ(used(), 0);
  }
}

TEST_F(StoreTest, ZeroByteLeavesHaveNoBlocks) {
  ASSERT_TRUE(store_->CreateDict("d", {0}, 4, 16).ok());
  ASSERT_TRUE(Write("d", {{{"e"}, DType::kFloat32, {0, 5}, ""}}).ok());
  ASSERT_TRUE(store_->CreateDict("s", {}, 4, 16).ok());
  ASSERT_TRUE(Write("s", {{{"scalar"}, DType::kFloat64, {}, RandomBytes(8, 1)},
                          {{"empty"}, DType::kFloat64, {3, 0}, ""}})
                  .ok());
  EXPECT_EQ(*Read("d", {"e"}), "");
  EXPECT_EQ(Read("s", {"scalar"})->size(), 8u);
  EXPECT_EQ(DataKeys().size(), 1u);
}

TEST_F(StoreTest, WriteReplicasWaitsForReplicaAcknowledgement) {
  StoreOptions options = store_->options();
  options.write_replicas = 1;
  options.write_replicas_timeout = std::chrono::milliseconds(200);
  DictStore durable(client_.get(), options);
  // The same, patient enough for a replica that has just finished syncing.
  StoreOptions patient_options = options;
  patient_options.write_replicas_timeout = std::chrono::milliseconds(5000);
  DictStore patient(client_.get(), patient_options);
  ASSERT_TRUE(durable.CreateDict("d", {4}, 2, 100).ok());
  auto write_with = [&](DictStore* store, const std::string& bytes) {
    auto txn = WriteTxn::Begin(store, "d");
    if (!txn.ok()) return txn.status();
    if (auto s = (*txn)->BeginLeaf({"x"}, DType::kUInt8, {4}, 4); !s.ok()) return s;
    if (auto s = (*txn)->Append(bytes); !s.ok()) return s;
    return (*txn)->Commit().status();
  };
  auto write = [&](const std::string& bytes) { return write_with(&durable, bytes); };
  if (redis_->cluster() != nullptr) {
    // The test cluster has one replica per master: one confirms, two cannot.
    ASSERT_TRUE(write("efgh").ok());
    EXPECT_EQ(*Read("d", {"x"}), "efgh");
    options.write_replicas = 2;
    DictStore too_many(client_.get(), options);
    auto txn = WriteTxn::Begin(&too_many, "d");
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE((*txn)->BeginLeaf({"x"}, DType::kUInt8, {4}, 4).ok());
    ASSERT_TRUE((*txn)->Append("ijkl").ok());
    EXPECT_EQ((*txn)->Commit().status().code(), absl::StatusCode::kUnavailable);
    return;
  }
  // Standalone without a replica: the write cannot be confirmed.
  absl::Status unconfirmed = write("abcd");
  EXPECT_EQ(unconfirmed.code(), absl::StatusCode::kUnavailable) << unconfirmed;
  EXPECT_NE(unconfirmed.message().find("replica"), std::string::npos) << unconfirmed;

  // A real replica of the test's Redis: now WAIT is satisfied. (Start the
  // sync at once rather than after the default 5 s diskless-sync delay.)
  redis_->Command({"CONFIG", "SET", "repl-diskless-sync-delay", "0"});
  ::tdstore::testing::RedisServerProcess replica(::tdstore::testing::RedisServerOptions{
      "/usr/bin/redis-server", "", "", "", {"--replicaof", "127.0.0.1",
                                            std::to_string(redis_->standalone()->port())}});
  ASSERT_TRUE(replica.Start().ok());
  bool online = false;
  for (int i = 0; i < 300 && !online; ++i) {
    std::string info = redis_->Command({"INFO", "replication"}).at(0);
    online = info.find("connected_slaves:1") != std::string::npos &&
             info.find("state=online") != std::string::npos;
    if (!online) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(online) << "the replica did not come online within 15 s";
  absl::Status confirmed = write_with(&patient, "efgh");
  ASSERT_TRUE(confirmed.ok()) << confirmed;
  EXPECT_EQ(*Read("d", {"x"}), "efgh");
  replica.Stop();
}

TEST_F(StoreTest, UnreachableRedisIsUnavailable) {
  redis::RedisAddress nowhere;
  nowhere.host = "127.0.0.1";
  nowhere.port = ::tdstore::testing::PickFreePort();
  redis::StandaloneClient client(nowhere, redis::ConnectOptions{});
  DictStore store(&client, StoreOptions{});
  EXPECT_EQ(store.CreateDict("x", {1}, 0, 0).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store.LoadDict("x").status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tdstore::store
