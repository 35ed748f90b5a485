#include "server/redis_store/leaf_record_text.h"

#include <random>

#include "common/leaf_kind.h"
#include "gtest/gtest.h"

namespace tdstore {
namespace {

TEST(LeafRecordTextTest, LeafRecordExactText) {
  const LeafRecord record{DType::kFloat32, {100, 84}, 7};
  EXPECT_EQ(EncodeLeafRecord(record), "dtype=float32;shape=100,84;gen=7");
  EXPECT_EQ(EncodeLeafRecord({DType::kBool, {}, 0}), "dtype=bool;shape=;gen=0");
}

TEST(LeafRecordTextTest, ValueLeafRecordsExactText) {
  // A tensor leaf's record is what it always was: no kind, no value.
  EXPECT_EQ(EncodeLeafRecord({DType::kUInt8, {4, 16}, 3}), "dtype=uint8;shape=4,16;gen=3");
  EXPECT_EQ(EncodeLeafRecord({DType::kUInt8, {4, 16}, 3, LeafKind::kText}),
            "dtype=uint8;shape=4,16;gen=3;kind=text");
  // One value, in hex: its ';' and '=' cannot break the record.
  EXPECT_EQ(EncodeLeafRecord({DType::kUInt8, {4, 0}, 9, LeafKind::kJson, "{\"a=\":\";\"}"}),
            "dtype=uint8;shape=4,0;gen=9;kind=json;value=7b22613d223a223b227d");
  EXPECT_EQ(EncodeLeafRecord({DType::kUInt8, {0}, 1, LeafKind::kBytes, ""}),
            "dtype=uint8;shape=0;gen=1;kind=bytes;value=");
  const absl::StatusOr<LeafRecord> back =
      DecodeLeafRecord("dtype=uint8;shape=4,0;gen=9;kind=json;value=7b7d");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, LeafKind::kJson);
  EXPECT_EQ(back->value, "{}");
  for (const char* bad : {"dtype=uint8;shape=4,0;gen=9;kind=pickle",
                          "dtype=uint8;shape=4,0;gen=9;kind=json;value=7b7",
                          "dtype=uint8;shape=4,0;gen=9;kind=json;value=7B7D",
                          "dtype=uint8;shape=4,0;gen=9;kind=json;value=zz"}) {
    EXPECT_EQ(DecodeLeafRecord(bad).status().code(), absl::StatusCode::kDataLoss) << bad;
  }
}

TEST(LeafRecordTextTest, RecordDictLeavesSayWhereTheirRowsSit) {
  LeafRecord record{DType::kFloat32, {100, 84}, 7};
  record.in_record = {24, 365};
  EXPECT_EQ(EncodeLeafRecord(record), "dtype=float32;shape=100,84;gen=7;rec=24/365");
  const absl::StatusOr<LeafRecord> back = DecodeLeafRecord(EncodeLeafRecord(record));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, record);
  EXPECT_TRUE(back->InSharedRecord());
  for (const char* bad : {"dtype=uint8;shape=4;gen=9;rec=3", "dtype=uint8;shape=4;gen=9;rec=3/0",
                          "dtype=uint8;shape=4;gen=9;rec=-1/4", "dtype=uint8;shape=4;gen=9;rec=a/4"}) {
    EXPECT_EQ(DecodeLeafRecord(bad).status().code(), absl::StatusCode::kDataLoss) << bad;
  }
}

TEST(LeafRecordTextTest, PendingRecordExactText) {
  const PendingRecord record{1764480000000, {DType::kFloat32, {100, 84}, 7}};
  EXPECT_EQ(EncodePendingRecord(record),
            "expires_ms=1764480000000;dtype=float32;shape=100,84;gen=7");
}

