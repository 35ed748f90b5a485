// Record dicts (CreateOptions::layout = kRecord): every row's leaves in one
// record. Their rows must read and write exactly as a per-leaf dict's on
// random indices; whole-leaf reads cut the leaf out of the records; the
// record is formed once and then refuses what would need another (whole
// writes, fills, a new leaf), writing nothing; deleting, renaming and
// resizing keep the other leaves' rows; nothing is left behind; and a
// sample costs at most one GETRANGE per row. Through the libtorch client,
// on both back ends.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tdstore/client.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/expect_error.h"
#include "tests/support/redis_cluster.h"
#include "tests/e2e/tensor_testing.h"

namespace tdstore::testing {
namespace {

const std::vector<Client::LeafSpec> kSchema = {
    {"obs", at::kFloat, {5}},
    {"action", at::kLong, {2}},
    {"reward", at::kFloat, {}},
    {"done", at::kBool, {}},
    {Key({"next", "obs"}), at::kFloat, {5}},
};

CreateOptions RecordOptions(int64_t rows_per_block) {
  CreateOptions options;
  options.rows_per_block = rows_per_block;
  options.layout = Layout::kRecord;
  return options;
}

// Random values for every leaf of kSchema at `rows` rows.
std::map<Key, at::Tensor> RandomRows(int64_t rows, uint32_t seed) {
  std::map<Key, at::Tensor> out;
  for (const Client::LeafSpec& spec : kSchema) {
    std::vector<int64_t> shape{rows};
    shape.insert(shape.end(), spec.element_shape.begin(), spec.element_shape.end());
    out[spec.path] = RandomTensor(spec.dtype, shape, seed++);
  }
  return out;
}

// A random index over batch dim 0 of `n` rows: an int, a slice with a
// step, positions (with repeats) or a mask.
Index RandomIndex(std::mt19937& rng, int64_t n) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  switch (pick(0, 3)) {
    case 0:
      return Index(pick(-n, n - 1));
    case 1: {
      const int64_t start = pick(0, n - 1);
      return Index(Slice(start, pick(start, n), pick(1, 4)));
    }
    case 2: {
      std::vector<int64_t> positions;
      for (int64_t i = pick(1, 20); i > 0; --i) positions.push_back(pick(0, n - 1));
      return Index(positions);
    }
    default: {
      at::Tensor mask = at::zeros({n}, at::kBool);
      for (int64_t i = pick(1, 20); i > 0; --i) mask[pick(0, n - 1)] = true;
      return Index(mask);
    }
  }
}

// Rows an index selects: 0 dims for an int (one row, no batch dim left).
at::Tensor Selected(Dict& dict, const Index& index) {
  return dict.index(index, {"reward"}).at("reward");
}

void ExpectSameLeaves(const LocalDict& a, const LocalDict& b, const std::string& what) {
  ASSERT_EQ(a.leaves.size(), b.leaves.size()) << what;
  for (const auto& [path, tensor] : a.leaves) {
    ASSERT_TRUE(b.contains(path)) << what << " " << path.str();
    EXPECT_TRUE(SameBytes(tensor, b.at(path))) << what << " " << path.str();
  }
}

std::set<std::string> BlockKeysOf(const std::string& id) {
  std::set<std::string> out;
  for (const auto& [key, _] : NamespaceSnapshot("e2e")) {
    if (key.find("{" + id + ".") != std::string::npos) out.insert(key);
  }
  return out;
}

// GETRANGE calls Redis served, summed over every node of a cluster.
int64_t GetrangeCalls() {
  std::vector<std::string> infos;
  if (RedisClusterProcess* cluster = SharedRedis().cluster()) {
    for (int i = 0; i < cluster->node_count(); ++i) {
      infos.push_back(cluster->CommandOnNode(i, {"INFO", "commandstats"}).at(0));
    }
  } else {
    infos.push_back(SharedRedis().Command({"INFO", "commandstats"}).at(0));
  }
  int64_t calls = 0;
  for (const std::string& info : infos) {
    const size_t at = info.find("cmdstat_getrange:calls=");
    if (at != std::string::npos) calls += std::stoll(info.substr(at + 23));
  }
  return calls;
}

TEST(E2eRecordLayout, RowsFollowAPerLeafDictOnRandomIndexedReadsAndWrites) {
  Client client(DaemonAddress());
  const int64_t n = 45;
  Dict record = client.create(UniqueDictName(), {n}, kSchema, RecordOptions(8));
  CreateOptions plain;
  plain.rows_per_block = 8;
  Dict leaves = client.create(UniqueDictName(), {n}, kSchema, plain);
  EXPECT_EQ(record.describe().layout, Layout::kRecord);
  EXPECT_EQ(leaves.describe().layout, Layout::kLeaves);

  std::mt19937 rng(11);
  for (int step = 0; step < 60; ++step) {
    const Index at_write = RandomIndex(rng, n);
    const at::Tensor selected = Selected(leaves, at_write);
    const bool scalar = selected.dim() == 0;
    std::map<Key, at::Tensor> values =
        RandomRows(scalar ? 1 : selected.size(0), 100 + static_cast<uint32_t>(step) * 10);
    if (scalar) {
      for (auto& [path, t] : values) t = t[0];
    }
    if (step % 3 == 0) values.erase("obs");  // a write of some leaves only
    record.set_index(at_write, values);
    leaves.set_index(at_write, values);
    const Index at_read = RandomIndex(rng, n);
    ExpectSameLeaves(leaves.index(at_read), record.index(at_read), "step " + std::to_string(step));
  }
  ExpectSameLeaves(leaves.to_local(), record.to_local(), "whole leaves");
  EXPECT_TRUE(SameBytes(leaves.get("action"), record.get("action")));
  record.core().drop();
  leaves.core().drop();
}

TEST(E2eRecordLayout, RecordIsFormedByTheFirstIndexedWriteAndLaterLeavesLiveBesideIt) {
  Client client(DaemonAddress());
  Dict dict = client.create(UniqueDictName(), {20}, RecordOptions(6));
  const std::map<Key, at::Tensor> rows = {{"a", at::arange(3, at::kLong)},
                                          {"b", at::ones({3, 4}, at::kFloat)}};
  dict.set_index(Index(std::vector<int64_t>{2, 9, 17}), rows);
  EXPECT_TRUE(SameBytes(dict.get("a").index({at::tensor({2, 9, 17}, at::kLong)}), rows.at("a")));
  EXPECT_EQ(dict.get("b").sum().item<float>(), 12.0f);

  // A leaf of the record is written by rows only: refused whole, filled, or
  // replaced (even by a leaf without row bytes), with nothing written.
  const auto before = NamespaceSnapshot("e2e");
  EXPECT_EQ(ErrorOf([&] { dict.set("a", at::ones({20}, at::kLong)); }).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(ErrorOf([&] { dict.fill({"b"}, 2.0); }).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ErrorOf([&] { dict.set("a", at::ones({20, 0}, at::kLong)); }).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(NamespaceSnapshot("e2e"), before);
  EXPECT_EQ(dict.keys(), (std::vector<Key>{"a", "b"}));

  // A leaf made after the record formed keeps rows of its own beside it:
  // by an indexed write (zero-filled elsewhere, as in any dict), or whole.
  dict.set_index(Index(1), "c", at::full({}, 5.0f));
  at::Tensor c = at::zeros({20}, at::kFloat);
  c[1] = 5.0f;
  EXPECT_TRUE(SameBytes(dict.get("c"), c));
  dict.set("d", at::arange(20, at::kInt));
  dict.fill({"d"}, 3.0);
  EXPECT_TRUE(SameBytes(dict.get("d"), at::full({20}, 3, at::kInt)));
  // A row read of every leaf takes the record's and the others' cells.
  LocalDict got = dict.index(Index(std::vector<int64_t>{9, 1}));
  EXPECT_TRUE(SameBytes(got.at("a"), at::tensor({1, 0}, at::kLong)));
  EXPECT_TRUE(SameBytes(got.at("c"), at::tensor({0.0f, 5.0f})));
  EXPECT_TRUE(SameBytes(got.at("d"), at::tensor({3, 3}, at::kInt)));

  // Rows go on being written, and ring appends too, across both kinds.
  EXPECT_EQ(dict.append_ring({{"a", at::full({15}, 7, at::kLong)}}, "cursor", "count").start, 0);
  EXPECT_EQ(dict.append_ring({{"a", at::full({15}, 8, at::kLong)}, {"c", at::full({15}, 1.0f)}},
                             "cursor", "count")
                .start,
            15);
  at::Tensor expected = at::full({20}, 8, at::kLong);  // wrapped: rows 15..19, 0..9
  expected.slice(0, 10, 15).fill_(7);
  EXPECT_TRUE(SameBytes(dict.get("a"), expected));
  EXPECT_EQ(dict.get("b").sum().item<float>(), 12.0f);  // the other leaf's rows stay
  EXPECT_EQ(dict.get("c").sum().item<float>(), 15.0f);
  dict.core().drop();
}

// Leaves without row bytes live beside the record, made in the same create.
TEST(E2eRecordLayout, LeavesWithEmptyRowsComeWithTheRecord) {
  Client client(DaemonAddress());
  Dict dict = client.create(UniqueDictName(), {6},
                            {{"obs", at::kFloat, {4}}, {"mask", at::kBool, {0}}},
                            RecordOptions(4));
  EXPECT_EQ(dict.keys(), (std::vector<Key>{"mask", "obs"}));
  dict.set_index(Index(2), "obs", at::full({4}, 3.0));
  EXPECT_EQ(dict.get("obs").sum().item<float>(), 12.0f);
  EXPECT_EQ(dict.get("mask").sizes(), (std::vector<int64_t>{6, 0}));
  dict.core().drop();
}

// Where an index names a row twice the last occurrence wins, in both
// layouts, also now that touching runs are written as one range: runs of
// different lengths that overlap ([3] and [2, 3]) keep the index's order.
TEST(E2eRecordLayout, ARowNamedTwiceTakesItsLastValueInBothLayouts) {
  Client client(DaemonAddress());
  for (Layout layout : {Layout::kLeaves, Layout::kRecord}) {
    CreateOptions options;
    options.layout = layout;
    Dict dict = client.create(UniqueDictName(), {10}, {{"x", at::kFloat, {}}}, options);
    dict.set_index(Index(std::vector<int64_t>{3, 2, 3}), "x", at::tensor({10.0f, 20.0f, 30.0f}));
    at::Tensor x = dict.get("x");
    EXPECT_EQ(x[3].item<float>(), 30.0f) << static_cast<int>(layout);
    EXPECT_EQ(x[2].item<float>(), 20.0f) << static_cast<int>(layout);
    dict.core().drop();
  }
}

TEST(E2eRecordLayout, DeleteRenameAndResizeKeepTheOtherLeavesRows) {
  Client client(DaemonAddress());
  Dict dict = client.create(UniqueDictName(), {30}, kSchema, RecordOptions(7));
  const std::map<Key, at::Tensor> values = RandomRows(30, 5);
  dict.set_index(Index(Slice()), values);
  const std::string id = dict.describe().id;
  const std::set<std::string> blocks = BlockKeysOf(id);
  ASSERT_FALSE(blocks.empty());

  dict.erase("reward");
  dict.rename("obs", "o2");
  EXPECT_EQ(BlockKeysOf(id), blocks);  // the record stays for the leaves left
  EXPECT_TRUE(SameBytes(dict.get("o2"), values.at("obs")));
  EXPECT_TRUE(SameBytes(dict.get("action"), values.at("action")));
  EXPECT_TRUE(SameBytes(dict.get(Key({"next", "obs"})), values.at(Key({"next", "obs"}))));

  dict.resize(44);  // grow: rows keep their values, new rows are zeros
  at::Tensor action = dict.get("action");
  EXPECT_TRUE(SameBytes(action.slice(0, 0, 30), values.at("action")));
  EXPECT_EQ(action.slice(0, 30).count_nonzero().item<int64_t>(), 0);
  dict.set_index(Index(43), "done", at::ones({}, at::kBool));
  dict.resize(12);  // shrink
  EXPECT_TRUE(SameBytes(dict.get("o2"), values.at("obs").slice(0, 0, 12)));
  EXPECT_TRUE(SameBytes(dict.index(Index(Slice(2, 9)), {"done"}).at("done"),
                        values.at("done").slice(0, 2, 9)));

  // The record goes with its last leaf, and nothing of the dict with it.
  for (const Key& key : dict.keys(true, true)) dict.erase(key);
  EXPECT_TRUE(BlockKeysOf(id).empty());
  dict.core().drop();
  for (const auto& [key, _] : NamespaceSnapshot("e2e")) {
    EXPECT_EQ(key.find("{" + id), std::string::npos) << key;
  }
}

TEST(E2eRecordLayout, RefusedCreatesWriteNothing) {
  Client client(DaemonAddress());
  const auto before = NamespaceSnapshot("e2e");
  // No batch dims: no rows to keep together.
  EXPECT_EQ(ErrorOf([&] { client.create(UniqueDictName(), {}, RecordOptions(0)); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NamespaceSnapshot("e2e"), before);
  Dict source = client.create(UniqueDictName(), {4}, kSchema, RecordOptions(0));
  const auto with_source = NamespaceSnapshot("e2e");
  CreateOptions copy_as_record;
  copy_as_record.layout = Layout::kRecord;
  EXPECT_EQ(ErrorOf([&] { source.core().clone(UniqueDictName(), Key(std::vector<std::string>{}),
                                              copy_as_record); })
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NamespaceSnapshot("e2e"), with_source);
  // A plain copy of a record dict is a per-leaf dict with the same rows.
  source.set_index(Index(Slice()), RandomRows(4, 9));
  Dict copy = source.clone(UniqueDictName());
  EXPECT_EQ(copy.describe().layout, Layout::kLeaves);
  ExpectSameLeaves(source.to_local(), copy.to_local(), "copy");
  const std::string ids[] = {source.describe().id, copy.describe().id};
  source.core().drop();
  copy.core().drop();
  for (const auto& [key, _] : NamespaceSnapshot("e2e")) {
    for (const std::string& id : ids) EXPECT_EQ(key.find("{" + id), std::string::npos) << key;
  }
}

// One range per row, whatever the leaves: the reason record dicts exist.
TEST(E2eRecordLayout, ASampleCostsAtMostOneGetrangePerRow) {
  Client client(DaemonAddress());
  const int64_t n = 200000;
  Dict dict = client.create(UniqueDictName(), {n}, kSchema, RecordOptions(0));
  std::mt19937 rng(3);
  std::set<int64_t> unique;
  while (unique.size() < 64) unique.insert(std::uniform_int_distribution<int64_t>(0, n - 1)(rng));
  const std::vector<int64_t> rows(unique.begin(), unique.end());
  dict.index(Index(rows));  // the schema cached
  const int64_t before = GetrangeCalls();
  LocalDict sample = dict.index(Index(rows));
  EXPECT_EQ(sample.leaves.size(), kSchema.size());
  const int64_t calls = GetrangeCalls() - before;
  EXPECT_GT(calls, 0);  // counted where the reads ran
  EXPECT_LE(calls, static_cast<int64_t>(rows.size()));
  dict.core().drop();
}

// Rows less than 2 KiB apart (indexed_io.cc, kRunCostBytes) come in one
// GETRANGE, the bytes between them read and dropped, where a sample's rows
// spread too wide for one range covering them all; and sampled rows read
// as a per-leaf dict's, at random gaps in random order with repeats.
TEST(E2eRecordLayout, RowsLessThan2KiBApartShareAGetrangeAndReadAsAPerLeafDicts) {
  Client client(DaemonAddress());
  const int64_t n = 20000;
  Dict record = client.create(UniqueDictName(), {n}, kSchema, RecordOptions(0));
  Dict leaves = client.create(UniqueDictName(), {n}, kSchema);
  const std::map<Key, at::Tensor> values = RandomRows(n, 21);
  record.set_index(Index(Slice()), values);
  leaves.set_index(Index(Slice()), values);

  std::mt19937 rng(5);
  for (int trial = 0; trial < 12; ++trial) {
    // Gaps of 0 to 60 rows: rows of 61 bytes are up to 3.7 KB apart.
    std::vector<int64_t> positions;
    int64_t at = std::uniform_int_distribution<int64_t>(0, 99)(rng);
    while (at < n && positions.size() < 300) {
      positions.push_back(at);
      at += 1 + std::uniform_int_distribution<int64_t>(0, 60)(rng);
    }
    positions.push_back(positions[positions.size() / 2]);  // a repeat
    std::shuffle(positions.begin(), positions.end(), rng);
    ExpectSameLeaves(leaves.index(Index(positions)), record.index(Index(positions)),
                     "trial " + std::to_string(trial));
  }

  // 32 pairs of rows 3 apart, the pairs 400 rows apart: one GETRANGE a
  // pair (a call a row before: 64).
  std::vector<int64_t> pairs;
  for (int64_t p = 0; p < 32; ++p) {
    pairs.push_back(400 * p + 7);
    pairs.push_back(400 * p + 10);
  }
  record.index(Index(pairs));  // the schema cached
  const int64_t before = GetrangeCalls();
  const LocalDict sampled = record.index(Index(pairs));
  EXPECT_EQ(GetrangeCalls() - before, 32);
  ExpectSameLeaves(leaves.index(Index(pairs)), sampled, "pairs");
  record.core().drop();
  leaves.core().drop();
}

}  // namespace
}  // namespace tdstore::testing
