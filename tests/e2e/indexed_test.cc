// Indexed reads and writes — td.index(idx) and td.set_index(idx, values) —
// against a real tdstored and Redis:
//   - every index kind and tuple combination, compared with torch's own
//     t.index() / t.index_put_() on local copies;
//   - random property cases (fixed seeds) of reads and writes;
//   - broadcasting, writes into missing leaves, dicts created with a schema;
//   - concurrency: disjoint row writers lose nothing, a reader never sees a
//     row torn across leaves;
//   - every bad input leaves the dict's Redis keys byte-for-byte unchanged;
//   - the CLI's --index / --index-file, against NumPy's own indexing;
//   - the acceptance measurement: bytes an indexed read moves out of Redis.
#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tdstore/client.h"
#include "tests/e2e/expect_error.h"
#include "tdstore/v1/tdstore.grpc.pb.h"
#include "tests/e2e/cli_testing.h"
#include "tests/support/daemon_process.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/tensor_testing.h"

namespace tdstore::testing {
namespace {

using at::indexing::TensorIndex;

// ---- Helpers ------------------------------------------------------------------

// An int64 tensor of positions: 1-D, or of `shape` ([] for 0-d).
at::Tensor Positions(const std::vector<int64_t>& values) {
  return at::tensor(at::ArrayRef<int64_t>(values), at::TensorOptions().dtype(at::kLong))
      .reshape({static_cast<int64_t>(values.size())});
}
at::Tensor Positions(const std::vector<int64_t>& values, std::vector<int64_t> shape) {
  return Positions(values).reshape(shape);
}

at::Tensor Scalar0d(int64_t value) { return Positions({value}, {}); }

// A 1-D bool mask of `length` that is true exactly at `trues`.
at::Tensor Mask(int64_t length, const std::vector<int64_t>& trues) {
  at::Tensor mask = at::zeros({length}, at::TensorOptions().dtype(at::kBool));
  for (int64_t i : trues) mask[i] = true;
  return mask;
}

// The same index in torch's terms, for a leaf with `element_dims` dims past
// the batch dims. Integer tensors become int64: in torch a uint8 tensor would
// be a mask, in tdstore only bool is. tdstore's ellipsis spans batch dims
// only, so when there is one, the element dims get explicit ':'s.
std::vector<TensorIndex> ToTorch(const Index& index, int64_t element_dims) {
  std::vector<TensorIndex> out;
  bool ellipsis = false;
  for (const IndexTerm& term : index.terms()) {
    switch (term.kind()) {
      case IndexTerm::Kind::kInt:
        out.emplace_back(term.position());
        break;
      case IndexTerm::Kind::kSlice: {
        const Slice& s = term.slice();
        out.emplace_back(at::indexing::Slice(
            s.start ? c10::optional<int64_t>(*s.start) : c10::nullopt,
            s.stop ? c10::optional<int64_t>(*s.stop) : c10::nullopt, s.step));
        break;
      }
      case IndexTerm::Kind::kEllipsis:
        out.emplace_back(at::indexing::Ellipsis);
        ellipsis = true;
        break;
      case IndexTerm::Kind::kTensor: {
        const at::Tensor& t = term.tensor();
        out.emplace_back(t.scalar_type() == at::kBool ? t : t.to(at::kLong));
        break;
      }
    }
  }
  if (ellipsis) {
    for (int64_t i = 0; i < element_dims; ++i) out.emplace_back(at::indexing::Slice());
  }
  return out;
}

// td[index] of one leaf, by torch.
at::Tensor TorchIndex(const at::Tensor& leaf, size_t batch_dims, const Index& index) {
  return leaf.index(ToTorch(index, leaf.dim() - static_cast<int64_t>(batch_dims)));
}

// td[index] = value for one leaf, by torch.
void TorchIndexPut(at::Tensor& leaf, size_t batch_dims, const Index& index,
                   const at::Tensor& value) {
  leaf.index_put_(ToTorch(index, leaf.dim() - static_cast<int64_t>(batch_dims)), value);
}

std::string Show(const Index& index) {
  std::ostringstream out;
  out << "[";
  bool first = true;
  for (const IndexTerm& term : index.terms()) {
    if (!first) out << ", ";
    first = false;
    switch (term.kind()) {
      case IndexTerm::Kind::kInt:
        out << term.position();
        break;
      case IndexTerm::Kind::kSlice: {
        const Slice& s = term.slice();
        if (s.start) out << *s.start;
        out << ":";
        if (s.stop) out << *s.stop;
        out << ":" << s.step;
        break;
      }
      case IndexTerm::Kind::kEllipsis:
        out << "...";
        break;
      case IndexTerm::Kind::kTensor: {
        const at::Tensor t = term.tensor().contiguous();
        out << c10::toString(t.scalar_type()) << t.sizes() << "{";
        const at::Tensor flat = t.to(at::kLong).flatten();
        for (int64_t i = 0; i < std::min<int64_t>(flat.numel(), 12); ++i) {
          out << (i ? "," : "") << flat[i].item<int64_t>();
        }
        if (flat.numel() > 12) out << ",...";
        out << "}";
        break;
      }
    }
  }
  out << "]";
  return out.str();
}

// Every Redis key of a dict of the shared daemon, with its DUMP: equal
// snapshots mean byte-for-byte equal state (metadata and data).
std::map<std::string, std::string> Snapshot(const std::string& id) {
  std::map<std::string, std::string> out;
  for (const std::string& pattern : {"e2e:{" + id + "}*", "e2e:{" + id + ".*"}) {
    for (const std::string& key : SharedRedis().Keys(pattern)) {
      out[key] = SharedRedis().Command({"DUMP", key}).at(0);
    }
  }
  return out;
}

::testing::AssertionResult SameLocal(const LocalDict& expected, const LocalDict& actual) {
  if (expected.leaves.size() != actual.leaves.size()) {
    return ::testing::AssertionFailure() << actual.leaves.size() << " leaves, expected "
                                         << expected.leaves.size();
  }
  for (const auto& [path, value] : expected.leaves) {
    if (!actual.contains(path)) return ::testing::AssertionFailure() << "no leaf " << path.str();
    ::testing::AssertionResult same = SameBytes(value, actual.at(path));
    if (!same) return ::testing::AssertionFailure() << path.str() << ": " << same.message();
  }
  return ::testing::AssertionSuccess();
}

// The indexed batch shape torch gives: the result's dims minus the leaf's
// element dims.
std::vector<int64_t> IndexedBatch(const at::Tensor& leaf, size_t batch_dims, const Index& index) {
  const at::Tensor r = TorchIndex(leaf, batch_dims, index);
  const int64_t element_dims = leaf.dim() - static_cast<int64_t>(batch_dims);
  return std::vector<int64_t>(r.sizes().begin(), r.sizes().end() - element_dims);
}

// td.index(index) equals torch's indexing of every local leaf.
void ExpectIndexedReadMatches(Dict& td, const LocalDict& local, const Index& index) {
  SCOPED_TRACE("index " + Show(index));
  LocalDict got;
  try {
    got = td.index(index);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
    return;
  }
  ASSERT_EQ(got.leaves.size(), local.leaves.size());
  const at::Tensor& first = local.leaves.begin()->second;
  EXPECT_EQ(got.batch_size, IndexedBatch(first, local.batch_size.size(), index));
  for (const auto& [path, value] : local.leaves) {
    ASSERT_TRUE(got.contains(path)) << path.str();
    EXPECT_TRUE(SameBytes(TorchIndex(value, local.batch_size.size(), index), got.at(path)))
        << path.str();
  }
}

// Random values for td[index] = ... for every leaf, written to the store and
// with index_put_ into `local`; then the whole dict must equal `local`.
void ExpectIndexedWriteMatches(Dict& td, LocalDict& local, const Index& index, uint32_t seed) {
  SCOPED_TRACE("index " + Show(index));
  std::map<Key, at::Tensor> values;
  for (auto& [path, leaf] : local.leaves) {
    const at::Tensor target = TorchIndex(leaf, local.batch_size.size(), index);
    values.emplace(path, RandomTensor(leaf.scalar_type(), target.sizes().vec(), seed++));
  }
  try {
    td.set_index(index, values);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
    return;
  }
  for (auto& [path, leaf] : local.leaves) {
    TorchIndexPut(leaf, local.batch_size.size(), index, values.at(path));
  }
  EXPECT_TRUE(SameLocal(local, td.to_local()));
}

// A dict of the shared daemon holding random leaves of several dtypes and
// element shapes; `local` keeps the same data.
struct TestDict {
  Dict td;
  LocalDict local;
};

TestDict MakeDict(std::vector<int64_t> batch, CreateOptions options, uint32_t seed) {
  Client client(DaemonAddress());
  TestDict out{client.create(UniqueDictName(), batch, options), LocalDict{}};
  out.local.batch_size = batch;
  auto shape = [&](std::vector<int64_t> element) {
    std::vector<int64_t> s = batch;
    s.insert(s.end(), element.begin(), element.end());
    return s;
  };
  out.local.leaves[Key("obs")] = RandomTensor(at::kFloat, shape({3}), seed);
  out.local.leaves[Key({"next", "reward"})] = RandomTensor(at::kDouble, shape({}), seed + 1);
  out.local.leaves[Key({"next", "done"})] = RandomTensor(at::kBool, shape({}), seed + 2);
  out.local.leaves[Key("pix")] = RandomTensor(at::kByte, shape({2, 2}), seed + 3);
  out.td.update(out.local.leaves);
  return out;
}

// ---- Every kind, by hand ------------------------------------------------------

std::vector<Index> CasesForTwoDims() {
  // Batch [100, 8].
  return {
      // ints
      Index{3}, Index{-1}, Index{0}, Index{99}, Index{-100}, Index{3, 5}, Index{-2, -8},
      Index{0, 7},
      // slices: omitted, negative and out-of-range bounds, steps
      Index{Slice()}, Index{Slice(10, 20)}, Index{Slice(std::nullopt, 5)},
      Index{Slice(95, std::nullopt)}, Index{Slice(-10, std::nullopt)},
      Index{Slice(std::nullopt, -90)}, Index{Slice(-30, -5, 3)},
      Index{Slice(std::nullopt, std::nullopt, 7)}, Index{Slice(5, 200)}, Index{Slice(-500, 3)},
      Index{Slice(50, 10)}, Index{Slice(3, 3)}, Index{Slice(1, 100, 33)},
      Index{Slice(), 3}, Index{Slice(10, 20, 3), Slice(1, 7, 2)}, Index{Slice(), Slice(-3, -1)},
      // tuples of int and slice
      Index{3, Slice(1, 5)}, Index{-1, Slice(std::nullopt, std::nullopt, 3)},
      Index{Slice(20, 40, 5), -1},
      // positions: 1-D with duplicates and any order, 0-D, 2-D, empty
      Index{Positions({5, 1, 5, 99, 0})}, Index{Scalar0d(7)},
      Index{Positions({0, 1, 2, 3}, {2, 2})}, Index{Positions({9, 9, 0, 50, 9, 1}, {3, 2})},
      Index{Positions({}, {0})}, Index{IndexTerm(std::vector<int64_t>{1, 5, 9})},
      Index{Positions({31, 32, 33, 47, 48})},  // across a block boundary
      // positions with slices and ints
      Index{Positions({4, 2, 4}), Slice()}, Index{Slice(), Positions({0, 7, 7, 3})},
      Index{Positions({4, 2}), 6}, Index{1, Positions({0, 7, 7, 3})},
      Index{Slice(10, 60, 10), Positions({1, 2, 1})},
      Index{Scalar0d(5), Slice(2, 6)}, Index{Slice(), Scalar0d(5)},
      Index{Positions({0, 1, 2, 3}, {2, 2}), Slice(1, 3)},
      Index{Slice(std::nullopt, 4), Positions({0, 1, 2, 3, 4, 5}, {2, 3})},
      // several advanced indices, broadcast together
      Index{Positions({1, 2, 3}), Positions({7, 0, 7})},
      Index{Positions({10, 20, 30, 40, 50, 60}, {2, 3}), Positions({0, 1, 2})},
      Index{Positions({10, 20, 30}, {3, 1}), Positions({0, 1, 2, 3})},
      Index{Scalar0d(3), Positions({1, 2})}, Index{Positions({1, 2}), Scalar0d(3)},
      // bool masks
      Index{Mask(100, {0, 3, 50, 99})}, Index{Slice(), Mask(8, {1, 2, 7})},
      Index{Mask(100, {}), Slice()}, Index{Slice(), Mask(8, {0, 1, 2, 3, 4, 5, 6, 7})},
      Index{at::ones({100}, at::kBool)},
      Index{Mask(100, {4, 8, 15, 16}), Mask(8, {0, 2, 4, 6})}, Index{3, Mask(8, {1, 5})},
      Index{Mask(100, {10, 90}), 2}, Index{Mask(100, {1, 2, 3}), Slice(2, 6)},
      Index{Slice(1, 50, 4), Mask(8, {6})}, Index{Mask(100, {7, 8}), Positions({5, 6})},
      // ellipsis
      Index{Ellipsis{}}, Index{Ellipsis{}, 3}, Index{Ellipsis{}, Slice(2, 4)},
      Index{3, Ellipsis{}}, Index{3, Ellipsis{}, 2}, Index{Ellipsis{}, Positions({7, 1})},
      Index{Positions({50, 2}), Ellipsis{}}, Index{Ellipsis{}, Mask(8, {3, 4})},
      Index{Slice(5, 9), Ellipsis{}, Slice(std::nullopt, std::nullopt, 2)},
      // index tensors of every integer dtype: positions (uint8 is not a mask)
      Index{Positions({1, 3, 1}).to(at::kByte)}, Index{Positions({1, 3, 99}).to(at::kChar)},
      Index{Positions({-1, 3, 99}).to(at::kShort)}, Index{Positions({64, 3}).to(at::kInt)},
      // a non-contiguous index tensor: its logical (C-order) values count
      Index{at::arange(0, 20, at::kLong).view({4, 5}).t()},
  };
}

std::vector<Index> CasesForOneDim() {
  // Batch [1000].
  return {
      Index{0}, Index{999}, Index{-1}, Index{-1000}, Index{Slice()}, Index{Slice(100, 300, 7)},
      Index{Slice(-64, std::nullopt)}, Index{Slice(std::nullopt, std::nullopt, 64)},
      Index{Slice(63, 65)}, Index{Slice(990, 2000, 3)}, Index{Slice(10, 5)},
      Index{Positions({999, 0, 500, 0})}, Index{Scalar0d(640)},
      Index{Positions({1, 2, 3, 999, 998, 997}, {2, 3})},
      Index{Positions({5, 5, 5, 5, 5, 5, 5, 5}, {2, 2, 2})}, Index{Positions({}, {0})},
      Index{Positions({}, {2, 0})}, Index{Mask(1000, {0, 63, 64, 65, 128, 999})},
      Index{Mask(1000, {})}, Index{Ellipsis{}}, Index{Ellipsis{}, 5},
      Index{Ellipsis{}, Positions({3, 1})}, Index{Positions({900, 100}), Ellipsis{}},
      Index{at::arange(1000, at::kLong).flip(0)},  // every row, reversed
      Index{Positions({7, 300}).to(at::kInt)}, Index{Positions({255, 0}).to(at::kByte)},
  };
}

TEST(E2eIndexed, EveryKindOnTwoBatchDims) {
  TestDict d = MakeDict({100, 8}, CreateOptions{16, 0}, 1);
  for (const Index& index : CasesForTwoDims()) ExpectIndexedReadMatches(d.td, d.local, index);
}

TEST(E2eIndexed, EveryKindOnOneBatchDim) {
  TestDict d = MakeDict({1000}, CreateOptions{64, 0}, 2);
  for (const Index& index : CasesForOneDim()) ExpectIndexedReadMatches(d.td, d.local, index);
}

// Three batch dims: where advanced indices separated by a slice put their
// dims, and ints and 0-d tensors taken as torch takes them (as select).
TEST(E2eIndexed, AdvancedIndicesOnThreeBatchDims) {
  TestDict d = MakeDict({6, 5, 4}, CreateOptions{2, 0}, 9);
  for (const Index& index : {
           Index{Positions({0, 5}), Slice(), Positions({1, 3})},
           Index{Slice(), Positions({1, 2}), Positions({0, 3})},
           Index{Positions({1, 2}), Positions({0, 3}), Slice(1, 3)},
           Index{Positions({0, 1, 2, 3}, {2, 2}), Slice(), Positions({3, 0})},
           Index{Mask(6, {1, 4}), Slice(), Positions({0, 3})},
           Index{Scalar0d(2), Slice(), Positions({1, 3})},
           Index{Positions({1, 2}), Slice(), Scalar0d(3)},
           Index{1, Slice(), Positions({0, 3})},
           Index{Positions({0, 3}), 2, Positions({1, 1})},
           Index{Positions({0, 3}), Slice(), 2},
           Index{Ellipsis{}, Positions({0, 3}), Slice()},
           Index{Positions({4}), Ellipsis{}, Positions({2, 1})},
       }) {
    ExpectIndexedReadMatches(d.td, d.local, index);
    ExpectIndexedWriteMatches(d.td, d.local, index, 300);
  }
}

TEST(E2eIndexed, ReadsOfChosenPathsAndPrefixes) {
  TestDict d = MakeDict({100, 8}, CreateOptions{16, 0}, 3);
  const Index index{Positions({4, 50, 4}), Slice(1, 3)};
  LocalDict next = d.td.index(index, {Key("next")});
  ASSERT_EQ(next.leaves.size(), 2u);
  EXPECT_EQ(next.batch_size, (std::vector<int64_t>{3, 2}));
  EXPECT_TRUE(
      SameBytes(TorchIndex(d.local.at({"next", "done"}), 2, index), next.at({"next", "done"})));
  EXPECT_TRUE(
      SameBytes(TorchIndex(d.local.at({"next", "reward"}), 2, index), next.at({"next", "reward"})));

  LocalDict two = d.td.index(7, {Key("obs"), Key("pix")});
  ASSERT_EQ(two.leaves.size(), 2u);
  EXPECT_EQ(two.batch_size, (std::vector<int64_t>{8}));
  EXPECT_TRUE(SameBytes(d.local.at("obs")[7], two.at("obs")));
  EXPECT_TRUE(SameBytes(d.local.at("pix")[7], two.at("pix")));

  EXPECT_EQ(ErrorOf([&] { d.td.index(3, {Key("missing")}); }).code(), StatusCode::kNotFound);
}

TEST(E2eIndexed, EmptyIndexIsTheWholeDict) {
  TestDict d = MakeDict({10, 3}, CreateOptions{4, 0}, 4);
  LocalDict all = d.td.index(Index(std::vector<IndexTerm>{}));
  EXPECT_EQ(all.batch_size, (std::vector<int64_t>{10, 3}));
  EXPECT_TRUE(SameLocal(d.local, all));
}

TEST(E2eIndexed, NegativePositionsCountFromTheEnd) {
  TestDict d = MakeDict({100, 8}, CreateOptions{16, 0}, 5);
  for (const Index& index :
       {Index{Positions({-1, -100, 5, -5})}, Index{Slice(), Positions({-8, -1, 0})},
        Index{Positions({-1, -2, -3, -4}, {2, 2}), Positions({-1, 0})}}) {
    ExpectIndexedReadMatches(d.td, d.local, index);
  }
  ExpectIndexedWriteMatches(d.td, d.local, Index{Positions({-1, -50, 3})}, 50);
  ExpectIndexedWriteMatches(d.td, d.local, Index{Slice(), Positions({-8, 2})}, 60);
}

TEST(E2eIndexed, WritesOfEveryKindOnTwoBatchDims) {
  TestDict d = MakeDict({100, 8}, CreateOptions{16, 0}, 6);
  uint32_t seed = 100;
  for (const Index& index : CasesForTwoDims()) {
    // Duplicate targets have no single right answer (DuplicateTargets).
    const at::Tensor cells = TorchIndex(at::arange(800, at::kLong).view({100, 8}), 2, index);
    if (std::get<0>(at::_unique(cells.flatten())).numel() != cells.numel()) continue;
    ExpectIndexedWriteMatches(d.td, d.local, index, seed);
    seed += 10;
  }
}

TEST(E2eIndexed, WritesOfEveryKindOnOneBatchDim) {
  TestDict d = MakeDict({1000}, CreateOptions{64, 0}, 7);
  uint32_t seed = 200;
  for (const Index& index : CasesForOneDim()) {
    const at::Tensor cells = TorchIndex(at::arange(1000, at::kLong), 1, index);
    if (std::get<0>(at::_unique(cells.flatten())).numel() != cells.numel()) continue;
    ExpectIndexedWriteMatches(d.td, d.local, index, seed);
    seed += 10;
  }
}

// Duplicate targets: each gets one of the values written to it, the same
// one in every leaf of the row is not promised — only that it is one of them.
TEST(E2eIndexed, DuplicateTargetsGetOneOfTheirValues) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {20}, CreateOptions{4, 0});
  td.set("x", at::zeros({20, 2}, at::kLong));
  const at::Tensor value = at::tensor({11, 11, 22, 22, 33, 33, 44, 44}, at::kLong).view({4, 2});
  td.set_index(Positions({5, 9, 5, 5}), "x", value);
  const at::Tensor x = td.get("x");
  const int64_t row5 = x[5][0].item<int64_t>();
  EXPECT_TRUE(row5 == 11 || row5 == 33 || row5 == 44) << row5;
  EXPECT_EQ(x[5][1].item<int64_t>(), row5);
  EXPECT_EQ(x[9][0].item<int64_t>(), 22);
  EXPECT_EQ(at::count_nonzero(x).item<int64_t>(), 4);
}

