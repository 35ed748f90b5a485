// Leaf operations tdstored does itself, through real gRPC on both back
// ends: renaming a leaf or subtree (no data moves: the block keys and their
// bytes are the same before and after), filling whole leaves or indexed rows
// with a scalar (compared with torch's fill_ for every dtype), keys under a
// prefix, and a write that a locked dict refuses even in place. Bad input
// changes nothing.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tdstore/client.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/expect_error.h"
#include "tests/e2e/tensor_testing.h"

namespace tdstore::testing {
namespace {

using Snapshot = std::map<std::string, std::string>;

// The data keys (blocks) of the shared namespace with their DUMPs.
Snapshot DataKeys() {
  Snapshot out;
  for (const auto& [key, dump] : NamespaceSnapshot("e2e")) {
    if (key.find(":g") != std::string::npos) out[key] = dump;
  }
  return out;
}

std::vector<std::string> Strs(const std::vector<Key>& keys) {
  std::vector<std::string> out;
  for (const Key& k : keys) out.push_back(k.str());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(E2eLeafOps, RenameMovesRecordsNotBytes) {
  Client client(DaemonAddress());
  Dict d = client.create(UniqueDictName(), {6}, CreateOptions{4, 0});
  const at::Tensor x = RandomTensor(at::kFloat, {6, 3}, 1);
  const at::Tensor y = RandomTensor(at::kInt, {6}, 2);
  const at::Tensor z = RandomTensor(at::kDouble, {6, 2}, 3);
  d.set("x", x);
  d.set({"n", "y"}, y);
  d.set({"n", "m", "z"}, z);
  const Snapshot blocks = DataKeys();

  d.rename("x", {"moved", "x"});
  d.rename("n", "sub");  // a whole subtree
  EXPECT_EQ(Strs(d.keys(true, true)), (std::vector<std::string>{"moved/x", "sub/m/z", "sub/y"}));
  EXPECT_TRUE(SameBytes(x, d.get({"moved", "x"})));
  EXPECT_TRUE(SameBytes(y, d.get({"sub", "y"})));
  EXPECT_TRUE(SameBytes(z, d.get({"sub", "m", "z"})));
  // The same block keys hold the same bytes: nothing was copied.
  EXPECT_EQ(DataKeys(), blocks);

  // Refusals change nothing (records, blocks, version).
  int64_t version = d.describe().version;
  auto refused = [&](StatusCode code, const std::function<void()>& call) {
    Error e = ErrorOf(call);
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(d.describe().version, version) << e.what();
    EXPECT_EQ(DataKeys(), blocks);
  };
  refused(StatusCode::kNotFound, [&] { d.rename("nope", "x"); });
  refused(StatusCode::kAlreadyExists, [&] { d.rename({"sub", "y"}, {"moved", "x"}); });
  refused(StatusCode::kAlreadyExists, [&] { d.rename({"sub", "y"}, "moved"); });  // a subtree there
  refused(StatusCode::kFailedPrecondition, [&] { d.rename({"sub", "y"}, {"moved", "x", "deep"}); });
  refused(StatusCode::kFailedPrecondition, [&] { d.rename("sub", {"sub", "inner"}); });
  refused(StatusCode::kFailedPrecondition, [&] { d.rename({"sub", "m"}, "sub"); });
  d.lock();
  version = d.describe().version;  // the lock moved it
  refused(StatusCode::kFailedPrecondition, [&] { d.rename({"sub", "y"}, "w"); });
  d.unlock();

  // With replace, the target's leaf goes and its blocks are deleted.
  d.rename({"sub", "y"}, {"moved", "x"}, /*replace=*/true);
  EXPECT_TRUE(SameBytes(y, d.get({"moved", "x"})));
  EXPECT_EQ(Strs(d.keys(true, true)), (std::vector<std::string>{"moved/x", "sub/m/z"}));
  EXPECT_LT(DataKeys().size(), blocks.size());
  d.core().drop();
}

TEST(E2eLeafOps, RenameFollowsAModelOnRandomTrees) {
  Client client(DaemonAddress());
  std::mt19937 rng(77);
  const std::vector<std::vector<std::string>> spots{
      {"a"}, {"b"}, {"n", "a"}, {"n", "b"}, {"n", "m", "a"}, {"o", "a"}, {"p"}};
  for (int trial = 0; trial < 4; ++trial) {
    Dict d = client.create(UniqueDictName(), {3});
    std::map<std::vector<std::string>, at::Tensor> model;
    for (const auto& spot : spots) {
      if (rng() % 2 == 0) continue;
      // Only spots that keep the tree valid (no leaf above another).
      bool ok = true;
      for (const auto& [p, _] : model) {
        const size_t n = std::min(p.size(), spot.size());
        if (std::equal(p.begin(), p.begin() + n, spot.begin())) ok = false;
      }
      if (!ok) continue;
      model[spot] = RandomTensor(at::kFloat, {3}, rng());
      d.set(Key(spot), model[spot]);
    }
    for (int step = 0; step < 10 && !model.empty(); ++step) {
      auto it = model.begin();
      std::advance(it, rng() % model.size());
      std::vector<std::string> from = it->first;
      if (from.size() > 1 && rng() % 2 == 0) from.pop_back();  // a subtree
      std::vector<std::string> to{"r" + std::to_string(step)};
      d.rename(Key(from), Key(to));
      std::map<std::vector<std::string>, at::Tensor> next;
      for (auto& [p, t] : model) {
        if (p.size() >= from.size() && std::equal(from.begin(), from.end(), p.begin())) {
          std::vector<std::string> q = to;
          q.insert(q.end(), p.begin() + from.size(), p.end());
          next[q] = t;
        } else {
          next[p] = t;
        }
      }
      model = next;
      std::vector<std::string> want;
      for (const auto& [p, _] : model) want.push_back(Key(p).str());
      std::sort(want.begin(), want.end());
      ASSERT_EQ(Strs(d.keys(true, true)), want) << "trial " << trial << " step " << step;
    }
    for (const auto& [p, t] : model) EXPECT_TRUE(SameBytes(t, d.get(Key(p)))) << Key(p).str();
    d.core().drop();
  }
}

TEST(E2eLeafOps, WholeLeafFillMatchesTorchForEveryDType) {
  Client client(DaemonAddress());
  // rows_per_block 5 and small parts: several blocks and parts per leaf.
  Dict d = client.create(UniqueDictName(), {13}, CreateOptions{5, 24});
  std::vector<Key> paths;
  for (at::ScalarType type : AllDTypes()) {
    const Key path(std::vector<std::string>{"t", std::string(c10::toString(type))});
    d.set(path, RandomTensor(type, {13, 3}, 9));
    paths.push_back(path);
  }
  for (const double value : {0.0, 1.0, -2.5, 3.1, 1e10}) {
    for (const Key& path : paths) {
      const at::Tensor before = d.get(path);
      const at::ScalarType type = before.scalar_type();
      // Only values torch's fill_ takes for the dtype (it refuses those
      // out of an integer dtype's range).
      if (type == at::kBool && value != 0 && value != 1) continue;
      if (type == at::kByte && value < 0) continue;
      if (std::abs(value) > 1e9 && type != at::kLong && (at::isIntegralType(type, true) || type == at::kHalf)) continue;
      at::Tensor want = before.clone();
      want.fill_(value);
      d.fill({path}, value);
      EXPECT_TRUE(SameBytes(want, d.get(path))) << path.str() << " = " << value;
    }
  }
  // A sub-dict fills every leaf under it; zero costs a SETRANGE per part.
  d.fill({"t"}, 0);
  for (const Key& path : paths) EXPECT_EQ(d.get(path).count_nonzero().item<int64_t>(), 0);
  d.core().drop();
}

TEST(E2eLeafOps, IndexedFillMatchesTorchOnRandomIndices) {
  Client client(DaemonAddress());
  Dict d = client.create(UniqueDictName(), {20}, CreateOptions{6, 0});
  std::mt19937 rng(11);
  at::Tensor local = RandomTensor(at::kFloat, {20, 4}, 5);
  d.set("x", local);
  for (int i = 0; i < 12; ++i) {
    const double value = static_cast<double>(rng() % 100) - 50;
    Index index{Ellipsis{}};
    switch (i % 3) {
      case 0: {
        const int64_t a = rng() % 20, b = a + rng() % (21 - a);
        index = Index(Slice(a, b));
        local.slice(0, a, b).fill_(value);
        break;
      }
      case 1: {
        const at::Tensor pos = at::randint(20, {5}, at::kLong);
        index = Index(pos);
        local.index_fill_(0, pos, value);
        break;
      }
      case 2: {
        const at::Tensor mask = at::rand({20}) > 0.5;
        index = Index(mask);
        local.index_put_({mask}, at::scalar_tensor(value));
        break;
      }
    }
    d.fill({"x"}, value, &index);
    ASSERT_TRUE(SameBytes(local, d.get("x"))) << "step " << i;
  }
  d.core().drop();
}

TEST(E2eLeafOps, FillRefusesBadInputAndWorksWhileLocked) {
  Client client(DaemonAddress());
  Dict d = client.create(UniqueDictName(), {4});
  d.set("x", at::zeros({4, 2}));
  const core::Dict& c = d.core();
  const int64_t version = c.describe().version;
  auto refused = [&](StatusCode code, const std::vector<core::LeafFill>& fills) {
    Error e = ErrorOf([&] { c.fill(fills); });
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(c.describe().version, version);
    EXPECT_TRUE(d.get("x").equal(at::zeros({4, 2})));
  };
  const std::string one(4, '\1');
  refused(StatusCode::kNotFound, {{Key("nope"), DType::kFloat32, one}});
  // The leaf is float32: a caller that believes otherwise wrote nothing.
  refused(StatusCode::kFailedPrecondition, {{Key("x"), DType::kInt32, one}});
  refused(StatusCode::kInvalidArgument, {{Key("x"), DType::kFloat32, std::string(3, '\1')}});
  refused(StatusCode::kInvalidArgument,
          {{Key("x"), DType::kFloat32, one}, {Key("x"), DType::kFloat32, one}});
  refused(StatusCode::kInvalidArgument, {});
  // In place: a locked dict allows it.
  d.lock();
  d.fill({"x"}, 7);
  EXPECT_TRUE(d.get("x").equal(at::full({4, 2}, 7.0)));
  d.core().drop();
}

TEST(E2eLeafOps, KeysUnderAPrefix) {
  Client client(DaemonAddress());
  Dict d = client.create(UniqueDictName(), {2});
  d.set("a", at::zeros({2}));
  d.set({"n", "b"}, at::zeros({2}));
  d.set({"n", "m", "c"}, at::zeros({2}));
  d.set({"n", "m", "e"}, at::zeros({2}));
  using S = std::vector<std::string>;
  EXPECT_EQ(Strs(d.keys_under("n")), (S{"b", "m"}));
  EXPECT_EQ(Strs(d.keys_under("n", true)), (S{"b", "m", "m/c", "m/e"}));
  EXPECT_EQ(Strs(d.keys_under("n", true, true)), (S{"b", "m/c", "m/e"}));
  EXPECT_EQ(Strs(d.keys_under({"n", "m"})), (S{"c", "e"}));
  EXPECT_EQ(ErrorOf([&] { d.keys_under("zz"); }).code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrorOf([&] { d.keys_under("a"); }).code(), StatusCode::kInvalidArgument);
  // The same through a client without a watched copy (tdstored answers).
  ClientOptions options;
  options.watch_schemas = false;
  Dict plain = Client(DaemonAddress(), options).open(d.name());
  EXPECT_EQ(Strs(plain.keys_under("n", true)), (S{"b", "m", "m/c", "m/e"}));
  EXPECT_EQ(ErrorOf([&] { plain.keys_under("zz"); }).code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrorOf([&] { plain.keys_under("a"); }).code(), StatusCode::kInvalidArgument);
  d.core().drop();
}

TEST(E2eLeafOps, AWriteCanAskALockedDictToRefuseItEvenInPlace) {
  Client client(DaemonAddress());
  Dict d = client.create(UniqueDictName(), {2});
  const at::Tensor x = at::zeros({2});
  d.set("x", x);
  d.lock();
  const core::LeafData leaf{Key("x"), DType::kFloat32, {2}, x.data_ptr(), 8};
  core::WriteOptions strict;
  strict.refuse_if_locked = true;
  Error e = ErrorOf([&] { d.core().write({leaf}, strict); });
  EXPECT_EQ(e.code(), StatusCode::kFailedPrecondition) << e.what();
  EXPECT_NE(e.message().find("is locked"), std::string::npos) << e.what();
  d.core().write({leaf});  // without it: in place, allowed
  d.unlock();
  d.core().write({leaf}, strict);  // unlocked: no difference
  d.core().drop();
}

}  // namespace
}  // namespace tdstore::testing
