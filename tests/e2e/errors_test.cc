// Errors a person can act on, through the whole stack: status codes and
// messages from a real tdstored, and what happens when the daemon or its
// Redis is down.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "tdstore/client.h"
#include "tests/e2e/expect_error.h"
#include "tests/support/daemon_process.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/tensor_testing.h"

namespace tdstore::testing {
namespace {


TEST(E2eErrors, UnknownDictOrLeafIsNotFound) {
  Client client(DaemonAddress());
  Error e = ErrorOf([&] { client.open("no-such-dict"); });
  EXPECT_EQ(e.code(), StatusCode::kNotFound) << e.what();
  EXPECT_TRUE(Contains(e.message(), "no-such-dict")) << e.what();
  EXPECT_EQ(std::string(e.what()), "NOT_FOUND: " + e.message());

  EXPECT_EQ(ErrorOf([&] { client.drop("no-such-dict"); }).code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrorOf([&] { client.rename("no-such-dict", "x"); }).code(), StatusCode::kNotFound);

  Dict td = client.create(UniqueDictName(), {2});
  td.set("a", at::zeros({2}));
  e = ErrorOf([&] { td.get("missing"); });
  EXPECT_EQ(e.code(), StatusCode::kNotFound) << e.what();
  EXPECT_TRUE(Contains(e.message(), "missing")) << e.what();
  EXPECT_EQ(ErrorOf([&] { td.get_many({Key("a"), Key("missing")}); }).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(ErrorOf([&] { td.get({"a", "below"}); }).code(), StatusCode::kNotFound);

  // A Dict whose dict was dropped under it.
  client.drop(td.name());
  EXPECT_EQ(ErrorOf([&] { td.set("a", at::zeros({2})); }).code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrorOf([&] { td.get("a"); }).code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrorOf([&] { td.describe(); }).code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrorOf([&] { td.keys(); }).code(), StatusCode::kNotFound);
}

TEST(E2eErrors, LeadingDimsMustEqualTheBatchShape) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {4, 2});
  Error e = ErrorOf([&] { td.set("x", at::zeros({4, 3})); });
  EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << e.what();
  EXPECT_TRUE(Contains(e.message(), "[4, 2]")) << e.what();
  EXPECT_TRUE(Contains(e.message(), "[4, 3]")) << e.what();
  EXPECT_EQ(ErrorOf([&] { td.set("scalar", at::scalar_tensor(1.0)); }).code(),
            StatusCode::kInvalidArgument);

  // A rejected update writes nothing, not even its good leaves.
  e = ErrorOf([&] {
    td.update({{Key("good"), at::zeros({4, 2, 5})}, {Key("bad"), at::zeros({5, 2})}});
  });
  EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << e.what();
  EXPECT_FALSE(td.contains("good"));
  EXPECT_TRUE(td.keys(true, false).empty());
}

TEST(E2eErrors, BadNamesAndPathsAreInvalidArgument) {
  Client client(DaemonAddress());
  for (const std::string& name :
       {std::string(""), std::string("has space"), std::string("a|b"), std::string("/lead"),
        std::string(200, 'n'), std::string("nul\0x", 5)}) {
    Error e = ErrorOf([&] { client.create(name, {1}); });
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << "name '" << name << "': " << e.what();
  }
  Dict td = client.create(UniqueDictName(), {1});
  for (const Key& path : {Key(""), Key(std::vector<std::string>{}), Key({"a", ""}),
                          Key(std::string(300, 'c')), Key(std::string("nul\0x", 5))}) {
    Error e = ErrorOf([&] { td.set(path, at::zeros({1})); });
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << "path '" << path.str() << "': "
                                                      << e.what();
  }
  EXPECT_TRUE(td.keys(true, false).empty());
}

TEST(E2eErrors, UnsupportedTensorsAreRejectedBeforeSending) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {2});
  Error e = ErrorOf(
      [&] { td.set("q", at::quantize_per_tensor(at::zeros({2}), 0.1, 0, at::kQInt8)); });
  EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << e.what();
  EXPECT_TRUE(Contains(e.message(), "'q'")) << e.what();
  EXPECT_EQ(ErrorOf([&] { td.set("u", at::Tensor()); }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf([&] { td.set("s", at::eye(2).to_sparse()); }).code(),
            StatusCode::kInvalidArgument);
}

