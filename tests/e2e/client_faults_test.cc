// Clients that die or hang in the middle of a write (issue #6): whatever
// happens to the client, the half-written leaf never becomes visible, and
// within the pending timeout plus a few sweep intervals the daemon's
// namespace holds exactly the Redis keys it held before the write began.
//
//   - the `tdstore` CLI killed (SIGKILL) during a 200 MiB put;
//   - the CLI frozen (SIGSTOP) during the put: its connection stays open, so
//     only the sweeper can clean up; resumed (SIGCONT) afterwards, the CLI
//     must fail with ABORTED and write nothing;
//   - a raw gRPC client that sends part of a leaf, then destroys its stream
//     and channel without half-closing;
//   - a raw gRPC client that sends a whole leaf, goes silent past the
//     pending timeout, then half-closes: the commit is refused (ABORTED).
//
// Each test runs its own tdstored over the shared test Redis (standalone or
// cluster, from TDSTORE_TEST_BACKEND) in a namespace of its own, with a
// 1.5 s pending timeout and a 200 ms sweep interval. Keys are counted over
// every master of a cluster (TestRedis::Keys).
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <ATen/ATen.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/cli/npy_header.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tdstore/client.h"
#include "tdstore/v1/tdstore.grpc.pb.h"
#include "tests/e2e/cli_testing.h"
#include "tests/e2e/e2e_env.h"
#include "tests/support/child_process.h"
#include "tests/support/daemon_process.h"

namespace tdstore::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kPendingTimeoutMs = 1500;
constexpr int kSweepIntervalMs = 200;
// The longest cleanup may take: an abandoned write's entry expires at most
// a pending timeout after its last refresh, and the next sweep (or the one
// after, on a busy machine) removes it.
constexpr milliseconds kCleanupBound{kPendingTimeoutMs + 5 * kSweepIntervalMs};

// The .npy the CLI puts: float32 [51200, 1024], 200 MiB; 4 MiB per block of
// 1024 rows, so the put creates a key every few milliseconds.
constexpr int64_t kNpyRows = 51200, kNpyCols = 1024, kNpyRowsPerBlock = 1024;

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += "\n  " + item;
  return out;
}

class ClientFaults : public ::testing::Test {
 protected:
  // One 200 MiB file for the whole suite (writing it takes a moment).
  static void SetUpTestSuite() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tdstore-faults-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    auto header = cli::FormatNpyHeader(DType::kFloat32, {kNpyRows, kNpyCols});
    ASSERT_TRUE(header.ok()) << header.status();
    std::ofstream out(NpyPath(), std::ios::binary);
    out << *header;
    std::vector<float> row(kNpyCols);
    for (int64_t r = 0; r < kNpyRows; ++r) {
      for (int64_t c = 0; c < kNpyCols; ++c) row[c] = static_cast<float>(r * kNpyCols + c);
      out.write(reinterpret_cast<const char*>(row.data()),
                static_cast<std::streamsize>(row.size() * sizeof(float)));
    }
    ASSERT_TRUE(out.good()) << "cannot write " << NpyPath();
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  static std::string NpyPath() { return dir_ + "/big.npy"; }

  void SetUp() override {
    static int tests = 0;
    ns_ = "faults" + std::to_string(tests++);
    absl::Status started = daemon_.Start(
        {"--redis", SharedRedis().url(), "--namespace", ns_, "--pending-timeout-ms",
         std::to_string(kPendingTimeoutMs), "--sweep-interval-ms",
         std::to_string(kSweepIntervalMs)});
    ASSERT_TRUE(started.ok()) << started;
    client_ = std::make_unique<Client>(daemon_.address());
  }
  void TearDown() override {
    if (cli_pid_ > 0) {  // a test that failed halfway: no stopped child left
      KillChild(cli_pid_);
      cli_pid_ = -1;
    }
    // Our channel goes first (tidier; tdstored no longer waits for idle
    // clients on SIGTERM, see E2eShutdown in faults_test.cc).
    client_.reset();
    EXPECT_EQ(daemon_.Stop(), 0) << daemon_.LogTail();
  }

