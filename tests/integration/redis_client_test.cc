// server/redis against real redis-server processes.
//
// One shared server (started once for the suite) serves the tests that only
// read and write keys; tests that restart, kill or reconfigure a server get
// their own.
#include <hiredis/hiredis.h>
#include <signal.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <errno.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "server/redis/connection.h"
#include "server/redis/embedded_redis.h"
#include "server/redis/local_tcp.h"
#include "server/redis/redis_address.h"
#include "server/redis/script.h"
#include "server/redis/standalone_client.h"
#include "tests/support/redis_server.h"

namespace tdstore::redis {
namespace {

using ::tdstore::testing::RedisServerOptions;
using ::tdstore::testing::RedisServerProcess;
using Clock = std::chrono::steady_clock;

RedisServerOptions ServerOptions() {
  RedisServerOptions options;
  options.binary = TDSTORE_REDIS_SERVER_BIN;
  return options;
}

RedisAddress MustParse(const std::string& url) {
  absl::StatusOr<RedisAddress> address = ParseRedisUrl(url);
  EXPECT_TRUE(address.ok()) << address.status();
  return address.ok() ? *address : RedisAddress{};
}

// Short timeouts keep failure tests fast.
ConnectOptions FastOptions() {
  ConnectOptions options;
  options.connect_timeout = std::chrono::milliseconds(1000);
  options.io_timeout = std::chrono::milliseconds(5000);
  return options;
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Bytes 0..255 repeated, shifted by `seed`: NULs included, distinct per seed.
std::string Pattern(size_t size, int seed) {
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<char>((i * 7 + seed * 13) & 0xff);
  return out;
}

// ---------------------------------------------------------------------------
// Pure parts: SHA1 and URL parsing.

TEST(Sha1Test, KnownVectors) {
  EXPECT_EQ(Sha1Hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(Sha1Hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(Sha1Hex(std::string(1000000, 'a')), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  // 56 bytes: the length no longer fits in the first block's padding.
  EXPECT_EQ(Sha1Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

TEST(Sha1Test, ScriptCarriesSha) {
  Script script("answer", "return 42");
  EXPECT_EQ(script.name(), "answer");
  EXPECT_EQ(script.body(), "return 42");
  EXPECT_EQ(script.sha1(), Sha1Hex("return 42"));
}

// FormatCommand writes what hiredis' own formatter writes, byte for byte,
// for random commands: empty, binary and long arguments, many or none.
TEST(FormatCommandTest, MatchesHiredisOnRandomCommands) {
  std::mt19937 rng(7);
  std::string out;
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::string> args(1 + rng() % 40);
    for (std::string& a : args) {
      const size_t n = rng() % 4 == 0 ? rng() % 70000 : rng() % 24;
      a.resize(n);
      for (char& c : a) c = static_cast<char>(rng());
    }
    std::vector<std::string_view> views(args.begin(), args.end());
    std::vector<const char*> ptrs;
    std::vector<size_t> lens;
    for (const std::string& a : args) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    char* want = nullptr;
    const int len = redisFormatCommandArgv(&want, static_cast<int>(args.size()), ptrs.data(),
                                           lens.data());
    ASSERT_GT(len, 0);
    FormatCommand(views, &out);
    const bool same = out == std::string_view(want, static_cast<size_t>(len));
    redisFreeCommand(want);
    ASSERT_TRUE(same) << "round " << round << ": " << args.size() << " arguments";
  }
}

TEST(RedisAddressTest, AcceptsTcpForms) {
  RedisAddress a = MustParse("redis://localhost:6380");
  EXPECT_EQ(a.kind, RedisAddress::Kind::kTcp);
  EXPECT_EQ(a.host, "localhost");
  EXPECT_EQ(a.port, 6380);
  EXPECT_EQ(a.db, 0);
  EXPECT_TRUE(a.user.empty());
  EXPECT_TRUE(a.password.empty());

  a = MustParse("redis://10.0.0.1:7000/3");
  EXPECT_EQ(a.host, "10.0.0.1");
  EXPECT_EQ(a.port, 7000);
  EXPECT_EQ(a.db, 3);

  a = MustParse("redis://:hunter2@h:1/");
  EXPECT_EQ(a.user, "");
  EXPECT_EQ(a.password, "hunter2");
  EXPECT_EQ(a.db, 0);

  a = MustParse("redis://alice:p%40ss%3Aw%2Frd%25@h:1/2");
  EXPECT_EQ(a.user, "alice");
  EXPECT_EQ(a.password, "p@ss:w/rd%");
  EXPECT_EQ(a.db, 2);

  // Unescaped '@', ':' and '/' in a password still parse: credentials end
  // at the last '@'.
  a = MustParse("redis://bob:a@b:c/d@h:2");
  EXPECT_EQ(a.user, "bob");
  EXPECT_EQ(a.password, "a@b:c/d");
  EXPECT_EQ(a.host, "h");
  EXPECT_EQ(a.port, 2);

  a = MustParse("redis://myhost");  // default port
  EXPECT_EQ(a.port, 6379);

  a = MustParse("redis://[::1]:6390");
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, 6390);
}

TEST(RedisAddressTest, AcceptsUnixForms) {
  RedisAddress a = MustParse("unix:///run/redis/redis.sock");
  EXPECT_EQ(a.kind, RedisAddress::Kind::kUnix);
  EXPECT_EQ(a.path, "/run/redis/redis.sock");
  EXPECT_EQ(a.db, 0);

  a = MustParse("unix:///tmp/r.sock?db=5");
  EXPECT_EQ(a.path, "/tmp/r.sock");
  EXPECT_EQ(a.db, 5);
}

TEST(RedisAddressTest, RejectsBadForms) {
  const char* bad[] = {
      "",
      "localhost:6379",
      "http://h:1",
      "rediss://h:1",              // no TLS in hiredis 0.14
      "redis://",                  // no host
      "redis://:6379",             // no host
      "redis://h:",                // empty port
      "redis://h:0",               // port out of range
      "redis://h:65536",
      "redis://h:12ab",
      "redis://h:1/x",             // db not a number
      "redis://h:1/-1",
      "redis://h:1?db=1",          // query only for unix://
      "redis://::1:6379",          // IPv6 without brackets
      "redis://[::1:6379",
      "redis://useronly@h:1",      // no password for AUTH
      "redis://user:@h:1",         // empty password
      "redis://:bad%zzpw@h:1",     // bad escape
      "redis://:trunc%4@h:1",
      "unix://relative.sock",
      "unix://",
      "unix:///tmp/r.sock?db=x",
      "unix:///tmp/r.sock?timeout=1",
  };
  for (const char* url : bad) {
    absl::StatusOr<RedisAddress> a = ParseRedisUrl(url);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << "url: " << url;
  }
}

TEST(RedisAddressTest, ErrorsAndRedactedNeverShowThePassword) {
  const std::string secret = "Sup3rSecretPw";
  for (const std::string& url : {"redis://:" + secret + "@h:0", "redis://u:" + secret + "@h:1/x",
                                 "redis://u:" + secret + "%zz@h:1", "rediss://:" + secret + "@h:1"}) {
    absl::StatusOr<RedisAddress> a = ParseRedisUrl(url);
    ASSERT_FALSE(a.ok()) << url;
    EXPECT_FALSE(Contains(std::string(a.status().message()), secret));
  }

  RedisAddress a = MustParse("redis://alice:" + secret + "@h:6379/4");
  EXPECT_EQ(a.Redacted(), "redis://alice:***@h:6379/4");
  a = MustParse("redis://:" + secret + "@h:6379");
  EXPECT_EQ(a.Redacted(), "redis://:***@h:6379");
  EXPECT_FALSE(Contains(a.Redacted(), secret));
  EXPECT_EQ(MustParse("redis://h:1").Redacted(), "redis://h:1");
  EXPECT_EQ(MustParse("redis://[::1]:1").Redacted(), "redis://[::1]:1");
  EXPECT_EQ(MustParse("unix:///tmp/r.sock?db=2").Redacted(), "unix:///tmp/r.sock?db=2");

  RedisAddress unix_with_password = MustParse("unix:///tmp/r.sock");
  unix_with_password.password = secret;
  EXPECT_FALSE(Contains(unix_with_password.Redacted(), secret));
}

// ---------------------------------------------------------------------------
// Against one shared redis-server.

class RedisClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new RedisServerProcess(ServerOptions());
    absl::Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(server_->running());
    client_ = std::make_unique<StandaloneClient>(MustParse(server_->url()), FastOptions());
  }

  // Every test uses its own keys, so tests do not depend on one another.
  std::string Key(std::string_view suffix) const {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string(info->name()) + ":" + std::string(suffix);
  }

  static RedisServerProcess* server_;
  std::unique_ptr<StandaloneClient> client_;
};

RedisServerProcess* RedisClientTest::server_ = nullptr;

TEST_F(RedisClientTest, CallRoundTripsBinaryValues) {
  const std::string key = Key("bin");
  const std::string value = Pattern(100000, 1);
  ASSERT_NE(value.find('\0'), std::string::npos);

  absl::StatusOr<Reply> set = client_->Call(key, {"SET", key, value});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->is_status());
  EXPECT_EQ(set->str(), "OK");

  absl::StatusOr<Reply> get = client_->Call(key, {"GET", key});
  ASSERT_TRUE(get.ok()) << get.status();
  ASSERT_TRUE(get->is_string());
  EXPECT_EQ(get->str(), value);

  absl::StatusOr<Reply> missing = client_->Call(key, {"GET", Key("missing")});
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->is_nil());

  absl::StatusOr<Reply> len = client_->Call(key, {"STRLEN", key});
  ASSERT_TRUE(len.ok());
  EXPECT_TRUE(len->is_integer());
  EXPECT_EQ(len->integer(), 100000);

  // A key with NULs and high bytes in its name too.
  const std::string odd_key = Key(std::string("a\0b\xff", 4));
  ASSERT_TRUE(client_->Call(odd_key, {"RPUSH", odd_key, "x", std::string_view("\0", 1)}).ok());
  absl::StatusOr<Reply> list = client_->Call(odd_key, {"LRANGE", odd_key, "0", "-1"});
  ASSERT_TRUE(list.ok());
  ASSERT_TRUE(list->is_array());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].str(), "x");
  EXPECT_EQ((*list)[1].str(), std::string_view("\0", 1));
  EXPECT_FALSE((*list)[2].is_string());  // out of range: a null view, not UB
}

