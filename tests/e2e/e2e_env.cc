#include "tests/e2e/e2e_env.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

namespace tdstore::testing {
namespace {

class SharedDaemon : public ::testing::Environment {
 public:
  void SetUp() override {
    // Standalone or cluster, from TDSTORE_TEST_BACKEND: ctest runs the whole
    // e2e suite against both.
    redis_ = MakeTestRedis();
    absl::Status redis_started = redis_->Start();
    ASSERT_TRUE(redis_started.ok()) << redis_started;
    // A namespace quota far above what the tests store, so that a request
    // for tens of GiB (the soak's oversized ones) is refused.
    absl::Status started = daemon_.Start({"--redis", redis_->url(), "--namespace", "e2e",
                                          "--unix-socket", daemon_.dir() + "/td.sock",
                                          "--namespace-quota-bytes", "8589934592"});
    ASSERT_TRUE(started.ok()) << started;
    ASSERT_EQ(daemon_.addresses().size(), 2u) << "expected a TCP and a unix address";
  }

  void TearDown() override {
    // SIGTERM must be a clean shutdown after everything the tests did.
    EXPECT_EQ(daemon_.Stop(), 0) << daemon_.LogTail();
    redis_->Stop();
  }

  DaemonProcess& daemon() { return daemon_; }
  TestRedis& redis() { return *redis_; }

 private:
  std::unique_ptr<TestRedis> redis_;
  DaemonProcess daemon_;
};

// Registered before main() runs (gtest_main); gtest owns and deletes it.
SharedDaemon* const shared = static_cast<SharedDaemon*>(
    ::testing::AddGlobalTestEnvironment(new SharedDaemon));

}  // namespace

const std::string& DaemonAddress() { return shared->daemon().address(); }
const std::string& DaemonUnixAddress() { return shared->daemon().addresses().at(1); }
TestRedis& SharedRedis() { return shared->redis(); }

std::map<std::string, std::string> NamespaceSnapshot(const std::string& ns) {
  std::map<std::string, std::string> out;
  for (const std::string& key : SharedRedis().Keys(ns + ":*")) {
    out[key] = SharedRedis().Command({"DUMP", key}).at(0);
  }
  return out;
}

std::string UniqueDictName() {
  static std::atomic<int> counter{0};
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(test->test_suite_name()) + "." + test->name() + "." +
         std::to_string(counter++);
}

}  // namespace tdstore::testing
