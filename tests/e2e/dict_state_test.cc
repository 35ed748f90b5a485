// A dict's state beside its leaves, through real gRPC on both back ends:
// the lock (shared by every client and every daemon, refusing exactly the
// structural changes), attributes (limits, all-or-nothing updates) and
// counters (atomic across threads and daemons, compared with a local model
// on random operations), and resizing batch dim 0 (every client sees the
// new size; every old row keeps its values, new rows read zeros). Stale and renamed handles get NOT_FOUND, and
// deleting a dict deletes its state.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tdstore/client.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/expect_error.h"

namespace tdstore::testing {
namespace {

// Another client's change reaches this client's watched schema copy a
// pub/sub hop later (docs/protocol.md, *Schema watch*); the store itself
// enforces it at once. Waits up to 5 s for `condition`.
bool Eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// A second tdstored on the shared daemon's Redis and namespace: what one
// daemon changes, the other must see.
class E2eDictState : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    other_ = new DaemonProcess();
    ASSERT_TRUE(other_->Start({"--redis", SharedRedis().url(), "--namespace", "e2e"}).ok())
        << other_->LogTail();
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(other_->Stop(), 0) << other_->LogTail();
    delete other_;
    other_ = nullptr;
  }
  static DaemonProcess* other_;
};
DaemonProcess* E2eDictState::other_ = nullptr;

TEST_F(E2eDictState, ALockIsSharedAndRefusesExactlyTheStructuralChanges) {
  Client a(DaemonAddress());
  Client b(other_->address());
  const std::string name = UniqueDictName();
  Dict mine = a.create(name, {4});
  mine.set("x", at::zeros({4, 2}));
  mine.set({"n", "y"}, at::zeros({4}));
  mine.lock();
  Dict theirs = b.open(name);
  EXPECT_TRUE(theirs.is_locked());  // through the other daemon, at once
  EXPECT_TRUE(mine.is_locked());
  const int64_t version = theirs.describe().version;

  auto expect_locked = [&](const char* what, const std::function<void()>& call) {
    Error e = ErrorOf(call);
    EXPECT_EQ(e.code(), StatusCode::kFailedPrecondition) << what << ": " << e.what();
    EXPECT_TRUE(Contains(e.message(), "is locked")) << what << ": " << e.what();
  };
  expect_locked("new leaf", [&] { theirs.set("z", at::ones({4})); });
  expect_locked("new nested leaf", [&] { theirs.set({"n", "w"}, at::ones({4})); });
  expect_locked("other shape", [&] { theirs.set("x", at::ones({4, 3})); });
  expect_locked("other dtype", [&] { theirs.set("x", at::ones({4, 2}, at::kDouble)); });
  expect_locked("erase leaf", [&] { theirs.erase("x"); });
  expect_locked("erase subtree", [&] { theirs.erase("n"); });
  expect_locked("indexed write creating a leaf",
                [&] { theirs.set_index(Index{1}, "fresh", at::ones({})); });
  expect_locked("one of two new", [&] {
    theirs.update({{Key("x"), at::ones({4, 2})}, {Key("q"), at::ones({4})}});
  });
  // Nothing of it landed.
  EXPECT_EQ(theirs.describe().version, version);
  EXPECT_TRUE(mine.get("x").equal(at::zeros({4, 2})));
  EXPECT_FALSE(mine.contains("z"));
  EXPECT_FALSE(mine.contains("q"));

  // Writes into existing leaves go on, whole and indexed, through both.
  const at::Tensor x = at::rand({4, 2});
  theirs.set("x", x);
  EXPECT_TRUE(mine.get("x").equal(x));
  mine.set_index(Index{2}, {"n", "y"}, at::full({}, 7.0));
  EXPECT_EQ(theirs.get({"n", "y"})[2].item<float>(), 7.0f);
  // Locking again is no error, and changes nothing.
  const int64_t locked_version = mine.describe().version;
  theirs.lock();
  EXPECT_EQ(mine.describe().version, locked_version);

  theirs.unlock();
  EXPECT_TRUE(Eventually([&] { return !mine.is_locked(); }));
  mine.set("z", at::ones({4}));
  theirs.erase("n");
  EXPECT_TRUE(Eventually([&] { return theirs.contains("z") && !mine.contains("n"); }));
  mine.core().drop();
}

