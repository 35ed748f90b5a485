// Request limits: each check refuses exactly what crosses its limit, with
// the documented code and the setting's name in the message.
#include "server/service/request_limits.h"

#include <gtest/gtest.h>

#include <random>

namespace tdstore::service {
namespace {

ServiceLimits Small() {
  ServiceLimits l;
  l.max_call_bytes = 1000;
  l.max_index_length = 10;
  l.max_leaves_per_call = 3;
  l.max_name_bytes = 8;
  l.max_path_bytes = 12;
  return l;
}

TEST(RequestLimits, NamesAndPaths) {
  EXPECT_TRUE(CheckDictName(Small(), "12345678").ok());
  EXPECT_EQ(CheckDictName(Small(), "123456789").code(), absl::StatusCode::kInvalidArgument);
  v1::Path p;
  p.add_components("abcde");
  p.add_components("fghijk");  // "abcde/fghijk" = 12 bytes
  EXPECT_TRUE(CheckPath(Small(), p).ok());
  p.set_components(1, "fghijkl");
  absl::Status s = CheckPath(Small(), p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("--max-path-bytes"), std::string::npos);
}

TEST(RequestLimits, LeafCountAndBytes) {
  EXPECT_TRUE(CheckLeafCount(Small(), 3).ok());
  EXPECT_EQ(CheckLeafCount(Small(), 4).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(CheckCallBytes(Small(), 1000).ok());
  absl::Status s = CheckCallBytes(Small(), 1001);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(s.message()).find("--max-call-bytes"), std::string::npos);
  v1::ReadLeavesRequest read;
  read.set_dict("d");
  for (int i = 0; i < 4; ++i) read.add_paths()->add_components("x");
  EXPECT_EQ(CheckRequest(Small(), read).code(), absl::StatusCode::kResourceExhausted);
}

// Random indices: the length counted is the positions' and masks' elements
// plus one per other item, and the limit is applied exactly.
TEST(RequestLimits, IndexLengthOnRandomIndices) {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    v1::Index index;
    int64_t length = 0;
    const int items = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < items; ++i) {
      v1::IndexItem* item = index.add_items();
      switch (rng() % 4) {
        case 0:
          item->set_integer(static_cast<int64_t>(rng() % 5));
          length += 1;
          break;
        case 1: {
          const int n = static_cast<int>(rng() % 8);
          for (int k = 0; k < n; ++k) item->mutable_positions()->add_values(k);
          item->mutable_positions()->add_shape(n);
          length += n;
          break;
        }
        case 2: {
          const int n = static_cast<int>(rng() % 8);
          item->mutable_mask();  // an empty mask is still a mask
          for (int k = 0; k < n; ++k) item->mutable_mask()->add_values(k % 2 == 0);
          length += n;
          break;
        }
        default:
          item->mutable_slice();
          length += 1;
      }
    }
    absl::Status s = CheckIndex(Small(), index);
    if (length <= 10) {
      EXPECT_TRUE(s.ok()) << s << " length " << length;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << "length " << length;
    }
  }
}

TEST(RequestLimits, PositionShapesMustMatchTheirValues) {
  v1::Index index;
  auto* pos = index.add_items()->mutable_positions();
  pos->add_values(1);
  pos->add_values(2);
  pos->add_shape(3);
  EXPECT_EQ(CheckIndex(ServiceLimits(), index).code(), absl::StatusCode::kInvalidArgument);
  pos->set_shape(0, int64_t{1} << 40);
  pos->add_shape(int64_t{1} << 40);  // would overflow when multiplied
  EXPECT_EQ(CheckIndex(ServiceLimits(), index).code(), absl::StatusCode::kInvalidArgument);
  pos->clear_shape();  // a 0-d tensor holds one value
  pos->clear_values();
  pos->add_values(4);
  EXPECT_TRUE(CheckIndex(ServiceLimits(), index).ok());
}

}  // namespace
}  // namespace tdstore::service