// ---- Random property cases ------------------------------------------------------

class IndexGenerator {
 public:
  explicit IndexGenerator(uint64_t seed) : rng_(seed) {}

  int64_t Uniform(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  // A random index over `batch`. With `unique_targets`, no batch cell is
  // selected twice (so index_put_ has one right answer).
  Index Next(const std::vector<int64_t>& batch, bool unique_targets) {
    const int64_t ndim = static_cast<int64_t>(batch.size());
    // The broadcast shape every advanced index of this tuple shares.
    std::vector<int64_t> shape;
    switch (Uniform(0, 5)) {
      case 0: shape = {}; break;
      case 1: shape = {Uniform(0, 2)}; break;
      case 2: case 3: shape = {Uniform(1, 7)}; break;
      default: shape = {Uniform(1, 3), Uniform(1, 4)}; break;
    }
    // Which dims get an item; an ellipsis stands for the ones in between.
    const bool ellipsis = Chance(0.2);
    int64_t before = Uniform(ndim > 0 ? 1 : 0, ndim);
    int64_t after = 0;
    if (ellipsis) {
      before = Uniform(0, ndim);
      after = Uniform(0, ndim - before);
    }
    std::vector<IndexTerm> terms;
    for (int64_t d = 0; d < before; ++d) terms.push_back(Term(batch[d], shape, unique_targets));
    if (ellipsis) terms.push_back(Ellipsis{});
    for (int64_t d = ndim - after; d < ndim; ++d) {
      terms.push_back(Term(batch[d], shape, unique_targets));
    }
    return Index(std::move(terms));
  }

 private:
  IndexTerm Term(int64_t n, const std::vector<int64_t>& shape, bool unique) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    switch (Uniform(0, 9)) {
      case 0: case 1:
        return IndexTerm(Uniform(-n, n - 1));
      case 2: case 3: case 4: {
        auto bound = [&]() -> std::optional<int64_t> {
          if (Chance(0.25)) return std::nullopt;
          return Uniform(-n - 3, n + 3);
        };
        std::optional<int64_t> start = bound(), stop = bound();
        return IndexTerm(Slice(start, stop, Chance(0.5) ? 1 : Uniform(1, 5)));
      }
      case 5:
        // A mask selects as many cells as a 1-D advanced index has.
        if (shape.size() == 1 && shape[0] <= n) return MaskTerm(n, shape[0]);
        [[fallthrough]];
      default:
        if (unique && numel > n) return IndexTerm(Slice());
        return PositionsTerm(n, shape, unique);
    }
  }

