// tdstored's observability, end to end: a real daemon serving Prometheus
// /metrics (--metrics-listen) and logging at debug level. Each test starts
// its own daemon, scrapes /metrics with a plain HTTP/1.0 GET, makes calls
// with the client library and checks that
//   - the counters moved by exactly what those calls did (calls per method
//     and code, latency histogram counts), bytes by at least the tensor
//     bytes, Redis commands grew, a NOSCRIPT reload and sweeper passes are
//     counted;
//   - the log has one debug line per call and no secret: neither the Redis
//     password nor a bearer token (good or bad);
//   - Redis going away shows in the Redis metrics;
//   - a metrics port that cannot be bound stops start-up with a clear error.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tdstore/client.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/expect_error.h"
#include "tests/e2e/metrics_scrape.h"
#include "tests/support/daemon_process.h"
#include "tests/support/redis_server.h"
#include "tests/support/test_redis.h"

namespace tdstore::testing {
namespace {

constexpr char kService[] = "tdstore.v1.TdStore/";
// Secrets the daemon sees and must never write anywhere.
constexpr char kRedisPassword[] = "redis-pw-b7c41f09";
constexpr char kToken[] = "token-5e1d9a7c3b2f4e60";
constexpr char kWrongToken[] = "wrong-token-0a9b8c7d6e5f";


std::map<std::string, std::string> Call(const std::string& method, const std::string& code) {
  return {{"method", kService + method}, {"code", code}};
}
std::map<std::string, std::string> Method(const std::string& method) {
  return {{"method", kService + method}};
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> LinesWith(const std::string& text, const std::string& part) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (Contains(line, part)) lines.push_back(line);
  }
  return lines;
}

// Polls `done` every 50 ms for up to `seconds`.
bool WaitFor(const std::function<bool()>& done, int seconds = 10) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

TEST(E2eMetrics, CountersMoveByWhatTheCallsDid) {
  // Our own Redis (the test's back end) with a password, and tokens: two
  // secrets for the log check below.
  std::unique_ptr<TestRedis> redis = MakeTestRedis(TestRedisOptions{kRedisPassword, "", ""});
  absl::Status redis_started = redis->Start();
  ASSERT_TRUE(redis_started.ok()) << redis_started;
  ASSERT_TRUE(Contains(redis->url(), kRedisPassword));

  DaemonProcess daemon;
  const std::string tokens_file = daemon.dir() + "/tokens";
  std::ofstream(tokens_file) << kToken << " rw *\n";
  absl::Status started = daemon.Start({"--redis", redis->url(), "--namespace", "metrics",
                                       "--metrics-listen", "127.0.0.1:0", "--log-level", "debug",
                                       "--tokens-file", tokens_file, "--sweep-interval-ms", "200"});
  ASSERT_TRUE(started.ok()) << started;
  ASSERT_FALSE(daemon.metrics_url().empty()) << "no metrics line in the ready file";
  EXPECT_EQ(daemon.addresses().size(), 1u) << "the metrics line is not a gRPC address";

  const Scrape before(daemon.metrics_url());
  EXPECT_EQ(before.Value("tdstore_build_info", {{"version", "0.1.0"}}), 1) << before.text();
  // Start-up loaded every script on every master.
  EXPECT_GT(before.Sum("tdstore_redis_script_loads_total"), 0) << before.text();

  // Redis forgets our scripts: the next script call must reload one.
  redis->Command({"SCRIPT", "FLUSH"});

  constexpr int64_t kRows = 256, kCols = 64;  // 64 KiB of float32
  const int64_t tensor_bytes = kRows * kCols * 4;
  {
    ClientOptions options;
    options.token = kToken;
    // No schema watch: a create starts one, and its stream would end (and
    // be counted) only some time after the client closes. No shared
    // memory: a loopback client asks GetServerInfo whether it may lend.
    options.watch_schemas = false;
    options.shared_memory_bytes = 0;
    Client client(daemon.address(), options);
    Dict td = client.create("d", {kRows});
    td.set("x", at::rand({kRows, kCols}));
    at::Tensor back = td.get("x");
    EXPECT_EQ(back.numel(), kRows * kCols);
    // A call by EVALSHA (counter.lua) after the flush. The write above may
    // have sent its scripts whole (EVAL: a small write at once on a
    // standalone Redis), which reloads nothing.
    EXPECT_EQ(td.counter_add("n", 1), 1);
    try {
      client.open("missing");
      ADD_FAILURE() << "opened a dict that does not exist";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), StatusCode::kNotFound) << e.what();
    }

