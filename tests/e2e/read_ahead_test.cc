// Reads that do not block their caller: core::Dict::read_async and the
// libtorch client's Dict::index_async, on the core's read-ahead threads.
// Many in flight at once give exactly what blocking reads give; errors
// reach future.get(); a future outlives the Dict and Client it came from.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <random>
#include <vector>

#include "tdstore/client.h"
#include "tdstore/core.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/leaf_values.h"
#include "tests/e2e/expect_error.h"

namespace tdstore::testing {
namespace {

constexpr int64_t kRows = 1000;
constexpr int64_t kWidth = 8;

using FloatSink = VectorOf<float>;

// A dict of kRows rows, obs [kRows, kWidth] f32 = row * 100 + column.
core::Dict MakeDict(const core::Client& client) {
  std::vector<float> obs(kRows * kWidth);
  for (int64_t i = 0; i < kRows * kWidth; ++i) obs[i] = float(i / kWidth * 100 + i % kWidth);
  core::Dict dict = client.create(UniqueDictName(), {kRows});
  dict.write({{"obs", DType::kFloat32, {kRows, kWidth}, obs.data(), kRows * kWidth * 4}});
  return dict;
}

core::Index Positions(std::mt19937& rng, int n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t& x : p) x = std::uniform_int_distribution<int64_t>(0, kRows - 1)(rng);
  return {core::IndexTerm::Positions(p, {n})};
}

TEST(E2eReadAhead, ManyReadsInFlightGiveWhatBlockingReadsGive) {
  core::Client client(DaemonAddress());
  core::Dict dict = MakeDict(client);
  std::mt19937 rng(11);
  constexpr int kReads = 24;  // more than the read-ahead threads: some queue
  std::vector<core::Index> indices;
  std::vector<std::shared_ptr<FloatSink>> sinks;
  std::vector<std::future<void>> futures;
  for (int i = 0; i < kReads; ++i) {
    indices.push_back(Positions(rng, 256));
    sinks.push_back(std::make_shared<FloatSink>());
    futures.push_back(dict.read_async({"obs"}, sinks.back(), indices.back()));
  }
  for (int i = 0; i < kReads; ++i) {
    futures[i].get();
    ASSERT_EQ(sinks[i]->values.size(), static_cast<size_t>(256 * kWidth));
    EXPECT_EQ(sinks[i]->values, ReadLeafAs<float>(dict, "obs", &indices[i])) << "read " << i;
  }
  // No index: the whole leaf.
  auto whole = std::make_shared<FloatSink>();
  dict.read_async({"obs"}, whole).get();
  EXPECT_EQ(whole->values.size(), static_cast<size_t>(kRows * kWidth));
  EXPECT_EQ(whole->values[kWidth * 7 + 3], 703.0f);
  dict.drop();
}

// A FloatSink whose read waits, in Begin, until `open` is set.
class GatedSink : public FloatSink {
 public:
  explicit GatedSink(std::shared_future<void> open) : open_(std::move(open)) {}
  void Begin(const std::vector<int64_t>& shape, int64_t leaves) override {
    open_.wait();
    FloatSink::Begin(shape, leaves);
  }

 private:
  std::shared_future<void> open_;
};

TEST(E2eReadAhead, ErrorsReachGetAndAFutureOutlivesItsDict) {
  std::future<void> later;
  auto sink = std::make_shared<FloatSink>();
  std::promise<void> open;
  auto gated = std::make_shared<GatedSink>(open.get_future().share());
  std::string name;
  {
    core::Client client(DaemonAddress());
    core::Dict dict = MakeDict(client);
    name = dict.name();
    EXPECT_EQ(ErrorOf([&] { dict.read_async({"missing"}, sink).get(); }).code(),
              StatusCode::kNotFound);
    core::Index out_of_range{core::IndexTerm::Int(kRows)};
    EXPECT_EQ(ErrorOf([&] { dict.read_async({"obs"}, sink, out_of_range).get(); }).code(),
              StatusCode::kOutOfRange);
    EXPECT_EQ(ErrorOf([&] { dict.read_async({"obs"}, nullptr); }).code(),
              StatusCode::kInvalidArgument);
    // The read cannot start before the scope ends: the sink waits for it.
    later = dict.read_async({"obs"}, gated, core::Index{core::IndexTerm::Int(5)});
  }  // the Dict and the Client are gone; the read holds what it needs
  open.set_value();
  later.get();
  EXPECT_EQ(gated->values, (std::vector<float>{500, 501, 502, 503, 504, 505, 506, 507}));
  core::Client(DaemonAddress()).drop(name);
}

// A process that forks while its read-ahead threads are busy: every child
// runs its own read-ahead tasks (a fresh pool; the parent's, whose mutex may
// have been copied locked, is never touched). Children that hang are killed
// after 10 s and fail the test.
TEST(E2eReadAhead, AForkedChildReadsAheadWhileTheParentsThreadsAreBusy) {
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop) {
      std::vector<std::future<int>> futures;
      for (int i = 0; i < 8; ++i) futures.push_back(core::ReadAhead([i] { return i; }));
      for (auto& f : futures) f.get();
    }
  });
  constexpr int kChildren = 50;
  int failed = 0;
  for (int c = 0; c < kChildren; ++c) {
    const pid_t child = fork();
    if (child == 0) {
      bool ok = core::ReadAhead([] { return 7; }).get() == 7 &&
                core::ReadAhead([] { return 8; }).get() == 8;
      _exit(ok ? 0 : 1);
    }
    ASSERT_GT(child, 0);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (waitpid(child, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  stop = true;
  busy.join();
  EXPECT_EQ(failed, 0) << "of " << kChildren << " children";
}

TEST(E2eReadAhead, LibtorchIndexAsyncGivesWhatIndexGives) {
  Client client(DaemonAddress());
  const std::string name = UniqueDictName();
  Dict td = client.create(name, {kRows});
  td.set("obs", at::rand({kRows, kWidth}));
  td.set("reward", at::rand({kRows}));
  std::vector<at::Tensor> positions;
  std::vector<std::future<LocalDict>> futures;
  for (int i = 0; i < 8; ++i) {
    positions.push_back(at::randint(0, kRows, {256}, at::kLong));
    futures.push_back(td.index_async(positions.back()));
  }
  for (int i = 0; i < 8; ++i) {
    LocalDict got = futures[i].get();
    LocalDict want = td.index(positions[i]);
    ASSERT_EQ(got.batch_size, want.batch_size);
    EXPECT_TRUE(at::equal(got.at("obs"), want.at("obs")));
    EXPECT_TRUE(at::equal(got.at("reward"), want.at("reward")));
  }
  EXPECT_EQ(ErrorOf([&] { td.index_async(Index(int64_t(kRows))).get(); }).code(),
            StatusCode::kOutOfRange);
  td.core().drop();
}

}  // namespace
}  // namespace tdstore::testing
