// Leaf operations tdstored does itself, through real gRPC on both back
// ends: renaming a leaf or subtree (no data moves: the block keys and their
// bytes are the same before and after), filling whole leaves or indexed rows
// with a scalar (compared with torch's fill_ for every dtype), keys under a
// prefix, a write that a locked dict refuses even in place, and copies
// (into a dict, or as a new dict that appears only once complete). Bad
// input changes nothing.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tdstore/client.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/expect_error.h"
#include "tests/e2e/metrics_scrape.h"
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

// "a/b" -> Key({"a", "b"}).
Key SlashKey(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t slash; (slash = text.find('/', start)) != std::string::npos; start = slash + 1) {
    parts.push_back(text.substr(start, slash - start));
  }
  parts.push_back(text.substr(start));
  return Key(parts);
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
  const core::LeafData leaf{Key("x"), DType::kFloat32, {2}, x.data_ptr(), 8, LeafKind::kTensor, {}};
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

TEST(E2eLeafOps, CopyInsideTdstoredMatchesTheSourceByteForByte) {
  Client client(DaemonAddress());
  Dict src = client.create(UniqueDictName(), {11}, CreateOptions{4, 40});
  std::map<std::string, at::Tensor> leaves;
  uint32_t seed = 30;
  for (at::ScalarType type : AllDTypes()) {
    const std::string name = std::string("n/") + c10::toString(type);
    leaves[name] = RandomTensor(type, {11, 3}, seed++);
    src.set(SlashKey(name), leaves[name]);
  }
  leaves["top"] = RandomTensor(at::kFloat, {11}, seed++);
  src.set("top", leaves["top"]);

  // The whole dict into another one, same paths.
  Dict dst = client.create(UniqueDictName(), {11});
  src.copy(Key(std::vector<std::string>{}), dst, Key(std::vector<std::string>{}));
  for (const auto& [name, t] : leaves) EXPECT_TRUE(SameBytes(t, dst.get(SlashKey(name)))) << name;
  // A subtree and a leaf within one dict, to new paths.
  src.copy("n", src, {"m", "copy"});
  EXPECT_TRUE(SameBytes(leaves["n/Float"], src.get({"m", "copy", "Float"})));
  src.copy("top", src, "top2");
  EXPECT_TRUE(SameBytes(leaves["top"], src.get("top2")));
  // Onto an existing leaf: replaced, as a write would.
  src.copy("top2", dst, {"n", "Float"});
  EXPECT_TRUE(SameBytes(leaves["top"], dst.get({"n", "Float"})));  // now [11], was [11, 3]

  // Refused, nothing visible in the target.
  Dict other = client.create(UniqueDictName(), {5});
  const int64_t version = other.describe().version;
  auto refused = [&](StatusCode code, const std::function<void()>& call) {
    Error e = ErrorOf(call);
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(other.describe().version, version);
    EXPECT_TRUE(other.keys().empty());
  };
  refused(StatusCode::kInvalidArgument, [&] { src.copy("top", other, "top"); });  // batch 11 vs 5
  refused(StatusCode::kNotFound, [&] { src.copy("nope", other, "x"); });
  refused(StatusCode::kInvalidArgument,
          [&] { src.copy("top", other, Key(std::vector<std::string>{})); });
  other.lock();
  EXPECT_EQ(ErrorOf([&] { src.copy("top", dst, {"n", "Float", "deep"}); }).code(),
            StatusCode::kFailedPrecondition);  // under a leaf
  for (Dict* d : {&src, &dst, &other}) d->core().drop();
}

