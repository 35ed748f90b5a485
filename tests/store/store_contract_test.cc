// The Store contract (server/store/store.h), held against every store the
// same way: through the interface only, never through what a store keeps
// inside. ctest runs it on the Redis store over a real redis-server and a
// real Redis Cluster (tests/store/store_under_test.h). Indexed reads and
// writes are checked on random cases against a plain reference model of the
// leaf's rows kept here.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/store/store.h"
#include "tests/store/store_under_test.h"

namespace tdstore::store {
namespace {

using testing::MakeStoreUnderTest;
using testing::StoreUnderTest;

std::string F32Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::vector<float> AsF32(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

// Collects a whole-leaf read: display path -> bytes.
class CollectSink final : public LeafSink {
 public:
  absl::Status Begin(const DictSchema&, const std::vector<const Leaf*>& leaves) override {
    for (const Leaf* leaf : leaves) order.push_back(PathToDisplay(leaf->path));
    return absl::OkStatus();
  }
  absl::Status BeginLeaf(const Leaf& leaf) override {
    current_ = PathToDisplay(leaf.path);
    bytes[current_];
    return absl::OkStatus();
  }
  absl::Status Data(SharedBytes data) override {
    bytes[current_].append(data.bytes);
    return absl::OkStatus();
  }
  std::vector<std::string> order;
  std::map<std::string, std::string> bytes;

 private:
  std::string current_;
};

struct WholeLeaf {
  LeafPath path;
  DType dtype = DType::kFloat32;
  Shape shape;
  std::string bytes;
};

class StoreContract : public ::testing::Test {
 protected:
  void SetUp() override { Open(StoreOptions{}); }

  void Open(StoreOptions options) {
    sut_.reset();
    auto sut = MakeStoreUnderTest(std::move(options));
    ASSERT_TRUE(sut.ok()) << sut.status();
    sut_ = *std::move(sut);
  }

  Store& store() { return sut_->store(); }

  // A dict `name` with batch shape `batch` and float32 leaves of `elems`
  // elements per row, zero-filled.
  DictSchema Create(std::string_view name, Shape batch,
                    const std::vector<std::pair<std::string, int64_t>>& leaves = {}) {
    NewDict spec;
    spec.name = name;
    spec.batch_shape = std::move(batch);
    for (const auto& [leaf, elems] : leaves) {
      spec.leaves.push_back({{leaf}, DType::kFloat32, {elems}});
    }
    auto schema = store().CreateDict(spec);
    EXPECT_TRUE(schema.ok()) << schema.status();
    return schema.ok() ? *schema : DictSchema{};
  }

  absl::StatusOr<CommitResult> Write(const DictRef& ref, const std::vector<WholeLeaf>& leaves,
                                     bool commit = true) {
    auto write = store().BeginWrite(ref);
    if (!write.ok()) return write.status();
    for (const WholeLeaf& leaf : leaves) {
      if (auto s = (*write)->BeginLeaf(leaf.path, LeafRecord{leaf.dtype, leaf.shape, 0},
                                       static_cast<int64_t>(leaf.bytes.size()));
          !s.ok()) {
        return s;
      }
      // In two pieces, so that a store joining pieces is exercised.
      const size_t half = leaf.bytes.size() / 2;
      if (auto s = (*write)->Append(leaf.bytes.substr(0, half)); !s.ok()) return s;
      if (auto s = (*write)->Append(leaf.bytes.substr(half)); !s.ok()) return s;
    }
    if (!commit) return CommitResult{};
    return (*write)->Commit();
  }

  absl::StatusOr<std::map<std::string, std::string>> Read(const DictRef& ref,
                                                          std::vector<LeafPath> paths = {}) {
    CollectSink sink;
    if (auto s = store().Read(ref, paths, sink); !s.ok()) return s;
    return sink.bytes;
  }

  std::vector<float> ReadF32(const DictRef& ref, const LeafPath& leaf) {
    auto all = Read(ref, {leaf});
    EXPECT_TRUE(all.ok()) << all.status();
    if (!all.ok()) return {};
    return AsF32((*all)[PathToDisplay(leaf)]);
  }
  std::vector<float> ReadF32(const DictRef& ref, const std::string& leaf) {
    return ReadF32(ref, LeafPath{leaf});
  }

  std::unique_ptr<StoreUnderTest> sut_;
};

// --- Dicts ----------------------------------------------------------------------

TEST_F(StoreContract, ACreatedDictIsDescribedListedAndReadsZeros) {
  const DictSchema made = Create("d", {6}, {{"obs", 3}, {"act", 1}});
  EXPECT_FALSE(made.meta.id.empty());
  EXPECT_EQ(made.meta.batch_shape, (Shape{6}));
  auto described = store().Describe({"d", made.meta.id});
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->meta.version, made.meta.version);
  ASSERT_NE(described->Find({"obs"}), nullptr);
  EXPECT_EQ(described->Find({"obs"})->record.shape, (Shape{6, 3}));
  EXPECT_EQ(described->Find({"obs"})->record.dtype, DType::kFloat32);
  EXPECT_EQ(ReadF32({"d", made.meta.id}, "obs"), std::vector<float>(18, 0.0f));

  Create("b", {2});
  auto names = store().ListDicts();
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"b", "d"}));

  auto seen = store().SchemaVersion({"d", made.meta.id});
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->id, made.meta.id);
  EXPECT_EQ(seen->version, described->meta.version);
}

TEST_F(StoreContract, ATakenNameIsRefusedAndChangesNothing) {
  const DictSchema made = Create("d", {4}, {{"x", 2}});
  NewDict again;
  again.name = "d";
  again.batch_shape = {9};
  auto refused = store().CreateDict(again);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists) << refused.status();
  auto described = store().Describe({"d", made.meta.id});
  ASSERT_TRUE(described.ok());
  EXPECT_EQ(described->meta.batch_shape, (Shape{4}));
  EXPECT_EQ(described->meta.version, made.meta.version);
}