TEST(E2eErrors, ClientOptionsAndAddressesAreChecked) {
  ClientOptions too_big;
  too_big.chunk_bytes = (1 << 20) + 1;
  EXPECT_EQ(ErrorOf([&] { Client c(DaemonAddress(), too_big); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf([&] { Client c("no-port-here"); }).code(), StatusCode::kInvalidArgument);
}

TEST(E2eErrors, NoDaemonIsUnavailable) {
  ClientOptions no_retries;
  no_retries.retry_for = std::chrono::milliseconds(0);
  Client client("127.0.0.1:" + std::to_string(PickFreePort()), no_retries);
  Error e = ErrorOf([&] { client.list(); });
  EXPECT_EQ(e.code(), StatusCode::kUnavailable) << e.what();
  EXPECT_TRUE(Contains(e.message(), client.address())) << e.what();
}

// A daemon whose Redis goes away answers UNAVAILABLE (retryable), quickly,
// and serves again once Redis is back. (Clients live in an inner scope so
// they are gone before the daemon stops.)
TEST(E2eErrors, RedisDownIsUnavailable) {
  RedisServerProcess redis;
  ASSERT_TRUE(redis.Start().ok());
  DaemonProcess daemon;
  absl::Status started = daemon.Start({"--redis", redis.url(), "--namespace", "down"});
  ASSERT_TRUE(started.ok()) << started;
  {
    ClientOptions options;
    options.timeout = std::chrono::seconds(30);  // so DEADLINE_EXCEEDED would stand out
    options.retry_for = std::chrono::milliseconds(0);  // see each failure (faults_test retries)
    Client client(daemon.address(), options);
    Dict td = client.create("d", {2});
    td.set("x", at::ones({2}));

    redis.Stop();
    for (const auto& call : std::vector<std::function<void()>>{
             [&] { client.list(); }, [&] { client.open("d"); }, [&] { td.get("x"); },
             [&] { td.set("y", at::ones({2})); }, [&] { client.create("e", {1}); }}) {
      Error e = ErrorOf(call);
      EXPECT_EQ(e.code(), StatusCode::kUnavailable) << e.what() << daemon.LogTail();
    }

    // Back (empty: the test Redis keeps nothing on disk).
    ASSERT_TRUE(redis.Start().ok());
    bool served = false;
    for (int attempt = 0; attempt < 100 && !served; ++attempt) {
      try {
        client.list();
        served = true;
      } catch (const Error&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    EXPECT_TRUE(served) << "tdstored did not reconnect to Redis" << daemon.LogTail();
  }
  EXPECT_EQ(daemon.Stop(), 0) << daemon.LogTail();
}

// A daemon started while its Redis is not there starts anyway and answers
// UNAVAILABLE until Redis is reachable.
TEST(E2eErrors, RedisNeverUpIsUnavailable) {
  DaemonProcess daemon;
  absl::Status started = daemon.Start(
      {"--redis", "redis://127.0.0.1:" + std::to_string(PickFreePort()), "--namespace", "never"});
  ASSERT_TRUE(started.ok()) << started;
  {
    ClientOptions options;
    options.timeout = std::chrono::seconds(30);
    options.retry_for = std::chrono::milliseconds(0);
    Client client(daemon.address(), options);
    for (const auto& call : std::vector<std::function<void()>>{
             [&] { client.list(); }, [&] { client.create("d", {1}); },
             [&] { client.open("d"); }}) {
      Error e = ErrorOf(call);
      EXPECT_EQ(e.code(), StatusCode::kUnavailable) << e.what() << daemon.LogTail();
    }
  }
  EXPECT_EQ(daemon.Stop(), 0) << daemon.LogTail();
}

}  // namespace
}  // namespace tdstore::testing
