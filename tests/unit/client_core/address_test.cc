// client/core/src/address.h: what an address says about where tdstored
// runs (a token in the clear, shared memory over loopback).
#include "client/core/src/address.h"

#include <gtest/gtest.h>

#include <string>

namespace tdstore::core {
namespace {

TEST(Address, UnixSocketPathTakesEachOfGrpcsForms) {
  EXPECT_EQ(UnixSocketPath("unix:///run/td.sock"), "/run/td.sock");
  EXPECT_EQ(UnixSocketPath("unix:/run/td.sock"), "/run/td.sock");
  EXPECT_EQ(UnixSocketPath("unix:td.sock"), "td.sock");
  EXPECT_EQ(UnixSocketPath("127.0.0.1:50051"), "");
  EXPECT_EQ(UnixSocketPath("unixhost:50051"), "");
}

TEST(Address, LoopbackTcpIsOnlyThisMachinesLoopback) {
  for (const std::string a : {"127.0.0.1:50051", "localhost:1", "[::1]:50051",
                              "ipv4:127.0.0.1:50051", "ipv6:[::1]:50051"}) {
    EXPECT_TRUE(IsLoopbackTcp(a)) << a;
  }
  for (const std::string a :
       {"unix:///run/td.sock", "10.0.0.5:50051", "127.0.0.2:50051", "localhost.example:1",
        "mylocalhost:1", "0.0.0.0:50051", "[::2]:50051", "dns:///localhost:50051", "localhost",
        "127.0.0.1"}) {
    EXPECT_FALSE(IsLoopbackTcp(a)) << a;
  }
}

}  // namespace
}  // namespace tdstore::core