  // Every key of this test's namespace, sorted, over every master.
  std::vector<std::string> Keys() const { return SharedRedis().Keys(ns_ + ":*"); }
  // The block parts only.
  std::vector<std::string> DataKeys() const { return SharedRedis().Keys(ns_ + ":{*.*}:g*"); }

  // Polls until the namespace holds exactly `expected`; how long that took,
  // or nothing if it did not happen within `bound`.
  std::optional<milliseconds> WaitForKeys(const std::vector<std::string>& expected,
                                          milliseconds bound) const {
    const auto start = Clock::now();
    while (Keys() != expected) {
      if (Clock::now() - start > bound) return std::nullopt;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  }

  // Starts `tdstore put <dict> x big.npy` against this test's daemon.
  void StartPut(const std::string& dict) {
    cli_log_ = daemon_.dir() + "/cli.log";
    absl::Status spawned = SpawnChild({TDSTORE_CLI_BIN, "--addr", daemon_.address(), "put", dict,
                                       "x", NpyPath()},
                                      cli_log_, ChildLog::kTruncate, &cli_pid_);
    ASSERT_TRUE(spawned.ok()) << spawned;
  }

  // Waits (up to 10 s) until the put has written 4 of its 50 blocks to
  // Redis while the CLI still runs: from then on it is really mid-write (the
  // whole put takes about a second). Fails if the CLI ends first.
  void WaitUntilMidWrite() {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (DataKeys().size() < 4) {
      int status = 0;
      if (TryReapChild(cli_pid_, &status)) {
        cli_pid_ = -1;
        FAIL() << "the CLI exited (" << ExitCodeOf(status) << ") before writing 4 blocks: "
               << ReadFile(cli_log_);
      }
      ASSERT_LT(Clock::now(), deadline) << "the put did not write 4 blocks within 10 s";
      std::this_thread::sleep_for(milliseconds(1));
    }
  }

  // Sends `signal` to the CLI; with SIGKILL also reaps it and returns its
  // exit code.
  int Signal(int signal) {
    EXPECT_EQ(kill(cli_pid_, signal), 0);
    if (signal != SIGKILL) return 0;
    int status = 0;
    EXPECT_EQ(waitpid(cli_pid_, &status, 0), cli_pid_);
    cli_pid_ = -1;
    return ExitCodeOf(status);
  }

  static std::string dir_;
  std::string ns_;
  DaemonProcess daemon_;
  std::unique_ptr<Client> client_;
  pid_t cli_pid_ = -1;
  std::string cli_log_;
};

std::string ClientFaults::dir_;

TEST_F(ClientFaults, CliKilledMidPutLeavesNothing) {
  Dict td = client_->create("big", {kNpyRows}, CreateOptions{kNpyRowsPerBlock, 0});
  const std::vector<std::string> before = Keys();
  ASSERT_NO_FATAL_FAILURE(StartPut("big"));
  ASSERT_NO_FATAL_FAILURE(WaitUntilMidWrite());
  const size_t keys_at_kill = Keys().size();
  // Still running, so the kill lands mid-transfer.
  ASSERT_FALSE(TryReapChild(cli_pid_)) << "the put ended before it could be killed";
  EXPECT_EQ(Signal(SIGKILL), 128 + SIGKILL);
  EXPECT_GT(keys_at_kill, before.size());

  EXPECT_FALSE(td.contains("x"));
  EXPECT_TRUE(td.keys().empty());
  const std::optional<milliseconds> took = WaitForKeys(before, kCleanupBound);
  ASSERT_TRUE(took.has_value()) << "keys left behind " << kCleanupBound.count()
                                << " ms after the kill:" << Join(Keys()) << "\nbefore:"
                                << Join(before) << daemon_.LogTail();
  std::cout << "killed at " << keys_at_kill << " keys (" << before.size() << " before); back to "
            << before.size() << " after " << took->count() << " ms\n";
  EXPECT_FALSE(td.contains("x"));
  // The dict is still usable.
  td.set("y", at::ones({kNpyRows, 2}));
  EXPECT_EQ(td.keys().size(), 1u);
}

TEST_F(ClientFaults, CliFrozenMidPutIsSweptAndFailsWhenResumed) {
  Dict td = client_->create("big", {kNpyRows}, CreateOptions{kNpyRowsPerBlock, 0});
  const std::vector<std::string> before = Keys();
  ASSERT_NO_FATAL_FAILURE(StartPut("big"));
  ASSERT_NO_FATAL_FAILURE(WaitUntilMidWrite());
  ASSERT_FALSE(TryReapChild(cli_pid_)) << "the put ended before it could be frozen";
  ASSERT_EQ(Signal(SIGSTOP), 0);
  const size_t keys_at_stop = Keys().size();
  EXPECT_GT(keys_at_stop, before.size());

  // The stream stays open: the daemon waits for more data, and only the
  // sweeper, once the pending entry has expired, removes the blocks.
  const std::optional<milliseconds> took = WaitForKeys(before, kCleanupBound);
  ASSERT_TRUE(took.has_value()) << "keys left behind " << kCleanupBound.count()
                                << " ms after the freeze:" << Join(Keys()) << "\nbefore:"
                                << Join(before) << daemon_.LogTail();
  std::cout << "frozen at " << keys_at_stop << " keys (" << before.size() << " before); swept to "
            << before.size() << " after " << took->count() << " ms\n";
  EXPECT_FALSE(td.contains("x"));

  // Resumed, the CLI sends its next chunk; the daemon finds its write swept
  // and ends it with ABORTED instead of writing into deleted blocks.
  ASSERT_EQ(Signal(SIGCONT), 0);
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!TryReapChild(cli_pid_, &status)) {
    ASSERT_LT(Clock::now(), deadline) << "the resumed CLI did not end within 10 s";
    std::this_thread::sleep_for(milliseconds(10));
  }
  cli_pid_ = -1;
  const std::string log = ReadFile(cli_log_);
  EXPECT_EQ(ExitCodeOf(status), 1) << log;
  EXPECT_NE(log.find("tdstore: ABORTED: "), std::string::npos) << log;
  EXPECT_FALSE(td.contains("x"));
  EXPECT_EQ(Keys(), before);
}

