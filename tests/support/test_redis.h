// Test harness: "a Redis" for tests that do not care which back end it is.
//
//   std::unique_ptr<TestRedis> redis = MakeTestRedis();
//   ASSERT_TRUE(redis->Start().ok()) << ...;
//   daemon.Start({"--redis", redis->url()});  // redis:// or redis-cluster://
//   EXPECT_EQ(redis->Keys("ns:*"), ...);
//
// MakeTestRedis() reads TDSTORE_TEST_BACKEND: "standalone" (default, also
// when unset or empty) starts one RedisServerProcess, "cluster" a
// RedisClusterProcess of 3 masters + 3 replicas. ctest registers the suites
// once per back end (tdstore_discover_tests_per_backend in
// tests/support/CMakeLists.txt).
//
// Not thread-safe except that Command/Keys/TotalNetOutputBytes may be called
// from several threads at once.
#ifndef TDSTORE_TESTS_SUPPORT_TEST_REDIS_H_
#define TDSTORE_TESTS_SUPPORT_TEST_REDIS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_server.h"

namespace tdstore::testing {

struct TestRedisOptions {
  // Same meaning as in RedisServerOptions / RedisClusterOptions (every node).
  std::string password;
  std::string acl_user;
  std::string acl_password;
};

class TestRedis {
 public:
  virtual ~TestRedis() = default;

  // Starts the server or cluster; ports are kept across Stop()/Start() and
  // the data is not (no persistence on either back end).
  virtual absl::Status Start() = 0;
  // Stops everything. Idempotent; the destructor calls it too.
  virtual void Stop() = 0;
  // For `tdstored --redis`: "redis://..." or "redis-cluster://...".
  virtual std::string url() const = 0;
  // "standalone" or "cluster".
  virtual std::string backend() const = 0;
  // Number of redis-server processes (1 for standalone).
  virtual int node_count() const = 0;

  // A command on the data set, reply flattened to strings ("(error) ...",
  // "(nil)", integers in decimal). On a cluster, keyed commands go to their
  // slot's master and FLUSHALL/SCRIPT/FUNCTION/DBSIZE/KEYS to all masters
  // (see RedisClusterProcess::Command).
  virtual std::vector<std::string> Command(const std::vector<std::string>& argv) const = 0;
  // Every key matching a glob, sorted (over all masters on a cluster).
  virtual std::vector<std::string> Keys(const std::string& pattern = "*") const = 0;
  // Bytes Redis sent to clients, replication excluded: INFO stats
  // total_net_output_bytes - total_net_repl_output_bytes (summed over the
  // masters of a cluster).
  virtual int64_t TotalNetOutputBytes() const = 0;

  // The underlying harness, for back-end-specific fault tests; null for the
  // other back end.
  virtual RedisServerProcess* standalone() { return nullptr; }
  virtual RedisClusterProcess* cluster() { return nullptr; }
};

// How many times Redis ran `command` so far (INFO commandstats; on a
// cluster, of the node that answers INFO), 0 if never.
int64_t CommandCalls(const TestRedis& redis, const std::string& command);

// The value of TDSTORE_TEST_BACKEND, "standalone" when unset or empty.
std::string TestBackendName();

// A not yet started TestRedis of the back end TDSTORE_TEST_BACKEND names. An
// unknown name gives a TestRedis whose Start() fails with InvalidArgument.
std::unique_ptr<TestRedis> MakeTestRedis(TestRedisOptions options = {});
// The same for an explicit back end name.
std::unique_ptr<TestRedis> MakeTestRedis(const std::string& backend, TestRedisOptions options);

}  // namespace tdstore::testing

#endif  // TDSTORE_TESTS_SUPPORT_TEST_REDIS_H_