  IndexTerm MaskTerm(int64_t n, int64_t count) {
    std::vector<int64_t> rows(n);
    std::iota(rows.begin(), rows.end(), 0);
    std::shuffle(rows.begin(), rows.end(), rng_);
    rows.resize(count);
    return IndexTerm(Mask(n, rows));
  }

  IndexTerm PositionsTerm(int64_t n, std::vector<int64_t> shape, bool unique) {
    // Reads may use a shape that broadcasts to the tuple's.
    if (!unique && !shape.empty() && Chance(0.3)) {
      if (shape.size() == 1) {
        shape = Chance(0.5) ? std::vector<int64_t>{1} : std::vector<int64_t>{};
      } else {
        switch (Uniform(0, 2)) {
          case 0: shape = {shape[1]}; break;
          case 1: shape = {shape[0], 1}; break;
          default: shape = {1, shape[1]}; break;
        }
      }
    }
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    std::vector<int64_t> values;
    if (unique) {
      std::vector<int64_t> rows(n);
      std::iota(rows.begin(), rows.end(), 0);
      std::shuffle(rows.begin(), rows.end(), rng_);
      values.assign(rows.begin(), rows.begin() + numel);
    } else {
      for (int64_t i = 0; i < numel; ++i) values.push_back(Uniform(0, n - 1));
    }
    // Negative positions name the same rows from the end.
    for (int64_t& v : values) {
      if (Chance(0.15)) v -= n;
    }
    at::Tensor t = Positions(values, shape);
    // Any integer dtype works; narrow ones when the values fit.
    const int64_t lo = values.empty() ? 0 : *std::min_element(values.begin(), values.end());
    const int64_t hi = values.empty() ? 0 : *std::max_element(values.begin(), values.end());
    switch (Uniform(0, 5)) {
      case 0: t = t.to(at::kInt); break;
      case 1: if (lo >= 0 && hi < 256) t = t.to(at::kByte); break;
      case 2: if (lo >= -32768 && hi < 32768) t = t.to(at::kShort); break;
      default: break;
    }
    // Sometimes a non-contiguous view of the same values.
    if (t.dim() == 2 && Chance(0.3)) t = t.t().contiguous().t();
    return IndexTerm(t);
  }

