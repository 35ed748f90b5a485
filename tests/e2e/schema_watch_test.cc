// Schema-only calls (keys, contains, describe) answered by the client core
// from a copy a WatchSchema stream keeps current (issue #13):
//  - once watched, they cost no call at all (tdstored's own call counters
//    say so);
//  - this client's own changes are seen by its very next call, on random
//    sequences of writes, indexed writes that create leaves, and deletions,
//    compared with a client that asks tdstored every time;
//  - another client's change through another tdstored reaches the copy;
//  - a drop or rename, here or elsewhere, ends the copy (NOT_FOUND), and a
//    stopped daemon ends the trust (UNAVAILABLE, never an old answer).
// Through the torch-free core, on both back ends.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tdstore/core.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/metrics_scrape.h"

namespace tdstore::testing {
namespace {

using std::chrono::milliseconds;

constexpr char kNamespace[] = "watch";

core::LeafData Floats(const Key& path, const std::vector<float>& values,
                      std::vector<int64_t> shape) {
  return {path, DType::kFloat32, std::move(shape), values.data(),
          static_cast<int64_t>(values.size() * sizeof(float)), LeafKind::kTensor, {}};
}

// True once `done` holds, polling for up to 10 s.
bool Eventually(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return done();
}

// Everything a schema-only call can say about a dict, for comparing two
// clients' answers.
struct SchemaView {
  std::vector<Key> top, nested, leaves, top_leaves;
  std::vector<std::string> described;  // "path dtype shape bytes" per leaf
  bool operator==(const SchemaView& o) const {
    return top == o.top && nested == o.nested && leaves == o.leaves &&
           top_leaves == o.top_leaves && described == o.described;
  }
};

SchemaView ViewOf(const core::Dict& dict) {
  SchemaView v;
  v.top = dict.keys(false, false);
  v.nested = dict.keys(true, false);
  v.leaves = dict.keys(true, true);
  v.top_leaves = dict.keys(false, true);
  for (const core::LeafMeta& leaf : dict.describe().leaves) {
    std::string line = leaf.path.str() + " " + std::to_string(static_cast<int>(leaf.dtype));
    for (int64_t d : leaf.shape) line += " " + std::to_string(d);
    v.described.push_back(line + " " + std::to_string(leaf.byte_size));
  }
  return v;
}

std::string Show(const SchemaView& v) {
  std::string out;
  for (const std::string& line : v.described) out += line + "; ";
  return out;
}

ClientOptions Unwatched() {
  ClientOptions options;
  options.watch_schemas = false;
  return options;
}

class E2eSchemaWatch : public ::testing::Test {
 protected:
  void SetUp() override {
    for (DaemonProcess* d : {&near_, &far_}) {
      // Events come 200 ms late, so that every answer right after a change
      // is one the copy gave before the change's event arrived.
      ASSERT_TRUE(d->Start({"--redis", SharedRedis().url(), "--namespace", kNamespace,
                            "--metrics-listen", "127.0.0.1:0",
                            "--test-schema-event-delay-ms", "200"})
                      .ok())
          << d->LogTail();
    }
  }
  // Calls of `method` the daemon answered so far.
  static double Calls(const DaemonProcess& daemon, const std::string& method) {
    return Scrape(daemon.metrics_url())
        .Value("tdstore_rpc_calls_total",
               {{"code", "OK"}, {"method", "tdstore.v1.TdStore/" + method}});
  }
  // Schema-only calls of `dict` until a round of them costs `near_` no call.
  bool AnsweredLocally(const core::Dict& dict) {
    return Eventually([&] {
      const double before = Calls(near_, "ListKeys") + Calls(near_, "DescribeDict") +
                            Calls(near_, "Exists");
      for (int i = 0; i < 20; ++i) ViewOf(dict), dict.contains({"nope"});
      return Calls(near_, "ListKeys") + Calls(near_, "DescribeDict") + Calls(near_, "Exists") ==
             before;
    });
  }
  DaemonProcess near_, far_;
};

TEST_F(E2eSchemaWatch, OnceWatchedSchemaCallsCostNoCall) {
  core::Client client(near_.address());
  core::Client asking(near_.address(), Unwatched());
  const std::string name = UniqueDictName();
  core::Dict dict = client.create(name, {4});
  dict.write({Floats("a", std::vector<float>(4), {4}),
              Floats({"n", "b"}, std::vector<float>(8), {4, 2})});
  ASSERT_TRUE(AnsweredLocally(dict)) << near_.LogTail();
  // ...and say what tdstored says.
  EXPECT_TRUE(ViewOf(dict) == ViewOf(asking.open(name))) << Show(ViewOf(dict));
  EXPECT_TRUE(dict.contains({"n"}));
  EXPECT_TRUE(dict.contains({"n", "b"}));
  EXPECT_FALSE(dict.contains({"n", "c"}));
  EXPECT_FALSE(dict.contains({"a", "b"}));

  // The unwatched client asks every time.
  core::Dict asked = asking.open(name);
  const double before = Calls(near_, "ListKeys");
  for (int i = 0; i < 5; ++i) asked.keys();
  EXPECT_EQ(Calls(near_, "ListKeys"), before + 5);
  dict.drop();
}

// A create's and an open's answer carry the whole schema: the watched copy
// starts from it, so the schema calls right after cost no call, while the
// watch's own first event is still 200 ms away, and say what tdstored says.
TEST_F(E2eSchemaWatch, ACreateOrOpenAnswerIsTheCopysFirstSchema) {
  core::Client client(near_.address());
  core::Client other(near_.address());
  core::Client asking(near_.address(), Unwatched());
  const std::string name = UniqueDictName();
  auto schema_calls = [&] {
    return Calls(near_, "ListKeys") + Calls(near_, "DescribeDict") + Calls(near_, "Exists");
  };

  const double before_create = schema_calls();
  core::Dict dict = client.create(name, {6, 2},
                                  {{Key("a"), DType::kFloat32, {3}, LeafKind::kTensor},
                                   {Key(std::vector<std::string>{"n", "b"}), DType::kInt64, {},
                                    LeafKind::kTensor}});
  const SchemaView created = ViewOf(dict);
  EXPECT_EQ(dict.batch_size(), (std::vector<int64_t>{6, 2}));
  EXPECT_TRUE(dict.contains({"n", "b"}));
  EXPECT_FALSE(dict.contains({"n", "c"}));
  EXPECT_EQ(schema_calls(), before_create) << "the create's answer was not used";
  EXPECT_TRUE(created == ViewOf(asking.open(name))) << Show(created);

  const double before_open = schema_calls();
  core::Dict opened = other.open(name);  // one DescribeDict, then none
  const SchemaView seen = ViewOf(opened);
  EXPECT_EQ(opened.batch_size(), (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(schema_calls(), before_open + 1) << "the open's answer was not used";
  EXPECT_TRUE(seen == created) << Show(seen);

  // The copies still follow changes: their watches run.
  dict.write({Floats("c", std::vector<float>(12), {6, 2})});
  ASSERT_TRUE(Eventually([&] { return opened.contains({"c"}); })) << near_.LogTail();
  EXPECT_TRUE(ViewOf(opened) == ViewOf(asking.open(name))) << Show(ViewOf(opened));
  dict.drop();
}

// Random writes, indexed writes into missing leaves and deletions through
// the watching client: after each, its next answers equal tdstored's.
TEST_F(E2eSchemaWatch, OwnChangesAreSeenByTheNextCall) {
  core::Client client(near_.address());
  core::Client asking(near_.address(), Unwatched());
  const std::string name = UniqueDictName();
  core::Dict dict = client.create(name, {6});
  core::Dict truth = asking.open(name);
  ASSERT_TRUE(AnsweredLocally(dict)) << near_.LogTail();

  std::mt19937 rng(1234);
  const std::vector<Key> paths = {"a", "b", {"n", "x"}, {"n", "y"}, {"n", "m", "z"}, {"o", "p"}};
  const std::vector<Key> prefixes = {"a", "n", {"n", "m"}, "o", "b"};
  int local_rounds = 0;
  for (int step = 0; step < 120; ++step) {
    const Key& path = paths[rng() % paths.size()];
    const int cols = 1 + static_cast<int>(rng() % 3);
    const std::vector<float> values(static_cast<size_t>(6 * cols), static_cast<float>(step));
    std::string what;
    try {
      switch (rng() % 4) {
        case 0:
        case 1:
          what = "write " + path.str();
          dict.write({Floats(path, values, {6, cols})});
          break;
        case 2: {
          what = "indexed write " + path.str();
          const core::Index rows = {core::IndexTerm::Positions({1, 4}, {2})};
          core::WriteOptions at;
          at.index = &rows;
          const std::vector<float> two(static_cast<size_t>(2 * cols), 1.0f);
          dict.write({Floats(path, two, {2, cols})}, at);
          break;
        }
        default: {
          const Key& prefix = prefixes[rng() % prefixes.size()];
          what = "erase " + prefix.str();
          dict.erase(prefix);
          break;
        }
      }
    } catch (const Error& e) {
      // Refused (a dtype or shape clash, a path nested under a leaf, nothing
      // to erase): it changed nothing, which the comparison checks too.
      what += " (refused: " + std::string(e.what()) + ")";
    }
    const double before = Calls(near_, "ListKeys");
    const SchemaView seen = ViewOf(dict);
    if (Calls(near_, "ListKeys") == before) ++local_rounds;
    const SchemaView told = ViewOf(truth);
    ASSERT_TRUE(seen == told) << "after step " << step << " (" << what << "):\n  copy:     "
                              << Show(seen) << "\n  tdstored: " << Show(told);
  }
  // Whole-leaf writes and deletions are derived at once; only indexed
  // writes that created a leaf wait for the stream.
  EXPECT_GT(local_rounds, 60) << "most answers should come from the copy";
  dict.drop();
}

TEST_F(E2eSchemaWatch, ChangesThroughAnotherDaemonReachTheCopy) {
  core::Client client(near_.address());
  core::Client other(far_.address(), Unwatched());
  const std::string name = UniqueDictName();
  core::Dict dict = client.create(name, {4});
  core::Dict elsewhere = other.open(name);
  ASSERT_TRUE(AnsweredLocally(dict));

  const std::vector<float> four(4), eight(8);
  elsewhere.write({Floats("x", four, {4})});
  EXPECT_TRUE(Eventually([&] { return dict.contains({"x"}); }));
  elsewhere.write({Floats("x", eight, {4, 2})});
  EXPECT_TRUE(Eventually([&] { return dict.describe().leaves.at(0).shape.size() == 2; }));
  elsewhere.write({Floats({"n", "y"}, four, {4})});
  EXPECT_TRUE(Eventually([&] { return dict.keys(true, true).size() == 2; }));
  elsewhere.erase({"x"});
  EXPECT_TRUE(Eventually([&] { return !dict.contains({"x"}); }));
  EXPECT_TRUE(ViewOf(dict) == ViewOf(elsewhere));
  // Still answered from the copy after all that.
  EXPECT_TRUE(AnsweredLocally(dict));
  elsewhere.drop();
}

void ExpectCode(const std::function<void()>& call, StatusCode code, const std::string& what) {
  try {
    call();
    ADD_FAILURE() << what << ": answered";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << what << ": " << e.what();
  }
}

TEST_F(E2eSchemaWatch, DropOrRenameEndsTheCopy) {
  core::Client client(near_.address());
  core::Client other(far_.address());
  const std::vector<float> four(4);

  // Dropped here: the next call knows at once.
  const std::string here = UniqueDictName();
  core::Dict dropped = client.create(here, {4});
  dropped.write({Floats("x", four, {4})});
  ASSERT_TRUE(AnsweredLocally(dropped));
  dropped.drop();
  ExpectCode([&] { dropped.keys(); }, StatusCode::kNotFound, "keys after its own drop");
  ExpectCode([&] { dropped.describe(); }, StatusCode::kNotFound, "describe after its own drop");

  // Renamed elsewhere, and a namesake created: the copy is not the answer.
  const std::string name = UniqueDictName();
  core::Dict renamed = client.create(name, {4});
  renamed.write({Floats("x", four, {4})});
  ASSERT_TRUE(AnsweredLocally(renamed));
  other.rename(name, name + ".moved");
  other.create(name, {4});
  EXPECT_TRUE(Eventually([&] {
    try {
      renamed.keys();
      return false;
    } catch (const Error& e) {
      return e.code() == StatusCode::kNotFound;
    }
  }));
  ExpectCode([&] { renamed.contains({"x"}); }, StatusCode::kNotFound, "contains after a rename");
  other.drop(name);
  other.drop(name + ".moved");
}

TEST_F(E2eSchemaWatch, AStoppedDaemonEndsTheTrust) {
  ClientOptions fail_fast;
  fail_fast.retry_for = milliseconds(0);
  fail_fast.timeout = milliseconds(2000);
  core::Client client(near_.address(), fail_fast);
  const std::string name = UniqueDictName();
  core::Dict dict = client.create(name, {4});
  dict.write({Floats("x", std::vector<float>(4), {4})});
  ASSERT_TRUE(AnsweredLocally(dict));
  near_.Stop();
  // The stream ended with the daemon: no answer from the copy, however
  // current it might still be.
  EXPECT_TRUE(Eventually([&] {
    try {
      dict.keys();
      return false;
    } catch (const Error& e) {
      return e.code() == StatusCode::kUnavailable || e.code() == StatusCode::kDeadlineExceeded;
    }
  }));
  core::Client(far_.address()).drop(name);
}

}  // namespace
}  // namespace tdstore::testing