TEST_F(RedisClientTest, ErrorRepliesAreRepliesNotStatuses) {
  absl::StatusOr<Reply> reply = client_->Call("", {"NOSUCHCOMMAND", "x"});
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->is_error());
  EXPECT_TRUE(Contains(std::string(reply->str()), "ERR"));

  const std::string key = Key("s");
  ASSERT_TRUE(client_->Call(key, {"SET", key, "not a number"}).ok());
  reply = client_->Call(key, {"INCR", key});
  ASSERT_TRUE(reply.ok());
  EXPECT_TRUE(reply->is_error());

  // The connection stays healthy after an error reply.
  reply = client_->Call(key, {"GET", key});
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->str(), "not a number");
}

TEST_F(RedisClientTest, PipelineLongerThanItsWindow) {
  constexpr int kCommands = 1000;
  constexpr int kWindow = 4;
  constexpr size_t kChunk = 64 * 1024;
  const std::string key = Key("big");

  // Writes: send everything before receiving anything. The window forces
  // Send() to buffer the older replies itself.
  {
    absl::StatusOr<std::unique_ptr<Pipeline>> pipe = client_->NewPipeline(kWindow);
    ASSERT_TRUE(pipe.ok()) << pipe.status();
    for (int i = 0; i < kCommands; ++i) {
      const std::string offset = std::to_string(i * kChunk);
      const std::string chunk = Pattern(kChunk, i);
      ASSERT_TRUE((*pipe)->Send(key, {"SETRANGE", key, offset, chunk}).ok());
      EXPECT_EQ((*pipe)->outstanding(), i + 1);
    }
    for (int i = 0; i < kCommands; ++i) {
      absl::StatusOr<Reply> reply = (*pipe)->Receive();
      ASSERT_TRUE(reply.ok()) << reply.status();
      ASSERT_TRUE(reply->is_integer()) << reply->str();
      EXPECT_EQ(reply->integer(), static_cast<int64_t>((i + 1) * kChunk));  // new length
    }
    EXPECT_EQ((*pipe)->outstanding(), 0);
    EXPECT_EQ((*pipe)->Receive().status().code(), absl::StatusCode::kFailedPrecondition);
  }

  // Reads: keep the caller side in flight too, receiving as it goes.
  absl::StatusOr<std::unique_ptr<Pipeline>> pipe = client_->NewPipeline(kWindow);
  ASSERT_TRUE(pipe.ok());
  int received = 0;
  auto receive_one = [&] {
    absl::StatusOr<Reply> reply = (*pipe)->Receive();
    ASSERT_TRUE(reply.ok()) << reply.status();
    ASSERT_TRUE(reply->is_string());
    ASSERT_EQ(reply->str(), Pattern(kChunk, received)) << "chunk " << received;
    ++received;
  };
  for (int i = 0; i < kCommands; ++i) {
    const std::string from = std::to_string(i * kChunk);
    const std::string to = std::to_string((i + 1) * kChunk - 1);
    ASSERT_TRUE((*pipe)->Send(key, {"GETRANGE", key, from, to}).ok());
    if ((*pipe)->outstanding() > 2 * kWindow) receive_one();
    if (::testing::Test::HasFatalFailure()) return;
  }
  while ((*pipe)->outstanding() > 0) {
    receive_one();
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(received, kCommands);
  ASSERT_TRUE(client_->Call(key, {"DEL", key}).ok());
}

TEST_F(RedisClientTest, PipelineCarriesErrorRepliesInOrder) {
  const std::string key = Key("k");
  absl::StatusOr<std::unique_ptr<Pipeline>> pipe = client_->NewPipeline(2);
  ASSERT_TRUE(pipe.ok());
  // One connection: its commands run in the order sent, whatever their keys
  // (indexed_io.h reads a schema version behind its blocks on that).
  EXPECT_TRUE(client_->pipelines_in_order());
  ASSERT_TRUE((*pipe)->Send(key, {"SET", key, "v"}).ok());
  ASSERT_TRUE((*pipe)->Send(key, {"LPUSH", key, "wrong type"}).ok());
  ASSERT_TRUE((*pipe)->Send(key, {"GET", key}).ok());
  absl::StatusOr<Reply> r1 = (*pipe)->Receive();
  absl::StatusOr<Reply> r2 = (*pipe)->Receive();
  absl::StatusOr<Reply> r3 = (*pipe)->Receive();
  ASSERT_TRUE(r1.ok() && r2.ok() && r3.ok());
  EXPECT_EQ(r1->str(), "OK");
  EXPECT_TRUE(r2->is_error());
  EXPECT_TRUE(Contains(std::string(r2->str()), "WRONGTYPE"));
  EXPECT_EQ(r3->str(), "v");
}

TEST_F(RedisClientTest, EvalRunsScriptsAndRecoversFromNoscript) {
  const Script script("incr_and_echo",
                      "local n = redis.call('INCR', KEYS[1])\n"
                      "return {n, ARGV[1]}\n");
  const std::string key = Key("counter");
  // The locally computed SHA1 is what Redis computes.
  EXPECT_EQ(server_->Command({"SCRIPT", "LOAD", script.body()}),
            std::vector<std::string>{script.sha1()});

  absl::StatusOr<Reply> reply = client_->Eval(script, {key}, {"hello"});
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_TRUE(reply->is_array());
  ASSERT_EQ(reply->size(), 2u);
  EXPECT_EQ((*reply)[0].integer(), 1);
  EXPECT_EQ((*reply)[1].str(), "hello");

  // Redis forgets every script: EVALSHA answers NOSCRIPT, Eval loads the
  // script and retries once, invisibly to the caller.
  EXPECT_EQ(server_->Command({"SCRIPT", "FLUSH"}), std::vector<std::string>{"OK"});
  EXPECT_EQ(server_->Command({"SCRIPT", "EXISTS", script.sha1()}), std::vector<std::string>{"0"});
  reply = client_->Eval(script, {key}, {"again"});
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_TRUE(reply->is_array()) << reply->str();
  EXPECT_EQ((*reply)[0].integer(), 2);
  EXPECT_EQ((*reply)[1].str(), "again");
  EXPECT_EQ(server_->Command({"SCRIPT", "EXISTS", script.sha1()}), std::vector<std::string>{"1"});
}

TEST_F(RedisClientTest, EvalReturnsScriptErrorsAsReplies) {
  const Script raises("raises", "return redis.error_reply('BADSHAPE rows do not match')");
  absl::StatusOr<Reply> reply = client_->Eval(raises, {Key("k")}, {});
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->is_error());
  EXPECT_TRUE(Contains(std::string(reply->str()), "BADSHAPE rows do not match"));

  // A script that does not compile: SCRIPT LOAD fails, its error is returned.
  const Script broken("broken", "this is not lua");
  reply = client_->Eval(broken, {Key("k")}, {});
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->is_error());
}