  std::mt19937_64 rng_;
};

struct RandomCase {
  std::vector<int64_t> batch;
  CreateOptions options;
};

std::vector<RandomCase> RandomCases() {
  return {
      {{100, 8}, CreateOptions{16, 0}},
      {{1000}, CreateOptions{64, 0}},
      // Parts smaller than a row: runs cross part boundaries inside blocks.
      {{37, 5}, CreateOptions{4, 40}},
      {{6, 5, 4}, CreateOptions{2, 0}},
  };
}

TEST(E2eIndexed, RandomReadsMatchTorch) {
  IndexGenerator gen(20240611);
  int checked = 0;
  for (const RandomCase& c : RandomCases()) {
    TestDict d = MakeDict(c.batch, c.options, 10 + checked);
    for (int i = 0; i < 100; ++i, ++checked) {
      ExpectIndexedReadMatches(d.td, d.local, gen.Next(c.batch, /*unique_targets=*/false));
      if (HasFailure()) return;  // the first failing case is enough to debug
    }
  }
}

// tdstored serves a read of at most 4,096 positions on the thread that
// received it and a larger one, or a slice or a mask, on its read pool
// (read_leaves_reactor.h). Both sides of that bound, over TCP (streamed or
// one SmallRead) and the unix socket (the reply in shared memory), give
// torch's rows, duplicates and any order included.
TEST(E2eIndexed, PositionReadsAgreeOnEitherSideOfTheServedWhereReceivedBound) {
  std::mt19937_64 rng(4096);
  for (const std::string& address : {DaemonAddress(), DaemonUnixAddress()}) {
    SCOPED_TRACE(address);
    Client client(address);
    const int64_t rows = 10000;
    Dict td = client.create(UniqueDictName(), {rows});
    LocalDict local;
    local.batch_size = {rows};
    local.leaves[Key("obs")] = RandomTensor(at::kFloat, {rows, 64}, 5);
    local.leaves[Key({"next", "done"})] = RandomTensor(at::kBool, {rows}, 6);
    td.update(local.leaves);
    for (int64_t count : {1, 4095, 4096, 4097, 9000}) {
      std::vector<int64_t> positions(static_cast<size_t>(count));
      std::uniform_int_distribution<int64_t> row(-rows, rows - 1);
      for (int64_t& p : positions) p = row(rng);
      ExpectIndexedReadMatches(td, local, Index{Positions(positions)});
    }
    ExpectIndexedReadMatches(td, local, Index{Slice(3, 9000, 2)});
    td.core().drop();
  }
}

TEST(E2eIndexed, RandomWritesMatchIndexPut) {
  IndexGenerator gen(777);
  uint32_t seed = 1000;
  for (const RandomCase& c : RandomCases()) {
    TestDict d = MakeDict(c.batch, c.options, seed);
    for (int i = 0; i < 60; ++i) {
      const Index index = gen.Next(c.batch, /*unique_targets=*/true);
      SCOPED_TRACE("index " + Show(index));
      // All leaves, or a random subset, in one call; values of the indexed
      // shape or of a shape that broadcasts to it.
      std::map<Key, at::Tensor> values;
      for (auto& [path, leaf] : d.local.leaves) {
        if (gen.Chance(0.3)) continue;
        std::vector<int64_t> shape = TorchIndex(leaf, c.batch.size(), index).sizes().vec();
        if (gen.Chance(0.25)) {
          for (int64_t& dim : shape) {
            if (gen.Chance(0.5)) dim = 1;
          }
          shape.erase(shape.begin(), shape.begin() + gen.Uniform(0, shape.size()));
        }
        values.emplace(path, RandomTensor(leaf.scalar_type(), shape, seed++));
      }
      try {
        d.td.set_index(index, values);
      } catch (const Error& e) {
        ADD_FAILURE() << e.what();
        return;
      }
      for (const auto& [path, value] : values) {
        TorchIndexPut(d.local.leaves.at(path), c.batch.size(), index, value);
      }
      ASSERT_TRUE(SameLocal(d.local, d.td.to_local()));
    }
  }
}

// ---- Broadcasting, missing leaves, schemas, casts ----------------------------------