TEST_F(E2eDictState, AResizeIsSeenEverywhereAndKeepsEveryRow) {
  Client a(DaemonAddress());
  Client b(other_->address());
  const std::string name = UniqueDictName();
  Dict mine = a.create(name, {10});
  const at::Tensor x = at::rand({10, 3});
  const at::Tensor y = at::arange(10, at::kLong);
  mine.set("x", x);
  mine.set({"n", "y"}, y);
  Dict theirs = b.open(name);
  ASSERT_EQ(theirs.batch_size(), (std::vector<int64_t>{10}));

  mine.resize(25);
  EXPECT_EQ(mine.batch_size(), (std::vector<int64_t>{25}));  // its own change, at once
  EXPECT_TRUE(Eventually([&] { return theirs.batch_size() == std::vector<int64_t>{25}; }));
  at::Tensor got = theirs.get("x");
  ASSERT_EQ(got.sizes(), (at::IntArrayRef{25, 3}));
  EXPECT_TRUE(got.slice(0, 0, 10).equal(x));
  EXPECT_TRUE(got.slice(0, 10).equal(at::zeros({15, 3})));
  EXPECT_TRUE(theirs.get({"n", "y"}).slice(0, 0, 10).equal(y));
  // New rows are rows like any other, through the other daemon.
  theirs.set_index(Slice(20, 23), "x", at::full({3, 3}, 5.0));
  EXPECT_TRUE(mine.index(21, {"x"}).at("x").equal(at::full({3}, 5.0)));

  // Shrink through the other daemon: the kept rows keep their values.
  theirs.resize(7);
  EXPECT_TRUE(Eventually([&] { return mine.batch_size() == std::vector<int64_t>{7}; }));
  EXPECT_TRUE(mine.get("x").equal(x.slice(0, 0, 7)));
  EXPECT_TRUE(mine.get({"n", "y"}).equal(y.slice(0, 0, 7)));
  EXPECT_EQ(ErrorOf([&] { mine.index(8); }).code(), StatusCode::kOutOfRange);
  // Resizing to the current size changes nothing.
  const int64_t version = mine.describe().version;
  mine.resize(7);
  EXPECT_EQ(mine.describe().version, version);

  // Refusals, each changing nothing.
  EXPECT_EQ(ErrorOf([&] { mine.resize(-1); }).code(), StatusCode::kInvalidArgument);
  mine.lock();
  Error locked = ErrorOf([&] { theirs.resize(9); });
  EXPECT_EQ(locked.code(), StatusCode::kFailedPrecondition) << locked.what();
  EXPECT_TRUE(Contains(locked.message(), "is locked")) << locked.what();
  mine.unlock();
  EXPECT_EQ(mine.describe().version, version + 2);  // lock and unlock only
  Dict scalar = a.create(UniqueDictName(), {});
  EXPECT_EQ(ErrorOf([&] { scalar.resize(3); }).code(), StatusCode::kInvalidArgument);
  scalar.core().drop();

  // A handle held across a delete and re-create reaches nothing.
  mine.core().drop();
  Dict fresh = a.create(name, {4});
  EXPECT_EQ(ErrorOf([&] { theirs.resize(30); }).code(), StatusCode::kNotFound);
  EXPECT_EQ(fresh.batch_size(), (std::vector<int64_t>{4}));
  fresh.core().drop();
}

