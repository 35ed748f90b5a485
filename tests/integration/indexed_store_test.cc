// server/store's indexed path against a real redis-server: td[idx] reads and
// td[idx] = v writes across tiny blocks and parts, the "stale" protocol,
// NOSCRIPT recovery, creating missing leaves, rejected writes leaving Redis
// byte-for-byte unchanged, and how many bytes an indexed read moves.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/redis/redis_address.h"
#include "server/redis/standalone_client.h"
#include "server/redis_store/dict_store.h"
#include "server/redis_store/indexed_access.h"
#include "server/redis_store/indexed_io.h"
#include "server/redis_store/leaf_reader.h"
#include "server/redis_store/leaf_writer.h"
#include "server/redis_store/lua_scripts.h"
#include "server/redis/make_client.h"
#include "tests/support/redis_suite_test.h"

namespace tdstore::store {
namespace {

using plan::IndexSpec;
using plan::IndexTerm;
using plan::ResolvedIndex;
using plan::ResolveIndex;

using ::tdstore::testing::RedisSuiteTest;

class IndexedStoreTest : public RedisSuiteTest {
 protected:
  void SetUp() override {
    ns_ = TestNamespace("i");
    auto client = redis::MakeRedisClient(redis_->url(), "", redis::ConnectOptions{});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    StoreOptions options;
    options.ns = ns_;
    options.pipeline_depth = 3;
    store_ = std::make_unique<DictStore>(client_.get(), options);
  }

