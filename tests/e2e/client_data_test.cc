// Client data paths against a real tdstored: every dtype bit-exact, nested
// paths, 0-d and empty tensors, non-contiguous inputs, multi-leaf calls,
// leaves bigger than a chunk, a block and a message.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "tdstore/client.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/tensor_testing.h"

namespace tdstore::testing {
namespace {

std::string LeafName(at::ScalarType type) { return std::string("x_") + c10::toString(type); }

TEST(E2eData, EveryDTypeRoundTripsBitExact) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {6});
  std::map<Key, at::Tensor> written;
  uint32_t seed = 1;
  for (at::ScalarType type : AllDTypes()) {
    at::Tensor value = RandomTensor(type, {6, 5, 3}, seed++);
    td.set(LeafName(type), value);
    written.emplace(Key(LeafName(type)), value);
  }
  for (const auto& [path, value] : written) {
    EXPECT_TRUE(SameBytes(value, td.get(path))) << path.str();
  }
  LocalDict all = td.to_local();
  EXPECT_EQ(all.batch_size, std::vector<int64_t>{6});
  ASSERT_EQ(all.leaves.size(), written.size());
  for (const auto& [path, value] : written) {
    EXPECT_TRUE(SameBytes(value, all.at(path))) << path.str();
  }
}

TEST(E2eData, NestedPaths) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {4});
  const at::Tensor obs = RandomTensor(at::kFloat, {4, 3}, 1);
  const at::Tensor next_obs = RandomTensor(at::kFloat, {4, 3}, 2);
  const at::Tensor reward = RandomTensor(at::kDouble, {4}, 3);
  const at::Tensor deep = RandomTensor(at::kInt, {4, 2, 2}, 4);
  td.set("obs", obs);
  td.set({"next", "obs"}, next_obs);
  td.set({"next", "reward"}, reward);
  td.set({"a", "b", "c", "d"}, deep);

  EXPECT_TRUE(SameBytes(obs, td.get("obs")));
  EXPECT_TRUE(SameBytes(next_obs, td.get({"next", "obs"})));
  EXPECT_TRUE(SameBytes(reward, td.get({"next", "reward"})));
  EXPECT_TRUE(SameBytes(deep, td.get({"a", "b", "c", "d"})));

  // A prefix reads every leaf under it.
  LocalDict next = td.get_many({Key("next")});
  ASSERT_EQ(next.leaves.size(), 2u);
  EXPECT_TRUE(SameBytes(next_obs, next.at({"next", "obs"})));
  EXPECT_TRUE(SameBytes(reward, next.at({"next", "reward"})));
  LocalDict deep_part = td.get_many({Key({"a", "b"})});
  ASSERT_EQ(deep_part.leaves.size(), 1u);
  EXPECT_TRUE(SameBytes(deep, deep_part.at({"a", "b", "c", "d"})));

  // get() wants a leaf: a nested dict is an argument error pointing at get_many.
  try {
    td.get("next");
    FAIL() << "get of a nested dict succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << e.what();
    EXPECT_NE(e.message().find("get_many"), std::string::npos) << e.what();
  }
  // Also when the nested dict holds a single leaf.
  try {
    td.get({"a", "b"});
    FAIL() << "get of a nested dict with one leaf succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << e.what();
  }
  // "obs" and "next/obs" are different leaves; components are not split.
  td.set("next/obs", RandomTensor(at::kByte, {4}, 5));
  EXPECT_TRUE(SameBytes(next_obs, td.get({"next", "obs"})));
  EXPECT_EQ(td.get(Key("next/obs")).scalar_type(), at::kByte);
}

TEST(E2eData, ZeroDimTensorInDictWithoutBatchDims) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {});
  const at::Tensor scalar = at::scalar_tensor(3.25, at::kDouble);
  td.set("lr", scalar);
  at::Tensor back = td.get("lr");
  EXPECT_EQ(back.dim(), 0);
  EXPECT_TRUE(SameBytes(scalar, back));
  // Without batch dims, leaves of any shape fit.
  const at::Tensor matrix = RandomTensor(at::kFloat, {7, 3}, 9);
  td.set("w", matrix);
  EXPECT_TRUE(SameBytes(matrix, td.get("w")));
  DictInfo info = td.describe();
  EXPECT_TRUE(info.batch_size.empty());
  EXPECT_TRUE(td.batch_size().empty());
}

TEST(E2eData, EmptyTensors) {
  Client client(DaemonAddress());
  // A zero-size element dim.
  Dict td = client.create(UniqueDictName(), {3});
  const at::Tensor no_features = at::empty({3, 0}, at::kFloat);
  td.set("none", no_features);
  EXPECT_TRUE(SameBytes(no_features, td.get("none")));

  // A batch dim of 0: every leaf is empty.
  Dict empty = client.create(UniqueDictName(), {0});
  const at::Tensor rows = at::empty({0, 5}, at::kLong);
  empty.set("rows", rows);
  empty.set({"n", "flags"}, at::empty({0}, at::kBool));
  EXPECT_TRUE(SameBytes(rows, empty.get("rows")));
  LocalDict all = empty.to_local();
  EXPECT_EQ(all.batch_size, std::vector<int64_t>{0});
  ASSERT_EQ(all.leaves.size(), 2u);
  EXPECT_EQ(all.at({"n", "flags"}).sizes(), at::IntArrayRef({0}));
  for (const LeafInfo& leaf : empty.describe().leaves) EXPECT_EQ(leaf.byte_size, 0);
}

