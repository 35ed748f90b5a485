// KeySlot against values Redis itself computed (CLUSTER KEYSLOT on a
// cluster-enabled redis-server 7.0), including hash-tag edge cases.
#include "server/redis/cluster_slot.h"

#include "gtest/gtest.h"

namespace tdstore {
namespace {

TEST(ClusterSlot, Crc16XmodemCheckValue) {
  // The CRC16/XMODEM check value for "123456789".
  EXPECT_EQ(Crc16Xmodem("123456789"), 0x31C3);
}

TEST(ClusterSlot, MatchesRedis) {
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot("123456789"), 12739);
  EXPECT_EQ(KeySlot("{user1000}.following"), 3443);
  EXPECT_EQ(KeySlot("td:{7.3}:g5:0"), 9196);
  EXPECT_EQ(KeySlot("td:{7}:meta"), 1716);
  EXPECT_EQ(KeySlot("td:catalog"), 8775);
  EXPECT_EQ(KeySlot(""), 0);
  // "{}" is no tag; the first '{' and the first '}' after it decide.
  EXPECT_EQ(KeySlot("a{}b"), 13694);
  EXPECT_EQ(KeySlot("{}{x}"), 3257);
  EXPECT_EQ(KeySlot("x{"), 3596);
}

TEST(ClusterSlot, KeysOfOneTagShareASlot) {
  EXPECT_EQ(KeySlot("td:{7}:meta"), KeySlot("td:{7}:leaves"));
  EXPECT_EQ(KeySlot("td:{7}:meta"), KeySlot("td:{7}:pending"));
  EXPECT_EQ(KeySlot("td:{7.3}:g5:0"), KeySlot("td:{7.3}:g9:2"));
  EXPECT_EQ(HashTagOf("td:{7.3}:g5:0"), "7.3");
  EXPECT_EQ(HashTagOf("plain"), "plain");
}

}  // namespace
}  // namespace tdstore
