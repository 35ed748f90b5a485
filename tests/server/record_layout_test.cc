// The record layout's rules (server/store/record_layout.h).
#include "server/store/record_layout.h"

#include "gtest/gtest.h"

namespace tdstore::store {
namespace {

Leaf F32(std::string name, Shape shape) { return {{std::move(name)}, {DType::kFloat32, shape, 3}}; }

TEST(RecordLayoutTest, EachRowSitsAtTheNextOffsetInTheOrderGiven) {
  auto placed = PlaceRecord(10, {F32("obs", {10, 4}), F32("act", {10, 2, 3}),
                                 {{"done"}, {DType::kBool, {10}, 5}}});
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->stride, 16 + 24 + 1);
  EXPECT_EQ(placed->bytes, 10 * 41);
  ASSERT_EQ(placed->fields.size(), 3u);
  EXPECT_EQ(placed->fields[0].record.in_record, (LeafRecord::InRecord{0, 41}));
  EXPECT_EQ(placed->fields[1].record.in_record, (LeafRecord::InRecord{16, 41}));
  EXPECT_EQ(placed->fields[2].record.in_record, (LeafRecord::InRecord{40, 41}));
  for (const Leaf& leaf : placed->fields) EXPECT_EQ(leaf.record.generation, 0);
}

TEST(RecordLayoutTest, LeavesWithoutRowBytesKeepRowsOfTheirOwn) {
  RecordSplit split = SplitForRecord({F32("a", {4, 2}), F32("empty", {4, 0}), F32("b", {4})});
  ASSERT_EQ(split.fields.size(), 2u);
  EXPECT_EQ(split.fields[0].path, (LeafPath{"a"}));
  EXPECT_EQ(split.fields[1].path, (LeafPath{"b"}));
  ASSERT_EQ(split.own.size(), 1u);
  EXPECT_EQ(split.own[0].path, (LeafPath{"empty"}));
}

TEST(RecordLayoutTest, ARecordIsFormedOnceOnlyInARecordDict) {
  DictSchema schema;
  schema.meta.batch_shape = {4};
  EXPECT_FALSE(FormsRecord(schema));  // the default layout never forms one
  schema.meta.layout = DictLayout::kRecord;
  EXPECT_TRUE(FormsRecord(schema));
  auto placed = PlaceRecord(4, {F32("a", {4, 2})});
  ASSERT_TRUE(placed.ok());
  schema.leaves["a"] = placed->fields[0];
  EXPECT_FALSE(FormsRecord(schema));  // formed: later leaves keep their own rows
}

TEST(RecordLayoutTest, AnOverflowingRecordIsRefused) {
  EXPECT_FALSE(PlaceRecord(int64_t{1} << 62, {F32("a", {int64_t{1} << 62, 8})}).ok());
}

}  // namespace
}  // namespace tdstore::store