TEST(E2eData, NonContiguousInputsAreStoredInCOrder) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {4});
  std::map<std::string, at::Tensor> inputs = {
      {"transposed", RandomTensor(at::kFloat, {6, 4}, 1).t()},
      {"strided", RandomTensor(at::kDouble, {8, 6}, 2).slice(0, 0, 8, 2)},
      {"offset", RandomTensor(at::kInt, {6, 3}, 3).narrow(0, 2, 4)},
      {"expanded", RandomTensor(at::kShort, {1, 5}, 4).expand({4, 5})},
      {"channels_last",
       RandomTensor(at::kHalf, {4, 3, 2, 2}, 5).contiguous(at::MemoryFormat::ChannelsLast)},
      // A lazily conjugated view: memory holds the unconjugated values.
      {"conj", at::randn({4, 3}, at::kComplexFloat).conj()},
  };
  for (const auto& [name, value] : inputs) {
    // "offset" is contiguous but starts inside its storage; "conj" is
    // contiguous with a lazy conjugation flag.
    const bool contiguous_on_purpose = name == "offset" || name == "conj";
    ASSERT_TRUE(contiguous_on_purpose || !value.is_contiguous()) << name;
    td.set(name, value);
  }
  for (const auto& [name, value] : inputs) {
    EXPECT_TRUE(SameBytes(value, td.get(name))) << name;
  }
  EXPECT_TRUE(at::equal(td.get("conj"), inputs["conj"].resolve_conj()));
}

TEST(E2eData, UpdateGetManyAndToLocalMoveManyLeavesInOneCall) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {5});
  const int64_t version_before = td.describe().version;
  std::map<Key, at::Tensor> values = {
      {Key("obs"), RandomTensor(at::kFloat, {5, 8}, 1)},
      {Key("action"), RandomTensor(at::kLong, {5}, 2)},
      {Key({"next", "obs"}), RandomTensor(at::kFloat, {5, 8}, 3)},
      {Key({"next", "done"}), RandomTensor(at::kBool, {5, 1}, 4)},
  };
  td.update(values);
  EXPECT_GT(td.describe().version, version_before);

  LocalDict some = td.get_many({Key("action"), Key("next")});
  ASSERT_EQ(some.leaves.size(), 3u);
  EXPECT_EQ(some.batch_size, std::vector<int64_t>{5});
  for (const Key& path : {Key("action"), Key({"next", "obs"}), Key({"next", "done"})}) {
    EXPECT_TRUE(SameBytes(values.at(path), some.at(path))) << path.str();
  }
  EXPECT_FALSE(some.contains("obs"));

  LocalDict all = td.to_local();
  ASSERT_EQ(all.leaves.size(), values.size());
  for (const auto& [path, value] : values) EXPECT_TRUE(SameBytes(value, all.at(path)));

  // Replacing a leaf may change its dtype and element shape.
  const at::Tensor replacement = RandomTensor(at::kComplexDouble, {5, 2, 2}, 6);
  td.update({{Key("obs"), replacement}});
  EXPECT_TRUE(SameBytes(replacement, td.get("obs")));

  EXPECT_TRUE(td.get_many({}).leaves.empty());
  td.update({});  // nothing to do
}

TEST(E2eData, LeavesLargerThanChunksBlocksAndMessages) {
  // Small blocks so one leaf spans many of them.
  Client client(DaemonAddress());
  CreateOptions layout;
  layout.rows_per_block = 7;
  Dict td = client.create(UniqueDictName(), {50}, layout);
  const at::Tensor wide = RandomTensor(at::kDouble, {50, 3001}, 1);  // ~1.2 MB, 8 blocks
  td.set("wide", wide);
  EXPECT_TRUE(SameBytes(wide, td.get("wide")));
  EXPECT_EQ(td.describe().rows_per_block, 7);

  // Bigger than the 4 MiB message limit, with an odd byte count.
  Dict flat = client.create(UniqueDictName(), {});
  const at::Tensor big = RandomTensor(at::kByte, {(5 << 20) + 3}, 2);
  flat.set("big", big);
  EXPECT_TRUE(SameBytes(big, flat.get("big")));

  // Tiny odd-sized chunks: many data messages per leaf, in both directions
  // through a second client with other options.
  ClientOptions options;
  options.chunk_bytes = 1000;
  Client small_chunks(DaemonAddress(), options);
  Dict same = small_chunks.open(td.name());
  const at::Tensor odd = RandomTensor(at::kComplexFloat, {50, 77}, 3);
  same.set("odd", odd);
  EXPECT_TRUE(SameBytes(odd, td.get("odd")));
  EXPECT_TRUE(SameBytes(wide, same.get("wide")));
}

}  // namespace
}  // namespace tdstore::testing