TEST_F(RedisClientTest, Sha1MatchesRedisAroundBlockBoundaries) {
  // Bodies of 40..140 bytes cross the 55/56/64/119/120-byte padding edges.
  for (size_t len = 40; len <= 140; ++len) {
    std::string body = "return 1 --";
    body.resize(len, 'x');
    const std::vector<std::string> got = server_->Command({"SCRIPT", "LOAD", body});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(Sha1Hex(body), got[0]) << "length " << len;
  }
}

TEST_F(RedisClientTest, SelectsTheDatabaseOfTheUrl) {
  const std::string key = Key("k");
  StandaloneClient db3(MustParse(server_->url() + "/3"), FastOptions());
  ASSERT_TRUE(db3.Call(key, {"SET", key, "in db 3"}).ok());

  absl::StatusOr<Reply> in_db3 = db3.Call(key, {"GET", key});
  ASSERT_TRUE(in_db3.ok());
  EXPECT_EQ(in_db3->str(), "in db 3");
  absl::StatusOr<Reply> in_db0 = client_->Call(key, {"GET", key});
  ASSERT_TRUE(in_db0.ok());
  EXPECT_TRUE(in_db0->is_nil());
  EXPECT_EQ(server_->Command({"GET", key}), std::vector<std::string>{"(nil)"});

  // Redis has 16 databases by default.
  StandaloneClient db99(MustParse(server_->url() + "/99"), FastOptions());
  EXPECT_EQ(db99.Call(key, {"PING"}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RedisClientTest, ConcurrentCallsFromManyThreads) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  const std::string counter = Key("counter");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t, own = Key("t" + std::to_string(t))] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string value = Pattern(100 + i, t);
        absl::StatusOr<Reply> incr = client_->Call(counter, {"INCR", counter});
        absl::StatusOr<Reply> set = client_->Call(own, {"SET", own, value});
        absl::StatusOr<Reply> get = client_->Call(own, {"GET", own});
        if (!incr.ok() || !incr->is_integer() || !set.ok() || !get.ok() || get->str() != value) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(server_->Command({"GET", counter}),
            std::vector<std::string>{std::to_string(kThreads * kPerThread)});
}