    ClientOptions wrong;
    wrong.token = kWrongToken;
    wrong.retry_for = std::chrono::milliseconds(0);
    Client intruder(daemon.address(), wrong);
    try {
      intruder.list();
      ADD_FAILURE() << "a wrong token was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), StatusCode::kUnauthenticated) << e.what();
    }
  }

  const Scrape after(daemon.metrics_url());
  auto delta = [&](const std::string& name, const std::map<std::string, std::string>& labels) {
    return after.Value(name, labels) - before.Value(name, labels);
  };
  // One call each, with the code it ended with.
  EXPECT_EQ(delta("tdstore_rpc_calls_total", Call("CreateDict", "OK")), 1) << after.text();
  EXPECT_EQ(delta("tdstore_rpc_calls_total", Call("WriteLeaves", "OK")), 1) << after.text();
  EXPECT_EQ(delta("tdstore_rpc_calls_total", Call("ReadLeaves", "OK")), 1) << after.text();
  EXPECT_EQ(delta("tdstore_rpc_calls_total", Call("DescribeDict", "NOT_FOUND")), 1);
  EXPECT_EQ(delta("tdstore_rpc_calls_total", Call("ListDicts", "UNAUTHENTICATED")), 1);
  EXPECT_EQ(delta("tdstore_rpc_calls_total", Call("Counter", "OK")), 1) << after.text();
  const double calls = after.Sum("tdstore_rpc_calls_total") - before.Sum("tdstore_rpc_calls_total");
  EXPECT_EQ(calls, 6) << after.text();

  // The latency histogram saw each call once.
  for (const char* method : {"CreateDict", "WriteLeaves", "ReadLeaves", "ListDicts"}) {
    EXPECT_EQ(delta("tdstore_rpc_latency_seconds_count", Method(method)), 1) << method;
    EXPECT_GT(delta("tdstore_rpc_latency_seconds_sum", Method(method)), 0) << method;
    EXPECT_EQ(after.Raw("tdstore_rpc_latency_seconds_bucket{method=\"" + std::string(kService) +
                        method + "\",le=\"+Inf\"}"),
              after.Value("tdstore_rpc_latency_seconds_count", Method(method)))
        << method;
  }

  // Bytes: the tensor went in with WriteLeaves and out with ReadLeaves,
  // plus a little framing (headers, paths) - not a whole second copy.
  const double written = delta("tdstore_rpc_bytes_received_total", Method("WriteLeaves"));
  const double read = delta("tdstore_rpc_bytes_sent_total", Method("ReadLeaves"));
  EXPECT_GE(written, tensor_bytes);
  EXPECT_LT(written, tensor_bytes + 4096);
  EXPECT_GE(read, tensor_bytes);
  EXPECT_LT(read, tensor_bytes + 4096);
  EXPECT_GT(delta("tdstore_rpc_bytes_received_total", Method("CreateDict")), 0);
  EXPECT_GT(delta("tdstore_rpc_bytes_sent_total", Method("CreateDict")), 0);

  // Redis: commands went out (schema reads, scripts, data windows), nothing
  // broke, every node is up, the flushed script was loaded again.
  EXPECT_GE(after.Sum("tdstore_redis_commands_total") - before.Sum("tdstore_redis_commands_total"),
            5)
      << after.text();
  EXPECT_EQ(after.Sum("tdstore_redis_errors_total"), 0) << after.text();
  EXPECT_GT(after.Sum("tdstore_redis_connections"), 0) << after.text();
  for (double up : after.All("tdstore_redis_up")) EXPECT_EQ(up, 1) << after.text();
  EXPECT_GT(after.Sum("tdstore_redis_script_loads_total"),
            before.Sum("tdstore_redis_script_loads_total"))
      << "no script reload after SCRIPT FLUSH\n"
      << after.text();

  // The sweeper runs every 200 ms.
  EXPECT_TRUE(WaitFor([&] {
    return Scrape(daemon.metrics_url()).Value("tdstore_sweeps_total", {{"result", "ok"}}) >= 1;
  })) << Scrape(daemon.metrics_url()).text();

  // No secret in the metrics either.
  EXPECT_FALSE(Contains(after.text(), kRedisPassword));
  EXPECT_FALSE(Contains(after.text(), kToken));

  EXPECT_EQ(daemon.Stop(), 0) << daemon.LogTail();
  const std::string log = ReadFile(daemon.dir() + "/tdstored.log");
  // One debug line per call, saying what happened.
  const std::vector<std::string> call_lines = LinesWith(log, " DEBUG call tdstore.v1.TdStore/");
  EXPECT_EQ(call_lines.size(), 6u) << log;
  const std::vector<std::string> not_found =
      LinesWith(log, "DEBUG call " + std::string(kService) + "DescribeDict");
  ASSERT_EQ(not_found.size(), 1u) << log;
  EXPECT_TRUE(Contains(not_found[0], " code=NOT_FOUND ")) << not_found[0];
  EXPECT_TRUE(Contains(not_found[0], " peer=")) << not_found[0];
  EXPECT_TRUE(Contains(not_found[0], " ms=")) << not_found[0];
  EXPECT_TRUE(Contains(not_found[0], "missing")) << not_found[0];  // the status message
  const std::vector<std::string> write =
      LinesWith(log, "DEBUG call " + std::string(kService) + "WriteLeaves");
  ASSERT_EQ(write.size(), 1u) << log;
  EXPECT_TRUE(Contains(write[0], " bytes_in=" + std::to_string(static_cast<int64_t>(written))))
      << write[0];
  // Never a secret.
  EXPECT_FALSE(Contains(log, kRedisPassword)) << log;
  EXPECT_FALSE(Contains(log, kToken)) << log;
  EXPECT_FALSE(Contains(log, kWrongToken)) << log;
  EXPECT_FALSE(Contains(log, "Bearer")) << log;
}