  // Byte-exact picture of every key of this test's namespace.
  std::vector<std::string> Snapshot() const {
    std::vector<std::string> out;
    for (const std::string& k : redis_->Keys(ns_ + ":*")) {
      out.push_back(k);
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

  void WriteWhole(const std::string& dict, const LeafPath& path, DType dtype, const Shape& shape,
                  const std::string& bytes) {
    auto txn = WriteTxn::Begin(store_.get(), dict);
    ASSERT_TRUE(txn.ok()) << txn.status();
    ASSERT_TRUE((*txn)->BeginLeaf(path, dtype, shape, bytes.size()).ok());
    ASSERT_TRUE((*txn)->Append(bytes).ok());
    ASSERT_TRUE((*txn)->Commit().ok());
  }

  std::string ReadWhole(const std::string& dict, const LeafPath& path) {
    auto schema = store_->LoadDict(dict);
    EXPECT_TRUE(schema.ok());
    std::string out;
    EXPECT_TRUE(ReadLeaf(*store_, *schema, *schema->Find(path), [&](std::string_view b) {
                  out.append(b);
                  return absl::OkStatus();
                }).ok());
    return out;
  }

  std::string ns_;
  std::unique_ptr<redis::RedisClient> client_;
  std::unique_ptr<DictStore> store_;
};

// A local model: the bytes td[index] selects, computed from ResolveIndex's
// cells. (That ResolveIndex itself matches torch is index_torch_test's job;
// this test checks the store moves exactly the bytes the plan names.)
std::string Select(const std::string& leaf, const ResolvedIndex& r, int64_t cell) {
  std::string out;
  for (int64_t c : r.cells) out.append(leaf, static_cast<size_t>(c * cell), static_cast<size_t>(cell));
  return out;
}

TEST_F(IndexedStoreTest, RandomReadsAndWritesMatchTheModel) {
  // batch [20, 3], 2 x int32 per cell (8 bytes); 4 rows per block = 96-byte
  // blocks in 10-byte parts: runs split across parts all the time.
  ASSERT_TRUE(store_->CreateDict("d", {20, 3}, 4, 10).ok());
  std::string model = RandomBytes(20 * 3 * 8, 1);
  WriteWhole("d", {"x"}, DType::kInt32, {20, 3, 2}, model);
  WriteWhole("d", {"y"}, DType::kUInt8, {20, 3}, RandomBytes(60, 2));

  std::mt19937 rng(3);
  for (int round = 0; round < 200; ++round) {
    IndexSpec index;
    switch (rng() % 4) {
      case 0:
        index = {IndexTerm::Int(static_cast<int64_t>(rng() % 40) - 20)};
        break;
      case 1:
        index = {IndexTerm::Slice(rng() % 20, std::nullopt, 1 + rng() % 3),
                 IndexTerm::Slice(std::nullopt, std::nullopt, 2)};
        break;
      case 2: {
        std::vector<int64_t> rows;
        for (int i = 0; i < 7; ++i) rows.push_back(rng() % 20);
        index = {IndexTerm::Positions(rows), IndexTerm::Int(rng() % 3)};
        break;
      }
      default: {
        std::vector<bool> mask(20);
        for (size_t i = 0; i < mask.size(); ++i) mask[i] = rng() % 2;
        index = {IndexTerm::Mask(mask)};
      }
    }
    auto resolved = ResolveIndex(index, {20, 3});
    ASSERT_TRUE(resolved.ok()) << resolved.status();

    auto read = ReadIndexedLeaves(*store_, "d", index, {{"x"}});
    ASSERT_TRUE(read.ok()) << read.status();
    ASSERT_EQ(read->leaves.size(), 1u);
    EXPECT_EQ(read->result_shape, resolved->result_shape);
    EXPECT_EQ(read->leaves[0].bytes, Select(model, *resolved, 8)) << "round " << round;

    // Write fresh values; the model applies them in result order (the last
    // duplicate wins, as the store promises).
    std::string values = RandomBytes(resolved->cells.size() * 8, 100 + round);
    Shape value_shape = resolved->result_shape;
    value_shape.push_back(2);
    auto written = WriteIndexedLeaves(store_.get(), "d", index,
                                      {{{"x"}, DType::kInt32, value_shape, values}});
    ASSERT_TRUE(written.ok()) << written.status();
    for (size_t i = 0; i < resolved->cells.size(); ++i) {
      std::memcpy(model.data() + resolved->cells[i] * 8, values.data() + i * 8, 8);
    }
    ASSERT_EQ(ReadWhole("d", {"x"}), model) << "round " << round;
  }
}

TEST_F(IndexedStoreTest, BroadcastScalarValue) {
  ASSERT_TRUE(store_->CreateDict("d", {10}, 3, 1000).ok());
  WriteWhole("d", {"x"}, DType::kInt16, {10, 2}, std::string(40, '\0'));
  // td[[1, 7]] = int16 0x0101 broadcast from shape [].
  auto written = WriteIndexedLeaves(store_.get(), "d", {IndexTerm::Positions({1, 7})},
                                    {{{"x"}, DType::kInt16, {}, std::string(2, '\x01')}});
  ASSERT_TRUE(written.ok()) << written.status();
  std::string expected(40, '\0');
  for (int row : {1, 7}) std::memset(expected.data() + row * 4, 1, 4);
  EXPECT_EQ(ReadWhole("d", {"x"}), expected);
}

TEST_F(IndexedStoreTest, LeadingSizeOneDimsOfAValueAreDroppedAsTorchDoes) {
  ASSERT_TRUE(store_->CreateDict("d", {4}, 2, 100).ok());
  WriteWhole("d", {"x"}, DType::kUInt8, {4, 2}, "........");
  // td[1] = value of shape [1, 1, 2] (target [2]).
  ASSERT_TRUE(WriteIndexedLeaves(store_.get(), "d", {IndexTerm::Int(1)},
                                 {{{"x"}, DType::kUInt8, {1, 1, 2}, "ab"}})
                  .ok());
  EXPECT_EQ(ReadWhole("d", {"x"}), "..ab....");
}

TEST_F(IndexedStoreTest, OversizedSelectionsFailBeforeAllocating) {
  StoreOptions options = store_->options();
  options.max_indexed_bytes = 1 << 20;
  DictStore small(client_.get(), options);
  ASSERT_TRUE(small.CreateDict("d", {100000}, 0, 0).ok());
  // Positions [n, 1] and [1, n] broadcast to n * n cells: 10^10 here.
  std::vector<int64_t> rows(100000);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  auto resolved = ResolveIndex({IndexTerm::Positions(rows, {100000, 1}),
                                IndexTerm::Positions(rows, {1, 100000})},
                               {100000, 100000}, options.max_indexed_bytes / 8);
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kResourceExhausted);
  WriteWhole("d", {"x"}, DType::kFloat32, {100000}, std::string(400000, '\0'));
  auto too_big = ReadIndexedLeaves(small, "d", {IndexTerm::Slice(0, std::nullopt)}, {});
  // 400,000 bytes fit; a write of 2 x 400,000 bytes of values does not.
  EXPECT_TRUE(too_big.ok()) << too_big.status();
  auto write = WriteIndexedLeaves(
      &small, "d", {IndexTerm::Slice(0, std::nullopt)},
      {{{"x"}, DType::kFloat32, {100000}, std::string(400000, 'a')},
       {{"y"}, DType::kFloat64, {100000}, std::string(800000, 'b')}});
  EXPECT_EQ(write.status().code(), absl::StatusCode::kResourceExhausted) << write.status();
}

TEST_F(IndexedStoreTest, MissingLeafIsCreatedZeroFilledThenWritten) {
  ASSERT_TRUE(store_->CreateDict("d", {6}, 4, 7).ok());
  auto written = WriteIndexedLeaves(store_.get(), "d", {IndexTerm::Slice(2, 4)},
                                    {{{"new", "leaf"}, DType::kUInt8, {2, 3}, "abcdef"}});
  ASSERT_TRUE(written.ok()) << written.status();
  auto schema = store_->LoadDict("d");
  ASSERT_EQ(schema->Find({"new", "leaf"})->record.shape, (Shape{6, 3}));
  EXPECT_EQ(ReadWhole("d", {"new", "leaf"}), std::string(6, '\0') + "abcdef" + std::string(6, '\0'));
}

TEST_F(IndexedStoreTest, RejectedWritesLeaveRedisByteForByteUnchanged) {
  ASSERT_TRUE(store_->CreateDict("d", {10, 2}, 3, 16).ok());
  WriteWhole("d", {"x"}, DType::kFloat32, {10, 2, 3}, RandomBytes(240, 1));
  const std::vector<std::string> before = Snapshot();
  struct Case {
    const char* what;
    IndexSpec index;
    IndexedWriteValue value;
    absl::StatusCode code;
  };
  const std::string twelve(12, 'v');
  const Case cases[] = {
      {"row out of range", {IndexTerm::Positions({1, 10})},
       {{"x"}, DType::kFloat32, {2, 2, 3}, std::string(48, 'v')}, absl::StatusCode::kOutOfRange},
      {"negative row out of range", {IndexTerm::Int(-11)},
       {{"x"}, DType::kFloat32, {2, 3}, std::string(24, 'v')}, absl::StatusCode::kOutOfRange},
      {"mask length", {IndexTerm::Mask({true, false})},
       {{"x"}, DType::kFloat32, {1, 2, 3}, std::string(24, 'v')},
       absl::StatusCode::kInvalidArgument},
      {"step 0", {IndexTerm::Slice(0, 4, 0)},
       {{"x"}, DType::kFloat32, {4, 2, 3}, std::string(96, 'v')},
       absl::StatusCode::kInvalidArgument},
      {"shape mismatch", {IndexTerm::Int(3)},
       {{"x"}, DType::kFloat32, {3, 2}, std::string(24, 'v')}, absl::StatusCode::kInvalidArgument},
      {"dtype mismatch", {IndexTerm::Int(3), IndexTerm::Int(1)},
       {{"x"}, DType::kInt32, {3}, twelve}, absl::StatusCode::kInvalidArgument},
      {"byte count", {IndexTerm::Int(3), IndexTerm::Int(1)},
       {{"x"}, DType::kFloat32, {3}, std::string(11, 'v')}, absl::StatusCode::kInvalidArgument},
      {"new leaf, bad index", {IndexTerm::Positions({99})},
       {{"fresh"}, DType::kFloat32, {1}, std::string(4, 'v')}, absl::StatusCode::kOutOfRange},
      {"too many index terms", {IndexTerm::Int(0), IndexTerm::Int(0), IndexTerm::Int(0)},
       {{"x"}, DType::kFloat32, {3}, twelve}, absl::StatusCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    auto written = WriteIndexedLeaves(store_.get(), "d", c.index, {c.value});
    EXPECT_EQ(written.status().code(), c.code) << c.what << ": " << written.status();
    EXPECT_EQ(Snapshot(), before) << c.what << " changed Redis";
  }
}

TEST_F(IndexedStoreTest, StaleGenerationIsReportedNotRecreated) {
  ASSERT_TRUE(store_->CreateDict("d", {8}, 2, 100).ok());
  WriteWhole("d", {"x"}, DType::kUInt8, {8}, "abcdefgh");
  auto old_schema = store_->LoadDict("d");
  ASSERT_TRUE(old_schema.ok());
  WriteWhole("d", {"x"}, DType::kUInt8, {8}, "ABCDEFGH");  // old generation deleted
  const std::vector<std::string> keys = redis_->Keys(ns_ + ":*");

  auto resolved = ResolveIndex({IndexTerm::Positions({1, 6})}, {8});
  ASSERT_TRUE(resolved.ok());
  const Leaf* stale_leaf = old_schema->Find({"x"});
  absl::Status write = WriteIndexed(*store_, *old_schema, *resolved, {{stale_leaf, "zz"}});
  EXPECT_TRUE(IsStale(write)) << write;
  EXPECT_EQ(redis_->Keys(ns_ + ":*"), keys) << "a stale write recreated old keys";
  auto read = ReadIndexed(*store_, *old_schema, *resolved, {stale_leaf});
  EXPECT_TRUE(IsStale(read.status())) << read.status();

  // The request-level calls refresh the schema and succeed.
  ASSERT_TRUE(WriteIndexedLeaves(store_.get(), "d", {IndexTerm::Positions({1, 6})},
                                 {{{"x"}, DType::kUInt8, {2}, "zz"}})
                  .ok());
  EXPECT_EQ(ReadWhole("d", {"x"}), "AzCDEFzH");
}

// write_runs.lua itself: its groups of fixed-stride runs and its single runs
// write exactly their bytes, and a run reaching past a key's end, or into a
// key that is gone, writes nothing at all.
TEST_F(IndexedStoreTest, WriteRunsScriptWritesGroupsAndSingleRunsOrNothing) {
  const std::string a = "{" + ns_ + "}:a";
  const std::string b = "{" + ns_ + "}:b";
  const Scripts& s = GetScripts();
  auto eval = [&](std::vector<std::string> args) {
    std::vector<std::string_view> views(args.begin(), args.end());
    auto reply = client_->Eval(s.write_runs, {a, b}, views);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? std::string(reply->str()) : std::string("(no reply)");
  };
  redis_->Command({"SET", a, std::string(20, '.')});
  redis_->Command({"SET", b, std::string(10, '.')});
  // a: 3 runs of 2 bytes from 1, stride 5; b: one of 3 bytes from 4, then a
  // single run into a and one into b.
  eval({"2", "1", "1", "5", "2", "AABBCC", "2", "4", "3", "3", "xyz", "1", "18", "ZZ", "2", "0", "q"});
  EXPECT_EQ(redis_->Command({"GET", a}).at(0), ".AA...BB...CC.....ZZ");
  EXPECT_EQ(redis_->Command({"GET", b}).at(0), "q...xyz...");

  // The last run of a group one byte past b's end: TDSTALE, and nothing
  // written, not even the runs that fit.
  EXPECT_EQ(eval({"1", "2", "0", "9", "2", "1111", "1", "0", "!"}).substr(0, 7), "TDSTALE");
  EXPECT_EQ(eval({"1", "2", "0", "8", "3", "222333", "1", "0", "!"}).substr(0, 7), "TDSTALE");
  EXPECT_EQ(redis_->Command({"GET", a}).at(0), ".AA...BB...CC.....ZZ");
  EXPECT_EQ(redis_->Command({"GET", b}).at(0), "q...xyz...");
  // A key that is gone is not recreated.
  redis_->Command({"DEL", b});
  EXPECT_EQ(eval({"1", "1", "0", "3", "1", "123", "2", "0", "x"}).substr(0, 7), "TDSTALE");
  EXPECT_EQ(redis_->Command({"EXISTS", b}).at(0), "0");
  EXPECT_EQ(redis_->Command({"GET", a}).at(0), ".AA...BB...CC.....ZZ");
  // Malformed groups are refused, not guessed at: bytes that are not whole
  // runs, a stride shorter than a run.
  EXPECT_NE(eval({"1", "1", "0", "3", "2", "123"}).find("malformed"), std::string::npos);
  EXPECT_NE(eval({"1", "1", "0", "1", "2", "1234"}).find("malformed"), std::string::npos);
  EXPECT_EQ(redis_->Command({"GET", a}).at(0), ".AA...BB...CC.....ZZ");
}

// guard_runs.lua and release_runs.lua around plain SETRANGEs, in one MULTI
// as WriteIndexed sends them on standalone Redis: with every key a string
// long enough the runs land; with one key short, gone or of another type no
// byte is written anywhere, no key is created, and every key comes back as
// it was (DUMP-exact), with no hold key left behind. (On a cluster,
// WriteIndexed uses write_runs.lua; the scripts keep their contract on a
// cluster node all the same, all keys in one slot, and are checked there
// too.)
TEST_F(IndexedStoreTest, GuardedSetrangesWriteAllOrNothingAndLeaveNoTrace) {
  const std::string a = "{" + ns_ + "}:a";
  const std::string b = "{" + ns_ + "}:b";
  const Scripts& s = GetScripts();
  // The transaction for runs "AA" at a[1] and "xyz" at b[4], the guard told
  // that b's runs reach `b_reach`; returns EXEC's replies as text.
  auto write = [&](int64_t b_reach) {
    auto pipe = client_->NewPipeline(16);
    EXPECT_TRUE(pipe.ok()) << pipe.status();
    const std::string reach_b = std::to_string(b_reach);
    const std::string_view suffix = ":tdstore-held";
    std::vector<std::vector<std::string_view>> cmds = {
        {"MULTI"},
        {"EVAL", s.guard_runs.body(), "2", a, b, "3", reach_b, suffix},
        {"SETRANGE", a, "1", "AA"},
        {"SETRANGE", b, "4", "xyz"},
        {"EVAL", s.release_runs.body(), "2", a, b, suffix},
        {"EXEC"}};
    for (const auto& c : cmds) EXPECT_TRUE((*pipe)->Send(a, c).ok());
    std::vector<std::string> out;
    for (size_t i = 0; i + 1 < cmds.size(); ++i) EXPECT_TRUE((*pipe)->Receive().ok());
    auto exec = (*pipe)->Receive();
    EXPECT_TRUE(exec.ok()) << exec.status();
    for (size_t i = 0; exec.ok() && i < exec->size(); ++i) {
      out.push_back((*exec)[i].is_integer() ? std::to_string((*exec)[i].integer())
                                            : std::string((*exec)[i].str()));
    }
    return out;
  };
  redis_->Command({"SET", a, std::string(8, '.')});
  redis_->Command({"SET", b, std::string(10, '.')});
  std::vector<std::string> ok = write(7);
  ASSERT_EQ(ok.size(), 4u);
  EXPECT_EQ(ok[0], "0");
  EXPECT_EQ(redis_->Command({"GET", a}).at(0), ".AA.....");
  EXPECT_EQ(redis_->Command({"GET", b}).at(0), "....xyz...");

  auto refused = [&](const std::string& what, int64_t b_reach) {
    const std::vector<std::string> before = Snapshot();
    std::vector<std::string> r = write(b_reach);
    ASSERT_EQ(r.size(), 4u) << what;
    EXPECT_EQ(r[0].substr(0, 7), "TDSTALE") << what << ": " << r[0];
    EXPECT_EQ(r[1].substr(0, 9), "WRONGTYPE") << what << ": " << r[1];
    EXPECT_EQ(r[2].substr(0, 9), "WRONGTYPE") << what << ": " << r[2];
    EXPECT_EQ(Snapshot(), before) << what << " changed Redis";
  };
  redis_->Command({"SET", a, "--------"});
  refused("a run past b's end", 11);
  redis_->Command({"SET", b, "short"});
  refused("b cut short", 7);
  redis_->Command({"DEL", b});
  refused("b gone", 7);
  EXPECT_EQ(redis_->Command({"EXISTS", b}).at(0), "0") << "a gone key was created";
  redis_->Command({"RPUSH", b, "x", "y"});
  refused("b a list", 7);
  redis_->Command({"DEL", b});
  redis_->Command({"HSET", b, "f", "v"});
  refused("b a hash", 7);
  EXPECT_EQ(redis_->Command({"HGET", b, "f"}).at(0), "v");
}

// A step slice written from a schema whose leaf was replaced meanwhile: the
// block's call holds a group for each leaf, the replaced leaf's key is gone,
// and the script refuses the whole block, so the other leaf is untouched too.
TEST_F(IndexedStoreTest, StridedWriteIntoAReplacedGenerationIsStaleAndWritesNothing) {
  ASSERT_TRUE(store_->CreateDict("d", {200}, 100, 1000).ok());
  WriteWhole("d", {"x"}, DType::kFloat32, {200, 2}, RandomBytes(1600, 1));
  WriteWhole("d", {"y"}, DType::kUInt8, {200}, RandomBytes(200, 2));
  auto old_schema = store_->LoadDict("d");
  ASSERT_TRUE(old_schema.ok());
  WriteWhole("d", {"x"}, DType::kFloat32, {200, 2}, RandomBytes(1600, 3));  // replaces x
  const std::vector<std::string> before = Snapshot();

  auto resolved = ResolveIndex({IndexTerm::Slice(1, std::nullopt, 3)}, {200});
  ASSERT_TRUE(resolved.ok());
  const std::string x_values = RandomBytes(resolved->cells.size() * 8, 4);
  const std::string y_values = RandomBytes(resolved->cells.size(), 5);
  absl::Status write = WriteIndexed(*store_, *old_schema, *resolved,
                                    {{old_schema->Find({"x"}), x_values},
                                     {old_schema->Find({"y"}), y_values}});
  EXPECT_TRUE(IsStale(write)) << write;
  EXPECT_EQ(Snapshot(), before) << "a stale strided write changed Redis";

  // From the current schema the same write lands, on every selected row and
  // no other.
  auto written = WriteIndexedLeaves(store_.get(), "d", {IndexTerm::Slice(1, std::nullopt, 3)},
                                    {{{"x"}, DType::kFloat32, {67, 2}, x_values},
                                     {{"y"}, DType::kUInt8, {67}, y_values}});
  ASSERT_TRUE(written.ok()) << written.status();
  std::string x = RandomBytes(1600, 3);
  std::string y = RandomBytes(200, 2);
  for (size_t i = 0; i < resolved->cells.size(); ++i) {
    const size_t row = static_cast<size_t>(resolved->cells[i]);
    x.replace(row * 8, 8, x_values, i * 8, 8);
    y[row] = y_values[i];
  }
  EXPECT_EQ(ReadWhole("d", {"x"}), x);
  EXPECT_EQ(ReadWhole("d", {"y"}), y);
}

TEST_F(IndexedStoreTest, ScriptsAreReloadedAfterScriptFlush) {
  ASSERT_TRUE(store_->CreateDict("d", {8}, 2, 100).ok());
  WriteWhole("d", {"x"}, DType::kUInt8, {8}, "abcdefgh");
  redis_->Command({"SCRIPT", "FLUSH"});
  auto read = ReadIndexedLeaves(*store_, "d", {IndexTerm::Positions({7, 0, 3})}, {});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->leaves[0].bytes, "had");
  redis_->Command({"SCRIPT", "FLUSH"});
  ASSERT_TRUE(WriteIndexedLeaves(store_.get(), "d", {IndexTerm::Positions({0, 5})},
                                 {{{"x"}, DType::kUInt8, {2}, "XY"}})
                  .ok());
  EXPECT_EQ(ReadWhole("d", {"x"}), "XbcdeYgh");
}

TEST_F(IndexedStoreTest, PreloadLoadsEveryScriptUnderItsLocalSha1) {
  redis_->Command({"SCRIPT", "FLUSH"});
  ASSERT_TRUE(PreloadScripts(*client_).ok());
  const Scripts& s = GetScripts();
  for (const redis::Script* script : {&s.begin_write, &s.commit_leaves,
                                      &s.write_runs, &s.delete_leaves, &s.claim_pending,
                                      &s.touch_pending, &s.rename_dict}) {
    EXPECT_EQ(redis_->Command({"SCRIPT", "EXISTS", script->sha1()}).at(0), "1") << script->name();
  }
}

TEST_F(IndexedStoreTest, SampledReadMovesAboutTheSelectedBytes) {
  // 100,000 rows of 64 float32 (256 bytes); 256 random rows = 64 KiB.
  ASSERT_TRUE(store_->CreateDict("d", {100000}, 0, 0).ok());
  WriteWhole("d", {"obs"}, DType::kFloat32, {100000, 64}, RandomBytes(100000 * 256, 5));
  std::mt19937 rng(9);
  std::vector<int64_t> rows;
  for (int i = 0; i < 256; ++i) rows.push_back(rng() % 100000);
  const long long before = redis_->TotalNetOutputBytes();
  auto read = ReadIndexedLeaves(*store_, "d", {IndexTerm::Positions(rows)}, {});
  const long long after = redis_->TotalNetOutputBytes();
  ASSERT_TRUE(read.ok()) << read.status();
  const long long selected = 256 * 256;
  std::printf("indexed read of 256 random rows (%s): %lld bytes out of Redis for %lld selected "
              "(%.3fx)\n", redis_->backend().c_str(), after - before, selected,
              static_cast<double>(after - before) / selected);
  // Rows less than 2 KiB apart are read with the bytes between them, one
  // GETRANGE instead of two (indexed_io.cc, kRunCostBytes): those gaps may
  // move too.
  std::vector<int64_t> sorted = rows;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  long long gaps = 0;
  for (size_t i = 1; i < sorted.size(); ++i) {
    const long long gap = (sorted[i] - sorted[i - 1] - 1) * 256;
    if (gap <= 2048) gaps += gap;
  }
  // 1.1x the selected bytes and those gaps, plus the schema lookups' small
  // replies (and, on a cluster, the INFO replies of every master that the
  // measurement itself causes).
  EXPECT_LE(after - before, selected * 11 / 10 + gaps + 4096 * redis_->node_count())
      << "moved " << (after - before) << ", gaps " << gaps;
}

// Dense selections (a step slice, most rows by position or mask) of two
// leaves across three blocks: on standalone Redis each key's span is read,
// patched and written back under WATCH (indexed_io.cc, WriteCovered), on a
// cluster written range by range; either way every round leaves exactly
// the model's bytes. Sparse rounds in between take the per-range path.
TEST_F(IndexedStoreTest, DenseWritesLeaveExactlyTheModelsBytes) {
  ASSERT_TRUE(store_->CreateDict("d", {1200}, 500, 1 << 20).ok());
  std::string x = RandomBytes(1200 * 16, 1);  // int32 [1200, 4]
  std::string y = RandomBytes(1200, 2);       // uint8 [1200]
  WriteWhole("d", {"x"}, DType::kInt32, {1200, 4}, x);
  WriteWhole("d", {"y"}, DType::kUInt8, {1200}, y);
  const bool covered = client_->pipelines_in_order();
  const int64_t watches = covered ? ::tdstore::testing::CommandCalls(*redis_, "watch") : 0;
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    IndexSpec index;
    switch (rng() % 4) {
      case 0: {
        const int64_t start = rng() % 10;
        const int64_t stop = 600 + rng() % 601;
        index = {IndexTerm::Slice(start, stop, 1 + rng() % 4)};
        break;
      }
      case 1: {  // many rows, with repeats: the last of each wins
        std::vector<int64_t> rows;
        for (int i = 0; i < 900; ++i) rows.push_back(rng() % 1200);
        index = {IndexTerm::Positions(rows)};
        break;
      }
      case 2: {
        std::vector<bool> mask(1200);
        for (size_t i = 0; i < mask.size(); ++i) mask[i] = rng() % 3 != 0;
        index = {IndexTerm::Mask(mask)};
        break;
      }
      default: {  // sparse
        std::vector<int64_t> rows;
        for (int i = 0; i < 9; ++i) rows.push_back(rng() % 1200);
        index = {IndexTerm::Positions(rows)};
      }
    }
    auto resolved = ResolveIndex(index, {1200});
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    const int64_t n = static_cast<int64_t>(resolved->cells.size());
    const std::string xv = RandomBytes(n * 16, 100 + round);
    const std::string yv = RandomBytes(n, 200 + round);
    auto written = WriteIndexedLeaves(store_.get(), "d", index,
                                      {{{"x"}, DType::kInt32, {n, 4}, xv},
                                       {{"y"}, DType::kUInt8, {n}, yv}});
    ASSERT_TRUE(written.ok()) << written.status();
    for (int64_t i = 0; i < n; ++i) {
      const size_t row = static_cast<size_t>(resolved->cells[i]);
      x.replace(row * 16, 16, xv, i * 16, 16);
      y[row] = yv[i];
    }
    ASSERT_EQ(ReadWhole("d", {"x"}), x) << "round " << round;
    ASSERT_EQ(ReadWhole("d", {"y"}), y) << "round " << round;
  }
  if (covered) {
    EXPECT_GT(::tdstore::testing::CommandCalls(*redis_, "watch"), watches) << "no write took the covering path";
  }
}

// Three writers, each of every third row (rows t, t + 3, ...), at once and
// over and over: each span covers the others' rows, so a read-modify-write
// that did not notice a change in between would put old bytes back over
// another writer's rows. Every row must end as its writer last wrote it.
TEST_F(IndexedStoreTest, ConcurrentDenseWritesOfInterleavedRowsLoseNoRow) {
  constexpr int64_t kRows = 3000;
  constexpr int kRounds = 30;
  ASSERT_TRUE(store_->CreateDict("d", {kRows}, kRows, 1 << 20).ok());
  WriteWhole("d", {"x"}, DType::kInt32, {kRows, 2}, std::string(kRows * 8, '\0'));
  auto fill = [](int32_t v, int64_t n) {
    std::string out(static_cast<size_t>(n) * 8, '\0');
    for (int64_t i = 0; i < 2 * n; ++i) std::memcpy(out.data() + i * 4, &v, 4);
    return out;
  };
  std::vector<std::thread> writers;
  std::vector<absl::Status> failed(3);
  for (int t = 0; t < 3; ++t) {
    writers.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        auto written = WriteIndexedLeaves(
            store_.get(), "d", {IndexTerm::Slice(t, std::nullopt, 3)},
            {{{"x"}, DType::kInt32, {kRows / 3, 2}, fill(1000 * (t + 1) + r, kRows / 3)}});
        if (!written.ok()) {
          failed[t] = written.status();
          return;
        }
      }
    });
  }
  for (std::thread& w : writers) w.join();
  for (const absl::Status& s : failed) ASSERT_TRUE(s.ok()) << s;
  const std::string x = ReadWhole("d", {"x"});
  for (int64_t row = 0; row < kRows; ++row) {
    int32_t a = 0, b = 0;
    std::memcpy(&a, x.data() + row * 8, 4);
    std::memcpy(&b, x.data() + row * 8 + 4, 4);
    const int32_t want = 1000 * static_cast<int32_t>(row % 3 + 1) + kRounds - 1;
    ASSERT_EQ(a, want) << "row " << row;
    ASSERT_EQ(b, want) << "row " << row;
  }
}