TEST_F(RedisClientTest, PipelinesAndCallsShareThePool) {
  // A pipeline abandoned with replies on the wire must not hand its
  // connection (and those replies) to the next caller.
  const std::string key = Key("k");
  {
    absl::StatusOr<std::unique_ptr<Pipeline>> pipe = client_->NewPipeline(8);
    ASSERT_TRUE(pipe.ok());
    for (int i = 0; i < 5; ++i) ASSERT_TRUE((*pipe)->Send(key, {"ECHO", "stale"}).ok());
    ASSERT_TRUE((*pipe)->Receive().ok());  // forces the sends onto the wire
  }
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<Reply> reply = client_->Call(key, {"ECHO", std::to_string(i)});
    ASSERT_TRUE(reply.ok());
    EXPECT_EQ(reply->str(), std::to_string(i));
  }
  EXPECT_EQ(client_->NewPipeline(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RedisClientTest, ConnectionRejectsMisuse) {
  absl::StatusOr<std::unique_ptr<Connection>> conn =
      Connection::Open(MustParse(server_->url()), FastOptions());
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_EQ((*conn)->GetReply().status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*conn)->Append({"ECHO", "a"}).ok());
  EXPECT_EQ((*conn)->pending(), 1);
  EXPECT_EQ((*conn)->Call({"ECHO", "b"}).status().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<Reply> a = (*conn)->GetReply();
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->str(), "a");
  EXPECT_FALSE((*conn)->broken());
}

// Commands with an argument of kDirectArgBytes or more go to the socket by
// writev at Append, the others through hiredis' buffer: mixed at random,
// Redis must still see them in the order they were appended, with every
// byte of every argument (large ones at any position in argv).
TEST_F(RedisClientTest, LargeArgumentsWrittenDirectlyKeepTheirOrder) {
  absl::StatusOr<std::unique_ptr<Connection>> conn =
      Connection::Open(MustParse(server_->url()), FastOptions());
  ASSERT_TRUE(conn.ok()) << conn.status();
  std::mt19937 rng(21);
  const std::string key = Key("mixed");
  std::string expected;  // what APPEND builds, to compare with GET at the end
  std::vector<std::optional<std::string>> echoes;  // nullopt: an APPEND
  for (int i = 0; i < 60; ++i) {
    const bool large = rng() % 2 == 0;
    const size_t n = large ? Connection::kDirectArgBytes + rng() % 300000 : rng() % 2000;
    const std::string value = Pattern(n, static_cast<int>(i));
    if (rng() % 3 == 0) {
      // The large argument first, the key after it: ECHO of a large value.
      ASSERT_TRUE((*conn)->Append({"ECHO", value}).ok());
      echoes.push_back(value);
    } else {
      ASSERT_TRUE((*conn)->Append({"APPEND", key, value}).ok());
      expected += value;
      echoes.push_back(std::nullopt);
    }
  }
  ASSERT_TRUE((*conn)->Append({"GET", key}).ok());
  EXPECT_EQ((*conn)->pending(), 61);
  for (const std::optional<std::string>& echo : echoes) {
    absl::StatusOr<Reply> reply = (*conn)->GetReply();
    ASSERT_TRUE(reply.ok()) << reply.status();
    if (echo) {
      ASSERT_TRUE(reply->is_string());
      EXPECT_EQ(reply->str(), *echo);
    } else {
      EXPECT_TRUE(reply->is_integer());
    }
  }
  absl::StatusOr<Reply> all = (*conn)->GetReply();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->str(), expected);
  EXPECT_FALSE((*conn)->broken());
}

