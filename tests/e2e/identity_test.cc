// Which dict a call reaches, and which schema it sees (issue #13):
//  - a Dict (or handle) held across a delete and re-create of its name, or a
//    rename, gets NOT_FOUND on every call and never touches the dict that has
//    the name now;
//  - tdstored serves schemas from a cache, proven current in the data's own
//    round trip: a leaf added, replaced or removed through another tdstored
//    on the same Redis is seen by the very next call.
// Through the torch-free core, on both back ends.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "tdstore/core.h"
#include "tests/e2e/e2e_env.h"

namespace tdstore::testing {
namespace {

// Collects the leaves of a read.
class Leaves : public core::ReadSink {
 public:
  void Begin(const std::vector<int64_t>& batch_shape, int64_t) override {
    batch = batch_shape;
    metas.clear();
    bytes.clear();
  }
  void* Leaf(const core::LeafMeta& leaf) override {
    metas.push_back(leaf);
    bytes.emplace_back(static_cast<size_t>(leaf.byte_size) / sizeof(float));
    return bytes.back().data();
  }
  std::vector<int64_t> batch;
  std::vector<core::LeafMeta> metas;
  std::vector<std::vector<float>> bytes;
};

std::vector<float> Filled(size_t n, float first) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

core::ReadOptions At(const core::Index& index) {
  core::ReadOptions options;
  options.index = &index;
  return options;
}

core::WriteOptions WriteAt(const core::Index& index) {
  core::WriteOptions options;
  options.index = &index;
  return options;
}

core::LeafData Float(const Key& path, const std::vector<float>& values,
                     std::vector<int64_t> shape) {
  return {path, DType::kFloat32, std::move(shape), values.data(),
          static_cast<int64_t>(values.size() * sizeof(float))};
}

// The values of leaf `path` read whole through `dict`.
std::vector<float> ReadLeaf(const core::Dict& dict, const Key& path) {
  Leaves sink;
  dict.read({path}, sink);
  EXPECT_EQ(sink.bytes.size(), 1u);
  return sink.bytes.empty() ? std::vector<float>{} : sink.bytes[0];
}

void ExpectNotFound(const std::function<void()>& call, const std::string& what) {
  try {
    call();
    ADD_FAILURE() << what << ": reached a dict it did not open";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kNotFound) << what << ": " << e.what();
  }
}

// Every call a held Dict can make, each expected NOT_FOUND.
void ExpectEveryCallNotFound(const core::Dict& stale) {
  const std::vector<float> row = Filled(4, 100);
  const core::Index first = {core::IndexTerm::Int(0)};
  Leaves sink;
  ExpectNotFound([&] { stale.read({}, sink); }, "read");
  ExpectNotFound([&] { stale.read({"x"}, sink, At(first)); }, "indexed read");
  ExpectNotFound([&] { stale.write({Float("x", Filled(16, 7), {4, 4})}); }, "write");
  ExpectNotFound([&] { stale.write({Float("x", row, {4})}, WriteAt(first)); }, "indexed write");
  ExpectNotFound([&] { stale.write({Float("fresh", Filled(16, 7), {4, 4})}); }, "new leaf");
  ExpectNotFound([&] { stale.keys(); }, "keys");
  ExpectNotFound([&] { stale.contains({"x"}); }, "contains");
  ExpectNotFound([&] { stale.erase({"x"}); }, "erase");
  ExpectNotFound([&] { stale.describe(); }, "describe");
  ExpectNotFound([&] { core::Client::open_handle(stale.handle()); }, "open_handle");
  ExpectNotFound([&] { stale.drop(); }, "drop");
}

TEST(E2eIdentity, AHeldDictNeverTouchesTheNamesakeThatReplacedIt) {
  core::Client client(DaemonAddress());
  const std::string name = UniqueDictName();
  core::Dict old = client.create(name, {4});
  old.write({Float("x", Filled(16, 0), {4, 4})});
  EXPECT_EQ(ReadLeaf(old, "x"), Filled(16, 0));  // the daemon caches its schema

  client.drop(name);
  core::Dict now = client.create(name, {4});
  now.write({Float("x", Filled(16, 50), {4, 4})});
  const std::map<std::string, std::string> before = NamespaceSnapshot("e2e");

  ExpectEveryCallNotFound(old);
  EXPECT_EQ(NamespaceSnapshot("e2e"), before) << "a stale Dict changed Redis";
  EXPECT_EQ(ReadLeaf(now, "x"), Filled(16, 50));
  EXPECT_EQ(now.keys(), std::vector<Key>{Key("x")});
  now.drop();
}

TEST(E2eIdentity, AHeldDictIsNotFoundAfterARenameAndTheNewNameWorks) {
  core::Client client(DaemonAddress());
  const std::string name = UniqueDictName();
  const std::string renamed = name + ".renamed";
  core::Dict old = client.create(name, {4});
  old.write({Float("x", Filled(16, 0), {4, 4})});
  client.rename(name, renamed);
  // The old name now names nothing, and a namesake made later is another dict.
  core::Dict namesake = client.create(name, {4});
  ExpectEveryCallNotFound(old);
  core::Dict reopened = client.open(renamed);
  EXPECT_EQ(reopened.id(), old.id());
  EXPECT_EQ(ReadLeaf(reopened, "x"), Filled(16, 0));
  EXPECT_TRUE(namesake.keys().empty());
  reopened.drop();
  namesake.drop();
}

// Two tdstored on one Redis and namespace: `cached` serves from its schema
// cache, `other` changes the dict behind its back.
class E2eSchemaCache : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(other_daemon_.Start({"--redis", SharedRedis().url(), "--namespace", "e2e"}).ok())
        << other_daemon_.LogTail();
  }
  DaemonProcess other_daemon_;
};

