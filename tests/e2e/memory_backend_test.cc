// tdstored --backend memory: no Redis started or contacted, and a client's
// round trip (create, whole-leaf write and read, indexed read and write,
// counters) works against it as against Redis. The store's own contract is
// tested in-process (tests/store/); this checks the daemon's wiring.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "tdstore/core.h"
#include "tests/support/daemon_process.h"

namespace tdstore::testing {
namespace {

// Keeps every leaf's bytes, in the order the read delivers them.
class Leaves : public core::ReadSink {
 public:
  void Begin(const std::vector<int64_t>& batch_shape, int64_t) override { batch = batch_shape; }
  void* Leaf(const core::LeafMeta& leaf) override {
    return bytes.emplace_back(static_cast<size_t>(leaf.byte_size)).data();
  }
  std::vector<int64_t> batch;
  std::vector<std::vector<char>> bytes;
};

TEST(E2eMemoryBackend, ServesARoundTripWithoutRedis) {
  DaemonProcess daemon;
  // No --redis, and a redis-server that cannot start: only the memory
  // backend gets this daemon ready.
  // A unix socket too, for the shared-memory path (loopback clients lend).
  ASSERT_TRUE(daemon
                  .Start({"--backend", "memory", "--redis-server-bin", "/nonexistent/redis-server",
                          "--unix-socket", daemon.dir() + "/td.sock"})
                  .ok())
      << daemon.LogTail();
  core::Client client(daemon.address());
  core::Dict td = client.create("replay", {6});
  std::vector<float> obs(6 * 2);
  std::iota(obs.begin(), obs.end(), 0.0f);
  td.write({{"obs", DType::kFloat32, {6, 2}, obs.data(),
             static_cast<int64_t>(obs.size() * sizeof(float))}});

  Leaves whole;
  td.read({}, whole);
  ASSERT_EQ(whole.bytes.size(), 1u);
  EXPECT_EQ(std::memcmp(whole.bytes[0].data(), obs.data(), whole.bytes[0].size()), 0);

  // td[[4, 1]]
  const core::Index rows = {core::IndexTerm::Positions({4, 1}, {2})};
  core::ReadOptions read;
  read.index = &rows;
  Leaves picked;
  td.read({}, picked, read);
  EXPECT_EQ(picked.batch, (std::vector<int64_t>{2}));
  ASSERT_EQ(picked.bytes.size(), 1u);
  const std::vector<float> expected = {8, 9, 2, 3};
  EXPECT_EQ(std::memcmp(picked.bytes[0].data(), expected.data(), picked.bytes[0].size()), 0);

  // A second client sees the first one's dict: one store per daemon.
  core::Client other(daemon.address());
  Leaves again;
  other.open("replay").read({"obs"}, again);
  ASSERT_EQ(again.bytes.size(), 1u);
  EXPECT_EQ(again.bytes[0], whole.bytes[0]);

  // A large leaf through shared memory (this client is on loopback): one
  // leaf of 1 MiB or more goes in lent pieces, which the memory store
  // takes as any bytes.
  std::vector<float> big(6 * 100000);
  std::iota(big.begin(), big.end(), 1.0f);
  td.write({{"big", DType::kFloat32, {6, 100000}, big.data(),
             static_cast<int64_t>(big.size() * sizeof(float))}});
  EXPECT_TRUE(client.shares_memory());
  Leaves large;
  other.open("replay").read({"big"}, large);
  ASSERT_EQ(large.bytes.size(), 1u);
  ASSERT_EQ(large.bytes[0].size(), big.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(large.bytes[0].data(), big.data(), large.bytes[0].size()), 0);

  EXPECT_EQ(daemon.Stop(), 0) << daemon.LogTail();
}

}  // namespace
}  // namespace tdstore::testing