// A strided read's covering range is a Redis reply string of 2 MiB or more:
// once the read is done, the pool keeps its mapping, and the gauge read at
// scrape time shows it (server/redis/reply_objects.h).
TEST(E2eMetrics, TheReplyPoolsKeptBytesShowAfterAStridedRead) {
  DaemonProcess daemon;
  ASSERT_TRUE(daemon
                  .Start({"--redis", SharedRedis().url(), "--namespace", "metpool",
                          "--metrics-listen", "127.0.0.1:0"})
                  .ok());
  const Scrape before(daemon.metrics_url());
  ASSERT_TRUE(Contains(before.text(), "\ntdstore_redis_reply_pool_kept_bytes ")) << before.text();
  EXPECT_EQ(before.Value("tdstore_redis_reply_pool_kept_bytes"), 0) << before.text();

  Client client(daemon.address());
  constexpr int64_t kRows = 4096, kCols = 256;  // 4 MiB of float32 in one block
  Dict td = client.create(UniqueDictName(), {kRows}, CreateOptions{kRows, 0});
  const at::Tensor x = at::rand({kRows, kCols});
  td.set("x", x);
  // Every other row: one covering range of the whole leaf, cut here.
  const LocalDict half = td.index(Slice(std::nullopt, std::nullopt, 2));
  EXPECT_TRUE(at::equal(half.at("x"), x.index({at::indexing::Slice(at::indexing::None,
                                                                   at::indexing::None, 2)})));

  const double kept = Scrape(daemon.metrics_url()).Value("tdstore_redis_reply_pool_kept_bytes");
  EXPECT_GE(kept, static_cast<double>(kRows * kCols * 4));
  EXPECT_LE(kept, 32.0 * (1 << 20));
}