// A command whose value is sent in pieces (Connection::AppendOpen) stores
// every byte of it, for random values, cuts and tails, between ordinary
// commands that keep their order; until its last byte the connection
// refuses anything else. A pipeline dropped half-way through a value
// inside MULTI closes its connection: Redis ran none of the transaction,
// and the pool hands out a clean connection after it.
TEST_F(RedisClientTest, AValueSentInPiecesArrivesWholeOrNotAtAll) {
  absl::StatusOr<std::unique_ptr<Connection>> conn =
      Connection::Open(MustParse(server_->url()), FastOptions());
  ASSERT_TRUE(conn.ok()) << conn.status();
  std::mt19937 rng(33);
  for (int round = 0; round < 40; ++round) {
    const std::string key = Key("v" + std::to_string(round));
    const size_t n = 1 + rng() % (rng() % 2 ? 3000000 : 2000);
    const std::string value = Pattern(n, round);
    const bool nx = rng() % 2 == 0;
    ASSERT_TRUE((*conn)->Append({"ECHO", "before"}).ok());
    ASSERT_TRUE((*conn)
                    ->AppendOpen({"SET", key}, static_cast<int64_t>(n),
                                 nx ? std::vector<std::string_view>{"NX"}
                                    : std::vector<std::string_view>{})
                    .ok());
    size_t at = 0;
    while (at < n) {
      EXPECT_TRUE((*conn)->mid_command());
      EXPECT_EQ((*conn)->Append({"ECHO", "x"}).code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_EQ((*conn)->GetReply().status().code(), absl::StatusCode::kFailedPrecondition);
      const size_t take = std::min(n - at, 1 + static_cast<size_t>(rng() % (n / 3 + 1)));
      ASSERT_TRUE((*conn)->AppendValue(std::string_view(value).substr(at, take)).ok());
      at += take;
    }
    EXPECT_FALSE((*conn)->mid_command());
    EXPECT_EQ((*conn)->AppendValue("x").code(), absl::StatusCode::kInvalidArgument);
    ASSERT_TRUE((*conn)->Append({"GET", key}).ok());
    ASSERT_EQ((*conn)->pending(), 3);
    EXPECT_EQ((*conn)->GetReply()->str(), "before");
    absl::StatusOr<Reply> set = (*conn)->GetReply();
    ASSERT_TRUE(set.ok()) << set.status();
    EXPECT_EQ(set->str(), "OK");
    absl::StatusOr<Reply> got = (*conn)->GetReply();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->str(), value) << "round " << round;
  }
  EXPECT_FALSE((*conn)->broken());

  // Dropped half-way, inside MULTI: nothing ran, and the next pipeline the
  // pool gives is not in a transaction.
  const std::string key = Key("dropped"), other = Key("queued");
  const std::string value = Pattern(1 << 20, 7);
  {
    absl::StatusOr<std::unique_ptr<Pipeline>> pipe = client_->NewPipeline(8);
    ASSERT_TRUE(pipe.ok());
    ASSERT_TRUE((*pipe)->Send(key, {"MULTI"}).ok());
    ASSERT_TRUE((*pipe)->Send(key, {"SET", other, "1"}).ok());
    ASSERT_TRUE((*pipe)->SendOpen(key, {"SET", key}, static_cast<int64_t>(value.size()), {}).ok());
    ASSERT_TRUE((*pipe)->SendValue(std::string_view(value).substr(0, value.size() / 2)).ok());
    EXPECT_EQ((*pipe)->Send(key, {"EXEC"}).code(), absl::StatusCode::kFailedPrecondition);
  }
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::unique_ptr<Pipeline>> pipe = client_->NewPipeline(8);
    ASSERT_TRUE(pipe.ok());
    ASSERT_TRUE((*pipe)->Send(key, {"EXISTS", key, other}).ok());
    absl::StatusOr<Reply> exists = (*pipe)->Receive();
    ASSERT_TRUE(exists.ok()) << exists.status();
    ASSERT_TRUE(exists->is_integer()) << exists->str();  // not +QUEUED
    EXPECT_EQ(exists->integer(), 0);
  }
}

// Small commands queued past Connection::kWriteAtBytes are written as they
// come, not held until a reply is asked for: Redis has applied the first
// of them while none of their replies has been read. A MULTI of many
// SETRANGEs (a strided write) then keeps every row, in order, with the
// queued replies read after.
TEST_F(RedisClientTest, QueuedCommandsPastAWindowAreWrittenAsTheyCome) {
  absl::StatusOr<std::unique_ptr<Connection>> conn =
      Connection::Open(MustParse(server_->url()), FastOptions());
  ASSERT_TRUE(conn.ok()) << conn.status();
  const std::string first = Key("first");
  ASSERT_TRUE((*conn)->Append({"SET", first, "1"}).ok());
  const std::string rows = Key("rows");
  ASSERT_TRUE((*conn)->Append({"SET", rows, std::string(300 * 1000, '\0')}).ok());
  std::string expected(300 * 1000, '\0');
  ASSERT_TRUE((*conn)->Append({"MULTI"}).ok());
  constexpr int kRows = 6000;  // 6000 x 300 bytes: past kWriteAtBytes
  static_assert(kRows * 300 > 1.5 * Connection::kWriteAtBytes);
  for (int i = 0; i < kRows; ++i) {
    const size_t at = (static_cast<size_t>(i) * 3 % 1000) * 300;  // rows overlap: order counts
    const std::string row = Pattern(300, i);
    expected.replace(at, row.size(), row);
    ASSERT_TRUE((*conn)->Append({"SETRANGE", rows, std::to_string(at), row}).ok());
  }
  ASSERT_TRUE((*conn)->Append({"EXEC"}).ok());
  // Nothing was read, yet Redis gets the first SET: it was written. (Redis
  // may serve this other connection before it reads ours: wait for it.
  // Held back until a reply is asked for, it never comes.)
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string seen;
  while (seen != "1" && std::chrono::steady_clock::now() < deadline) {
    absl::StatusOr<Reply> got = client_->Call(first, {"GET", first});
    ASSERT_TRUE(got.ok()) << got.status();
    seen = std::string(got->str());
  }
  EXPECT_EQ(seen, "1");
  EXPECT_EQ((*conn)->pending(), kRows + 4);
  for (int i = 0; i < kRows + 3; ++i) {
    absl::StatusOr<Reply> reply = (*conn)->GetReply();
    ASSERT_TRUE(reply.ok()) << reply.status();
    ASSERT_FALSE(reply->is_error()) << i << ": " << reply->str();
  }
  absl::StatusOr<Reply> exec = (*conn)->GetReply();
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_EQ(exec->size(), static_cast<size_t>(kRows));
  absl::StatusOr<Reply> value = client_->Call(rows, {"GET", rows});
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->str(), expected);
  EXPECT_FALSE((*conn)->broken());
}

