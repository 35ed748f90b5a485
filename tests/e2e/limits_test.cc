// tdstored's limits (server/service/service_limits.h) through real gRPC:
// each is enforced with the documented code, the message names the
// setting, a refused call writes nothing, and a slow or stalled client can
// neither hold a stream forever nor make tdstored buffer without bound.
#include <ATen/ATen.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <future>
#include <thread>

#include "client/core/src/rows_behind.h"
#include "tdstore/client.h"
#include "tdstore/core.h"
#include "tests/e2e/leaf_values.h"
#include "tests/e2e/expect_error.h"
#include "tdstore/v1/tdstore.grpc.pb.h"
#include "tests/e2e/e2e_env.h"
#include "tests/support/daemon_process.h"

namespace tdstore::testing {
namespace {


// Waits (up to 5 s) for a namespace to hold exactly the keys of `want`: a
// stream cancelled by the server is rolled back by its handler just after
// the client sees the cancellation. (Key names, not values: a write that
// began took a generation number from the dict's meta even if it aborted.)
bool SettlesTo(const std::string& ns, const std::map<std::string, std::string>& want) {
  std::vector<std::string> want_keys;
  for (const auto& [key, dump] : want) want_keys.push_back(key);
  for (int i = 0; i < 100; ++i) {
    if (SharedRedis().Keys(ns + ":*") == want_keys) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int64_t ResidentBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

// A daemon with small limits, shared by the suite. Each limit's own rule
// (at the limit and one past it, the flag named, nothing written) is
// tested in-process by tests/service/service_test.cc
// (EveryCallLimitNamesItsFlagAndWritesNothing); here, what only a real
// daemon and its streams show.
class E2eLimits : public ::testing::Test {
 protected:
  static constexpr char kNs[] = "lim";
  static void SetUpTestSuite() {
    daemon_ = new DaemonProcess();
    absl::Status started = daemon_->Start(
        {"--redis", SharedRedis().url(), "--namespace", kNs, "--max-call-bytes", "1000000",
         "--max-index-length", "100", "--max-leaves-per-call", "3", "--max-concurrent-streams",
         "2", "--max-name-bytes", "16", "--max-path-bytes", "20", "--max-dicts", "1000",
         "--idle-stream-timeout-ms", "800"});
    ASSERT_TRUE(started.ok()) << started;
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static Client NewClient() {
    ClientOptions options;
    options.retry_for = std::chrono::milliseconds(0);
    return Client(daemon_->address(), options);
  }
  static DaemonProcess* daemon_;
};
DaemonProcess* E2eLimits::daemon_ = nullptr;

// Writes behind that join (client/core/src/rows_behind.h) can make a call
// past a limit that none of them crosses alone: tdstored refuses it
// having written nothing, and the writes go again one by one.
TEST_F(E2eLimits, AJoinedWriteBehindPastALimitIsSentAgainAsItsWrites) {
  ClientOptions options;
  options.retry_for = std::chrono::milliseconds(0);
  core::Client client(daemon_->address(), options);
  static int runs = 0;  // its own dict each run, within --max-name-bytes
  core::Dict dict = client.create("join" + std::to_string(runs++), {200},
                                  {{"obs", DType::kFloat32, {2}}});
  // Two writes of 60 rows: each within --max-index-length 100, not both.
  auto rows = [](int64_t from, float value) {
    std::vector<int64_t> positions;
    std::vector<float> values;
    for (int64_t i = 0; i < 60; ++i) {
      positions.push_back(from + i);
      values.push_back(value + float(i));
      values.push_back(-value - float(i));
    }
    return std::make_pair(positions, values);
  };
  auto [a_pos, a_val] = rows(0, 1000.0f);
  auto [b_pos, b_val] = rows(100, 2000.0f);
  auto leaves = [](std::vector<float>& v) {
    return std::vector<core::LeafData>{
        {"obs", DType::kFloat32, {60, 2}, v.data(), static_cast<int64_t>(v.size() * 4)}};
  };
  const core::Index a_index{core::IndexTerm::Positions(a_pos, {60})};
  const core::Index b_index{core::IndexTerm::Positions(b_pos, {60})};
  // The premise: the joined call alone is refused.
  std::vector<int64_t> both = a_pos;
  both.insert(both.end(), b_pos.begin(), b_pos.end());
  std::vector<float> both_val = a_val;
  both_val.insert(both_val.end(), b_val.begin(), b_val.end());
  core::WriteOptions joined_options;
  const core::Index joined_index{core::IndexTerm::Positions(both, {120})};
  joined_options.index = &joined_index;
  EXPECT_EQ(ErrorOf([&] {
              dict.write_counted({{"obs", DType::kFloat32, {120, 2}, both_val.data(),
                                   static_cast<int64_t>(both_val.size() * 4)}},
                                 joined_options, "rows", 120);
            }).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(dict.counter_get("rows"), 0);
  core::RowsBehind first(dict, leaves(a_val), a_index, "rows", 60);
  core::RowsBehind second(dict, leaves(b_val), b_index, "rows", 60);
  ASSERT_TRUE(first.Join(second));
  first.Apply();
  std::vector<float> want(400, 0.0f);
  for (int64_t i = 0; i < 60; ++i) {
    for (int c = 0; c < 2; ++c) {
      want[static_cast<size_t>((a_pos[i]) * 2 + c)] = a_val[static_cast<size_t>(i * 2 + c)];
      want[static_cast<size_t>((b_pos[i]) * 2 + c)] = b_val[static_cast<size_t>(i * 2 + c)];
    }
  }
  EXPECT_EQ(ReadLeafAs<float>(dict, "obs"), want);
  EXPECT_EQ(dict.counter_get("rows"), 120);
  dict.drop();
}

// Opens a WriteLeaves stream with a raw stub, sends part of a leaf, and
// then does nothing — a client that hangs mid-write.
struct StalledWriter {
  grpc::ClientContext context;
  v1::WriteLeavesResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::WriteChunk>> writer;

  StalledWriter(v1::TdStore::Stub& stub, const std::string& dict, const std::string& leaf) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    writer = stub.WriteLeaves(&context, &response);
    v1::WriteChunk chunk;
    chunk.mutable_begin()->set_dict(dict);
    writer->Write(chunk);
    v1::LeafHeader* h = chunk.mutable_header();
    h->mutable_path()->add_components(leaf);
    h->set_dtype(v1::UINT8);
    h->add_shape(4);
    h->add_shape(100000);
    h->set_byte_size(400000);
    writer->Write(chunk);
    chunk.set_data(std::string(100000, 'x'));
    writer->Write(chunk);
  }
};

TEST_F(E2eLimits, StalledWritersAreCancelledAndDoNotBlockOthers) {
  Client client = NewClient();
  // Its own dict each time it runs (--gtest_repeat), within --max-name-bytes.
  static int runs = 0;
  const std::string name = "stall" + std::to_string(runs++);
  // Parts of 4 KiB: a leaf of the stalled writers' is 98 of them, more
  // than tdstored sends at once (WriteTxn::kAtOnceMaxParts), so it begins
  // stepwise, its generation pending in Redis from the start.
  Dict td = client.create(name, {4}, {}, CreateOptions{0, 4096});
  const auto before = NamespaceSnapshot(kNs);
  auto stub = v1::TdStore::NewStub(
      grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials()));
  const auto t0 = std::chrono::steady_clock::now();
  StalledWriter first(*stub, name, "s1");
  StalledWriter second(*stub, name, "s2");
  // The stalled streams hold both slots once tdstored has admitted them,
  // which the client cannot see. A read sent to find out could itself take
  // a slot before a writer's handler starts (reads are served on gRPC's
  // callback threads, writes wait for a sync-server thread), leaving that
  // writer refused and every later read admitted. So first wait until both
  // writers have begun their leaves: each registers its generation as
  // pending (docs/storage-layout.md) only after it was admitted.
  const std::string pending = std::string(kNs) + ":{" + td.describe().id + "}:pending";
  const auto both_began = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (SharedRedis().Command({"HLEN", pending}).at(0) != "2" &&
         std::chrono::steady_clock::now() < both_began) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(SharedRedis().Command({"HLEN", pending}).at(0), "2")
      << "the stalled writers never both began";
  // Now a read stream (which changes nothing) is refused for want of a slot.
  auto status_of = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const Error& e) {
      return e.code();
    }
    return StatusCode::kOk;
  };
  auto waited_for = [](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  };
  ASSERT_TRUE(waited_for([&] {
    grpc::ClientContext ctx;
    v1::ReadLeavesRequest req;
    req.set_dict(name);
    auto reader = stub->ReadLeaves(&ctx, req);
    v1::ReadChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish().error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
  })) << "the stalled streams never held both slots";

  // Both stream slots are taken: a third stream is refused at once...
  Error e = ErrorOf([&] { td.set("x", at::zeros({4})); });
  EXPECT_EQ(e.code(), StatusCode::kResourceExhausted) << e.what();
  EXPECT_TRUE(Contains(e.message(), "--max-concurrent-streams")) << e.what();
  // ...while unary calls go on.
  EXPECT_EQ(td.batch_size(), std::vector<int64_t>{4});
  EXPECT_EQ(client.list().empty(), false);

  // The idle timeout (800 ms) cancels both stalled streams.
  grpc::Status s1 = first.writer->Finish();
  grpc::Status s2 = second.writer->Finish();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(s1.error_code(), grpc::StatusCode::CANCELLED) << s1.error_message();
  EXPECT_EQ(s2.error_code(), grpc::StatusCode::CANCELLED) << s2.error_message();
  EXPECT_GE(waited, 0.7);
  EXPECT_LT(waited, 5.0);
  // Nothing of theirs stays in Redis, and streams are served again: a
  // cancelled stream's slot is free once its handler has cleaned up, which
  // may be just after the client saw CANCELLED.
  EXPECT_TRUE(SettlesTo(kNs, before)) << "a cancelled write left keys behind";
  ASSERT_TRUE(waited_for([&] {
    return status_of([&] { td.set("x", at::ones({4})); }) != StatusCode::kResourceExhausted;
  })) << "the cancelled streams' slots were never freed";
  EXPECT_TRUE(at::equal(td.get("x"), at::ones({4})));
}

// A client that asks for a large leaf and then stops reading: gRPC flow
// control stops tdstored's sends, tdstored does not buffer the leaf, and
// the idle timeout ends the call.
TEST(E2eLimitsMemory, StalledReaderHoldsLittleMemoryAndIsCancelled) {
  DaemonProcess daemon;
  ASSERT_TRUE(daemon
                  .Start({"--redis", SharedRedis().url(), "--namespace", "limmem",
                          "--idle-stream-timeout-ms", "1500"})
                  .ok());
  {
    Client client(daemon.address());
    // One try: a leaf of `mib` MiB read by a client that stops after the
    // ReadBegin. gRPC's client may take the whole stream in unread (its
    // window grows with the measured bandwidth: on a loaded machine all of
    // 64 MiB was seen to arrive), and then tdstored never had a stalled
    // stream: the try says so (stalled false) and a bigger leaf is tried.
    struct Try {
      bool stalled = false;
      int64_t rss_growth = 0;
      grpc::Status status;
      int64_t received = 0;
    };
    auto stall = [&](int64_t mib) {
      Try out;
      Dict td = client.create("big", {64});
      td.set("x", at::rand({64, mib * 4096}));  // 64 rows of mib/64 MiB
      const int64_t idle_rss = ResidentBytes(daemon.pid());
      auto stub = v1::TdStore::NewStub(
          grpc::CreateChannel(daemon.address(), grpc::InsecureChannelCredentials()));
      grpc::ClientContext context;
      v1::ReadLeavesRequest request;
      request.set_dict("big");
      auto reader = stub->ReadLeaves(&context, request);
      v1::ReadChunk chunk;
      EXPECT_TRUE(reader->Read(&chunk));  // ReadBegin; then we stop reading
      std::this_thread::sleep_for(std::chrono::milliseconds(700));
      out.rss_growth = ResidentBytes(daemon.pid()) - idle_rss;
      // Meanwhile another client is served.
      EXPECT_EQ(td.batch_size(), std::vector<int64_t>{64});
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      while (reader->Read(&chunk)) out.received += static_cast<int64_t>(chunk.data().size());
      out.status = reader->Finish();
      out.stalled = !(out.status.ok() && out.received == mib << 20);
      client.drop("big");
      return out;
    };
    Try t = stall(64);
    if (!t.stalled) t = stall(256);
    ASSERT_TRUE(t.stalled) << "gRPC's client took in 64 and then 256 MiB unread: no stream "
                              "ever stalled";
    EXPECT_LT(t.rss_growth, 24 << 20)
        << "tdstored buffered " << t.rss_growth << " bytes for a stalled reader";
    // The stream was cancelled: draining it ends with CANCELLED before the
    // whole leaf could have arrived.
    EXPECT_EQ(t.status.error_code(), grpc::StatusCode::CANCELLED) << t.status.error_message();
  }
  EXPECT_EQ(daemon.Stop(), 0) << daemon.LogTail();
}

// The same for an indexed read by positions, which tdstored gathers and
// then sends from gRPC's callback threads, with no thread of its own waiting
// on the client (read_leaves_reactor.h): a client that stops reading is
// still cancelled by the idle timeout, and other calls, samples included,
// are served meanwhile.
TEST(E2eLimitsMemory, StalledReaderOfAGatheredReadIsCancelledWhileOthersAreServed) {
  DaemonProcess daemon;
  ASSERT_TRUE(daemon
                  .Start({"--redis", SharedRedis().url(), "--namespace", "limgather",
                          "--idle-stream-timeout-ms", "1000"})
                  .ok());
  {
    Client client(daemon.address());
    struct Try {
      bool stalled = false;
      grpc::Status status;
      int64_t received = 0;
      bool others_served = true;
    };
    // `row_kib` KiB rows, 4,096 of them, all selected by position: at most
    // 4,096 positions are served where they were received.
    auto stall = [&](int64_t row_kib) {
      Try out;
      constexpr int64_t kRows = 4096;
      Dict td = client.create("big", {kRows});
      td.set("x", at::rand({kRows, row_kib * 256}));
      auto stub = v1::TdStore::NewStub(
          grpc::CreateChannel(daemon.address(), grpc::InsecureChannelCredentials()));
      grpc::ClientContext context;
      v1::ReadLeavesRequest request;  // accepts no SmallRead: streamed frames
      request.set_dict("big");
      auto* positions = request.mutable_index()->add_items()->mutable_positions();
      for (int64_t i = kRows - 1; i >= 0; --i) positions->add_values(i);
      positions->add_shape(kRows);
      auto reader = stub->ReadLeaves(&context, request);
      v1::ReadChunk chunk;
      EXPECT_TRUE(reader->Read(&chunk));  // ReadBegin; then we stop reading
      // Meanwhile other calls are served, a sample among them, several at
      // once (more than gRPC's callback threads on this machine).
      std::vector<std::future<bool>> samples;
      for (int i = 0; i < 4; ++i) {
        samples.push_back(std::async(std::launch::async, [&, i] {
          const at::Tensor rows = td.index({at::tensor({i, 7, 4095}, at::kLong)}).at(Key("x"));
          return rows.size(0) == 3;
        }));
      }
      for (auto& f : samples) out.others_served &= f.get();
      out.others_served &= td.batch_size() == std::vector<int64_t>{kRows};
      // The watchdog cancels within 1.25x the idle timeout (stream_guard.h):
      // by then the call is over, whatever is left unread.
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      while (reader->Read(&chunk)) out.received += static_cast<int64_t>(chunk.data().size());
      out.status = reader->Finish();
      out.stalled = !(out.status.ok() && out.received == kRows * row_kib * 1024);
      client.drop("big");
      return out;
    };
    Try t = stall(16);  // 64 MiB
    if (!t.stalled) t = stall(48);  // 192 MiB, under --max-indexed-bytes' 256
    EXPECT_TRUE(t.others_served);
    ASSERT_TRUE(t.stalled) << "gRPC's client took in 64 and then 192 MiB unread: no stream "
                              "ever stalled";
    EXPECT_EQ(t.status.error_code(), grpc::StatusCode::CANCELLED) << t.status.error_message();
  }
  EXPECT_EQ(daemon.Stop(), 0) << daemon.LogTail();
}

}  // namespace
}  // namespace tdstore::testing
