// The torch-free client core (tdstore/core.h) against a real tdstored: bytes
// in place from the caller's memory, reads into the caller's sink, progress
// per chunk, indices, handles, and what it refuses before any call. No
// tensor type appears here: this is what the CLI and the Python module see.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "tdstore/core.h"
#include "tests/e2e/e2e_env.h"

namespace tdstore::testing {
namespace {

// Keeps every leaf it is given in its own vector, and counts its calls.
class VectorSink : public core::ReadSink {
 public:
  void Begin(const std::vector<int64_t>& batch_shape, int64_t leaf_count) override {
    ++begins;
    batch = batch_shape;
    announced = leaf_count;
    metas.clear();
    bytes.clear();
  }
  void* Leaf(const core::LeafMeta& leaf) override {
    metas.push_back(leaf);
    bytes.emplace_back(static_cast<size_t>(leaf.byte_size));
    return bytes.back().data();
  }

  int begins = 0;
  std::vector<int64_t> batch;
  int64_t announced = -1;
  std::vector<core::LeafMeta> metas;
  std::vector<std::vector<char>> bytes;
};

std::vector<float> Iota(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

core::LeafData Leaf(const Key& path, const std::vector<float>& values,
                    std::vector<int64_t> shape) {
  return {path, DType::kFloat32, std::move(shape), values.data(),
          static_cast<int64_t>(values.size() * sizeof(float))};
}

TEST(E2eCore, WritesCallerMemoryAndReadsIntoTheCallersSink) {
  core::Client client(DaemonAddress());
  core::Dict td = client.create(UniqueDictName(), {100});
  const std::vector<float> obs = Iota(100 * 8);
  const std::vector<float> reward = Iota(100);
  td.write({Leaf("obs", obs, {100, 8}), Leaf({"next", "reward"}, reward, {100})});

  VectorSink sink;
  td.read({}, sink);
  EXPECT_EQ(sink.begins, 1);
  EXPECT_EQ(sink.batch, (std::vector<int64_t>{100}));
  ASSERT_EQ(sink.announced, 2);
  ASSERT_EQ(sink.metas.size(), 2u);
  for (size_t i = 0; i < sink.metas.size(); ++i) {
    const core::LeafMeta& meta = sink.metas[i];
    const std::vector<float>& expected = meta.path == Key("obs") ? obs : reward;
    EXPECT_EQ(meta.dtype, DType::kFloat32);
    EXPECT_EQ(meta.byte_size, static_cast<int64_t>(expected.size() * sizeof(float)));
    EXPECT_EQ(std::memcmp(sink.bytes[i].data(), expected.data(), sink.bytes[i].size()), 0)
        << meta.path.str();
  }
}

TEST(E2eCore, ProgressAdvancesPerChunkBothWays) {
  ClientOptions options;
  options.chunk_bytes = 256 << 10;
  core::Client client(DaemonAddress(), options);
  core::Dict td = client.create(UniqueDictName(), {3 << 16});  // 3 × 64 Ki rows of 4 bytes
  const std::vector<float> values = Iota(3 << 16);
  const int64_t total = static_cast<int64_t>(values.size() * sizeof(float));  // 768 KiB

  std::vector<std::pair<int64_t, int64_t>> sent;
  core::WriteOptions write;
  write.progress = [&](int64_t done, int64_t all) { sent.emplace_back(done, all); };
  td.write({Leaf("x", values, {3 << 16})}, write);
  ASSERT_EQ(sent.size(), 3u);  // one call per 256 KiB chunk
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(sent[i].first, static_cast<int64_t>(i + 1) * (256 << 10));
    EXPECT_EQ(sent[i].second, total);
  }

  std::vector<int64_t> received;
  core::ReadOptions read;
  read.progress = [&](int64_t done, int64_t all) {
    EXPECT_EQ(all, -1);  // a read's total arrives leaf by leaf
    received.push_back(done);
  };
  VectorSink sink;
  td.read({"x"}, sink, read);
  ASSERT_GE(received.size(), 2u) << "a 768 KiB read arrives in several chunks";
  EXPECT_TRUE(std::is_sorted(received.begin(), received.end()));
  EXPECT_EQ(received.back(), total);
}

TEST(E2eCore, IndexedReadAndWriteWithPositionsAndMasks) {
  core::Client client(DaemonAddress());
  core::Dict td = client.create(UniqueDictName(), {10});
  const std::vector<float> values = Iota(10 * 2);
  td.write({Leaf("v", values, {10, 2})});

  // td[[7, 1, 7]]
  const core::Index rows = {core::IndexTerm::Positions({7, 1, 7}, {3})};
  core::ReadOptions read;
  read.index = &rows;
  VectorSink sink;
  td.read({}, sink, read);
  EXPECT_EQ(sink.batch, (std::vector<int64_t>{3}));
  ASSERT_EQ(sink.metas.size(), 1u);
  EXPECT_EQ(sink.metas[0].shape, (std::vector<int64_t>{3, 2}));
  const auto* got = reinterpret_cast<const float*>(sink.bytes[0].data());
  EXPECT_EQ(std::vector<float>(got, got + 6), (std::vector<float>{14, 15, 2, 3, 14, 15}));

  // td[mask] = -1 for rows 0 and 9 (the value broadcasts over the rows).
  std::vector<bool> mask(10, false);
  mask[0] = mask[9] = true;
  const core::Index masked = {core::IndexTerm::Mask(mask)};
  const std::vector<float> minus_one = {-1, -1};
  core::WriteOptions write;
  write.index = &masked;
  td.write({Leaf("v", minus_one, {2})}, write);
  VectorSink all;
  td.read({"v"}, all);
  const auto* now = reinterpret_cast<const float*>(all.bytes[0].data());
  EXPECT_EQ(now[0], -1);
  EXPECT_EQ(now[1], -1);
  EXPECT_EQ(now[2], 2);
  EXPECT_EQ(now[18], -1);
  EXPECT_EQ(now[19], -1);

  // Out of range: OUT_OF_RANGE from tdstored.
  const core::Index outside = {core::IndexTerm::Int(10)};
  read.index = &outside;
  VectorSink none;
  try {
    td.read({}, none, read);
    FAIL() << "index 10 of 10 rows was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kOutOfRange) << e.what();
  }
}

TEST(E2eCore, RefusesInconsistentLeavesBeforeAnyCall) {
  core::Client client(DaemonAddress());
  core::Dict td = client.create(UniqueDictName(), {4});
  const std::vector<float> values = Iota(4);

  core::LeafData short_data = Leaf("a", values, {4});
  short_data.byte_size -= 1;
  core::LeafData no_dtype = Leaf("b", values, {4});
  no_dtype.dtype = DType::kUnspecified;
  core::LeafData negative = Leaf("c", values, {-4});
  for (const core::LeafData& bad : {short_data, no_dtype, negative}) {
    try {
      // A good leaf first: a bad one anywhere refuses the whole write.
      td.write({Leaf("good", values, {4}), bad});
      FAIL() << "accepted leaf " << bad.path.str();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << e.what();
      EXPECT_NE(e.message().find("'" + bad.path.str() + "'"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(td.keys().empty()) << "a refused write left leaves behind";

  try {
    core::IndexTerm::Positions({1, 2, 3}, {2});
    FAIL() << "3 positions for a shape of 2 were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument);
  }
}

TEST(E2eCore, ASinkThatThrowsCancelsTheReadAndTheClientGoesOn) {
  core::Client client(DaemonAddress());
  core::Dict td = client.create(UniqueDictName(), {1000});
  const std::vector<float> values = Iota(1000);
  td.write({Leaf("x", values, {1000})});

  class Refusing : public core::ReadSink {
    void Begin(const std::vector<int64_t>&, int64_t) override {}
    void* Leaf(const core::LeafMeta&) override { throw std::runtime_error("no room"); }
  } refusing;
  EXPECT_THROW(td.read({}, refusing), std::runtime_error);

  VectorSink sink;
  td.read({}, sink);
  ASSERT_EQ(sink.metas.size(), 1u);
  EXPECT_EQ(std::memcmp(sink.bytes[0].data(), values.data(), sink.bytes[0].size()), 0);
}

TEST(E2eCore, HandlesOpenTheSameDictAndOnlyIt) {
  core::Client client(DaemonAddress());
  const std::string name = UniqueDictName();
  core::Dict td = client.create(name, {2});
  core::Dict again = core::Client::open_handle(td.handle());
  EXPECT_EQ(again.id(), td.id());
  EXPECT_EQ(again.name(), name);
  EXPECT_EQ(again.client().address(), client.address());

  const std::string handle = td.handle();
  client.drop(name);
  client.create(name, {2});  // same name, another dict
  try {
    core::Client::open_handle(handle);
    FAIL() << "a handle opened the namesake of its deleted dict";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kNotFound);
  }
}

}  // namespace
}  // namespace tdstore::testing