// The raw protocol, so the stream can be left exactly as a vanished client
// leaves it.
struct RawWrite {
  explicit RawWrite(const std::string& address)
      : channel(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
        stub(v1::TdStore::NewStub(channel)),
        context(std::make_unique<grpc::ClientContext>()),
        writer(stub->WriteLeaves(context.get(), &response)) {}

  bool Begin(const std::string& dict) {
    v1::WriteChunk chunk;
    chunk.mutable_begin()->set_dict(dict);
    chunk.mutable_begin()->set_leaf_count(1);
    return writer->Write(chunk);
  }
  bool Header(const std::string& path, int64_t rows, int64_t cols) {
    v1::WriteChunk chunk;
    v1::LeafHeader* h = chunk.mutable_header();
    h->mutable_path()->add_components(path);
    h->set_dtype(v1::FLOAT32);
    h->add_shape(rows);
    h->add_shape(cols);
    h->set_byte_size(rows * cols * 4);
    return writer->Write(chunk);
  }
  bool Data(int64_t bytes) {
    v1::WriteChunk chunk;
    chunk.set_data(std::string(static_cast<size_t>(bytes), '\x3c'));
    return writer->Write(chunk);
  }

  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::TdStore::Stub> stub;
  std::unique_ptr<grpc::ClientContext> context;
  v1::WriteLeavesResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::WriteChunk>> writer;
};

TEST_F(ClientFaults, RawStreamDroppedWithoutHalfCloseLeavesNothing) {
  Dict td = client_->create("raw", {1024}, CreateOptions{64, 0});
  const std::vector<std::string> before = Keys();
  auto raw = std::make_unique<RawWrite>(daemon_.address());
  ASSERT_TRUE(raw->Begin("raw"));
  ASSERT_TRUE(raw->Header("half", 1024, 1024));  // 4 MiB announced
  ASSERT_TRUE(raw->Data(1 << 20));
  ASSERT_TRUE(raw->Data(1 << 20));  // 2 MiB sent
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (DataKeys().empty()) {
    ASSERT_LT(Clock::now(), deadline) << "the daemon wrote no block";
    std::this_thread::sleep_for(milliseconds(5));
  }
  // The client vanishes: stream, call and channel destroyed, no WritesDone,
  // no Finish.
  raw->writer.reset();
  raw->context.reset();
  raw.reset();

  EXPECT_FALSE(td.contains("half"));
  const std::optional<milliseconds> took = WaitForKeys(before, kCleanupBound);
  ASSERT_TRUE(took.has_value()) << "keys left behind:" << Join(Keys()) << daemon_.LogTail();
  std::cout << "dropped stream cleaned up after " << took->count() << " ms\n";
  EXPECT_FALSE(td.contains("half"));
}

TEST_F(ClientFaults, RawStreamSilentPastPendingTimeoutCannotCommit) {
  Dict td = client_->create("raw", {1024}, CreateOptions{64, 0});
  const std::vector<std::string> before = Keys();
  RawWrite raw(daemon_.address());
  ASSERT_TRUE(raw.Begin("raw"));
  // 2 MiB in 16 blocks, all of it, in chunks past the bytes tdstored holds
  // for a write sent at once (WriteTxn::kAtOnceMaxOwnedBytes): the write
  // goes stepwise, with its blocks pending in Redis until its commit.
  ASSERT_TRUE(raw.Header("late", 1024, 512));
  ASSERT_TRUE(raw.Data(1 << 20));
  ASSERT_TRUE(raw.Data(1 << 20));
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (DataKeys().size() < 16) {
    ASSERT_LT(Clock::now(), deadline) << "the daemon did not write the 16 blocks";
    std::this_thread::sleep_for(milliseconds(5));
  }
  // Silent: the stream is open and complete but not half-closed, until the
  // sweeper has given up on it.
  const std::optional<milliseconds> took = WaitForKeys(before, kCleanupBound);
  ASSERT_TRUE(took.has_value()) << "keys left behind:" << Join(Keys()) << daemon_.LogTail();
  std::cout << "silent stream swept after " << took->count() << " ms\n";
  EXPECT_FALSE(td.contains("late"));

  // The half-close comes too late: the commit finds the write swept.
  ASSERT_TRUE(raw.writer->WritesDone());
  const grpc::Status status = raw.writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED) << status.error_message();
  EXPECT_FALSE(td.contains("late"));
  EXPECT_EQ(Keys(), before);
}

