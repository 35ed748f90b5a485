#include "server/redis_store/key_schema.h"

#include <string>

#include "gtest/gtest.h"

namespace tdstore {
namespace {

// The hash tag as Redis Cluster computes it: the bytes between the first '{'
// and the next '}', when non-empty; otherwise the whole key is hashed.
std::string HashTag(const std::string& key) {
  const size_t open = key.find('{');
  if (open == std::string::npos) return key;
  const size_t close = key.find('}', open + 1);
  if (close == std::string::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

TEST(KeySchemaTest, ExactKeys) {
  const KeySchema keys("td");
  EXPECT_EQ(keys.ns(), "td");
  EXPECT_EQ(keys.Catalog(), "td:catalog");
  EXPECT_EQ(keys.DictIdCounter(), "td:next_dict_id");
  EXPECT_EQ(keys.UsedBytes(), "td:used_bytes");
  EXPECT_EQ(keys.Meta("42"), "td:{42}:meta");
  EXPECT_EQ(keys.Leaves("42"), "td:{42}:leaves");
  EXPECT_EQ(keys.Pending("42"), "td:{42}:pending");
  EXPECT_EQ(keys.BlockPart("42", 3, 7, 0), "td:{42.3}:g7:0");
  EXPECT_EQ(keys.BlockPart("42", 0, 0, 0), "td:{42.0}:g0:0");
  EXPECT_EQ(keys.BlockPart("1", 123456789012, 9876543210, 15),
            "td:{1.123456789012}:g9876543210:15");
}

TEST(KeySchemaTest, OtherNamespace) {
  const KeySchema keys("prod:tdstore");
  EXPECT_EQ(keys.Catalog(), "prod:tdstore:catalog");
  EXPECT_EQ(keys.Meta("5"), "prod:tdstore:{5}:meta");
  EXPECT_EQ(keys.BlockPart("5", 1, 2, 3), "prod:tdstore:{5.1}:g2:3");
}

TEST(KeySchemaTest, HashTags) {
  const KeySchema keys("td");
  for (const char* id : {"0", "7", "42", "123456"}) {
    EXPECT_EQ(HashTag(keys.Meta(id)), id);
    EXPECT_EQ(HashTag(keys.Leaves(id)), id);
    EXPECT_EQ(HashTag(keys.Pending(id)), id);
    for (int64_t block : {0, 1, 17, 100000}) {
      for (int64_t part : {0, 3}) {
        EXPECT_EQ(HashTag(keys.BlockPart(id, block, 9, part)),
                  std::string(id) + "." + std::to_string(block));
      }
    }
  }
}

TEST(KeySchemaTest, DataPattern) {
  const KeySchema keys("td");
  EXPECT_EQ(keys.DataPattern("42"), "td:{42.*}:g*");
  // Glob characters in the namespace are escaped so they match literally.
  EXPECT_EQ(KeySchema("a*b?").DataPattern("1"), "a\\*b\\?:{1.*}:g*");
}

}  // namespace
}  // namespace tdstore
