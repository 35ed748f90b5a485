// TestRedis: see test_redis.h.
#include "tests/support/test_redis.h"

#include <stdlib.h>

#include <utility>

namespace tdstore::testing {
namespace {

int64_t InfoNumber(const std::string& info, const std::string& name) {
  const std::string needle = "\n" + name + ":";
  const size_t pos = info.find(needle);
  return pos == std::string::npos ? 0 : atoll(info.c_str() + pos + needle.size());
}

// Bytes sent to clients (as RedisClusterProcess::TotalNetOutputBytes).
int64_t NetOutputBytes(const std::vector<std::string>& info_reply) {
  if (info_reply.size() != 1) return 0;
  return InfoNumber(info_reply[0], "total_net_output_bytes") -
         InfoNumber(info_reply[0], "total_net_repl_output_bytes");
}

class StandaloneTestRedis : public TestRedis {
 public:
  explicit StandaloneTestRedis(const TestRedisOptions& options)
      : server_([&options] {
          RedisServerOptions o;
          o.password = options.password;
          o.acl_user = options.acl_user;
          o.acl_password = options.acl_password;
          return o;
        }()) {}

  absl::Status Start() override { return server_.Start(); }
  void Stop() override { server_.Stop(); }
  std::string url() const override { return server_.url(); }
  std::string backend() const override { return "standalone"; }
  int node_count() const override { return 1; }
  std::vector<std::string> Command(const std::vector<std::string>& argv) const override {
    return server_.Command(argv);
  }
  std::vector<std::string> Keys(const std::string& pattern) const override {
    return server_.Keys(pattern);
  }
  int64_t TotalNetOutputBytes() const override {
    return NetOutputBytes(server_.Command({"INFO", "stats"}));
  }
  RedisServerProcess* standalone() override { return &server_; }

 private:
  RedisServerProcess server_;
};

class ClusterTestRedis : public TestRedis {
 public:
  explicit ClusterTestRedis(const TestRedisOptions& options)
      : cluster_([&options] {
          RedisClusterOptions o;
          o.password = options.password;
          o.acl_user = options.acl_user;
          o.acl_password = options.acl_password;
          return o;
        }()) {}

  absl::Status Start() override { return cluster_.Start(); }
  void Stop() override { cluster_.Stop(); }
  std::string url() const override { return cluster_.url(); }
  std::string backend() const override { return "cluster"; }
  int node_count() const override { return cluster_.node_count(); }
  std::vector<std::string> Command(const std::vector<std::string>& argv) const override {
    return cluster_.Command(argv);
  }
  std::vector<std::string> Keys(const std::string& pattern) const override {
    return cluster_.Keys(pattern);
  }
  int64_t TotalNetOutputBytes() const override { return cluster_.TotalNetOutputBytes(); }
  RedisClusterProcess* cluster() override { return &cluster_; }

 private:
  RedisClusterProcess cluster_;
};

// An unknown TDSTORE_TEST_BACKEND: fails loudly at Start().
class UnknownTestRedis : public TestRedis {
 public:
  explicit UnknownTestRedis(std::string name) : name_(std::move(name)) {}
  absl::Status Start() override {
    return absl::InvalidArgumentError("unknown TDSTORE_TEST_BACKEND \"" + name_ +
                                      "\" (want standalone or cluster)");
  }
  void Stop() override {}
  std::string url() const override { return ""; }
  std::string backend() const override { return name_; }
  int node_count() const override { return 0; }
  std::vector<std::string> Command(const std::vector<std::string>&) const override {
    return {"(error) unknown back end " + name_};
  }
  std::vector<std::string> Keys(const std::string&) const override { return {}; }
  int64_t TotalNetOutputBytes() const override { return 0; }

 private:
  std::string name_;
};

}  // namespace

std::string TestBackendName() {
  const char* env = getenv("TDSTORE_TEST_BACKEND");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string("standalone");
}

std::unique_ptr<TestRedis> MakeTestRedis(TestRedisOptions options) {
  return MakeTestRedis(TestBackendName(), std::move(options));
}

std::unique_ptr<TestRedis> MakeTestRedis(const std::string& backend, TestRedisOptions options) {
  if (backend == "standalone") return std::make_unique<StandaloneTestRedis>(options);
  if (backend == "cluster") return std::make_unique<ClusterTestRedis>(options);
  return std::make_unique<UnknownTestRedis>(backend);
}

int64_t CommandCalls(const TestRedis& redis, const std::string& command) {
  const std::string tag = "cmdstat_" + command + ":calls=";
  for (const std::string& text : redis.Command({"INFO", "commandstats"})) {
    const size_t at = text.find(tag);
    if (at != std::string::npos) return std::stoll(text.substr(at + tag.size()));
  }
  return 0;
}

}  // namespace tdstore::testing