TEST_F(E2eDictState, AttributesAreSharedAndBounded) {
  Client a(DaemonAddress());
  Client b(other_->address());
  const std::string name = UniqueDictName();
  Dict mine = a.create(name, {2});
  Dict theirs = b.open(name);
  EXPECT_TRUE(mine.attrs().empty());
  const std::string unicode = "caf\xc3\xa9 \xe2\x9c\x93";
  mine.update_attrs({{"device", "cpu"}, {"class", "pkg.mod.Cls"}, {"empty", ""}, {unicode, unicode}});
  using Attrs = std::map<std::string, std::string>;
  const Attrs expected{{"device", "cpu"}, {"class", "pkg.mod.Cls"}, {"empty", ""}, {unicode, unicode}};
  EXPECT_TRUE(Eventually([&] { return theirs.attrs() == expected; }));
  theirs.update_attrs({{"device", "cuda:0"}}, {"class", "never-set"});
  const Attrs changed{{"device", "cuda:0"}, {"empty", ""}, {unicode, unicode}};
  EXPECT_EQ(theirs.attrs(), changed);  // the writer sees its own change at once
  EXPECT_TRUE(Eventually([&] { return mine.attrs() == changed; }));

  // Bad input: a clear error, and nothing changes.
  const Attrs before = mine.attrs();
  const int64_t version = mine.describe().version;
  auto expect_refused = [&](StatusCode code, const std::string& part,
                            const std::function<void()>& call) {
    Error e = ErrorOf(call);
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_TRUE(Contains(e.message(), part)) << e.what();
    EXPECT_EQ(theirs.attrs(), before);
    EXPECT_EQ(theirs.describe().version, version);
  };
  expect_refused(StatusCode::kInvalidArgument, "1 to 256 bytes",
                 [&] { mine.update_attrs({{"", "v"}}); });
  expect_refused(StatusCode::kInvalidArgument, "1 to 256 bytes",
                 [&] { mine.update_attrs({{std::string(257, 'k'), "v"}}); });
  expect_refused(StatusCode::kInvalidArgument, "at most 4096 bytes",
                 [&] { mine.update_attrs({{"ok", "v"}, {"big", std::string(4097, 'v')}}); });
  expect_refused(StatusCode::kInvalidArgument, "both set and removed",
                 [&] { mine.update_attrs({{"device", "x"}}, {"device"}); });
  // 253 more fit beside the 3 there (256), one more does not, in one
  // update or spread over two.
  Attrs many;
  for (int i = 0; i < 254; ++i) many["k" + std::to_string(i)] = std::string(4096, 'v');
  expect_refused(StatusCode::kResourceExhausted, "more than 256",
                 [&] { mine.update_attrs(many); });
  many.erase("k253");
  mine.update_attrs(many);  // exactly 256, values at the size limit
  EXPECT_TRUE(Eventually([&] { return theirs.attrs().size() == 256u; }));
  EXPECT_EQ(ErrorOf([&] { theirs.update_attrs({{"one-more", "v"}}); }).code(),
            StatusCode::kResourceExhausted);
  // Replacing and removing within the limit is fine at the limit.
  theirs.update_attrs({{"one-more", "v"}}, {"k0"});
  EXPECT_TRUE(Eventually([&] { return mine.attrs().count("one-more") == 1; }));
  EXPECT_EQ(mine.attrs().size(), 256u);
  EXPECT_EQ(mine.attrs().at("one-more"), "v");
  mine.core().drop();
}

TEST_F(E2eDictState, CountersFollowALocalModelOnRandomOperations) {
  Client a(DaemonAddress());
  Client b(other_->address());
  const std::string name = UniqueDictName();
  Dict d1 = a.create(name, {1});
  Dict d2 = b.open(name);
  std::map<std::string, int64_t> model;
  std::mt19937_64 rng(1234);
  const std::vector<std::string> names{"cursor", "length", "x", "\xce\xbb"};
  for (int i = 0; i < 400; ++i) {
    Dict& d = (rng() & 1) ? d1 : d2;
    const std::string& n = names[rng() % names.size()];
    switch (rng() % 3) {
      case 0: {
        const int64_t delta = static_cast<int64_t>(rng() % 2001) - 1000;
        model[n] += delta;
        ASSERT_EQ(d.counter_add(n, delta), model[n]);
        break;
      }
      case 1:
        ASSERT_EQ(d.counter_get(n), model[n]);
        break;
      case 2: {
        // Half the time the expected value is the current one.
        const int64_t expected = (rng() & 1) ? model[n] : model[n] + 1;
        const int64_t new_value = static_cast<int64_t>(rng() % 100000) - 50000;
        const bool swapped = d.counter_cas(n, expected, new_value);
        ASSERT_EQ(swapped, expected == model[n]);
        if (swapped) model[n] = new_value;
        break;
      }
    }
  }
  // Full 64-bit values survive (Lua numbers are doubles: 2^53 + 1 is not).
  const int64_t big = (int64_t{1} << 62) + 1;
  ASSERT_TRUE(d1.counter_cas("big", 0, big));
  EXPECT_EQ(d2.counter_get("big"), big);
  EXPECT_EQ(d2.counter_add("big", 2), big + 2);
  // Overflow is refused and changes nothing.
  ASSERT_TRUE(d1.counter_cas("max", 0, INT64_MAX));
  Error e = ErrorOf([&] { d2.counter_add("max", 1); });
  EXPECT_EQ(e.code(), StatusCode::kOutOfRange) << e.what();
  EXPECT_EQ(d1.counter_get("max"), INT64_MAX);
  // Bad names.
  EXPECT_EQ(ErrorOf([&] { d1.counter_add(""); }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf([&] { d1.counter_get(std::string(257, 'c')); }).code(),
            StatusCode::kInvalidArgument);
  d1.core().drop();
}

TEST_F(E2eDictState, CountersAreAtomicAcrossThreadsAndDaemons) {
  const std::string name = UniqueDictName();
  Client(DaemonAddress()).create(name, {1});
  constexpr int kThreads = 8;
  constexpr int kAdds = 250;
  std::vector<std::thread> threads;
  std::vector<std::vector<int64_t>> seen(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Client client(t % 2 == 0 ? DaemonAddress() : other_->address());
      Dict d = client.open(name);
      for (int i = 0; i < kAdds; ++i) seen[t].push_back(d.counter_add("n"));
    });
  }
  for (std::thread& t : threads) t.join();
  Client client(DaemonAddress());
  Dict d = client.open(name);
  EXPECT_EQ(d.counter_get("n"), kThreads * kAdds);
  // Every add got its own value: 1..8*250, each once.
  std::vector<int64_t> all;
  for (const auto& s : seen) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  for (int i = 0; i < kThreads * kAdds; ++i) ASSERT_EQ(all[i], i + 1);
  d.core().drop();
}