// ---------------------------------------------------------------------------
// The congestion control of a connection to a Redis on this host
// (server/redis/local_tcp.h).

std::string HostDefaultCongestion() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_congestion_control");
  std::string name;
  in >> name;
  return name;
}

TEST_F(RedisClientTest, ConnectionsToThisHostSendWithTheLocalCongestionControl) {
  ASSERT_FALSE(HostDefaultCongestion().empty());
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    const RedisAddress address =
        MustParse("redis://" + host + ":" + std::to_string(server_->port()));
    SCOPED_TRACE(host);
    // The default: reno, which any process may choose.
    absl::StatusOr<std::unique_ptr<Connection>> conn = Connection::Open(address, FastOptions());
    ASSERT_TRUE(conn.ok()) << conn.status();
    absl::StatusOr<std::string> cc = (*conn)->TcpCongestion();
    ASSERT_TRUE(cc.ok()) << cc.status();
    EXPECT_EQ(*cc, "reno");
    // The connection works as any other.
    const std::string key = Key("cc:" + host);
    const std::string value = Pattern(3 << 20, 5);
    absl::StatusOr<Reply> set = (*conn)->Call({"SET", key, value});
    ASSERT_TRUE(set.ok()) << set.status();
    absl::StatusOr<Reply> got = (*conn)->Call({"GET", key});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->str(), value);

    // Empty: the host's default, untouched.
    ConnectOptions host_default = FastOptions();
    host_default.local_congestion.clear();
    conn = Connection::Open(address, host_default);
    ASSERT_TRUE(conn.ok()) << conn.status();
    cc = (*conn)->TcpCongestion();
    ASSERT_TRUE(cc.ok()) << cc.status();
    EXPECT_EQ(*cc, HostDefaultCongestion());
  }
}

// A connected pair of TCP sockets, the client's to `host`; -1s on failure.
std::pair<int, int> TcpPair(const std::string& host) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(listener);
    return {-1, -1};
  }
  inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(client);
    close(listener);
    return {-1, -1};
  }
  const int accepted = accept(listener, nullptr, nullptr);
  close(listener);
  return {client, accepted};
}

TEST(LocalTcpTest, ThisHostIsLoopbackOrTheSocketsOwnAddress) {
  std::vector<std::string> hosts = {"127.0.0.1", "127.0.0.2"};
  // This host's own addresses, other than loopback: routed through
  // loopback too.
  ifaddrs* ifs = nullptr;
  ASSERT_EQ(getifaddrs(&ifs), 0);
  for (ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text,
              sizeof(text));
    if (std::string(text).rfind("127.", 0) != 0) hosts.push_back(text);
  }
  freeifaddrs(ifs);
  for (const std::string& host : hosts) {
    SCOPED_TRACE(host);
    auto [client, accepted] = TcpPair(host);
    ASSERT_GE(client, 0);
    EXPECT_TRUE(PeerIsThisHost(client));
    EXPECT_TRUE(PeerIsThisHost(accepted));
    ASSERT_TRUE(SetCongestionControl(client, "reno").ok());
    EXPECT_EQ(*CongestionControl(client), "reno");
    close(client);
    close(accepted);
  }
  // Not TCP, or not connected: never "this host".
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  EXPECT_FALSE(PeerIsThisHost(pair[0]));
  close(pair[0]);
  close(pair[1]);
  const int lone = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_FALSE(PeerIsThisHost(lone));
  close(lone);
}

