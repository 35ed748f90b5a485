// The Foundation's end-to-end promises about size and failure:
//   - a leaf larger than Redis' 512 MB value limit round-trips bit-exactly;
//   - a write stream broken halfway leaves no visible leaf and no keys;
//   - `tdstore put` then `tdstore get` (two processes) round-trip a 1 GiB
//     .npy file bit-exactly through tdstored's embedded default Redis, and a
//     library client in a third process reads what the CLI wrote.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tdstore/client.h"
#include "tdstore/v1/tdstore.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/tensor_testing.h"

namespace tdstore::testing {
namespace {

// Data keys of the shared daemon's namespace ("e2e") belonging to dict `id`.
std::vector<std::string> DataKeysOf(const std::string& id) {
  return SharedRedis().Keys("e2e:{" + id + ".*}:g*");
}

TEST(E2eLarge, LeafLargerThanRedisValueLimit) {
  Client client(DaemonAddress());
  // 600 MiB of int64 in 1,200 rows: past Redis' 512 MB string limit, so it
  // only works because blocks are cut into parts.
  constexpr int64_t kRows = 1200, kCols = 65536;
  Dict td = client.create(UniqueDictName(), {kRows}, CreateOptions{256, 32 << 20});
  // Distinct values everywhere (a constant would hide misplaced chunks).
  at::Tensor value = at::arange(kRows * kCols, at::kLong).view({kRows, kCols});
  value.mul_(static_cast<int64_t>(2654435761));
  td.set("big", value);
  EXPECT_EQ(td.describe().leaves.at(0).byte_size, kRows * kCols * 8);
  at::Tensor back = td.get("big");
  EXPECT_TRUE(SameBytes(value, back));
  // No Redis value exceeds the part size.
  const std::string id = td.describe().id;
  std::vector<std::string> keys = DataKeysOf(id);
  // 512 KiB rows, 256 rows per block: four 128 MiB blocks of 4 parts and a
  // last block of 176 rows (88 MiB) in 3 parts.
  EXPECT_EQ(keys.size(), 4u * 4u + 3u);
  for (const std::string& k : keys) {
    EXPECT_LE(std::stoll(SharedRedis().Command({"STRLEN", k}).at(0)), 32ll << 20) << k;
  }
  client.drop(td.name());
}

TEST(E2eBroken, WriteStreamCancelledHalfwayLeavesNothing) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {1024}, CreateOptions{64, 0});
  td.set("kept", at::ones({1024, 4}));
  const std::string id = td.describe().id;
  const std::vector<std::string> keys_before = DataKeysOf(id);

  // Speak the protocol directly so the stream can break where we choose:
  // after the header and half of the leaf's bytes.
  auto channel = grpc::CreateChannel(DaemonAddress(), grpc::InsecureChannelCredentials());
  auto stub = v1::TdStore::NewStub(channel);
  grpc::ClientContext ctx;
  v1::WriteLeavesResponse response;
  auto writer = stub->WriteLeaves(&ctx, &response);
  v1::WriteChunk chunk;
  chunk.mutable_begin()->set_dict(td.name());
  ASSERT_TRUE(writer->Write(chunk));
  chunk.Clear();
  v1::LeafHeader* h = chunk.mutable_header();
  h->mutable_path()->add_components("half");
  h->set_dtype(v1::FLOAT32);
  h->add_shape(1024);
  h->add_shape(1024);
  h->set_byte_size(1024 * 1024 * 4);
  ASSERT_TRUE(writer->Write(chunk));
  const std::string bytes(1 << 20, '\x5a');
  for (int i = 0; i < 2; ++i) {  // 2 of the 4 MiB
    chunk.Clear();
    chunk.set_data(bytes);
    ASSERT_TRUE(writer->Write(chunk));
  }
  // Wait until the daemon has written some of it to Redis, then break off.
  for (int i = 0; i < 100 && DataKeysOf(id).size() == keys_before.size(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(DataKeysOf(id).size(), keys_before.size()) << "the daemon never wrote the blocks";
  ctx.TryCancel();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);

  // The abort runs in the daemon after it notices the cancellation: it
  // deletes the blocks first, then the pending entry. Wait for both.
  auto pending = [&] { return SharedRedis().Command({"HLEN", "e2e:{" + id + "}:pending"}).at(0); };
  std::vector<std::string> keys_after = DataKeysOf(id);
  for (int i = 0; i < 250 && (keys_after != keys_before || pending() != "0"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    keys_after = DataKeysOf(id);
  }
  EXPECT_EQ(keys_after, keys_before) << "blocks of the broken write were left behind";
  EXPECT_FALSE(td.contains("half"));
  EXPECT_EQ(pending(), "0");
  client.drop(td.name());
}

TEST(E2eLarge, CliRoundTripsOneGiBNpyThroughEmbeddedRedis) {
  // tdstored with no --redis: it runs its own redis-server.
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start({}).ok()) << daemon.LogTail();
  const std::string dir = daemon.dir();
  const std::string in = dir + "/in.npy", out = dir + "/out.npy";

  // NumPy itself writes the 1 GiB file: float32 [2^18, 1024], distinct values.
  const std::string py =
      "/usr/bin/python3 -c \"import numpy as np; "
      "np.save('" + in + "', np.arange(1 << 28, dtype=np.float32).reshape(1 << 18, 1024))\"";
  ASSERT_EQ(std::system(py.c_str()), 0);

  const std::string cli = std::string(TDSTORE_CLI_BIN) + " --addr " + daemon.address() + " ";
  ASSERT_EQ(std::system((cli + "create big --batch-size 262144").c_str()), 0);
  ASSERT_EQ(std::system((cli + "put big data " + in).c_str()), 0);
  ASSERT_EQ(std::system((cli + "get big data -o " + out).c_str()), 0);
  ASSERT_EQ(std::system(("cmp " + in + " " + out).c_str()), 0) << "the .npy files differ";

  // Another process (this one) opens the dict by name and reads the leaf.
  Client client(daemon.address());
  at::Tensor leaf = client.open("big").get("data");
  ASSERT_EQ(leaf.sizes(), (at::IntArrayRef{1 << 18, 1024}));
  EXPECT_EQ(leaf.scalar_type(), at::kFloat);
  EXPECT_EQ(leaf.flatten()[(1 << 24) - 3].item<float>(), static_cast<float>((1 << 24) - 3));
  leaf = at::Tensor();
  std::remove(in.c_str());
  std::remove(out.c_str());
  EXPECT_EQ(daemon.Stop(), 0);
}

}  // namespace
}  // namespace tdstore::testing
