#include "tests/e2e/e2e_env.h"

#include <algorithm>
#include <utility>

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "tests/support/redis_cluster.h"
#include "tests/support/redis_server.h"

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
    // for tens of GiB (the soak's oversized ones) is refused. Shared memory
    // for the unix socket's clients only: the tests' TCP clients move
    // their bytes over the socket, as a client on another machine does
    // (loopback clients that lend: shared_memory_test.cc).
    absl::Status started = daemon_.Start({"--redis", redis_->url(), "--namespace", "e2e",
                                          "--unix-socket", daemon_.dir() + "/td.sock",
                                          "--shm-clients", "unix",
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

std::vector<int> SharedRedisPorts() {
  TestRedis& redis = SharedRedis();
  if (redis.standalone() != nullptr) return {redis.standalone()->port()};
  std::vector<int> ports;
  for (int i = 0; i < redis.cluster()->node_count(); ++i) ports.push_back(redis.cluster()->port(i));
  return ports;
}

namespace {

// A key's value as content, not as Redis encodes it: a hash's fields
// sorted, a set's members sorted. Why not DUMP: a hash with a field past
// hash-max-listpack-value (64 bytes; a long dict name in the catalog) is
// a hash table, whose DUMP order moves with Redis' incremental rehashing,
// which any command on it may advance: equal content, unequal bytes.
std::string ContentOf(const std::string& key) {
  const TestRedis& redis = SharedRedis();
  const std::string type = redis.Command({"TYPE", key}).at(0);
  std::vector<std::string> parts;
  if (type == "string") {
    parts = redis.Command({"GET", key});
  } else if (type == "hash") {
    const std::vector<std::string> flat = redis.Command({"HGETALL", key});
    std::vector<std::pair<std::string, std::string>> fields;
    for (size_t i = 0; i + 1 < flat.size(); i += 2) fields.emplace_back(flat[i], flat[i + 1]);
    std::sort(fields.begin(), fields.end());
    for (const auto& [field, value] : fields) {
      parts.push_back(field);
      parts.push_back(value);
    }
  } else if (type == "set") {
    parts = redis.Command({"SMEMBERS", key});
    std::sort(parts.begin(), parts.end());
  } else if (type == "zset") {
    parts = redis.Command({"ZRANGE", key, "0", "-1", "WITHSCORES"});
  } else if (type == "list") {
    parts = redis.Command({"LRANGE", key, "0", "-1"});
  } else {
    parts = redis.Command({"DUMP", key});
  }
  std::string out = type;
  for (const std::string& part : parts) {
    out += "\n" + std::to_string(part.size()) + ":" + part;
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> NamespaceSnapshot(const std::string& ns) {
  std::map<std::string, std::string> out;
  for (const std::string& key : SharedRedis().Keys(ns + ":*")) out[key] = ContentOf(key);
  return out;
}

std::string UniqueDictName() {
  static std::atomic<int> counter{0};
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(test->test_suite_name()) + "." + test->name() + "." +
         std::to_string(counter++);
}

}  // namespace tdstore::testing