TEST(LocalTcpTest, ANameTheKernelRefusesIsInvalidArgumentAndChangesNothing) {
  EXPECT_TRUE(CheckCongestionControl("reno").ok());
  for (const std::string& name : std::vector<std::string>{"no-such-cc", "", std::string(80, 'x')}) {
    absl::Status checked = CheckCongestionControl(name);
    EXPECT_EQ(checked.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_TRUE(Contains(std::string(checked.message()), "'" + name + "'")) << checked;
  }
  absl::Status checked = CheckCongestionControl("no-such-cc");
  EXPECT_TRUE(Contains(std::string(checked.message()), "tcp_available_congestion_control"))
      << checked;
  auto [client, accepted] = TcpPair("127.0.0.1");
  ASSERT_GE(client, 0);
  const std::string before = *CongestionControl(client);
  EXPECT_EQ(SetCongestionControl(client, "no-such-cc").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*CongestionControl(client), before);
  close(client);
  close(accepted);
}

TEST_F(RedisClientTest, StuckCommandTimesOutAsUnavailable) {
  ConnectOptions options = FastOptions();
  options.io_timeout = std::chrono::milliseconds(200);
  absl::StatusOr<std::unique_ptr<Connection>> conn =
      Connection::Open(MustParse(server_->url()), options);
  ASSERT_TRUE(conn.ok());
  const auto start = Clock::now();
  // Blocks server-side for 5 s: longer than the I/O timeout.
  absl::StatusOr<Reply> reply = (*conn)->Call({"BLPOP", Key("never"), "5"});
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  EXPECT_TRUE((*conn)->broken());
  EXPECT_EQ((*conn)->Call({"PING"}).status().code(), absl::StatusCode::kUnavailable);
}

// ---------------------------------------------------------------------------
// Failure and recovery.

TEST(RedisFailureTest, UnreachableRedisIsUnavailableQuickly) {
  const int port = ::tdstore::testing::PickFreePort();  // nothing listens there
  ASSERT_NE(port, 0);
  const std::string secret = "NotInMessages1";
  StandaloneClient client(MustParse("redis://:" + secret + "@127.0.0.1:" + std::to_string(port)),
                          FastOptions());
  const auto start = Clock::now();
  absl::StatusOr<Reply> reply = client.Call("", {"PING"});
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  const std::string message(reply.status().message());
  EXPECT_TRUE(Contains(message, "127.0.0.1:" + std::to_string(port)));
  EXPECT_FALSE(Contains(message, secret));

  EXPECT_EQ(client.NewPipeline(4).status().code(), absl::StatusCode::kUnavailable);
  const Script script("s", "return 1");
  EXPECT_EQ(client.Eval(script, {"k"}, {}).status().code(), absl::StatusCode::kUnavailable);

  RedisAddress missing_socket = MustParse("unix:///nonexistent/dir/redis.sock");
  EXPECT_EQ(Connection::Open(missing_socket, FastOptions()).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(RedisFailureTest, RestartedRedisIsPickedUpOnAFreshConnection) {
  RedisServerProcess server(ServerOptions());
  ASSERT_TRUE(server.Start().ok());
  StandaloneClient client(MustParse(server.url()), FastOptions());

  // Fill the pool with several idle connections.
  {
    std::vector<std::unique_ptr<Pipeline>> held;
    for (int i = 0; i < 4; ++i) {
      absl::StatusOr<std::unique_ptr<Pipeline>> pipe = client.NewPipeline(1);
      ASSERT_TRUE(pipe.ok());
      held.push_back(*std::move(pipe));
    }
  }
  ASSERT_TRUE(client.Call("k", {"SET", "k", "before"}).ok());

  server.Stop();
  absl::StatusOr<Reply> down = client.Call("k", {"GET", "k"});
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable);
  down = client.Call("k", {"GET", "k"});  // no idle connection left: connect fails
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable);

  ASSERT_TRUE(server.Start().ok());
  absl::StatusOr<Reply> up = client.Call("k", {"SET", "k", "after"});
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(up->str(), "OK");

  // Restart again without a call in between: the pooled connection is now
  // stale. One call may fail; the pool then drops every idle connection, so
  // the next one succeeds.
  server.Stop();
  ASSERT_TRUE(server.Start().ok());
  absl::StatusOr<Reply> first = client.Call("k", {"GET", "k"});
  if (!first.ok()) {
    EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable);
  }
  absl::StatusOr<Reply> second = client.Call("k", {"GET", "k"});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->is_nil());  // no persistence in the test server

  // Killed (no clean shutdown) behaves the same for a pipeline.
  absl::StatusOr<std::unique_ptr<Pipeline>> pipe = client.NewPipeline(4);
  ASSERT_TRUE(pipe.ok());
  server.Kill();
  absl::Status sent = (*pipe)->Send("k", {"PING"});
  absl::StatusOr<Reply> received = sent.ok() ? (*pipe)->Receive() : absl::StatusOr<Reply>(sent);
  EXPECT_EQ(received.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*pipe)->Send("k", {"PING"}).code(), absl::StatusCode::kUnavailable);  // sticky
  pipe->reset();
  ASSERT_TRUE(server.Start().ok());
  EXPECT_TRUE(client.Call("k", {"PING"}).ok());
}

// ---------------------------------------------------------------------------
// AUTH.

class RedisAuthTest : public ::testing::Test {
 protected:
  static constexpr const char* kPassword = "default-Pw-4711";
  static constexpr const char* kUser = "trainer";
  // Characters that must be percent-escaped in a URL.
  static constexpr const char* kUserPassword = "p@ss:w/rd%?#";

  static void SetUpTestSuite() {
    RedisServerOptions options = ServerOptions();
    options.password = kPassword;
    options.acl_user = kUser;
    options.acl_password = kUserPassword;
    server_ = new RedisServerProcess(options);
    absl::Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  std::string HostPort() const { return "127.0.0.1:" + std::to_string(server_->port()); }

  static RedisServerProcess* server_;
};

RedisServerProcess* RedisAuthTest::server_ = nullptr;

TEST_F(RedisAuthTest, PasswordOfTheDefaultUser) {
  StandaloneClient good(MustParse("redis://:" + std::string(kPassword) + "@" + HostPort()),
                        FastOptions());
  absl::StatusOr<Reply> reply = good.Call("", {"PING"});
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->str(), "PONG");