TEST(LeafRecordTextTest, RandomRoundTrip) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 3000; ++trial) {
    LeafRecord leaf;
    leaf.dtype = static_cast<DType>(1 + rng() % 22);
    if (rng() % 3 == 0) leaf.kind = static_cast<LeafKind>(1 + rng() % 3);
    leaf.shape.resize(rng() % 6);
    for (int64_t& dim : leaf.shape) dim = static_cast<int64_t>(rng() % 1000);
    leaf.generation = static_cast<int64_t>((rng() >> 1) >> (rng() % 63));
    if (leaf.kind != LeafKind::kTensor && rng() % 2 == 0) {
      // The one-value form: slot 0 and any bytes (';' and '=' included).
      leaf.shape.push_back(0);
      leaf.value.resize(rng() % 40);
      for (char& c : leaf.value) c = static_cast<char>(rng() % 256);
    }
    const absl::StatusOr<LeafRecord> back = DecodeLeafRecord(EncodeLeafRecord(leaf));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, leaf);

    const PendingRecord pending{static_cast<int64_t>(rng() >> 1), leaf};
    const absl::StatusOr<PendingRecord> pback =
        DecodePendingRecord(EncodePendingRecord(pending));
    ASSERT_TRUE(pback.ok()) << pback.status();
    EXPECT_EQ(pback->expires_ms, pending.expires_ms);
    EXPECT_EQ(pback->leaf, leaf);
  }
}

TEST(LeafRecordTextTest, UnknownKeysIgnoredAndOrderFree) {
  const LeafRecord expected{DType::kInt64, {3}, 12};
  for (const char* text : {"dtype=int64;shape=3;gen=12;future=1",
                           "owner=x;dtype=int64;shape=3;gen=12",
                           "gen=12;shape=3;dtype=int64",
                           "shape=3;zz=;gen=12;dtype=int64;note=a=b"}) {
    const absl::StatusOr<LeafRecord> record = DecodeLeafRecord(text);
    ASSERT_TRUE(record.ok()) << text << ": " << record.status();
    EXPECT_EQ(*record, expected) << text;
  }
  const absl::StatusOr<PendingRecord> pending =
      DecodePendingRecord("gen=12;new=1;expires_ms=5;shape=3;dtype=int64");
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ(pending->expires_ms, 5);
  EXPECT_EQ(pending->leaf, expected);
}

TEST(LeafRecordTextTest, MalformedLeafRecordsAreDataLoss) {
  for (const char* text : {
           "",
           "garbage",
           "dtype=float32;shape=3",                // missing gen
           "dtype=float32;gen=1",                  // missing shape
           "shape=3;gen=1",                        // missing dtype
           "dtype=float99;shape=3;gen=1",          // unknown dtype
           "dtype=unspecified;shape=3;gen=1",      //
           "dtype=float32;shape=3,,4;gen=1",       // bad shape
           "dtype=float32;shape=-3;gen=1",         //
           "dtype=float32;shape=3;gen=-1",         // negative generation
           "dtype=float32;shape=3;gen=",           //
           "dtype=float32;shape=3;gen=1x",         //
           "dtype=float32;shape=3;gen=99999999999999999999",
           "dtype=float32;shape=3;gen=1;",         // empty item
           ";dtype=float32;shape=3;gen=1",         //
           "dtype=float32;;shape=3;gen=1",         //
           "dtype=float32;shape=3;gen=1;=x",       // empty key
           "dtype=float32;shape=3;gen=1;gen=2",    // duplicate key
           "dtype=float32;shape=3;gen=1;novalue",  // item without '='
           "dtype = float32;shape=3;gen=1",        // spaces are not trimmed
       }) {
    EXPECT_EQ(DecodeLeafRecord(text).status().code(), absl::StatusCode::kDataLoss)
        << "'" << text << "'";
  }
}

TEST(LeafRecordTextTest, MalformedPendingRecordsAreDataLoss) {
  for (const char* text : {"", "dtype=float32;shape=3;gen=1",
                           "expires_ms=;dtype=float32;shape=3;gen=1",
                           "expires_ms=-5;dtype=float32;shape=3;gen=1",
                           "expires_ms=5;dtype=float32;shape=3",
                           "expires_ms=5;expires_ms=6;dtype=float32;shape=3;gen=1"}) {
    EXPECT_EQ(DecodePendingRecord(text).status().code(), absl::StatusCode::kDataLoss)
        << "'" << text << "'";
  }
}

TEST(LeafRecordTextTest, ARaggedLeafKeepsItsCellDtype) {
  // The record keeps the cells' dtype, and gives it back.
  const LeafRecord record{DType::kUInt8, {4, 32}, 2, LeafKind::kRagged, "float32"};
  EXPECT_EQ(EncodeLeafRecord(record),
            "dtype=uint8;shape=4,32;gen=2;kind=ragged;value=666c6f61743332");
  auto back = DecodeLeafRecord(EncodeLeafRecord(record));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, LeafKind::kRagged);
  EXPECT_EQ(back->value, "float32");
}

}  // namespace
}  // namespace tdstore