// A dense write planned on a generation replaced meanwhile reads a span of
// a key that is gone: stale, and Redis is left byte for byte as it was.
TEST_F(IndexedStoreTest, DenseWriteIntoAReplacedGenerationIsStaleAndWritesNothing) {
  ASSERT_TRUE(store_->CreateDict("d", {600}, 600, 1 << 20).ok());
  WriteWhole("d", {"x"}, DType::kFloat32, {600, 2}, RandomBytes(4800, 1));
  auto old_schema = store_->LoadDict("d");
  ASSERT_TRUE(old_schema.ok());
  WriteWhole("d", {"x"}, DType::kFloat32, {600, 2}, RandomBytes(4800, 3));  // replaces x
  const std::vector<std::string> before = Snapshot();
  auto resolved = ResolveIndex({IndexTerm::Slice(0, std::nullopt, 2)}, {600});
  ASSERT_TRUE(resolved.ok());
  absl::Status write = WriteIndexed(*store_, *old_schema, *resolved,
                                    {{old_schema->Find({"x"}), RandomBytes(300 * 8, 4)}});
  EXPECT_TRUE(IsStale(write)) << write;
  EXPECT_EQ(Snapshot(), before) << "a stale dense write changed Redis";
}

// A real client whose pipelines note the most commands ever outstanding
// against the window they were made with. A Send past the window makes the
// pipeline read a reply before it can queue more: a Redis round trip in the
// middle of a call that meant to send everything at once.
class WindowWatchingClient final : public redis::RedisClient {
 public:
  explicit WindowWatchingClient(redis::RedisClient* real) : real_(real) {}
  int overflows() const { return overflows_; }
  int pipelines() const { return pipelines_; }