TEST(E2eIndexed, BroadcastWrites) {
  TestDict d = MakeDict({100, 8}, CreateOptions{16, 0}, 8);
  LocalDict& local = d.local;
  struct Case {
    Index index;
    Key path;
    at::Tensor value;
  };
  const std::vector<Case> cases = {
      // A 0-d value fills every selected cell.
      {Index{Slice(10, 30, 4)}, Key({"next", "reward"}), at::scalar_tensor(2.5, at::kDouble)},
      {Index{Positions({1, 50, 99})}, Key("obs"), at::scalar_tensor(-1.0, at::kFloat)},
      // One row for all rows: [1, D] and [D].
      {Index{Positions({3, 4, 5}), Slice()}, Key("obs"),
       at::arange(3, at::kFloat).view({1, 3})},
      {Index{Slice(), 2}, Key("obs"), at::tensor({7.f, 8.f, 9.f})},
      {Index{7}, Key("pix"), at::tensor({1, 2, 3, 4}, at::kByte).view({1, 2, 2})},
      {Index{Mask(100, {0, 1, 2}), Mask(8, {5, 6, 7})}, Key({"next", "done"}),
       at::scalar_tensor(true, at::kBool)},
      // [k, 1, D] over [k, 8, D].
      {Index{Slice(40, 43)}, Key("obs"), RandomTensor(at::kFloat, {3, 1, 3}, 9)},
      // Leading dims of size 1 beyond the target's, as torch (and NumPy) allow.
      {Index{Slice(60, 62)}, Key("obs"), RandomTensor(at::kFloat, {1, 1, 2, 8, 3}, 10)},
      {Index{5, 5}, Key({"next", "reward"}), at::full({1, 1}, 4.0, at::kDouble)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("index " + Show(c.index) + " into " + c.path.str());
    ASSERT_NO_THROW(d.td.set_index(c.index, c.path, c.value));
    TorchIndexPut(local.leaves.at(c.path), 2, c.index, c.value);
    ASSERT_TRUE(SameLocal(local, d.td.to_local()));
  }
}

TEST(E2eIndexed, WritingIntoAMissingLeafCreatesItZeroFilled) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {10, 4}, CreateOptions{3, 0});
  td.set("existing", at::ones({10, 4}, at::kInt));
  const at::Tensor value = RandomTensor(at::kFloat, {3, 4, 2}, 11);
  td.set_index(Slice(2, 5), {"new", "leaf"}, value);
  at::Tensor expected = at::zeros({10, 4, 2}, at::kFloat);
  expected.index_put_({at::indexing::Slice(2, 5)}, value);
  EXPECT_TRUE(SameBytes(expected, td.get({"new", "leaf"})));

  // Other index kinds, several missing leaves at once, an existing one too;
  // a missing leaf's element shape comes from its value.
  const Index index{Positions({9, 0}), 3};
  const at::Tensor a = at::tensor({5, 6}, at::kShort);
  const at::Tensor b = RandomTensor(at::kDouble, {2, 3, 3}, 12);
  td.set_index(index, {{Key("a"), a}, {Key("b"), b}, {Key("existing"), at::tensor({-1, -2}, at::kInt)}});
  at::Tensor ea = at::zeros({10, 4}, at::kShort);
  TorchIndexPut(ea, 2, index, a);
  at::Tensor eb = at::zeros({10, 4, 3, 3}, at::kDouble);
  TorchIndexPut(eb, 2, index, b);
  at::Tensor ee = at::ones({10, 4}, at::kInt);
  TorchIndexPut(ee, 2, index, at::tensor({-1, -2}, at::kInt));
  EXPECT_TRUE(SameBytes(ea, td.get("a")));
  EXPECT_TRUE(SameBytes(eb, td.get("b")));
  EXPECT_TRUE(SameBytes(ee, td.get("existing")));

  // A broadcast value of a missing leaf: its element shape is the value's
  // trailing dims past the indexed batch dims — here none.
  td.set_index(Positions({1, 2}), "flag", at::scalar_tensor(true, at::kBool));
  at::Tensor ef = at::zeros({10, 4}, at::kBool);
  ef.index_put_({Positions({1, 2})}, at::scalar_tensor(true, at::kBool));
  EXPECT_TRUE(SameBytes(ef, td.get("flag")));
}

TEST(E2eIndexed, CreateWithSchemaPreallocatesZeros) {
  Client client(DaemonAddress());
  const std::vector<Client::LeafSpec> schema = {
      {Key("obs"), at::kFloat, {3}},
      {Key({"next", "done"}), at::kBool, {}},
      {Key("img"), at::kByte, {2, 2}},
      {Key("q"), at::kComplexDouble, {}},
  };
  Dict td = client.create(UniqueDictName(), {50}, schema, CreateOptions{8, 0});
  DictInfo info = td.describe();
  ASSERT_EQ(info.leaves.size(), 4u);
  LocalDict all = td.to_local();
  EXPECT_TRUE(SameBytes(at::zeros({50, 3}, at::kFloat), all.at("obs")));
  EXPECT_TRUE(SameBytes(at::zeros({50}, at::kBool), all.at({"next", "done"})));
  EXPECT_TRUE(SameBytes(at::zeros({50, 2, 2}, at::kByte), all.at("img")));
  EXPECT_TRUE(SameBytes(at::zeros({50}, at::kComplexDouble), all.at("q")));

  // Row writes then land in the pre-allocated leaves.
  td.set_index(Slice(45, std::nullopt), "obs", at::ones({5, 3}));
  at::Tensor expected = at::zeros({50, 3});
  expected.index_put_({at::indexing::Slice(45, c10::nullopt)}, at::ones({5, 3}));
  EXPECT_TRUE(SameBytes(expected, td.get("obs")));
  // ... with the schema's dtype.
  EXPECT_EQ(ErrorOf([&] { td.set_index(0, "img", at::zeros({2, 2}, at::kInt)); }).code(),
            StatusCode::kInvalidArgument);

  // A schema with no batch dims, and one with a zero-size batch dim.
  Dict scalar = client.create(UniqueDictName(), {}, {{Key("s"), at::kLong, {4}}});
  EXPECT_TRUE(SameBytes(at::zeros({4}, at::kLong), scalar.get("s")));
  Dict empty = client.create(UniqueDictName(), {0, 3}, {{Key("e"), at::kFloat, {2}}});
  EXPECT_TRUE(SameBytes(at::zeros({0, 3, 2}), empty.get("e")));

  // A bad schema creates no dict.
  const std::string name = UniqueDictName();
  EXPECT_EQ(ErrorOf([&] {
              client.create(name, {4}, {{Key("a"), at::kFloat, {-1}}});
            }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf([&] { client.open(name); }).code(), StatusCode::kNotFound);
}

TEST(E2eIndexed, CastOption) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {6}, {{Key("f"), at::kFloat, {2}}});
  const at::Tensor value = at::tensor({1.5, 2.5, 3.5, 4.5}, at::kDouble).view({2, 2});
  Error e = ErrorOf([&] { td.set_index(Positions({1, 4}), "f", value); });
  EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << e.what();
  td.set_index(Positions({1, 4}), "f", value, SetIndexOptions{true});
  at::Tensor expected = at::zeros({6, 2});
  expected.index_put_({Positions({1, 4})}, value.to(at::kFloat));
  EXPECT_TRUE(SameBytes(expected, td.get("f")));
  // A missing leaf keeps the value's dtype.
  td.set_index(0, "d", at::tensor({1.0}, at::kDouble), SetIndexOptions{true});
  EXPECT_EQ(td.get("d").scalar_type(), at::kDouble);
}

TEST(E2eIndexed, EmptyValuesMakeNoCall) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {4});
  client.drop(td.name());
  // No call, so no NOT_FOUND for the dropped dict.
  td.set_index(Slice(), std::map<Key, at::Tensor>{});
}

// ---- Concurrency ---------------------------------------------------------------

