// Causal schema reads (docs/protocol.md, "Causal schema reads"), through
// real gRPC on both back ends. Process B (causal_writer, a child process)
// changes a dict's schema: adds a leaf, deletes one, renames a sub-dict,
// resizes, locks or unlocks; then bumps a counter. This process (A) polls the counter
// until it shows B's step (B then waits for A's acknowledgement, outside
// tdstored) and at once asks contains(), keys(),
// batch_size() and is_locked(), which its watched copy answers. No answer
// may be older than B's step: zero stale answers are allowed, with B
// through the same daemon, through a second daemon, and while the daemons'
// pub/sub connections are cut again and again.
#include <ATen/ATen.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tdstore/client.h"
#include "tests/e2e/e2e_env.h"
#include "tests/support/child_process.h"
#include "tests/support/daemon_process.h"
#include "tests/support/raw_redis.h"

namespace tdstore::testing {
namespace {

constexpr int kSteps = 1000;

class E2eCausal : public ::testing::Test {
 public:
  // How B signals a step, and A polls for it: the counter "step"
  // (counter_get), or row 0 of the leaf "signal" (an indexed write, read
  // back by an indexed read). Each call's own schema version, which the
  // reply carries, must be at least the step's.
  enum class Signal { kCounter, kRow };

  // A second tdstored on the shared daemon's Redis and namespace.
  static void SetUpTestSuite() {
    other_ = new DaemonProcess();
    ASSERT_TRUE(other_->Start({"--redis", SharedRedis().url(), "--namespace", "e2e"}).ok())
        << other_->LogTail();
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(other_->Stop(), 0) << other_->LogTail();
    delete other_;
    other_ = nullptr;
  }

  // Runs causal_writer through `writer_address` for kSteps steps while this
  // process checks each one through the shared daemon, and returns the
  // stale answers (each described).
  static std::vector<std::string> CheckSteps(const std::string& writer_address,
                                             Signal signal = Signal::kCounter) {
    const std::string name = UniqueDictName();
    Client client(DaemonAddress());
    Dict d = client.create(name, {10});
    d.set({"s0", "v"}, at::zeros({10}));
    if (signal == Signal::kRow) d.set("signal", at::zeros({10}, at::kLong));
    EXPECT_FALSE(d.contains("k1"));  // the copy is watched from here on

    // B waits for our acknowledgement of each step on a fifo, opened here
    // for reading and writing so that neither side's open blocks.
    const std::string fifo = ::testing::TempDir() + "/" + name + ".acks";
    unlink(fifo.c_str());
    EXPECT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    const int acks = open(fifo.c_str(), O_RDWR);
    EXPECT_GE(acks, 0);
    pid_t pid = -1;
    const std::string log = ::testing::TempDir() + "/" + name + ".causal_writer.log";
    EXPECT_TRUE(SpawnChild({TDSTORE_CAUSAL_WRITER_BIN, writer_address, name,
                            std::to_string(kSteps), fifo,
                            signal == Signal::kRow ? "row" : "counter"},
                           log, ChildLog::kTruncate, &pid)
                    .ok());
    std::vector<std::string> stale;
    auto expect = [&](int64_t step, bool ok, const std::string& what) {
      if (!ok) stale.push_back("step " + std::to_string(step) + ": " + what);
    };
    for (int64_t i = 1; i <= kSteps; ++i) {
      // Waits for B's step i; B waits for our "ack" before step i + 1.
      auto step_seen = [&]() -> int64_t {
        if (signal == Signal::kCounter) return d.counter_get("step");
        return d.index(0, {Key("signal")}).at(Key("signal")).item<int64_t>();
      };
      while (step_seen() < i) {
        // Spaces the polls (B shares two cores with us and the daemons);
        // what is tested comes after the poll that sees step i.
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        int status = 0;
        if (TryReapChild(pid, &status)) {
          ADD_FAILURE() << "causal_writer exited " << ExitCodeOf(status) << " before step " << i
                        << " (log: " << log << ")";
          close(acks);
          return stale;
        }
      }
      const std::string k = "k" + std::to_string(i);
      const std::string s = "s" + std::to_string(i);
      const std::string s_before = "s" + std::to_string(i - 1);
      const std::string k_before = "k" + std::to_string(i - 1);
      expect(i, d.contains(k), "contains(" + k + ") is false");
      expect(i, !d.contains(k_before), "contains(" + k_before + ") is true");
      expect(i, d.contains(Key({s, "v"})), "contains(" + s + "/v) is false");
      expect(i, !d.contains(s_before), "contains(" + s_before + ") is true");
      const std::vector<Key> keys = d.keys(/*include_nested=*/true);
      expect(i, std::find(keys.begin(), keys.end(), Key(k)) != keys.end(),
             "keys() lacks " + k);
      expect(i, std::find(keys.begin(), keys.end(), Key(s_before)) == keys.end(),
             "keys() has " + s_before);
      const std::vector<int64_t> batch = d.batch_size();
      expect(i, batch == std::vector<int64_t>{10 + i},
             "batch_size()[0] is " + std::to_string(batch.empty() ? -1 : batch[0]));
      expect(i, d.is_locked() == (i % 2 == 1), "is_locked() is " + std::to_string(!(i % 2)));
      EXPECT_EQ(write(acks, "a", 1), 1);
    }
    close(acks);
    unlink(fifo.c_str());
    // B ends once it has seen our last "ack".
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!TryReapChild(pid, &status) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!TryReapChild(pid, &status)) {
      ADD_FAILURE() << "causal_writer still runs 60 s after the last step (log: " << log << ")";
      KillChild(pid);
      return stale;
    }
    EXPECT_EQ(ExitCodeOf(status), 0) << "log: " << log;
    return stale;
  }