  absl::StatusOr<redis::Reply> Call(std::string_view key,
                                    absl::Span<const std::string_view> argv) override {
    return real_->Call(key, argv);
  }
  absl::StatusOr<redis::Reply> Eval(const redis::Script& script,
                                    absl::Span<const std::string_view> keys,
                                    absl::Span<const std::string_view> args) override {
    return real_->Eval(script, keys, args);
  }
  absl::StatusOr<std::vector<redis::Reply>> CallOnEveryMaster(
      absl::Span<const std::string_view> argv) override {
    return real_->CallOnEveryMaster(argv);
  }
  absl::StatusOr<redis::Reply> EvalDurable(const redis::Script& script,
                                           absl::Span<const std::string_view> keys,
                                           absl::Span<const std::string_view> args,
                                           int replicas,
                                           std::chrono::milliseconds timeout) override {
    return real_->EvalDurable(script, keys, args, replicas, timeout);
  }
  absl::StatusOr<std::unique_ptr<redis::Pipeline>> NewPipeline(int max_outstanding) override {
    auto pipe = real_->NewPipeline(max_outstanding);
    if (!pipe.ok()) return pipe.status();
    ++pipelines_;
    return std::unique_ptr<redis::Pipeline>(
        new Watched(*std::move(pipe), max_outstanding, &overflows_));
  }
  bool pipelines_in_order() const override { return real_->pipelines_in_order(); }
  absl::StatusOr<std::unique_ptr<redis::Connection>> ConnectForSubscribe() override {
    return real_->ConnectForSubscribe();
  }
  std::string Describe() const override { return real_->Describe(); }

