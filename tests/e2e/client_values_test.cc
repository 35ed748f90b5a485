// Non-tensor leaves through the C++ clients: written through the core with
// their slots (common/value_rows.h) and one value, read back by the libtorch
// client into LocalDict::values and get_values, whole and indexed; get()
// and get_values() refuse the other kind; a slot no client wrote is
// DATA_LOSS; ragged leaves' cells read as tensors of their own shapes, and
// rows naming another dtype than the leaf's are refused.
// tests/python/test_non_tensor.py and test_ragged.py cover the Python side.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/ragged_cells.h"
#include "common/value_rows.h"
#include "tdstore/client.h"
#include "tdstore/core.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/expect_error.h"

namespace tdstore::testing {
namespace {

constexpr int64_t kSlot = 16;

std::string Slots(const std::vector<std::string_view>& values) {
  std::string out(values.size() * kSlot, '\0');
  EXPECT_TRUE(EncodeValueRows(values, kSlot, out.data()).ok());
  return out;
}

core::LeafData ValueLeaf(const std::string& path, LeafKind kind, const std::string& slots,
                         int64_t rows) {
  core::LeafData leaf;
  leaf.path = Key(path);
  leaf.dtype = DType::kUInt8;
  leaf.shape = {rows, kSlot};
  leaf.data = slots.data();
  leaf.byte_size = static_cast<int64_t>(slots.size());
  leaf.kind = kind;
  return leaf;
}

TEST(E2eClientValues, ValueLeavesReadBackDecodedWholeAndIndexed) {
  const std::string name = UniqueDictName();
  core::Client core_client(DaemonAddress());
  core::Dict core_dict = core_client.create(name, {4});
  const std::string text = Slots({"zero", "", "twö", "three"});
  const std::string blobs = Slots({std::string_view("\0\1", 2), "b", "c", "d"});
  std::vector<float> x{0, 1, 2, 3};
  core::LeafData one;
  one.path = Key("cfg");
  one.dtype = DType::kUInt8;
  one.shape = {4, 0};
  one.kind = LeafKind::kJson;
  one.value = R"({"lr": 0.1})";
  core::LeafData tensor;
  tensor.path = Key("x");
  tensor.dtype = DType::kFloat32;
  tensor.shape = {4};
  tensor.data = x.data();
  tensor.byte_size = 16;
  core_dict.write({ValueLeaf("t", LeafKind::kText, text, 4),
                   ValueLeaf("b", LeafKind::kBytes, blobs, 4), one, tensor});

  Dict td = Client(DaemonAddress()).open(name);
  const LocalDict local = td.to_local();
  ASSERT_EQ(local.leaves.size(), 1u);
  EXPECT_TRUE(local.at(Key("x")).equal(at::arange(4, at::kFloat)));
  ASSERT_EQ(local.values.size(), 3u);
  const core::Values& t = local.values.at(Key("t"));
  EXPECT_EQ(t.kind, LeafKind::kText);
  EXPECT_FALSE(t.one);
  EXPECT_EQ(t.cells, (std::vector<int64_t>{4}));
  EXPECT_EQ(t.values, (std::vector<std::string>{"zero", "", "twö", "three"}));
  EXPECT_EQ(local.values.at(Key("b")).values[0], std::string("\0\1", 2));
  const core::Values& cfg = local.values.at(Key("cfg"));
  EXPECT_TRUE(cfg.one);
  EXPECT_EQ(cfg.kind, LeafKind::kJson);
  EXPECT_EQ(cfg.values, (std::vector<std::string>{R"({"lr": 0.1})"}));

  // Indexed: the selected cells, with the rows of the tensors.
  const LocalDict rows = td.index({at::tensor({3, 0}, at::kLong)});
  EXPECT_EQ(rows.values.at(Key("t")).values, (std::vector<std::string>{"three", "zero"}));
  EXPECT_TRUE(rows.at(Key("x")).equal(at::tensor({3.0f, 0.0f})));
  const Index slice{Slice(1, 3)};
  const core::Values some = td.get_values(Key("t"), &slice);
  EXPECT_EQ(some.cells, (std::vector<int64_t>{2}));
  EXPECT_EQ(some.values, (std::vector<std::string>{"", "twö"}));
  EXPECT_EQ(td.get_values(Key("cfg")).values[0], R"({"lr": 0.1})");

  // Each read refuses the other kind, by name.
  Error e = ErrorOf([&] { td.get(Key("t")); });
  EXPECT_EQ(e.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(e.what()).find("get_values"), std::string::npos) << e.what();
  EXPECT_EQ(ErrorOf([&] { td.get_values(Key("x")); }).code(), StatusCode::kInvalidArgument);

  // A slot whose length runs past its end: tdstored stores slots as
  // opaque bytes; the reader says they are corrupt.
  std::string bad = Slots({"a", "b", "c", "d"});
  bad[kSlot] = 100;  // row 1 claims 100 bytes in a 12-byte slot
  core_dict.write({ValueLeaf("t", LeafKind::kText, bad, 4)});
  EXPECT_EQ(ErrorOf([&] { td.get_values(Key("t")); }).code(), StatusCode::kDataLoss);
  core_client.drop(name);
}

// The slots of a ragged leaf of float32 cells holding `cells`.
std::string RaggedSlots(const std::vector<at::Tensor>& cells, int64_t slot) {
  std::vector<std::string> encoded;
  for (const at::Tensor& t : cells) {
    const at::Tensor c = t.contiguous();
    encoded.push_back(*EncodeRaggedCell(
        DType::kFloat32, c.sizes().vec(),
        std::string_view(static_cast<const char*>(c.data_ptr()), c.nbytes())));
  }
  std::string out(cells.size() * static_cast<size_t>(slot), '\0');
  EXPECT_TRUE(EncodeValueRows({encoded.begin(), encoded.end()}, slot, out.data()).ok());
  return out;
}

TEST(E2eClientValues, RaggedCellsReadBackAsTensorsOfTheirOwnShapes) {
  const std::string name = UniqueDictName();
  core::Client core_client(DaemonAddress());
  core::Dict core_dict = core_client.create(name, {4});
  const std::vector<at::Tensor> cells = {at::rand({2}), at::rand({0}), at::rand({3, 2}),
                                         at::tensor(7.5f)};
  constexpr int64_t kRaggedSlot = 64;
  const std::string slots = RaggedSlots(cells, kRaggedSlot);
  core::LeafData seq;
  seq.path = Key("seq");
  seq.dtype = DType::kUInt8;
  seq.shape = {4, kRaggedSlot};
  seq.data = slots.data();
  seq.byte_size = static_cast<int64_t>(slots.size());
  seq.kind = LeafKind::kRagged;
  seq.value = "float32";
  core_dict.write({seq});

  Dict td = Client(DaemonAddress()).open(name);
  auto same = [](const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].sizes(), want[i].sizes()) << i;
      EXPECT_EQ(got[i].scalar_type(), at::kFloat) << i;
      EXPECT_TRUE(got[i].equal(want[i])) << i;
    }
  };
  same(td.get_ragged(Key("seq")), cells);
  same(RaggedTensors(td.to_local().values.at(Key("seq"))), cells);
  const Index picked{at::tensor({2, 0, 2}, at::kLong)};
  same(td.get_ragged(Key("seq"), &picked), {cells[2], cells[0], cells[2]});
  EXPECT_EQ(ErrorOf([&] { td.get(Key("seq")); }).code(), StatusCode::kInvalidArgument);

  // Rows naming another dtype (or none) than the leaf's change nothing.
  const std::string row = RaggedSlots({at::rand({5})}, kRaggedSlot);
  core::LeafData wrong = seq;
  wrong.shape = {1, kRaggedSlot};
  wrong.data = row.data();
  wrong.byte_size = kRaggedSlot;
  const core::Index at_one{core::IndexTerm::Int(1)};
  core::WriteOptions indexed;
  indexed.index = &at_one;
  for (const char* dtype : {"int64", ""}) {
    wrong.value = dtype;
    Error e = ErrorOf([&] { core_dict.write({wrong}, indexed); });
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << dtype;
  }
  same(td.get_ragged(Key("seq")), cells);
  wrong.value = "float32";
  core_dict.write({wrong}, indexed);
  EXPECT_EQ(td.get_ragged(Key("seq"))[1].sizes(), (std::vector<int64_t>{5}));
  core_client.drop(name);
}

}  // namespace
}  // namespace tdstore::testing