  static DaemonProcess* other_;
};
DaemonProcess* E2eCausal::other_ = nullptr;

std::string Describe(const std::vector<std::string>& stale) {
  std::ostringstream out;
  out << stale.size() << " stale answers in " << kSteps << " steps";
  for (size_t i = 0; i < stale.size() && i < 5; ++i) out << "\n  " << stale[i];
  return out.str();
}

TEST_F(E2eCausal, AnotherProcesssChangeIsSeenOnceSomethingAfterItWasSeen) {
  const std::vector<std::string> stale = CheckSteps(DaemonAddress());
  EXPECT_TRUE(stale.empty()) << Describe(stale);
}

TEST_F(E2eCausal, AChangeThroughAnotherDaemonIsSeenOnceSomethingAfterItWasSeen) {
  const std::vector<std::string> stale = CheckSteps(other_->address());
  EXPECT_TRUE(stale.empty()) << Describe(stale);
}

// The same with the step seen in a row an indexed write wrote: the indexed
// read's reply carries the schema version read behind its data (on
// standalone Redis, on the data's own pipeline), never an older one.
TEST_F(E2eCausal, AChangeIsSeenOnceARowWrittenAfterItWasRead) {
  const std::vector<std::string> stale = CheckSteps(DaemonAddress(), Signal::kRow);
  EXPECT_TRUE(stale.empty()) << Describe(stale);
}

TEST_F(E2eCausal, AChangeThroughAnotherDaemonIsSeenOnceARowWrittenAfterItWasRead) {
  const std::vector<std::string> stale = CheckSteps(other_->address(), Signal::kRow);
  EXPECT_TRUE(stale.empty()) << Describe(stale);
}

// Watches end when their daemon loses its subscription, and start again a
// second later: answers in between come from tdstored, and none is stale.
// Runs the steps through the other daemon while the daemons' pub/sub
// connections are cut again and again: the watched copies lag, and the
// version each reply carries is all that tells A its copy is behind.
std::vector<std::string> CheckStepsWhileCut(E2eCausal::Signal signal,
                                            const std::string& writer_address) {
  std::atomic<bool> done{false};
  std::thread cutter([&] {
    while (!done.load()) {
      // Every node of a cluster: a daemon's subscription may sit on any.
      for (int port : SharedRedisPorts()) {
        raw_redis::Command(port, {}, {"CLIENT", "KILL", "TYPE", "pubsub"});
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const std::vector<std::string> stale = E2eCausal::CheckSteps(writer_address, signal);
  done.store(true);
  cutter.join();
  return stale;
}

TEST_F(E2eCausal, NothingIsStaleWhileThePubSubConnectionsAreCut) {
  const std::vector<std::string> stale = CheckStepsWhileCut(Signal::kCounter, other_->address());
  EXPECT_TRUE(stale.empty()) << Describe(stale);
}

TEST_F(E2eCausal, NothingIsStaleWhileThePubSubConnectionsAreCutSeenInARow) {
  const std::vector<std::string> stale = CheckStepsWhileCut(Signal::kRow, other_->address());
  EXPECT_TRUE(stale.empty()) << Describe(stale);
}

// Inside one process: two clients (two TensorDictStore objects, say) on
// one dict. Once one has locked it, the other's is_locked() says so at
// once, and its keys() show what the first added.
TEST_F(E2eCausal, TwoClientsOfOneProcessSeeEachOthersChangesAtOnce) {
  const std::string name = UniqueDictName();
  Client first(DaemonAddress());
  Client second(DaemonAddress());
  Dict a = first.create(name, {4});
  Dict b = second.open(name);
  EXPECT_FALSE(b.is_locked());  // watched from here on
  int stale = 0;
  for (int i = 0; i < 300; ++i) {
    a.lock();
    stale += b.is_locked() ? 0 : 1;
    a.unlock();
    stale += b.is_locked() ? 1 : 0;
    const std::string k = "k" + std::to_string(i);
    a.set(k, at::zeros({4}));
    stale += b.contains(k) ? 0 : 1;
  }
  EXPECT_EQ(stale, 0) << "of 900 answers";
}

}  // namespace
}  // namespace tdstore::testing