// A call the client may not repeat blindly (CreateDict, DeleteDict,
// RenameDict, ring appends) first waits, within retry_for, for a connected
// channel: made before tdstored listens, it succeeds once tdstored is up.
// (It used to fail UNAVAILABLE at once, unsent, and was not repeated: a
// fresh-clone CI run on a busy machine failed a CreateDict that way.) The
// outcome does not depend on timing: whichever comes first, the create
// must succeed.
TEST(E2eClientConnect, ACreateMadeBeforeTdstoredListensWaitsForIt) {
  std::string pattern = (std::filesystem::temp_directory_path() / "tdstore-conn-XXXXXX").string();
  ASSERT_NE(mkdtemp(pattern.data()), nullptr);
  const std::string socket = pattern + "/td.sock";
  Client client("unix://" + socket);
  const std::string name = UniqueDictName();
  auto created = std::async(std::launch::async, [&] { return client.create(name, {4}); });
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start({"--redis", SharedRedis().url(), "--namespace", "e2e",
                            "--unix-socket", socket}).ok())
      << daemon.LogTail();
  Dict dict = created.get();  // rethrows the create's error, if any
  EXPECT_EQ(dict.batch_size(), (std::vector<int64_t>{4}));
  client.drop(name);
  daemon.Stop();
  std::filesystem::remove_all(pattern);
}

}  // namespace
}  // namespace tdstore::testing