TEST(E2eMetrics, RedisGoingAwayShowsInTheRedisMetrics) {
  RedisServerProcess redis;
  ASSERT_TRUE(redis.Start().ok());
  DaemonProcess daemon;
  // Default log level (info): metrics, but no per-call lines.
  absl::Status started = daemon.Start(
      {"--redis", redis.url(), "--namespace", "metricsdown", "--metrics-listen", "127.0.0.1:0"});
  ASSERT_TRUE(started.ok()) << started;
  const std::string node = "127.0.0.1:" + std::to_string(redis.port());
  {
    ClientOptions options;
    options.retry_for = std::chrono::milliseconds(0);  // one call, one count
    Client client(daemon.address(), options);
    // The connection first, with retries (a loaded CI machine once let the
    // HTTP/2 handshake time out): ServerInfo is not among the counts below.
    for (int attempt = 0;; ++attempt) {
      try {
        client.server_info();
        break;
      } catch (const Error& e) {
        ASSERT_LT(attempt, 20) << e.what();
      }
    }
    client.list();
    const Scrape up(daemon.metrics_url());
    EXPECT_EQ(up.Value("tdstore_redis_up", {{"node", node}}), 1) << up.text();
    EXPECT_GE(up.Value("tdstore_redis_connections", {{"node", node}}), 1) << up.text();
    EXPECT_EQ(up.Value("tdstore_rpc_calls_total", Call("ListDicts", "OK")), 1) << up.text();

    redis.Stop();
    try {
      client.list();
      ADD_FAILURE() << "listed dicts without Redis";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), StatusCode::kUnavailable) << e.what();
    }
    const Scrape down(daemon.metrics_url());
    EXPECT_EQ(down.Value("tdstore_rpc_calls_total", Call("ListDicts", "UNAVAILABLE")), 1)
        << down.text();
    EXPECT_EQ(down.Value("tdstore_redis_up", {{"node", node}}), 0) << down.text();
    EXPECT_GE(down.Value("tdstore_redis_connects_total", {{"node", node}, {"result", "error"}}) +
                  down.Value("tdstore_redis_errors_total", {{"node", node}}),
              1)
        << down.text();
    // Every connection to the dead server is closed once noticed (the
    // health monitor's probes notice it too).
    EXPECT_TRUE(WaitFor([&] {
      return Scrape(daemon.metrics_url()).Value("tdstore_redis_connections", {{"node", node}}) == 0;
    })) << Scrape(daemon.metrics_url()).text();
  }
  EXPECT_EQ(daemon.Stop(), 0) << daemon.LogTail();
  const std::string log = ReadFile(daemon.dir() + "/tdstored.log");
  EXPECT_TRUE(LinesWith(log, " DEBUG ").empty()) << log;
  EXPECT_FALSE(LinesWith(log, " INFO metrics on http://127.0.0.1:").empty()) << log;
}

TEST(E2eMetrics, UnusableMetricsAddressStopsStartUp) {
  // A port someone else listens on.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string taken = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  DaemonProcess daemon;
  absl::Status started = daemon.Start({"--metrics-listen", taken}, std::chrono::seconds(10));
  close(fd);
  ASSERT_FALSE(started.ok()) << "tdstored started with its metrics port taken";
  EXPECT_TRUE(Contains(std::string(started.message()), "exited with status 1")) << started;
  EXPECT_TRUE(Contains(std::string(started.message()),
                       "--metrics-listen: cannot serve /metrics on " + taken))
      << started;

  DaemonProcess malformed;
  started = malformed.Start({"--metrics-listen", "no-port-here"}, std::chrono::seconds(10));
  ASSERT_FALSE(started.ok());
  EXPECT_TRUE(Contains(std::string(started.message()), "exited with status 2")) << started;
  EXPECT_TRUE(Contains(std::string(started.message()), "--metrics-listen")) << started;
}

}  // namespace
}  // namespace tdstore::testing