 private:
  class Watched final : public redis::Pipeline {
   public:
    Watched(std::unique_ptr<redis::Pipeline> real, int window, int* overflows)
        : real_(std::move(real)), window_(window), overflows_(overflows) {}
    absl::Status Send(std::string_view key, absl::Span<const std::string_view> argv) override {
      if (real_->outstanding() >= window_) ++*overflows_;
      return real_->Send(key, argv);
    }
    absl::Status SendOpen(std::string_view key, absl::Span<const std::string_view> head,
                          int64_t value_bytes, absl::Span<const std::string_view> tail) override {
      if (real_->outstanding() >= window_) ++*overflows_;
      return real_->SendOpen(key, head, value_bytes, tail);
    }
    absl::Status SendValue(std::string_view bytes) override { return real_->SendValue(bytes); }
    absl::Status Flush() override { return real_->Flush(); }
    absl::StatusOr<redis::Reply> Receive() override { return real_->Receive(); }
    int outstanding() const override { return real_->outstanding(); }
    absl::Status WaitReplicas(int replicas, std::chrono::milliseconds timeout) override {
      return real_->WaitReplicas(replicas, timeout);
    }

   private:
    std::unique_ptr<redis::Pipeline> real_;
    const int window_;
    int* const overflows_;
  };
  redis::RedisClient* const real_;
  int overflows_ = 0;
  int pipelines_ = 0;
};