// A clone is built before it has its name: a reader polling for it sees no
// dict, or the dict with every leaf, never one in between; a clone that
// cannot be made leaves no dict and no block.
TEST(E2eLeafOps, ACloneAppearsWithEveryLeafOrNotAtAll) {
  Client client(DaemonAddress());
  const std::string source_name = UniqueDictName(), name = UniqueDictName();
  Dict src = client.create(source_name, {1024});
  for (int i = 0; i < 4; ++i) src.set("l" + std::to_string(i), at::rand({1024, 2048}));  // 8 MiB
  src.set({"n", "y"}, at::arange(1024, at::kLong));
  ClientOptions no_watch;
  no_watch.watch_schemas = false;  // every describe asks tdstored
  std::atomic<bool> done{false};
  int polls = 0, absent = 0, whole = 0, partial = 0;
  std::thread watcher([&] {
    Client reader(DaemonAddress(), no_watch);
    while (!done.load()) {
      ++polls;
      try {
        const size_t leaves = reader.open(name).describe().leaves.size();
        (leaves == 5 ? whole : partial) += 1;
      } catch (const Error& e) {
        if (e.code() == StatusCode::kNotFound) ++absent;
        else ADD_FAILURE() << e.what();
      }
    }
  });
  Dict copy = src.clone(name);
  done = true;
  watcher.join();
  EXPECT_EQ(partial, 0) << "a reader saw the clone before every leaf was in place";
  EXPECT_GT(absent, 0) << "the poll never ran during the copy (" << polls << " polls)";
  for (int i = 0; i < 4; ++i) {
    const std::string leaf = "l" + std::to_string(i);
    EXPECT_TRUE(SameBytes(copy.get(leaf), src.get(leaf))) << leaf;
  }
  EXPECT_EQ(copy.describe().rows_per_block, src.describe().rows_per_block);

  // A sub-dict cloned alone becomes the new dict's root.
  const std::string sub_name = UniqueDictName();
  Dict sub = src.clone(sub_name, {"n"});
  EXPECT_EQ(sub.keys(true, true), (std::vector<Key>{Key("y")}));
  EXPECT_TRUE(sub.get("y").equal(at::arange(1024, at::kLong)));

  // Refused clones leave no dict and no block.
  const Snapshot blocks = DataKeys();
  const std::vector<std::string> names = client.list();
  EXPECT_EQ(ErrorOf([&] { src.clone(name); }).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrorOf([&] { src.clone(UniqueDictName(), {"nope"}); }).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(ErrorOf([&] { src.clone(UniqueDictName(), {"n", "y"}); }).code(),
            StatusCode::kInvalidArgument);  // a leaf needs a path in the new dict
  EXPECT_EQ(DataKeys(), blocks);
  EXPECT_EQ(client.list(), names);
  src.core().drop();
  copy.core().drop();
  sub.core().drop();
}

// A copy moves its bytes inside tdstored: the CopyLeaves call's gRPC
// messages stay tiny whatever the dict's size (tdstored's own byte counters,
// /metrics). 64 MiB in CI; the figure for 1 GiB:
//   TDSTORE_COPY_TEST_BYTES=1073741824 build/tests/e2e/e2e_test --gtest_filter='*CopySends*'
TEST(E2eLeafOps, CopySendsNoDataBytesOverGrpc) {
  const char* env = std::getenv("TDSTORE_COPY_TEST_BYTES");
  const int64_t bytes = env != nullptr && *env != '\0' ? std::atoll(env) : (int64_t{64} << 20);
  DaemonProcess daemon;
  ASSERT_TRUE(daemon
                  .Start({"--redis", SharedRedis().url(), "--namespace", "copybytes",
                          "--metrics-listen", "127.0.0.1:0", "--namespace-quota-bytes", "0"})
                  .ok())
      << daemon.LogTail();
  {
    Client client(daemon.address());
    const int64_t rows = 1024;
    Dict src = client.create("src", {rows});
    const int64_t cols = bytes / rows / 4;
    src.set("x", at::rand({rows, cols}));
    src.set({"n", "y"}, at::rand({rows, 8}));
    Dict dst = client.create("dst", {rows});
    const Scrape before(daemon.metrics_url());
    const auto start = std::chrono::steady_clock::now();
    src.copy(Key(std::vector<std::string>{}), dst, Key(std::vector<std::string>{}));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const Scrape after(daemon.metrics_url());
    const std::map<std::string, std::string> method{{"method", "tdstore.v1.TdStore/CopyLeaves"}};
    const double in = after.Value("tdstore_rpc_bytes_received_total", method) -
                      before.Value("tdstore_rpc_bytes_received_total", method);
    const double out = after.Value("tdstore_rpc_bytes_sent_total", method) -
                       before.Value("tdstore_rpc_bytes_sent_total", method);
    std::printf("copy of %lld bytes: %.0f bytes received, %.0f sent over gRPC, %.2f s\n",
                static_cast<long long>(rows * cols * 4 + rows * 32), in, out, seconds);
    EXPECT_GT(in, 0);  // the request was counted
    EXPECT_LT(in + out, 1024);
    // And the data is there (read after the scrape: reads do move bytes).
    EXPECT_TRUE(SameBytes(src.get({"n", "y"}), dst.get({"n", "y"})));
    EXPECT_TRUE(dst.get("x").equal(src.get("x")));
    src.core().drop();
    dst.core().drop();
  }
  EXPECT_EQ(daemon.Stop(), 0) << daemon.LogTail();
}

}  // namespace
}  // namespace tdstore::testing