TEST_F(E2eDictState, CounterLimitAndStaleHandles) {
  Client client(DaemonAddress());
  const std::string name = UniqueDictName();
  Dict d = client.create(name, {1});
  for (int i = 0; i < 1024; ++i) d.counter_add("c" + std::to_string(i));
  Error e = ErrorOf([&] { d.counter_add("one-more"); });
  EXPECT_EQ(e.code(), StatusCode::kResourceExhausted) << e.what();
  EXPECT_TRUE(Contains(e.message(), "1024")) << e.what();
  // A cas that would create it is refused too; one that would not swap
  // just says so.
  EXPECT_EQ(ErrorOf([&] { d.counter_cas("one-more", 0, 5); }).code(),
            StatusCode::kResourceExhausted);
  EXPECT_FALSE(d.counter_cas("one-more", 1, 5));
  EXPECT_EQ(d.counter_get("one-more"), 0);
  // Existing counters still change.
  EXPECT_EQ(d.counter_add("c0", 5), 6);

  // A handle held across a rename or a delete + re-create of the name
  // never reaches the dict that has the name now.
  d.update_attrs({{"a", "1"}});
  const std::string renamed = name + ".moved";
  client.rename(name, renamed);
  for (const auto& call : std::vector<std::function<void()>>{
           [&] { d.counter_add("c0"); }, [&] { d.counter_get("c0"); },
           [&] { d.lock(); }, [&] { d.update_attrs({{"b", "2"}}); }}) {
    EXPECT_EQ(ErrorOf(call).code(), StatusCode::kNotFound);
  }
  Dict moved = client.open(renamed);
  EXPECT_EQ(moved.counter_get("c0"), 6);
  EXPECT_EQ(moved.attrs().at("a"), "1");
  EXPECT_FALSE(moved.is_locked());

  moved.core().drop();
  Dict fresh = client.create(renamed, {1});
  EXPECT_EQ(ErrorOf([&] { moved.counter_add("c0"); }).code(), StatusCode::kNotFound);
  // The namesake starts with nothing: the deleted dict's state went with it.
  EXPECT_EQ(fresh.counter_get("c0"), 0);
  EXPECT_TRUE(fresh.attrs().empty());
  fresh.core().drop();
}

TEST_F(E2eDictState, DeletingADictDeletesItsStateKeys) {
  Client client(DaemonAddress());
  Dict d = client.create(UniqueDictName(), {1});
  d.update_attrs({{"a", "1"}});
  d.counter_add("n");
  d.lock();
  const std::string id = d.describe().id;
  bool found_attrs = false, found_counters = false;
  for (const auto& [key, value] : NamespaceSnapshot("e2e")) {
    if (key == "e2e:{" + id + "}:attrs") found_attrs = true;
    if (key == "e2e:{" + id + "}:counters") found_counters = true;
  }
  EXPECT_TRUE(found_attrs && found_counters);
  d.core().drop();  // a locked dict can be deleted (the lock guards its leaves)
  for (const auto& [key, value] : NamespaceSnapshot("e2e")) {
    EXPECT_EQ(key.find("{" + id + "}"), std::string::npos) << key;
  }
}

}  // namespace
}  // namespace tdstore::testing