TEST_F(StoreContract, ARefWithAnOldIdNeverReachesANamesake) {
  const DictSchema first = Create("d", {4}, {{"x", 1}});
  ASSERT_TRUE(store().DeleteDict({"d", first.meta.id}).ok());
  EXPECT_EQ(store().Describe({"d", first.meta.id}).status().code(), absl::StatusCode::kNotFound);
  const DictSchema second = Create("d", {4}, {{"x", 1}});
  EXPECT_NE(second.meta.id, first.meta.id);
  EXPECT_EQ(store().Describe({"d", first.meta.id}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store().DeleteDict({"d", first.meta.id}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Write({"d", first.meta.id}, {{{"x"}, DType::kFloat32, {4, 1}, F32Bytes({1, 2, 3, 4})}})
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadF32({"d", second.meta.id}, "x"), std::vector<float>(4, 0.0f));
  EXPECT_TRUE(store().Describe("d").ok());  // by name alone: whichever dict has it now
}

TEST_F(StoreContract, RenameMovesTheDictAndFreesItsName) {
  const DictSchema made = Create("a", {2}, {{"x", 1}});
  auto renamed = store().RenameDict({"a", made.meta.id}, "b");
  ASSERT_TRUE(renamed.ok()) << renamed.status();
  EXPECT_EQ(renamed->meta.id, made.meta.id);
  EXPECT_EQ(renamed->meta.name, "b");
  EXPECT_EQ(store().Describe("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store().Describe({"b", made.meta.id}).ok());
  Create("c", {1});
  EXPECT_EQ(store().RenameDict({"b", made.meta.id}, "c").status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(StoreContract, MaxDictsIsRefusedBeforeCreating) {
  StoreOptions options;
  options.max_dicts = 2;
  Open(options);
  Create("a", {1});
  Create("b", {1});
  NewDict third;
  third.name = "c";
  third.batch_shape = {1};
  EXPECT_EQ(store().CreateDict(third).status().code(), absl::StatusCode::kResourceExhausted);
  auto names = store().ListDicts();
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), 2u);
}

// --- Whole-leaf writes ------------------------------------------------------------

TEST_F(StoreContract, AWriteIsVisibleAllAtOnceAtItsCommitAndNeverBefore) {
  const DictSchema made = Create("d", {4}, {{"x", 2}});
  const DictRef ref{"d", made.meta.id};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-10, 10);
  std::vector<float> x(8), y(4);
  for (float& f : x) f = value(rng);
  for (float& f : y) f = value(rng);

  // Not committed: nothing changed.
  ASSERT_TRUE(Write(ref, {{{"x"}, DType::kFloat32, {4, 2}, F32Bytes(x)},
                          {{"y"}, DType::kFloat32, {4, 1}, F32Bytes(y)}},
                    /*commit=*/false)
                  .ok());
  auto after_abort = store().Describe(ref);
  ASSERT_TRUE(after_abort.ok());
  EXPECT_EQ(after_abort->meta.version, made.meta.version);
  EXPECT_EQ(after_abort->Find({"y"}), nullptr);
  EXPECT_EQ(ReadF32(ref, "x"), std::vector<float>(8, 0.0f));

  // Committed: both, at a new generation and a newer version.
  auto committed = Write(ref, {{{"x"}, DType::kFloat32, {4, 2}, F32Bytes(x)},
                               {{"y"}, DType::kFloat32, {4, 1}, F32Bytes(y)}});
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_GT(committed->version, made.meta.version);
  ASSERT_EQ(committed->written.size(), 2u);
  EXPECT_NE(committed->written[0].record.generation,
            made.Find({"x"})->record.generation);
  EXPECT_EQ(ReadF32(ref, "x"), x);
  EXPECT_EQ(ReadF32(ref, "y"), y);
  auto described = store().Describe(ref);
  ASSERT_TRUE(described.ok());
  EXPECT_EQ(described->meta.version, committed->version);
}

// LeafWrite::AppendBorrowed: the store is done with the bytes when it
// returns. Each piece is handed over from one scratch buffer that is
// overwritten right after the call, so a store that kept a pointer into it
// would commit the garbage. Random piece sizes, some large enough to start
// the write-behind worker (a large Append first), so that borrowed pieces
// also queue behind steps still running.
TEST_F(StoreContract, BorrowedBytesAreUsedUpBeforeAppendBorrowedReturns) {
  std::mt19937 random(20261205);
  for (int round = 0; round < 4; ++round) {
    const int64_t rows = 2000 + static_cast<int64_t>(random() % 3000);
    const int64_t cols = 64 + static_cast<int64_t>(random() % 200);
    const std::string name = "borrowed" + std::to_string(round);
    DictSchema schema = Create(name, {rows});
    const DictRef ref{name, schema.meta.id};
    std::string expected(static_cast<size_t>(rows * cols * 4), '\0');
    for (char& c : expected) c = static_cast<char>(random());
    auto write = store().BeginWrite(ref);
    ASSERT_TRUE(write.ok()) << write.status();
    ASSERT_TRUE((*write)->BeginLeaf({"x"}, LeafRecord{DType::kFloat32, {rows, cols}, 0},
                                    static_cast<int64_t>(expected.size()))
                    .ok());
    size_t at = 0;
    if (round % 2 == 1) {  // a large owned piece first: the worker starts
      at = std::min(expected.size() / 3, size_t{300} << 10);
      ASSERT_TRUE((*write)->Append(expected.substr(0, at)).ok());
    }
    std::string scratch;
    while (at < expected.size()) {
      const size_t n = std::min(expected.size() - at,
                                size_t{1} + random() % (random() % 2 ? (size_t{600} << 10) : 4096));
      scratch.assign(expected, at, n);
      ASSERT_TRUE((*write)->AppendBorrowed(scratch).ok()) << "round " << round;
      std::fill(scratch.begin(), scratch.end(), '\xEE');
      at += n;
    }
    ASSERT_TRUE((*write)->Commit().ok()) << "round " << round;
    auto got = Read(ref, {{"x"}});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE((*got)["x"] == expected) << "round " << round << ": borrowed bytes changed after return";
  }
}

TEST_F(StoreContract, BadWritesAreRefusedWithNothingVisible) {
  const DictSchema made = Create("d", {4}, {{"x", 2}});
  const DictRef ref{"d", made.meta.id};
  auto expect_nothing = [&] {
    auto described = store().Describe(ref);
    ASSERT_TRUE(described.ok());
    EXPECT_EQ(described->meta.version, made.meta.version);
    EXPECT_EQ(described->leaves.size(), 1u);
    EXPECT_EQ(ReadF32(ref, "x"), std::vector<float>(8, 0.0f));
  };
  // The batch dims do not match the dict's.
  EXPECT_EQ(Write(ref, {{{"x"}, DType::kFloat32, {5, 2}, std::string(40, 'a')}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  expect_nothing();
  // A byte count that is not the shape's.
  {
    auto write = store().BeginWrite(ref);
    ASSERT_TRUE(write.ok());
    EXPECT_EQ((*write)->BeginLeaf({"x"}, LeafRecord{DType::kFloat32, {4, 2}, 0}, 31).code(),
              absl::StatusCode::kInvalidArgument);
  }
  expect_nothing();
  // More bytes than announced, and a commit short of its bytes.
  {
    auto write = store().BeginWrite(ref);
    ASSERT_TRUE(write.ok());
    ASSERT_TRUE((*write)->BeginLeaf({"x"}, LeafRecord{DType::kFloat32, {4, 2}, 0}, 32).ok());
    absl::Status over = (*write)->Append(std::string(33, 'a'));
    if (over.ok()) over = (*write)->Commit().status();
    EXPECT_EQ(over.code(), absl::StatusCode::kInvalidArgument) << over;
  }
  expect_nothing();
  {
    auto write = store().BeginWrite(ref);
    ASSERT_TRUE(write.ok());
    ASSERT_TRUE((*write)->BeginLeaf({"x"}, LeafRecord{DType::kFloat32, {4, 2}, 0}, 32).ok());
    ASSERT_TRUE((*write)->Append(std::string(16, 'a')).ok());
    EXPECT_EQ((*write)->Commit().status().code(), absl::StatusCode::kInvalidArgument);
  }
  expect_nothing();
  // A leaf nested under a leaf.
  EXPECT_EQ(Write(ref, {{{"x", "deeper"}, DType::kFloat32, {4}, std::string(16, 'a')}})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  expect_nothing();
}

// --- Indexed reads and writes, against a reference model --------------------------

// A dim-0 index and the rows it selects, in order.
struct RowIndex {
  plan::IndexSpec spec;
  std::vector<int64_t> rows;
};

RowIndex RandomRowIndex(std::mt19937& rng, int64_t n) {
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_int_distribution<int64_t> row(0, n - 1);
  RowIndex out;
  switch (kind(rng)) {
    case 0: {  // positions, any order, duplicates allowed for reads
      std::vector<int64_t> p(std::uniform_int_distribution<int64_t>(1, n)(rng));
      for (int64_t& v : p) v = row(rng);
      out.rows = p;
      out.spec = {plan::IndexTerm::Positions(p)};
      break;
    }
    case 1: {  // a slice with a step
      const int64_t start = row(rng);
      const int64_t stop = std::uniform_int_distribution<int64_t>(start, n)(rng);
      const int64_t step = std::uniform_int_distribution<int64_t>(1, 3)(rng);
      for (int64_t r = start; r < stop; r += step) out.rows.push_back(r);
      out.spec = {plan::IndexTerm::Slice(start, stop, step)};
      break;
    }
    case 2: {  // a mask
      std::vector<bool> mask(static_cast<size_t>(n));
      for (int64_t r = 0; r < n; ++r) {
        mask[static_cast<size_t>(r)] = (rng() & 1) != 0;
        if (mask[static_cast<size_t>(r)]) out.rows.push_back(r);
      }
      out.spec = {plan::IndexTerm::Mask(mask)};
      break;
    }
    default: {  // one row, from the end
      const int64_t r = row(rng);
      out.rows = {r};
      out.spec = {plan::IndexTerm::Slice(r - n, r - n + 1 == 0 ? std::optional<int64_t>()
                                                                : r - n + 1)};
      break;
    }
  }
  return out;
}

TEST_F(StoreContract, RandomIndexedReadsAndWritesMatchTheReferenceRows) {
  constexpr int64_t kRows = 37;
  constexpr int64_t kElems = 3;
  const DictSchema made = Create("d", {kRows}, {{"x", kElems}});
  const DictRef ref{"d", made.meta.id};
  std::vector<float> model(kRows * kElems, 0.0f);
  std::mt19937 rng(20261204);
  std::uniform_real_distribution<float> value(-100, 100);
  for (int round = 0; round < 40; ++round) {
    // A write of distinct rows (the order of duplicate writes is the
    // store's; this contract does not pin it).
    RowIndex w = RandomRowIndex(rng, kRows);
    std::sort(w.rows.begin(), w.rows.end());
    w.rows.erase(std::unique(w.rows.begin(), w.rows.end()), w.rows.end());
    w.spec = {plan::IndexTerm::Positions(w.rows)};
    std::vector<float> v(w.rows.size() * kElems);
    for (float& f : v) f = value(rng);
    std::vector<IndexedWriteValue> values(1);
    values[0].path = {"x"};
    values[0].dtype = DType::kFloat32;
    values[0].shape = {static_cast<int64_t>(w.rows.size()), kElems};
    values[0].bytes = F32Bytes(v);
    MemoryBudget::Lease lease = store().budget().Empty();
    auto written = store().WriteIndexed(ref, w.spec, values, lease);
    if (w.rows.empty()) {
      // An empty selection writes nothing, or is refused; never corrupts.
      continue;
    }
    ASSERT_TRUE(written.ok()) << written.status();
    for (size_t i = 0; i < w.rows.size(); ++i) {
      std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(i * kElems), kElems,
                  model.begin() + w.rows[i] * kElems);
    }
    // A read of any rows.
    const RowIndex r = RandomRowIndex(rng, kRows);
    auto read = store().ReadIndexed(ref, r.spec, {});
    ASSERT_TRUE(read.ok()) << read.status();
    ASSERT_EQ(read->leaves.size(), 1u);
    std::vector<float> expected;
    for (int64_t row : r.rows) {
      expected.insert(expected.end(), model.begin() + row * kElems,
                      model.begin() + (row + 1) * kElems);
    }
    EXPECT_EQ(AsF32(read->leaves[0].bytes), expected) << "round " << round;
  }
  EXPECT_EQ(ReadF32(ref, "x"), model);
}

// Step slices of every cell size, in both layouts: 1-byte (uint8 [N]),
// 12-byte (float32 [N, 3]) and 16-byte (complex128 [N]) cells; blocks of
// 128 rows cut into 1,000-byte parts, so that a block's rows of one leaf
// span several parts and a row may be split across two. A Redis store sends
// the rows of a step slice as fixed-stride groups (server/lua/
// write_runs.lua); the model here knows nothing of that.
TEST_F(StoreContract, RandomStepSliceWritesOfEveryCellSizeMatchTheReferenceBytes) {
  constexpr int64_t kRows = 300;
  struct Spec {
    const char* name;
    DType dtype;
    Shape element_shape;
    int64_t cell;
  };
  const Spec specs[] = {{"u8", DType::kUInt8, {}, 1},
                        {"f32", DType::kFloat32, {3}, 12},
                        {"c128", DType::kComplex128, {}, 16}};
  for (const DictLayout layout : {DictLayout::kLeaves, DictLayout::kRecord}) {
    SCOPED_TRACE(layout == DictLayout::kRecord ? "record dict" : "default layout");
    const std::string name = layout == DictLayout::kRecord ? "rec" : "d";
    NewDict spec;
    spec.name = name;
    spec.batch_shape = {kRows};
    spec.rows_per_block = 128;
    spec.part_bytes = 1000;
    spec.layout = layout;
    for (const Spec& s : specs) spec.leaves.push_back({{s.name}, s.dtype, s.element_shape});
    auto made = store().CreateDict(spec);
    ASSERT_TRUE(made.ok()) << made.status();
    const DictRef ref{name, made->meta.id};
    std::vector<std::string> model;
    for (const Spec& s : specs) model.emplace_back(static_cast<size_t>(kRows * s.cell), '\0');

    std::mt19937 rng(layout == DictLayout::kRecord ? 33 : 3);
    for (int round = 0; round < 40; ++round) {
      // A slice with a step of 1 to 7 from anywhere, into some of the leaves.
      const int64_t start = std::uniform_int_distribution<int64_t>(-kRows, kRows - 1)(rng);
      const int64_t first = start < 0 ? start + kRows : start;
      const int64_t stop = std::uniform_int_distribution<int64_t>(first + 1, kRows)(rng);
      const int64_t step = std::uniform_int_distribution<int64_t>(1, 7)(rng);
      std::vector<int64_t> rows;
      for (int64_t r = first; r < stop; r += step) rows.push_back(r);
      std::vector<IndexedWriteValue> values;
      std::vector<size_t> which;
      for (size_t l = 0; l < std::size(specs); ++l) {
        if (rng() % 3 == 0 && !(l + 1 == std::size(specs) && which.empty())) continue;
        const Spec& s = specs[l];
        Shape shape = {static_cast<int64_t>(rows.size())};
        shape.insert(shape.end(), s.element_shape.begin(), s.element_shape.end());
        std::string bytes(rows.size() * static_cast<size_t>(s.cell), '\0');
        for (char& c : bytes) c = static_cast<char>(rng());
        values.push_back({{s.name}, s.dtype, shape, bytes});
        which.push_back(l);
      }
      MemoryBudget::Lease lease = store().budget().Empty();
      auto written =
          store().WriteIndexed(ref, {plan::IndexTerm::Slice(start, stop, step)}, values, lease);
      ASSERT_TRUE(written.ok()) << "round " << round << ": " << written.status();
      for (size_t v = 0; v < values.size(); ++v) {
        const int64_t cell = specs[which[v]].cell;
        for (size_t i = 0; i < rows.size(); ++i) {
          model[which[v]].replace(static_cast<size_t>(rows[i] * cell), static_cast<size_t>(cell),
                                  values[v].bytes, i * static_cast<size_t>(cell),
                                  static_cast<size_t>(cell));
        }
      }
      // Every byte of every leaf: a run written past its own bytes, or
      // into the rows between, shows here.
      auto all = Read(ref);
      ASSERT_TRUE(all.ok()) << all.status();
      for (size_t l = 0; l < std::size(specs); ++l) {
        ASSERT_EQ((*all)[specs[l].name], model[l]) << "round " << round << ", leaf " << specs[l].name;
      }
      // And the same slice read back by index.
      auto read = store().ReadIndexed(ref, {plan::IndexTerm::Slice(start, stop, step)}, {});
      ASSERT_TRUE(read.ok()) << read.status();
      for (const auto& leaf : read->leaves) {
        const std::string leaf_name = PathToDisplay(leaf.leaf.path);
        size_t l = 0;
        while (specs[l].name != leaf_name) ++l;
        std::string expected;
        for (int64_t r : rows) {
          expected.append(model[l], static_cast<size_t>(r * specs[l].cell),
                          static_cast<size_t>(specs[l].cell));
        }
        EXPECT_EQ(leaf.bytes, expected) << "round " << round << ", leaf " << leaf_name;
      }
    }
  }
}

TEST_F(StoreContract, ABroadcastValueAndAMissingLeaf) {
  const DictSchema made = Create("d", {5}, {{"x", 2}});
  const DictRef ref{"d", made.meta.id};
  // One row broadcast to three; a leaf that does not exist yet is made
  // zero-filled, then written.
  std::vector<IndexedWriteValue> values(2);
  values[0] = {{"x"}, DType::kFloat32, {2}, F32Bytes({7, 8})};
  values[1] = {{"new"}, DType::kFloat32, {3}, F32Bytes({1, 2, 3})};
  MemoryBudget::Lease lease = store().budget().Empty();
  auto written = store().WriteIndexed(ref, {plan::IndexTerm::Slice(1, 4)}, values, lease);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(ReadF32(ref, "x"), (std::vector<float>{0, 0, 7, 8, 7, 8, 7, 8, 0, 0}));
  EXPECT_EQ(ReadF32(ref, "new"), (std::vector<float>{0, 1, 2, 3, 0}));
  auto described = store().Describe(ref);
  ASSERT_TRUE(described.ok());
  ASSERT_NE(described->Find({"new"}), nullptr);
  EXPECT_EQ(described->Find({"new"})->record.shape, (Shape{5}));
}

TEST_F(StoreContract, BadIndexedWritesAreRefusedWithNothingWritten) {
  const DictSchema made = Create("d", {4}, {{"x", 2}});
  const DictRef ref{"d", made.meta.id};
  auto write = [&](plan::IndexSpec index, IndexedWriteValue value) {
    MemoryBudget::Lease lease = store().budget().Empty();
    return store().WriteIndexed(ref, index, {value}, lease).status().code();
  };
  const IndexedWriteValue row{{"x"}, DType::kFloat32, {2}, F32Bytes({1, 2})};
  EXPECT_EQ(write({plan::IndexTerm::Int(4)}, row), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(write({plan::IndexTerm::Positions({0, 9})}, row), absl::StatusCode::kOutOfRange);
  IndexedWriteValue wrong_dtype = row;
  wrong_dtype.dtype = DType::kInt32;
  EXPECT_EQ(write({plan::IndexTerm::Int(0)}, wrong_dtype), absl::StatusCode::kInvalidArgument);
  IndexedWriteValue wrong_shape{{"x"}, DType::kFloat32, {3}, F32Bytes({1, 2, 3})};
  EXPECT_EQ(write({plan::IndexTerm::Int(0)}, wrong_shape), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(write({plan::IndexTerm::Slice(0, 2, 0)}, row), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadF32(ref, "x"), std::vector<float>(8, 0.0f));
  auto described = store().Describe(ref);
  ASSERT_TRUE(described.ok());
  EXPECT_EQ(described->meta.version, made.meta.version);
}

TEST_F(StoreContract, AnIndexedWriteSessionHoldsItsValuesUntilCommit) {
  StoreOptions options;
  options.max_indexed_bytes = 64;
  Open(options);
  const DictSchema made = Create("d", {4}, {{"x", 2}});
  const DictRef ref{"d", made.meta.id};
  {
    auto write = store().BeginIndexedWrite(ref, plan::IndexSpec{plan::IndexTerm::Int(2)}, {});
    ASSERT_TRUE(write->BeginValue({{"x"}, DType::kFloat32, {2}, LeafKind::kTensor, "", 8}).ok());
    ASSERT_TRUE(write->Append(F32Bytes({5})).ok());
    ASSERT_TRUE(write->Append(F32Bytes({6})).ok());
    EXPECT_EQ(ReadF32(ref, "x"), std::vector<float>(8, 0.0f));  // nothing before Commit
    auto done = write->Commit();
    ASSERT_TRUE(done.ok()) << done.status();
  }
  EXPECT_EQ(ReadF32(ref, "x"), (std::vector<float>{0, 0, 0, 0, 5, 6, 0, 0}));
  // More than max_indexed_bytes is refused as it is announced.
  auto big = store().BeginIndexedWrite(ref, plan::IndexSpec{plan::IndexTerm::All()}, {});
  EXPECT_EQ(big->BeginValue({{"x"}, DType::kFloat32, {4, 2}, LeafKind::kTensor, "", 65}).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(StoreContract, AnAppendStreamWritesWellFormedBatchesOnly) {
  const DictSchema made = Create("d", {6}, {{"x", 2}});
  const DictRef ref{"d", made.meta.id};
  EXPECT_EQ(store().OpenAppend(ref, {{"nope"}}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store().OpenAppend(ref, {}).status().code(), absl::StatusCode::kInvalidArgument);
  auto append = store().OpenAppend(ref, {{"x"}});
  ASSERT_TRUE(append.ok()) << append.status();
  ASSERT_TRUE((*append)->Append(1, 2, {F32Bytes({1, 2, 3, 4})}).ok());
  EXPECT_EQ((*append)->Append(5, 2, {F32Bytes({1, 2, 3, 4})}).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*append)->Append(0, 1, {F32Bytes({1, 2, 3})}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*append)->Append(0, 1, {F32Bytes({1, 2}), F32Bytes({1, 2})}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadF32(ref, "x"), (std::vector<float>{0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0}));
}

TEST_F(StoreContract, ARecordDictKeepsEachRowsLeavesTogetherFromItsFirstLeaves) {
  NewDict spec;
  spec.name = "rec";
  spec.batch_shape = {5};
  spec.layout = DictLayout::kRecord;
  spec.leaves = {{{"obs"}, DType::kFloat32, {3}}, {{"act"}, DType::kInt64, {}}};
  auto made = store().CreateDict(spec);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->meta.layout, DictLayout::kRecord);
  const Leaf* obs = made->Find({"obs"});
  const Leaf* act = made->Find({"act"});
  ASSERT_TRUE(obs != nullptr && act != nullptr);
  // Each row's leaves side by side, in the order given: 12 + 8 bytes.
  EXPECT_EQ(obs->record.in_record, (LeafRecord::InRecord{0, 20}));
  EXPECT_EQ(act->record.in_record, (LeafRecord::InRecord{12, 20}));
  EXPECT_EQ(obs->record.generation, act->record.generation);
  EXPECT_EQ(made->StoredBytes(), 5 * 20);
  const DictRef ref{"rec", made->meta.id};

  // Rows of both leaves written and read by index.
  const int64_t two[] = {7, -7};
  std::vector<IndexedWriteValue> values{
      {{"obs"}, DType::kFloat32, {2, 3}, F32Bytes({1, 2, 3, 4, 5, 6})},
      {{"act"}, DType::kInt64, {2}, std::string(reinterpret_cast<const char*>(two), 16)}};
  MemoryBudget::Lease lease = store().budget().Empty();
  ASSERT_TRUE(store().WriteIndexed(ref, {plan::IndexTerm::Positions({4, 1})}, values, lease).ok());
  EXPECT_EQ(ReadF32(ref, "obs"),
            (std::vector<float>{0, 0, 0, 4, 5, 6, 0, 0, 0, 0, 0, 0, 1, 2, 3}));
  auto rows = store().ReadIndexed(ref, {plan::IndexTerm::Int(4)}, {});
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->leaves.size(), 2u);
  for (const auto& leaf : rows->leaves) {
    if (leaf.leaf.path == LeafPath{"act"}) {
      int64_t v = 0;
      ASSERT_EQ(leaf.bytes.size(), 8u);
      std::memcpy(&v, leaf.bytes.data(), 8);
      EXPECT_EQ(v, 7);
    } else {
      EXPECT_EQ(AsF32(leaf.bytes), (std::vector<float>{1, 2, 3}));
    }
  }

  // Formed once: a leaf made later keeps rows of its own.
  values = {{{"late"}, DType::kFloat32, {}, F32Bytes({9})}};
  MemoryBudget::Lease lease2 = store().budget().Empty();
  ASSERT_TRUE(store().WriteIndexed(ref, {plan::IndexTerm::Int(0)}, values, lease2).ok());
  auto described = store().Describe(ref);
  ASSERT_TRUE(described.ok());
  ASSERT_NE(described->Find({"late"}), nullptr);
  EXPECT_FALSE(described->Find({"late"})->record.InSharedRecord());
  EXPECT_EQ(described->Find({"obs"})->record.in_record, (LeafRecord::InRecord{0, 20}));
  EXPECT_EQ(ReadF32(ref, "late"), (std::vector<float>{9, 0, 0, 0, 0}));
  EXPECT_EQ(described->StoredBytes(), 5 * 20 + 5 * 4);
}

// --- Leaves -------------------------------------------------------------------------

TEST_F(StoreContract, DeleteAndRenameLeavesAllOrNothing) {
  const DictSchema made = Create("d", {2}, {{"a", 1}, {"b", 1}});
  const DictRef ref{"d", made.meta.id};
  ASSERT_TRUE(Write(ref, {{{"n", "c"}, DType::kFloat32, {2}, F32Bytes({1, 2})}}).ok());
  // One missing path: nothing is deleted.
  EXPECT_EQ(store().DeleteLeaves(ref, {{"a"}, {"missing"}}).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(store().Describe(ref)->Find({"a"}) != nullptr);
  auto removed = store().DeleteLeaves(ref, {{"a"}});
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->paths, (std::vector<LeafPath>{{"a"}}));

  auto moved = store().RenameLeaves(ref, {"n"}, {"m"}, false);
  ASSERT_TRUE(moved.ok()) << moved.status();
  ASSERT_EQ(moved->moved.size(), 1u);
  EXPECT_EQ(moved->moved[0].second, (LeafPath{"m", "c"}));
  EXPECT_EQ(ReadF32(ref, LeafPath{"m", "c"}), (std::vector<float>{1, 2}));
  EXPECT_EQ(store().RenameLeaves(ref, {"b"}, {"m", "c"}, false).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store().RenameLeaves(ref, {"zz"}, {"y"}, false).status().code(),
            absl::StatusCode::kNotFound);
  auto replaced = store().RenameLeaves(ref, {"b"}, {"m", "c"}, true);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(replaced->replaced, (std::vector<LeafPath>{{"m", "c"}}));
  EXPECT_EQ(ReadF32(ref, LeafPath{"m", "c"}), (std::vector<float>{0, 0}));
}

TEST_F(StoreContract, CopyAndFillLeaves) {
  const DictSchema src = Create("src", {3}, {{"x", 1}});
  ASSERT_TRUE(Write({"src", src.meta.id}, {{{"x"}, DType::kFloat32, {3, 1}, F32Bytes({1, 2, 3})}})
                  .ok());
  const DictSchema dst = Create("dst", {3});
  auto copied = store().CopyLeaves({"src", src.meta.id}, {"x"}, {"dst", dst.meta.id}, {"y"});
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(ReadF32({"dst", dst.meta.id}, "y"), (std::vector<float>{1, 2, 3}));

  const float nine = 9;
  std::vector<Fill> fills{{{"y"}, DType::kFloat32, std::string(reinterpret_cast<const char*>(&nine), 4)}};
  plan::IndexSpec rows{plan::IndexTerm::Positions({0, 2})};
  ASSERT_TRUE(store().FillLeaves({"dst", dst.meta.id}, fills, &rows).ok());
  EXPECT_EQ(ReadF32({"dst", dst.meta.id}, "y"), (std::vector<float>{9, 2, 9}));
  ASSERT_TRUE(store().FillLeaves({"dst", dst.meta.id}, fills, nullptr).ok());
  EXPECT_EQ(ReadF32({"dst", dst.meta.id}, "y"), (std::vector<float>{9, 9, 9}));
  // A dtype that is not the leaf's: refused, nothing written.
  std::vector<Fill> wrong{{{"y"}, DType::kInt32, std::string(4, '\0')}};
  EXPECT_EQ(store().FillLeaves({"dst", dst.meta.id}, wrong, nullptr).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadF32({"dst", dst.meta.id}, "y"), (std::vector<float>{9, 9, 9}));
  // A dict made as a copy.
  NewDict spec;
  spec.name = "copy";
  spec.copy_from = CopySource{{"src", src.meta.id}, {}};
  auto made = store().CreateDict(spec);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(ReadF32({"copy", made->meta.id}, "x"), (std::vector<float>{1, 2, 3}));
}

TEST_F(StoreContract, ResizeKeepsRowsAndZeroesNewOnes) {
  const DictSchema made = Create("d", {3}, {{"x", 2}});
  const DictRef ref{"d", made.meta.id};
  ASSERT_TRUE(Write(ref, {{{"x"}, DType::kFloat32, {3, 2}, F32Bytes({1, 2, 3, 4, 5, 6})}}).ok());
  auto grown = store().Resize(ref, 5);
  ASSERT_TRUE(grown.ok()) << grown.status();
  EXPECT_EQ(grown->meta.batch_shape, (Shape{5}));
  EXPECT_EQ(grown->Find({"x"})->record.shape, (Shape{5, 2}));
  EXPECT_EQ(ReadF32(ref, "x"), (std::vector<float>{1, 2, 3, 4, 5, 6, 0, 0, 0, 0}));
  auto shrunk = store().Resize(ref, 2);
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  EXPECT_EQ(ReadF32(ref, "x"), (std::vector<float>{1, 2, 3, 4}));
  // Grown again, the rows cut off read zeros, not their old bytes.
  ASSERT_TRUE(store().Resize(ref, 3).ok());
  EXPECT_EQ(ReadF32(ref, "x"), (std::vector<float>{1, 2, 3, 4, 0, 0}));
  EXPECT_EQ(store().Resize(ref, -1).status().code(), absl::StatusCode::kInvalidArgument);
  const DictSchema scalar = Create("s", {});
  EXPECT_EQ(store().Resize({"s", scalar.meta.id}, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// --- Lock, attributes, counters, rings ------------------------------------------------

TEST_F(StoreContract, ALockedDictKeepsItsLeavesButTakesTheirRows) {
  const DictSchema made = Create("d", {2}, {{"x", 1}});
  const DictRef ref{"d", made.meta.id};
  auto locked = store().SetLocked(ref, true);
  ASSERT_TRUE(locked.ok()) << locked.status();
  EXPECT_TRUE(locked->meta.locked);
  EXPECT_GT(locked->meta.version, made.meta.version);
  EXPECT_EQ(Write(ref, {{{"y"}, DType::kFloat32, {2}, F32Bytes({1, 2})}}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store().DeleteLeaves(ref, {{"x"}}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Same dtype and shape: rows may change.
  ASSERT_TRUE(Write(ref, {{{"x"}, DType::kFloat32, {2, 1}, F32Bytes({3, 4})}}).ok());
  EXPECT_EQ(ReadF32(ref, "x"), (std::vector<float>{3, 4}));
  ASSERT_TRUE(store().SetLocked(ref, false).ok());
  EXPECT_TRUE(Write(ref, {{{"y"}, DType::kFloat32, {2}, F32Bytes({1, 2})}}).ok());
}

TEST_F(StoreContract, AttributesChangeWholeAndMoveTheVersion) {
  const DictSchema made = Create("d", {1});
  const DictRef ref{"d", made.meta.id};
  AttrsUpdate update;
  update.set = {{"a", "1"}, {"b", "2"}};
  auto set = store().UpdateAttrs(ref, update);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->attrs, (std::map<std::string, std::string>{{"a", "1"}, {"b", "2"}}));
  EXPECT_GT(set->meta.version, made.meta.version);
  AttrsUpdate both;
  both.set = {{"a", "x"}};
  both.remove = {"a"};
  EXPECT_EQ(store().UpdateAttrs(ref, both).status().code(), absl::StatusCode::kInvalidArgument);
  AttrsUpdate remove;
  remove.remove = {"a", "absent"};
  auto removed = store().UpdateAttrs(ref, remove);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->attrs, (std::map<std::string, std::string>{{"b", "2"}}));
  EXPECT_EQ(store().Describe(ref)->attrs, removed->attrs);
}

TEST_F(StoreContract, CountersAddCompareAndSwapAndRefuseOverflow) {
  const DictSchema made = Create("d", {1});
  const DictRef ref{"d", made.meta.id};
  auto op = [&](CounterOp::Kind kind, int64_t a, int64_t b = 0) {
    CounterOp o;
    o.kind = kind;
    o.name = "c";
    o.delta = a;
    o.expected = a;
    o.new_value = b;
    return store().Counter(ref, o);
  };
  EXPECT_EQ(op(CounterOp::Kind::kGet, 0)->value, 0);
  EXPECT_EQ(op(CounterOp::Kind::kAdd, 5)->value, 5);
  EXPECT_EQ(op(CounterOp::Kind::kAdd, -2)->value, 3);
  auto missed = op(CounterOp::Kind::kCas, 4, 10);
  ASSERT_TRUE(missed.ok());
  EXPECT_FALSE(missed->swapped);
  EXPECT_EQ(missed->value, 3);
  auto hit = op(CounterOp::Kind::kCas, 3, std::numeric_limits<int64_t>::max());
  ASSERT_TRUE(hit.ok());
  EXPECT_TRUE(hit->swapped);
  EXPECT_EQ(op(CounterOp::Kind::kAdd, 1).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(op(CounterOp::Kind::kGet, 0)->value, std::numeric_limits<int64_t>::max());
}

// VersionAfter (store_values.h): a version a call's result carries was read
// at or after the call took effect, so with nothing else changing the dict
// it is the version now; never an older one. The memory store and a
// standalone Redis read it in the call's own step for indexed reads,
// indexed writes and counters; a cluster for counters (their script).
TEST_F(StoreContract, AVersionReadAfterACallIsTheVersionNow) {
  const DictSchema made = Create("d", {4}, {{"x", 2}});
  const DictRef ref{"d", made.meta.id};
  const std::string backend = sut_->backend();
  int carried = 0;
  auto check = [&](const std::optional<SchemaVersionSeen>& after, const std::string& call) {
    auto now = store().SchemaVersion(ref);
    ASSERT_TRUE(now.ok()) << now.status();
    if (!after) return;
    ++carried;
    EXPECT_EQ(after->id, made.meta.id) << call;
    EXPECT_EQ(after->version, now->version) << call;
  };
  auto read = store().ReadIndexed(ref, {plan::IndexTerm::Positions({3, 0})}, {});
  ASSERT_TRUE(read.ok()) << read.status();
  check(read->version_after, "an indexed read");
  MemoryBudget::Lease lease = store().budget().Empty();
  std::vector<IndexedWriteValue> values(1);
  values[0] = {{"x"}, DType::kFloat32, {2}, F32Bytes({1, 2})};
  auto written = store().WriteIndexed(ref, {plan::IndexTerm::Int(1)}, values, lease);
  ASSERT_TRUE(written.ok()) << written.status();
  check(written->version_after, "an indexed write");
  // A write that creates a leaf moves the version: the one after is the new.
  values[0] = {{"y"}, DType::kFloat32, {}, F32Bytes({5})};
  auto creating = store().WriteIndexed(ref, {plan::IndexTerm::Int(2)}, values, lease);
  ASSERT_TRUE(creating.ok()) << creating.status();
  check(creating->version_after, "an indexed write that creates a leaf");
  if (creating->version_after) {
    EXPECT_GT(creating->version_after->version, made.meta.version);
  }
  for (CounterOp::Kind kind :
       {CounterOp::Kind::kAdd, CounterOp::Kind::kGet, CounterOp::Kind::kCas}) {
    CounterOp op;
    op.kind = kind;
    op.name = "c";
    op.delta = 2;
    op.expected = 2;
    op.new_value = 7;
    auto counted = store().Counter(ref, op);
    ASSERT_TRUE(counted.ok()) << counted.status();
    ASSERT_TRUE(counted->version_after.has_value()) << "a counter on " << backend;
    check(counted->version_after, "a counter");
  }
  if (backend != "cluster") {
    EXPECT_EQ(carried, 6) << backend;
  }
}

TEST_F(StoreContract, RingAppendsWrapAndCount) {
  const DictSchema made = Create("d", {4}, {{"x", 1}});
  const DictRef ref{"d", made.meta.id};
  for (int i = 0; i < 3; ++i) {
    std::vector<IndexedWriteValue> values{{{"x"}, DType::kFloat32, {3, 1},
                                           F32Bytes({float(3 * i), float(3 * i + 1),
                                                     float(3 * i + 2)})}};
    MemoryBudget::Lease lease = store().budget().Empty();
    auto appended = store().AppendToRing(ref, {"cursor", 3, "count"}, values, lease);
    ASSERT_TRUE(appended.ok()) << appended.status();
    EXPECT_EQ(appended->start, 3 * i);
    EXPECT_EQ(appended->count_value, 3 * (i + 1));
  }
  // Rows 0..8 went to (row mod 4): 8, 5, 6, 7 remain.
  EXPECT_EQ(ReadF32(ref, "x"), (std::vector<float>{8, 5, 6, 7}));
  // Too many rows: refused, the cursor unchanged.
  std::vector<IndexedWriteValue> big{{{"x"}, DType::kFloat32, {5, 1}, std::string(20, '\0')}};
  MemoryBudget::Lease lease = store().budget().Empty();
  EXPECT_EQ(store().AppendToRing(ref, {"cursor", 5, ""}, big, lease).status().code(),
            absl::StatusCode::kInvalidArgument);
  CounterOp get;
  get.name = "cursor";
  EXPECT_EQ(store().Counter(ref, get)->value, 9);
}

// --- Quotas -------------------------------------------------------------------------

TEST_F(StoreContract, ADictQuotaRefusesBeforeWritingAnything) {
  StoreOptions options;
  options.dict_quota_bytes = 64;
  Open(options);
  const DictSchema made = Create("d", {4}, {{"x", 2}});  // 32 bytes
  const DictRef ref{"d", made.meta.id};
  EXPECT_EQ(Write(ref, {{{"y"}, DType::kFloat32, {4, 3}, std::string(48, 'a')}}).status().code(),
            absl::StatusCode::kResourceExhausted);
  auto described = store().Describe(ref);
  ASSERT_TRUE(described.ok());
  EXPECT_EQ(described->Find({"y"}), nullptr);
  EXPECT_EQ(described->meta.version, made.meta.version);
  EXPECT_TRUE(Write(ref, {{{"y"}, DType::kFloat32, {4, 2}, std::string(32, 'a')}}).ok());
}

// --- Watch ----------------------------------------------------------------------------

// What a listener was told, waited on with a deadline (never a sleep).
class Heard {
 public:
  SchemaListener Listener() {
    return [this](const absl::StatusOr<DictSchema>& event) {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(event);
      changed_.notify_all();
    };
  }
  // The first event after those already taken that `match` accepts.
  std::optional<absl::StatusOr<DictSchema>> WaitFor(
      const std::function<bool(const absl::StatusOr<DictSchema>&)>& match) {
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      while (!events_.empty()) {
        absl::StatusOr<DictSchema> e = events_.front();
        events_.pop_front();
        if (match(e)) return e;
      }
      if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) return std::nullopt;
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<absl::StatusOr<DictSchema>> events_;
};

TEST_F(StoreContract, AWatcherIsToldEveryChangeThenTheDeletion) {
  const DictSchema made = Create("d", {2}, {{"x", 1}});
  const DictRef ref{"d", made.meta.id};
  EXPECT_EQ(store().Watch("d", [](const absl::StatusOr<DictSchema>&) {}).status().code(),
            absl::StatusCode::kInvalidArgument);  // a watch needs the id
  Heard heard;
  auto token = store().Watch(ref, heard.Listener());
  ASSERT_TRUE(token.ok()) << token.status();
  auto first = heard.WaitFor([](const auto& e) { return e.ok(); });
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ((*first)->meta.id, made.meta.id);

  ASSERT_TRUE(Write(ref, {{{"y"}, DType::kFloat32, {2}, F32Bytes({1, 2})}}).ok());
  auto with_y = heard.WaitFor([](const auto& e) { return e.ok() && e->Find({"y"}) != nullptr; });
  ASSERT_TRUE(with_y.has_value()) << "the new leaf was never reported";

  ASSERT_TRUE(store().DeleteDict(ref).ok());
  auto gone = heard.WaitFor([](const auto& e) { return !e.ok(); });
  ASSERT_TRUE(gone.has_value()) << "the deletion was never reported";
  EXPECT_EQ(gone->status().code(), absl::StatusCode::kNotFound);
  store().Unwatch(*token);
}

}  // namespace
}  // namespace tdstore::store