TEST_F(IndexedStoreTest, AnIndexedCallSendsItsProbeBlocksAndVersionWithoutWaiting) {
  // Indexed reads and writes of one to three blocks, from a cached schema:
  // each sends the probe, its blocks (MULTI ... EXEC) and, on standalone
  // Redis, the version's HGET in one go, and only then reads. None may fill its pipeline's
  // window before it has sent them all.
  ASSERT_TRUE(store_->CreateDict("d", {12, 2}, 4, 0).ok());
  WriteWhole("d", {"x"}, DType::kInt32, {12, 2}, RandomBytes(12 * 2 * 4, 11));
  WriteWhole("d", {"y"}, DType::kUInt8, {12, 2, 3}, RandomBytes(12 * 2 * 3, 12));
  WindowWatchingClient watched(client_.get());
  StoreOptions options;
  options.ns = ns_;
  DictStore store(&watched, options);
  auto schema = store.LoadDict("d");
  ASSERT_TRUE(schema.ok()) << schema.status();
  store.Remember(*schema);  // the cached schema: every call probes it
  const std::vector<IndexSpec> indices = {{IndexTerm::Int(5)},
                                          {IndexTerm::Positions({0, 11, 3, 3, 7})},
                                          {IndexTerm::Slice(1, std::nullopt, 2)}};
  for (const IndexSpec& index : indices) {
    auto read = ReadIndexedLeaves(store, {"d", schema->meta.id}, index, {});
    ASSERT_TRUE(read.ok()) << read.status();
    // Only one connection runs a pipeline in order: there, the version
    // rides behind the blocks (a cluster reads it once the replies are in).
    const bool in_order = watched.pipelines_in_order();
    EXPECT_EQ(read->version_after.has_value(), in_order);
    auto resolved = ResolveIndex(index, {12, 2});
    ASSERT_TRUE(resolved.ok());
    std::optional<SchemaVersionSeen> after;
    MemoryBudget::Lease lease = store.budget().Empty();
    auto written = WriteIndexedLeaves(
        &store, {"d", schema->meta.id}, index,
        {{{"x"}, DType::kInt32, resolved->result_shape,
          RandomBytes(resolved->cells.size() * 4, 13)}},
        lease, nullptr, &after);
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_EQ(after.has_value(), in_order);
  }
  // A dense write (200 ranges of one key: on standalone Redis its span read
  // under WATCH, then one transaction) sends each of its two round trips
  // whole too.
  ASSERT_TRUE(store_->CreateDict("e", {400}, 400, 0).ok());
  WriteWhole("e", {"x"}, DType::kInt32, {400}, RandomBytes(400 * 4, 14));
  auto dense = store.LoadDict("e");
  ASSERT_TRUE(dense.ok()) << dense.status();
  store.Remember(*dense);
  std::optional<SchemaVersionSeen> after;
  MemoryBudget::Lease lease = store.budget().Empty();
  auto written = WriteIndexedLeaves(&store, {"e", dense->meta.id},
                                    {IndexTerm::Slice(0, std::nullopt, 2)},
                                    {{{"x"}, DType::kInt32, {200}, RandomBytes(200 * 4, 15)}},
                                    lease, nullptr, &after);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(after.has_value(), watched.pipelines_in_order());
  EXPECT_GE(watched.pipelines(), 7);
  EXPECT_EQ(watched.overflows(), 0) << "a Send waited for a reply (a round trip)";
}

}  // namespace
}  // namespace tdstore::store