TEST_F(E2eSchemaCache, ChangesThroughAnotherDaemonAreSeenByTheNextCall) {
  // This test is about tdstored's schema cache, so every call of the
  // cached side must reach tdstored: no client-side schema copy (that one,
  // which sees another daemon's changes once their event arrives, is
  // schema_watch_test.cc's).
  ClientOptions ask_every_time;
  ask_every_time.watch_schemas = false;
  core::Client cached_client(DaemonAddress(), ask_every_time);
  core::Client other_client(other_daemon_.address());
  const std::string name = UniqueDictName();
  core::Dict cached = cached_client.create(name, {4});
  core::Dict other = other_client.open(name);
  const core::Index rows = {core::IndexTerm::Positions({3, 1}, {2})};

  cached.write({Float("x", Filled(16, 0), {4, 4})});
  EXPECT_EQ(ReadLeaf(cached, "x"), Filled(16, 0));

  // Replaced with another shape: whole and indexed reads see the new one.
  other.write({Float("x", Filled(8, 10), {4, 2})});
  EXPECT_EQ(ReadLeaf(cached, "x"), Filled(8, 10));
  Leaves picked;
  cached.read({"x"}, picked, At(rows));
  ASSERT_EQ(picked.metas.size(), 1u);
  EXPECT_EQ(picked.metas[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(picked.bytes[0], (std::vector<float>{16, 17, 12, 13}));

  // Added: reads of the whole dict, keys and contains include it.
  other.write({Float("y", Filled(4, 90), {4})});
  Leaves all;
  cached.read({}, all);
  ASSERT_EQ(all.metas.size(), 2u);
  EXPECT_EQ(all.bytes[1], Filled(4, 90));
  EXPECT_TRUE(cached.contains({"y"}));
  Leaves indexed_all;
  cached.read({}, indexed_all, At(rows));
  EXPECT_EQ(indexed_all.metas.size(), 2u);

  // An indexed write through the cache after a replace lands in the leaf
  // as it is now, seen through the other daemon.
  other.write({Float("y", Filled(4, 0), {4})});
  const std::vector<float> two = {-1, -3};
  cached.write({Float("y", two, {2})}, WriteAt(rows));
  EXPECT_EQ(ReadLeaf(other, "y"), (std::vector<float>{0, -3, 2, -1}));

  // Removed: the next read is NOT_FOUND.
  other.erase({"x"});
  ExpectNotFound([&] { ReadLeaf(cached, "x"); }, "read of a leaf removed elsewhere");
  ExpectNotFound([&] { cached.read({"x"}, picked, At(rows)); }, "indexed read of it");

  // Dropped and re-created elsewhere: the held Dict reaches nothing.
  other.drop();
  core::Dict namesake = other_client.create(name, {4});
  ExpectEveryCallNotFound(cached);
  namesake.drop();
  EXPECT_EQ(other_daemon_.Stop(), 0) << other_daemon_.LogTail();
}

}  // namespace
}  // namespace tdstore::testing