// N threads write disjoint rows (row r belongs to thread r % N) of two
// leaves with every index kind; rows share blocks, so a write that rewrote
// more than its rows would lose other threads' updates.
TEST(E2eIndexed, ConcurrentDisjointRowWritersLoseNothing) {
  constexpr int kThreads = 8;
  constexpr int64_t kRows = 1024;
  constexpr int kWritesPerThread = 40;
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {kRows},
                          {{Key("a"), at::kLong, {}}, {Key("b"), at::kFloat, {4}}},
                          CreateOptions{16, 0});
  // What each thread wrote last, per row it owns.
  std::vector<at::Tensor> expect_a(kThreads), expect_b(kThreads);
  std::vector<std::future<void>> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.push_back(std::async(std::launch::async, [&, t] {
      Dict mine = Client(DaemonAddress()).open(td.name());
      at::Tensor a = at::zeros({kRows}, at::kLong);
      at::Tensor b = at::zeros({kRows, 4}, at::kFloat);
      std::mt19937_64 rng(t);
      const int64_t owned = kRows / kThreads;
      for (int w = 0; w < kWritesPerThread; ++w) {
        // Rows t + kThreads * j for j in a random set.
        std::vector<int64_t> js(owned);
        std::iota(js.begin(), js.end(), 0);
        std::shuffle(js.begin(), js.end(), rng);
        js.resize(1 + rng() % 24);
        std::vector<int64_t> rows;
        for (int64_t j : js) rows.push_back(t + kThreads * j);
        std::sort(rows.begin(), rows.end());
        Index index = Positions(rows);
        switch (w % 4) {
          case 0: index = Index(rows[0]); rows.resize(1); break;
          case 1: {
            const int64_t j0 = rng() % owned;
            const int64_t j1 = j0 + 1 + static_cast<int64_t>(rng() % 16);
            index = Index(Slice(t + kThreads * j0, t + kThreads * j1, kThreads));
            rows.clear();
            for (int64_t j = j0; j < std::min(j1, owned); ++j) rows.push_back(t + kThreads * j);
            break;
          }
          case 2: break;
          default: {
            at::Tensor mask = at::zeros({kRows}, at::kBool);
            for (int64_t r : rows) mask[r] = true;
            index = Index(mask);
          }
        }
        const int64_t k = static_cast<int64_t>(rows.size());
        const at::Tensor row_index = Positions(rows, {k});
        const at::Tensor va = row_index * 1000 + (t * 100 + w);
        const at::Tensor vb = va.to(at::kFloat).view({k, 1}).expand({k, 4}) + at::arange(4);
        at::Tensor value_a = va, value_b = vb;
        if (w % 4 == 0) {  // an int index removes the batch dim
          value_a = va[0];  // (view({}) would be view(dtype) with dtype 0: uint8)
          value_b = vb[0];
        }
        mine.set_index(index, {{Key("a"), value_a}, {Key("b"), value_b}});
        a.index_put_({row_index}, va);
        b.index_put_({row_index}, vb);
      }
      expect_a[t] = a;
      expect_b[t] = b;
    }));
  }
  for (auto& thread : threads) thread.get();
  at::Tensor a = at::zeros({kRows}, at::kLong);
  at::Tensor b = at::zeros({kRows, 4}, at::kFloat);
  for (int t = 0; t < kThreads; ++t) {
    const at::Tensor rows = at::arange(t, kRows, kThreads);
    a.index_put_({rows}, expect_a[t].index({rows}));
    b.index_put_({rows}, expect_b[t].index({rows}));
  }
  EXPECT_TRUE(SameBytes(a, td.get("a")));
  EXPECT_TRUE(SameBytes(b, td.get("b")));
}

// A writer puts value v into row i of all three leaves in one call; readers
// sample rows and check that every row's leaves agree.
TEST(E2eIndexed, ReaderNeverSeesARowTornAcrossLeaves) {
  constexpr int64_t kRows = 512;
  Client client(DaemonAddress());
  Dict td = client.create(
      UniqueDictName(), {kRows},
      {{Key("x"), at::kLong, {}}, {Key("y"), at::kInt, {2}}, {Key({"z", "w"}), at::kDouble, {3}}},
      CreateOptions{16, 0});
  std::atomic<bool> stop{false};
  std::atomic<int64_t> writes{0};
  auto writer = std::async(std::launch::async, [&] {
    // Readers stop when the writer does, even if it throws.
    struct StopReaders {
      std::atomic<bool>& stop;
      ~StopReaders() { stop = true; }
    } stop_readers{stop};
    std::mt19937_64 rng(1);
    int64_t v = 1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (std::chrono::steady_clock::now() < deadline) {
      // Random distinct rows over many blocks, or a strided slice.
      std::vector<int64_t> rows;
      Index index = Slice();
      if (rng() % 2 == 0) {
        std::vector<int64_t> all(kRows);
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng);
        rows.assign(all.begin(), all.begin() + 1 + rng() % 64);
        index = Positions(rows);
      } else {
        const int64_t start = rng() % kRows, step = 1 + rng() % 7;
        const int64_t stop = start + 1 + rng() % 200;
        for (int64_t r = start; r < std::min(stop, kRows); r += step) rows.push_back(r);
        index = Slice(start, stop, step);
      }
      const int64_t k = static_cast<int64_t>(rows.size());
      // Each row its own value; all leaves of a row the same.
      const at::Tensor values = at::arange(v, v + k, at::kLong);
      v += k;
      td.set_index(index, {{Key("x"), values},
                           {Key("y"), values.to(at::kInt).view({k, 1}).expand({k, 2})},
                           {Key({"z", "w"}), values.to(at::kDouble).view({k, 1}).expand({k, 3})}});
      ++writes;
    }
  });
  auto reader = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    int64_t reads = 0, torn = 0;
    while (!stop) {
      std::vector<int64_t> rows;
      for (int i = 0; i < 48; ++i) rows.push_back(rng() % kRows);
      LocalDict got = td.index(seed % 2 ? Index(Positions(rows)) : Index(Slice()));
      const at::Tensor x = got.at("x");
      const at::Tensor y = got.at("y").to(at::kLong);
      const at::Tensor z = got.at({"z", "w"}).to(at::kLong);
      const at::Tensor agree = (y == x.unsqueeze(1)).all(1) & (z == x.unsqueeze(1)).all(1);
      torn += agree.numel() - agree.sum().item<int64_t>();
      ++reads;
    }
    return std::make_pair(reads, torn);
  };
  auto r1 = std::async(std::launch::async, reader, 1);
  auto r2 = std::async(std::launch::async, reader, 2);
  writer.get();
  const auto [reads1, torn1] = r1.get();
  const auto [reads2, torn2] = r2.get();
  EXPECT_EQ(torn1, 0) << "rows torn across leaves in " << reads1 << " reads";
  EXPECT_EQ(torn2, 0) << "rows torn across leaves in " << reads2 << " reads";
  EXPECT_GT(writes.load(), 20);
  EXPECT_GT(reads1, 20);
  EXPECT_GT(reads2, 20);
}

// ---- Bad inputs change nothing ---------------------------------------------------