  const std::string wrong = "wrong-Pw-0815";
  StandaloneClient bad(MustParse("redis://:" + wrong + "@" + HostPort()), FastOptions());
  reply = bad.Call("", {"PING"});
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kPermissionDenied) << reply.status();
  EXPECT_FALSE(Contains(std::string(reply.status().message()), wrong));
  EXPECT_FALSE(Contains(bad.Describe(), wrong));

  // No password at all: the server answers NOAUTH.
  StandaloneClient none(MustParse("redis://" + HostPort()), FastOptions());
  EXPECT_EQ(none.Call("", {"PING"}).status().code(), absl::StatusCode::kUnauthenticated);
  StandaloneClient none_db(MustParse("redis://" + HostPort() + "/2"), FastOptions());
  EXPECT_EQ(none_db.Call("", {"PING"}).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(RedisAuthTest, AclUser) {
  // server_->url() carries the ACL user with a percent-escaped password.
  StandaloneClient good(MustParse(server_->url()), FastOptions());
  absl::StatusOr<Reply> who = good.Call("", {"ACL", "WHOAMI"});
  ASSERT_TRUE(who.ok()) << who.status();
  EXPECT_EQ(who->str(), kUser);

  const std::string wrong = "not-" + std::string("the-one");
  StandaloneClient bad(MustParse("redis://" + std::string(kUser) + ":" + wrong + "@" + HostPort()),
                       FastOptions());
  absl::StatusOr<Reply> reply = bad.Call("", {"PING"});
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kPermissionDenied) << reply.status();
  EXPECT_FALSE(Contains(std::string(reply.status().message()), wrong));
  EXPECT_FALSE(Contains(std::string(reply.status().message()), kUserPassword));

  // With a database too.
  StandaloneClient db5(MustParse(server_->url() + "/5"), FastOptions());
  ASSERT_TRUE(db5.Call("k", {"SET", "k", "v"}).ok());
  EXPECT_EQ(server_->Command({"EXISTS", "k"}), std::vector<std::string>{"0"});  // db 0
}

// ---------------------------------------------------------------------------
// EmbeddedRedis.

bool ProcessExists(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

EmbeddedRedisOptions EmbeddedOptions() {
  EmbeddedRedisOptions options;
  options.binary = TDSTORE_REDIS_SERVER_BIN;
  return options;
}

TEST(EmbeddedRedisTest, StartsAnswersOnItsSocketAndCleansUp) {
  absl::StatusOr<std::unique_ptr<EmbeddedRedis>> redis = EmbeddedRedis::Start(EmbeddedOptions());
  ASSERT_TRUE(redis.ok()) << redis.status();
  const RedisAddress address = (*redis)->address();
  const pid_t pid = (*redis)->pid();
  ASSERT_EQ(address.kind, RedisAddress::Kind::kUnix);
  EXPECT_EQ(address.Redacted(), "unix://" + address.path);
  const std::filesystem::path dir = std::filesystem::path(address.path).parent_path();

  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);  // private
  EXPECT_TRUE(ProcessExists(pid));

  StandaloneClient client(address, FastOptions());
  ASSERT_TRUE(client.Call("k", {"SET", "k", std::string_view("v\0v", 3)}).ok());
  absl::StatusOr<Reply> got = client.Call("k", {"GET", "k"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->str(), std::string_view("v\0v", 3));
  // No TCP listener.
  absl::StatusOr<Reply> port = client.Call("", {"CONFIG", "GET", "port"});
  ASSERT_TRUE(port.ok());
  ASSERT_EQ(port->size(), 2u);
  EXPECT_EQ((*port)[1].str(), "0");

  (*redis)->Stop();
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_FALSE(ProcessExists(pid));
  (*redis)->Stop();  // idempotent
}

TEST(EmbeddedRedisTest, DataDirSurvivesARestart) {
  char pattern[] = "/tmp/tdstore-embedded-data-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string data_dir = std::string(pattern) + "/data";  // created by Start
  EmbeddedRedisOptions options = EmbeddedOptions();
  options.data_dir = data_dir;

  std::string first_dir;
  {
    absl::StatusOr<std::unique_ptr<EmbeddedRedis>> redis = EmbeddedRedis::Start(options);
    ASSERT_TRUE(redis.ok()) << redis.status();
    first_dir = std::filesystem::path((*redis)->address().path).parent_path();
    StandaloneClient client((*redis)->address(), FastOptions());
    ASSERT_TRUE(client.Call("k", {"SET", "k", "persisted"}).ok());
  }  // destructor stops it
  EXPECT_FALSE(std::filesystem::exists(first_dir));
  EXPECT_TRUE(std::filesystem::exists(data_dir));

  absl::StatusOr<std::unique_ptr<EmbeddedRedis>> redis = EmbeddedRedis::Start(options);
  ASSERT_TRUE(redis.ok()) << redis.status();
  StandaloneClient client((*redis)->address(), FastOptions());
  absl::StatusOr<Reply> got = client.Call("k", {"GET", "k"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->str(), "persisted");
  (*redis)->Stop();
  EXPECT_TRUE(std::filesystem::exists(data_dir));  // Stop never deletes the data
  std::filesystem::remove_all(pattern);
}

TEST(EmbeddedRedisTest, MissingBinaryIsFailedPrecondition) {
  EmbeddedRedisOptions options = EmbeddedOptions();
  options.binary = "/nonexistent/redis-server";
  EXPECT_EQ(EmbeddedRedis::Start(options).status().code(), absl::StatusCode::kFailedPrecondition);
  options.binary = "no-such-redis-server-binary";
  EXPECT_EQ(EmbeddedRedis::Start(options).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(EmbeddedRedisTest, BadArgumentsReportTheLog) {
  // A server that exits at once (here a stand-in that always fails) is
  // UNAVAILABLE, with the log tail in the message, not a start_timeout wait.
  EmbeddedRedisOptions options = EmbeddedOptions();
  options.binary = "/bin/false";
  options.start_timeout = std::chrono::milliseconds(3000);
  absl::StatusOr<std::unique_ptr<EmbeddedRedis>> redis = EmbeddedRedis::Start(options);
  EXPECT_EQ(redis.status().code(), absl::StatusCode::kUnavailable) << redis.status();
}

}  // namespace
}  // namespace tdstore::redis