class E2eIndexedErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    d_.emplace(MakeDict({100, 8}, CreateOptions{16, 0}, 42));
    id_ = d_->td.describe().id;
    before_ = Snapshot(id_);
    ASSERT_FALSE(before_.empty());
  }

  // `call` fails with `code`, and the dict's Redis keys are unchanged.
  void ExpectRejected(const std::string& what, StatusCode code, const std::function<void()>& call) {
    SCOPED_TRACE(what);
    Error e = ErrorOf(call);
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_FALSE(e.message().empty());
    EXPECT_TRUE(Snapshot(id_) == before_) << "Redis changed";
  }

  // A raw WriteLeaves stream (for what the client library refuses to send).
  grpc::Status RawWrite(const v1::Index& index, const std::string& leaf,
                        const at::Tensor& value) {
    auto stub = v1::TdStore::NewStub(
        grpc::CreateChannel(DaemonAddress(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    v1::WriteLeavesResponse response;
    auto writer = stub->WriteLeaves(&context, &response);
    v1::WriteChunk chunk;
    chunk.mutable_begin()->set_dict(d_->td.name());
    *chunk.mutable_begin()->mutable_index() = index;
    writer->Write(chunk);
    const at::Tensor bytes = value.contiguous();
    v1::LeafHeader* header = chunk.mutable_header();
    header->mutable_path()->add_components(leaf);
    header->set_dtype(bytes.scalar_type() == at::kFloat ? v1::FLOAT32 : v1::FLOAT64);
    for (int64_t dim : bytes.sizes()) header->add_shape(dim);
    header->set_byte_size(static_cast<int64_t>(bytes.nbytes()));
    writer->Write(chunk);
    if (bytes.nbytes() > 0) {
      chunk.set_data(bytes.data_ptr(), bytes.nbytes());
      writer->Write(chunk);
    }
    writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status RawRead(const v1::Index& index) {
    auto stub = v1::TdStore::NewStub(
        grpc::CreateChannel(DaemonAddress(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    v1::ReadLeavesRequest request;
    request.set_dict(d_->td.name());
    *request.mutable_index() = index;
    auto reader = stub->ReadLeaves(&context, request);
    v1::ReadChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  }

  std::optional<TestDict> d_;
  std::string id_;
  std::map<std::string, std::string> before_;
};

TEST_F(E2eIndexedErrors, OutOfRangePositions) {
  Dict& td = d_->td;
  for (const Index& index :
       {Index{100}, Index{-101}, Index{0, 8}, Index{3, -9}, Index{Positions({5, 100})},
        Index{Positions({-101})}, Index{Slice(), Positions({0, 8})}, Index{Scalar0d(100)},
        Index{Positions({1, 2, 3, 1000}, {2, 2})}, Index{Ellipsis{}, 8}}) {
    ExpectRejected("read " + Show(index), StatusCode::kOutOfRange, [&] { td.index(index); });
    ExpectRejected("write " + Show(index), StatusCode::kOutOfRange, [&] {
      td.set_index(index, "obs", at::zeros({3}));
    });
    // Nor is a missing leaf created.
    ExpectRejected("write new leaf " + Show(index), StatusCode::kOutOfRange, [&] {
      td.set_index(index, "brand_new", at::scalar_tensor(0.0, at::kFloat));
    });
  }
}

TEST_F(E2eIndexedErrors, BadIndices) {
  Dict& td = d_->td;
  const std::vector<std::pair<std::string, Index>> cases = {
      {"mask too short", Index{Mask(99, {1})}},
      {"mask too long", Index{Mask(101, {1})}},
      {"mask of the 2nd dim too long", Index{Slice(), Mask(9, {1})}},
      {"2-D mask", Index{at::ones({100, 8}, at::kBool)}},
      {"float index", Index{at::tensor({1.0f, 2.0f})}},
      {"double index", Index{at::tensor({1.0})}},
      {"complex index", Index{at::ones({2}, at::kComplexFloat)}},
      {"step 0", Index{Slice(0, 10, 0)}},
      {"negative step", Index{Slice(10, 0, -1)}},
      {"too many items", Index{1, 2, 3}},
      {"two ellipses", Index{Ellipsis{}, Ellipsis{}}},
      {"shapes do not broadcast", Index{Positions({1, 2, 3}), Positions({1, 2})}},
      {"mask and positions do not broadcast", Index{Mask(100, {1, 2}), Positions({1, 2, 3})}},
      {"undefined tensor", Index{at::Tensor()}},
  };
  for (const auto& [what, index] : cases) {
    ExpectRejected("read: " + what, StatusCode::kInvalidArgument, [&] { td.index(index); });
    ExpectRejected("write: " + what, StatusCode::kInvalidArgument, [&] {
      td.set_index(index, {{Key("obs"), at::zeros({3})}, {Key("new_leaf"), at::zeros({1})}});
    });
  }
}

// What the client library checks itself must be checked by the server too.
TEST_F(E2eIndexedErrors, ServerChecksRawRequests) {
  auto slice_index = [](int64_t step) {
    v1::Index index;
    v1::Slice* slice = index.add_items()->mutable_slice();
    slice->set_start(0);
    slice->set_stop(10);
    slice->set_step(step);
    return index;
  };
  v1::Index short_mask;  // 99 values for a dim of 100
  auto* mask = short_mask.add_items()->mutable_mask();
  for (int i = 0; i < 99; ++i) mask->add_values(i % 2 == 0);
  v1::Index bad_positions;  // 3 values, shape [2]
  auto* positions = bad_positions.add_items()->mutable_positions();
  positions->add_values(1);
  positions->add_values(2);
  positions->add_values(3);
  positions->add_shape(2);
  v1::Index negative_dim;  // a shape with a negative dim
  positions = negative_dim.add_items()->mutable_positions();
  positions->add_shape(-1);
  v1::Index empty_item;  // an IndexItem with no kind set
  empty_item.add_items();

  const std::vector<std::pair<std::string, v1::Index>> cases = {
      {"step 0", slice_index(0)},       {"step -1", slice_index(-1)},
      {"mask length", short_mask},      {"positions shape", bad_positions},
      {"negative dim", negative_dim},   {"empty item", empty_item},
  };
  for (const auto& [what, index] : cases) {
    SCOPED_TRACE(what);
    grpc::Status read = RawRead(index);
    EXPECT_EQ(read.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << read.error_message();
    grpc::Status write = RawWrite(index, "obs", at::zeros({3}));
    EXPECT_EQ(write.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << write.error_message();
    EXPECT_TRUE(Snapshot(id_) == before_) << "Redis changed";
  }
}

TEST_F(E2eIndexedErrors, BadValues) {
  Dict& td = d_->td;
  const Index rows{Slice(0, 4)};  // indexed shape [4, 8]
  ExpectRejected("value shape", StatusCode::kInvalidArgument,
                 [&] { td.set_index(rows, "obs", at::zeros({5, 8, 3})); });
  ExpectRejected("value element shape", StatusCode::kInvalidArgument,
                 [&] { td.set_index(rows, "obs", at::zeros({4, 8, 4})); });
  ExpectRejected("value not broadcastable", StatusCode::kInvalidArgument,
                 [&] { td.set_index(rows, "obs", at::zeros({2, 8, 3})); });
  ExpectRejected("dtype", StatusCode::kInvalidArgument,
                 [&] { td.set_index(rows, "obs", at::zeros({4, 8, 3}, at::kDouble)); });
  ExpectRejected("dtype of a 0-d value", StatusCode::kInvalidArgument,
                 [&] { td.set_index(rows, "pix", at::scalar_tensor(1, at::kInt)); });
  // One good leaf and one bad: neither is written.
  ExpectRejected("second leaf bad", StatusCode::kInvalidArgument, [&] {
    td.set_index(rows, {{Key("obs"), at::ones({4, 8, 3})}, {Key("pix"), at::ones({4, 8, 3})}});
  });
  ExpectRejected("good leaf and bad new leaf", StatusCode::kInvalidArgument, [&] {
    td.set_index(rows, {{Key("new"), at::ones({4, 8})}, {Key("obs"), at::ones({3, 8, 3})}});
  });
  ExpectRejected("leaf where a nested dict is", StatusCode::kFailedPrecondition,
                 [&] { td.set_index(rows, "next", at::ones({4, 8})); });
  ExpectRejected("nested under a leaf", StatusCode::kFailedPrecondition,
                 [&] { td.set_index(rows, {"obs", "below"}, at::ones({4, 8})); });
  // An index too large for one request.
  std::vector<int64_t> many(1 << 20, 1LL << 40);
  ExpectRejected("index over 4 MiB", StatusCode::kInvalidArgument,
                 [&] { td.index(Positions(many)); });
  EXPECT_TRUE(SameLocal(d_->local, td.to_local()));
}

// ---- CLI -----------------------------------------------------------------------

class E2eIndexedCli : public CliTest {};

TEST_F(E2eIndexedCli, GetAndPutWithIndexMatchNumpy) {
  ASSERT_TRUE(HasNumpy()) << "needs /usr/bin/python3 with NumPy (deploy/install-deps.sh installs it)";
  const std::string name = UniqueDictName();
  Client(DaemonAddress()).create(name, {20, 3}, CreateOptions{4, 0});
  Python(R"(
obs = (np.arange(20 * 3 * 2, dtype=np.float32) * 1.5).reshape(20, 3, 2)
np.save('obs.npy', obs)
np.save('pos.npy', np.array([[3, 0], [19, 3], [-1, 7]], dtype=np.int64))
np.save('mask.npy', np.arange(20) % 3 == 1)
np.save('flt.npy', np.array([1.0, 2.0]))
)");
  ASSERT_EQ(Run({"put", name, "obs", "obs.npy"}).status, 0);

  // get --index TEXT: NumPy evaluates obs[TEXT] itself.
  const std::vector<std::string> texts = {
      "3",      "-1",      "3:10:2",        "::3",    "[1,5,9]",       "...",
      "2,1:3",  "[[0,1],[2,3]]", "[True,False]*10", ":,2", "...,0", "[0,2],:",
      "5:2",    "1::4,::2", "-3:",
  };
  std::vector<std::future<CliResult>> gets;
  for (size_t i = 0; i < texts.size(); ++i) {
    // "[True,False]*10" is Python for the mask; tdstore gets it spelled out.
    std::string text = texts[i];
    if (text == "[True,False]*10") {
      text = "[";
      for (int r = 0; r < 20; ++r) text += r % 2 == 0 ? "True," : "False,";
      text.back() = ']';
    }
    gets.push_back(std::async(std::launch::async, [this, name, text, i] {
      return Run({"get", name, "obs", "--index", text, "-o", "got" + std::to_string(i) + ".npy"});
    }));
  }
  std::string check = "obs = np.load('obs.npy')\n";
  for (size_t i = 0; i < texts.size(); ++i) {
    const CliResult r = gets[i].get();
    ASSERT_EQ(r.status, 0) << texts[i] << ": " << r.err;
    check += "got = np.load('got" + std::to_string(i) + ".npy')\n"
             "exp = obs[" + texts[i] + ", :]\n"
             "assert got.dtype == exp.dtype and got.shape == exp.shape and "
             "np.array_equal(got, exp), " + Quote(texts[i]) + "\n";
  }
  // --index-file: positions of any shape (negative ones too) and a mask.
  CliResult r = Run({"get", name, "obs", "--index-file", "pos.npy", "-o", "pos_out.npy"});
  ASSERT_EQ(r.status, 0) << r.err;
  r = Run({"get", name, "obs", "--index-file=mask.npy", "-o", "mask_out.npy"});
  ASSERT_EQ(r.status, 0) << r.err;
  check += R"(
assert np.array_equal(np.load('pos_out.npy'), obs[np.load('pos.npy')])
assert np.array_equal(np.load('mask_out.npy'), obs[np.load('mask.npy')])
)";
  Python(check);

  // put --index: rows, a broadcast 0-d value, a positions file, a new leaf.
  Python(R"(
np.save('rows.npy', np.full((5, 3, 2), 7, np.float32))
np.save('one.npy', np.array(-2.0, np.float32))
np.save('wpos.npy', np.array([18, 0, 9], np.int64))
np.save('wval.npy', np.arange(3 * 3 * 2, dtype=np.float32).reshape(3, 3, 2) + 100)
np.save('newval.npy', np.array([[1, 2, 3], [4, 5, 6]], np.int16))
)");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"put", name, "obs", "rows.npy", "--index", "1:20:4"},
           {"put", name, "obs", "one.npy", "--index", "2,1"},
           {"put", name, "obs", "wval.npy", "--index-file", "wpos.npy"},
           {"put", name, "new/leaf", "newval.npy", "--index", "[4,6]"}}) {
    r = Run(args);
    ASSERT_EQ(r.status, 0) << args[4] << ": " << r.err;
  }
  ASSERT_EQ(Run({"get", name, "obs", "-o", "after.npy"}).status, 0);
  ASSERT_EQ(Run({"get", name, "new/leaf", "-o", "new.npy"}).status, 0);
  Python(R"(
obs = np.load('obs.npy')
obs[1:20:4] = np.load('rows.npy')
obs[2, 1] = np.load('one.npy')
obs[np.load('wpos.npy')] = np.load('wval.npy')
assert np.array_equal(np.load('after.npy'), obs)
new = np.zeros((20, 3), np.int16)
new[[4, 6]] = np.load('newval.npy')
got = np.load('new.npy')
assert got.dtype == new.dtype and np.array_equal(got, new)
)");

  // Errors: one line, exit 2 for a malformed index, 1 for the server's.
  struct Bad {
    std::vector<std::string> args;
    int status;
    std::string text;
  };
  const std::vector<Bad> bad = {
      {{"get", name, "obs", "--index", "1:[", "-o", "x.npy"}, 2, "--index"},
      {{"get", name, "obs", "--index", "1", "--index-file", "pos.npy", "-o", "x.npy"}, 2, ""},
      {{"get", name, "obs", "--index", "20", "-o", "x.npy"}, 1, "OUT_OF_RANGE"},
      {{"get", name, "obs", "--index", "::0", "-o", "x.npy"}, 1, "INVALID_ARGUMENT"},
      {{"get", name, "obs", "--index-file", "flt.npy", "-o", "x.npy"}, 1, ""},
      {{"put", name, "obs", "rows.npy", "--index", "0:4"}, 1, "INVALID_ARGUMENT"},
      {{"put", name, "obs", "flt.npy", "--index", "0,0,0"}, 1, "INVALID_ARGUMENT"},
      {{"ls", name, "--index", "1"}, 2, ""},
  };
  for (const Bad& b : bad) {
    std::string joined;
    for (const std::string& a : b.args) joined += a + " ";
    r = Run(b.args);
    EXPECT_EQ(r.status, b.status) << joined << r.err;
    EXPECT_TRUE(IsOneLineError(r)) << joined;
    EXPECT_NE(r.err.find(b.text), std::string::npos) << joined << r.err;
    EXPECT_FALSE(std::filesystem::exists(File("x.npy"))) << joined;
  }
}

// ---- Acceptance: bytes out of Redis --------------------------------------------

// An indexed read of 256 random rows out of 100,000 (float32, 64 per row)
// moves at most 1.1x the selected bytes plus 64 KiB of protocol out of Redis.
// Its own Redis and daemon: nothing else talks to them.
TEST(E2eIndexedAcceptance, IndexedReadMovesOnlySelectedBytes) {
  std::unique_ptr<TestRedis> redis = MakeTestRedis();  // this run's back end
  ASSERT_TRUE(redis->Start().ok());
  DaemonProcess daemon;
  absl::Status started = daemon.Start({"--redis", redis->url(), "--namespace", "acc"});
  ASSERT_TRUE(started.ok()) << started;
  Client client(daemon.address());
  constexpr int64_t kRows = 100000, kCols = 64, kPick = 256;
  Dict td = client.create("acceptance", {kRows});
  const at::Tensor leaf = RandomTensor(at::kFloat, {kRows, kCols}, 3);
  td.set("x", leaf);

  std::mt19937_64 rng(99);
  std::vector<int64_t> all(kRows);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  td.index(Positions({all[kPick]}));  // warm up connections and scripts
  const std::vector<int64_t> rows(all.begin(), all.begin() + kPick);

  const int64_t before = redis->TotalNetOutputBytes();
  LocalDict got = td.index(Positions(rows));
  const int64_t after = redis->TotalNetOutputBytes();
  ASSERT_GE(before, 0);
  EXPECT_TRUE(SameBytes(leaf.index({Positions(rows)}), got.at("x")));

  const int64_t selected = kPick * kCols * 4;
  const int64_t moved = after - before;
  const double limit = 1.1 * static_cast<double>(selected) + 64 * 1024;
  std::cout << "[ measure  ] " << redis->backend() << ": indexed read of " << kPick << " rows: " << moved
            << " bytes out of Redis for " << selected << " selected ("
            << static_cast<double>(moved) / static_cast<double>(selected) << "x)" << std::endl;
  ::testing::Test::RecordProperty("redis_output_bytes", std::to_string(moved));
  EXPECT_GE(moved, selected) << "the measurement does not see the data";
  EXPECT_LE(static_cast<double>(moved), limit);
  EXPECT_EQ(daemon.Stop(), 0) << daemon.LogTail();
}

}  // namespace
}  // namespace tdstore::testing
