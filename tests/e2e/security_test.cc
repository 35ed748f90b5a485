// Access control end to end (docs/security.md), against real tdstored
// processes over the shared Redis:
//   - bearer tokens: no or unknown token -> UNAUTHENTICATED; a dict outside
//     the token's prefixes, or a write with a read-only token ->
//     PERMISSION_DENIED, and a denied call leaves Redis byte-for-byte as it
//     was; ListDicts shows a token only its own prefixes;
//   - TLS and mutual TLS: the right CA works, anything else fails;
//   - the client never sends a token in the clear beyond loopback;
//   - secrets (tokens, the Redis password) never reach a log or an error;
//   - the unix socket is 0660, the default listen address is loopback, and a
//     bad tokens file stops tdstored at start.
//
// SecurityTest makes its certificates (openssl CLI) and starts its three
// daemons once for the whole suite: each start costs ~0.3 s.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "tdstore/client.h"
#include "tests/e2e/expect_error.h"
#include "tdstore/v1/tdstore.grpc.pb.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/tensor_testing.h"
#include "tests/support/child_process.h"
#include "tests/support/daemon_process.h"
#include "tests/support/redis_server.h"

namespace tdstore::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

// The tokens file every token-checking daemon of the suite reads.
constexpr char kTeamAToken[] = "team-a-rw-token-1f3b5d7e9a0c2e4f";  // rw  team-a/
constexpr char kReaderToken[] = "reader-ro-token-8e6c4a2f0d9b7153";  // ro  *
constexpr char kAdminToken[] = "admin-rw-token-53a1c9e7f2b4d608";    // rw  *
// Known to nobody; and one that is a known token minus its last character.
constexpr char kUnknownToken[] = "unknown-token-00aa11bb22cc33dd44";
const std::string kTruncatedToken(kAdminToken, sizeof(kAdminToken) - 2);

// Redis keys of each daemon start with its namespace.
constexpr char kTokensNs[] = "sec-tok";
constexpr char kTlsNs[] = "sec-tls";
constexpr char kMtlsNs[] = "sec-mtls";

// ---- Helpers ------------------------------------------------------------------

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A new private (0700) directory under the temp directory; "" on failure.
std::string MakeTempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
  return mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
}

// Runs `argv` (argv[0] a path) to completion, its output appended to `log`.
// Returns its exit code; -1 if it cannot start or runs longer than 20 s.
int RunToCompletion(std::vector<std::string> argv, const std::string& log) {
  pid_t pid = -1;
  if (!SpawnChild(std::move(argv), log, ChildLog::kAppend, &pid).ok()) return -1;
  const auto deadline = steady_clock::now() + seconds(20);
  int wait_status = 0;
  while (!TryReapChild(pid, &wait_status)) {
    if (steady_clock::now() > deadline) {
      KillChild(pid);
      return -1;
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
  return ExitCodeOf(wait_status);
}


// Options for the suite's clients: a token, and no retries, so that a
// failure (UNAVAILABLE above all) shows at once instead of after 30 s.
ClientOptions WithToken(const std::string& token) {
  ClientOptions options;
  options.token = token;
  options.retry_for = milliseconds(0);
  options.timeout = seconds(10);
  return options;
}

// ---- Certificates ---------------------------------------------------------------

// PEM texts made by MakeTestPki; the same files are in its directory as
// <name>.pem / <name>.key.
struct TestPki {
  std::string ca;        // "ca": signs tdstored's and the client's certificate
  std::string other_ca;  // "other-ca": unrelated
  std::string server_cert, server_key;  // "server": IP:127.0.0.1, DNS:localhost
  std::string client_cert, client_key;  // "client": signed by ca
  std::string rogue_cert, rogue_key;    // "rogue": a client certificate by other-ca
};

absl::Status Openssl(const std::string& dir, std::vector<std::string> args) {
  const std::string what = args.at(0);
  args.insert(args.begin(), "/usr/bin/openssl");
  const int code = RunToCompletion(std::move(args), dir + "/openssl.log");
  if (code == 0) return absl::OkStatus();
  return absl::InternalError("openssl " + what + " exited with " + std::to_string(code) + ":\n" +
                             ReadFile(dir + "/openssl.log"));
}

// Small EC keys (P-256): fast to make, and every TLS stack takes them.
const std::vector<std::string> kNewKey = {"-newkey", "ec", "-pkeyopt",
                                          "ec_paramgen_curve:prime256v1", "-nodes"};

absl::Status MakeCa(const std::string& dir, const std::string& name) {
  std::vector<std::string> args = {"req", "-x509"};
  args.insert(args.end(), kNewKey.begin(), kNewKey.end());
  args.insert(args.end(), {"-keyout", dir + "/" + name + ".key", "-out", dir + "/" + name + ".pem",
                           "-subj", "/CN=tdstore test " + name, "-days", "2", "-addext",
                           "basicConstraints=critical,CA:TRUE", "-addext",
                           "keyUsage=critical,keyCertSign,cRLSign"});
  return Openssl(dir, args);
}

// A key and a certificate for it signed by `ca`, with `extensions`
// (openssl x509 -extfile syntax).
absl::Status MakeLeaf(const std::string& dir, const std::string& name, const std::string& ca,
                      const std::string& serial, const std::string& extensions) {
  const std::string base = dir + "/" + name;
  WriteFile(base + ".ext", extensions);
  std::vector<std::string> request = {"req", "-new"};
  request.insert(request.end(), kNewKey.begin(), kNewKey.end());
  request.insert(request.end(),
                 {"-keyout", base + ".key", "-out", base + ".csr", "-subj", "/CN=" + name});
  if (auto s = Openssl(dir, request); !s.ok()) return s;
  return Openssl(dir, {"x509", "-req", "-in", base + ".csr", "-CA", dir + "/" + ca + ".pem",
                       "-CAkey", dir + "/" + ca + ".key", "-set_serial", serial, "-days", "2",
                       "-extfile", base + ".ext", "-out", base + ".pem"});
}

absl::StatusOr<TestPki> MakeTestPki(const std::string& dir) {
  const std::string server_ext =
      "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
      "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n";
  const std::string client_ext =
      "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
      "extendedKeyUsage=clientAuth\n";
  for (absl::Status s : {MakeCa(dir, "ca"), MakeCa(dir, "other-ca"),
                         MakeLeaf(dir, "server", "ca", "2", server_ext),
                         MakeLeaf(dir, "client", "ca", "3", client_ext),
                         MakeLeaf(dir, "rogue", "other-ca", "4", client_ext)}) {
    if (!s.ok()) return s;
  }
  TestPki pki;
  pki.ca = ReadFile(dir + "/ca.pem");
  pki.other_ca = ReadFile(dir + "/other-ca.pem");
  pki.server_cert = ReadFile(dir + "/server.pem");
  pki.server_key = ReadFile(dir + "/server.key");
  pki.client_cert = ReadFile(dir + "/client.pem");
  pki.client_key = ReadFile(dir + "/client.key");
  pki.rogue_cert = ReadFile(dir + "/rogue.pem");
  pki.rogue_key = ReadFile(dir + "/rogue.key");
  return pki;
}

// ---- The suite: three daemons over the shared Redis -----------------------------

class SecurityTest : public ::testing::Test {
 protected:
  struct Suite {
    std::string dir;  // certificates and the tokens file
    TestPki pki;
    DaemonProcess tokens;  // plaintext, bearer tokens, TCP + unix socket, debug log
    DaemonProcess tls;     // TLS on TCP + unix socket, bearer tokens, debug log
    DaemonProcess mtls;    // mutual TLS, no tokens
  };

  static void SetUpTestSuite() {
    suite_ = new Suite;
    setup_ = StartSuite(*suite_);
  }

  static void TearDownTestSuite() {
    // Every client is gone by now (each test's are local), so each daemon
    // stops at once and cleanly.
    for (DaemonProcess* daemon : {&suite_->tokens, &suite_->tls, &suite_->mtls}) {
      if (daemon->running()) {
        EXPECT_EQ(daemon->Stop(), 0) << daemon->LogTail();
      }
    }
    std::error_code ignored;
    if (!suite_->dir.empty()) std::filesystem::remove_all(suite_->dir, ignored);
    delete suite_;
    suite_ = nullptr;
  }

  void SetUp() override { ASSERT_TRUE(setup_.ok()) << setup_; }

  static absl::Status StartSuite(Suite& s) {
    s.dir = MakeTempDir("tdstore-security-");
    if (s.dir.empty()) return absl::InternalError("cannot make a temporary directory");
    auto pki = MakeTestPki(s.dir);
    if (!pki.ok()) return pki.status();
    s.pki = *std::move(pki);
    const std::string tokens_file = s.dir + "/tokens";
    WriteFile(tokens_file, std::string("# security_test.cc\n") + kTeamAToken + "  rw  team-a/\n" +
                               kReaderToken + "  ro  *\n" + kAdminToken + "\trw\t*\n");

    const std::string redis = SharedRedis().url();
    const std::vector<std::string> tls = {"--tls-cert", s.dir + "/server.pem", "--tls-key",
                                          s.dir + "/server.key"};
    std::vector<std::string> tokens_args = {
        "--redis", redis, "--namespace", kTokensNs, "--tokens-file", tokens_file,
        "--unix-socket", s.tokens.dir() + "/td.sock", "--log-level", "debug"};
    std::vector<std::string> tls_args = {"--redis", redis, "--namespace", kTlsNs,
                                         "--tokens-file", tokens_file, "--unix-socket",
                                         s.tls.dir() + "/td.sock", "--log-level", "debug"};
    tls_args.insert(tls_args.end(), tls.begin(), tls.end());
    std::vector<std::string> mtls_args = {"--redis", redis, "--namespace", kMtlsNs,
                                          "--tls-client-ca", s.dir + "/ca.pem"};
    mtls_args.insert(mtls_args.end(), tls.begin(), tls.end());
    for (auto [daemon, args] : {std::pair{&s.tokens, tokens_args}, std::pair{&s.tls, tls_args},
                                std::pair{&s.mtls, mtls_args}}) {
      if (auto started = daemon->Start(args); !started.ok()) return started;
    }
    return absl::OkStatus();
  }

  static const TestPki& pki() { return suite_->pki; }
  static DaemonProcess& tokens_daemon() { return suite_->tokens; }
  static DaemonProcess& tls_daemon() { return suite_->tls; }
  static DaemonProcess& mtls_daemon() { return suite_->mtls; }

  // Options for the TLS daemons: trusting `ca`, with the admin token.
  static ClientOptions Tls(const std::string& ca, const std::string& token = kAdminToken) {
    ClientOptions options = WithToken(token);
    options.tls = true;
    options.tls_root_ca_pem = ca;
    return options;
  }

  // A write and read of a random tensor through `client` (a new dict).
  static void ExpectRoundTrip(Client& client) {
    const std::string name = "team-a/" + UniqueDictName();
    const at::Tensor value = RandomTensor(at::kDouble, {3, 5}, 7);
    Dict td = client.create(name, {3});
    td.set({"obs", "x"}, value);
    EXPECT_TRUE(SameBytes(value, client.open(name).get({"obs", "x"})));
    client.drop(name);
  }

  static inline Suite* suite_ = nullptr;
  static inline absl::Status setup_;
};

// ---- Tokens -------------------------------------------------------------------

TEST_F(SecurityTest, NoTokenIsUnauthenticated) {
  Client admin(tokens_daemon().address(), WithToken(kAdminToken));
  const std::string name = "team-a/" + UniqueDictName();
  admin.create(name, {2}).set("x", at::ones({2}));
  const auto before = NamespaceSnapshot(kTokensNs);
  ASSERT_FALSE(before.empty());

  // Over TCP and over the unix socket alike: the socket is no side door.
  for (const std::string& address : tokens_daemon().addresses()) {
    Client anonymous(address, WithToken(""));
    for (const auto& call : std::vector<std::function<void()>>{
             [&] { anonymous.server_info(); }, [&] { anonymous.list(); },
             [&] { anonymous.open(name); }, [&] { anonymous.create(name + ".new", {1}); },
             [&] { anonymous.rename(name, name + ".renamed"); },
             [&] { anonymous.drop(name); }}) {
      Error e = ErrorOf(call);
      EXPECT_EQ(e.code(), StatusCode::kUnauthenticated) << address << ": " << e.what();
      EXPECT_EQ(e.message(), "this tdstored requires a token: send 'authorization: Bearer <token>'");
    }
  }
  EXPECT_TRUE(NamespaceSnapshot(kTokensNs) == before) << "a denied call changed Redis";
}

TEST_F(SecurityTest, UnknownTokenIsUnauthenticated) {
  Client admin(tokens_daemon().address(), WithToken(kAdminToken));
  const std::string name = "team-a/" + UniqueDictName();
  admin.create(name, {2}).set("x", at::ones({2}));
  const auto before = NamespaceSnapshot(kTokensNs);
  ASSERT_FALSE(before.empty());

  // A token nobody has, and a known one short of its last character.
  for (const std::string& token : {std::string(kUnknownToken), kTruncatedToken}) {
    Client stranger(tokens_daemon().address(), WithToken(token));
    for (const auto& call : std::vector<std::function<void()>>{
             [&] { stranger.server_info(); }, [&] { stranger.list(); },
             [&] { stranger.open(name); }, [&] { stranger.create(name + ".new", {1}); },
             [&] { stranger.drop(name); }}) {
      Error e = ErrorOf(call);
      EXPECT_EQ(e.code(), StatusCode::kUnauthenticated) << e.what();
      EXPECT_EQ(e.message(), "unknown token");
    }
  }
  EXPECT_TRUE(NamespaceSnapshot(kTokensNs) == before) << "a denied call changed Redis";
}

// What the client library never sends: a header that is not "Bearer <token>".
TEST_F(SecurityTest, MalformedAuthorizationIsUnauthenticated) {
  auto stub = v1::TdStore::NewStub(
      grpc::CreateChannel(tokens_daemon().address(), grpc::InsecureChannelCredentials()));
  for (const std::string& header :
       {std::string("Basic ") + kAdminToken, std::string("bearer ") + kAdminToken,
        std::string(kAdminToken), std::string("Bearer  ") + kAdminToken}) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(10));
    context.AddMetadata("authorization", header);
    v1::ListDictsResponse response;
    grpc::Status status = stub->ListDicts(&context, v1::ListDictsRequest(), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << header;
    EXPECT_FALSE(Contains(status.error_message(), kAdminToken)) << status.error_message();
  }
}

TEST_F(SecurityTest, RightTokensReadAndWriteTheirDicts) {
  Client team_a(tokens_daemon().address(), WithToken(kTeamAToken));
  ExpectRoundTrip(team_a);
  Client admin(tokens_daemon().address(), WithToken(kAdminToken));
  EXPECT_TRUE(admin.server_info().redis_ok);
  const std::string elsewhere = "anywhere/" + UniqueDictName();
  admin.create(elsewhere, {1});
  admin.drop(elsewhere);
  // Over the unix socket a token is fine without TLS: it never leaves the host.
  Client by_socket(tokens_daemon().addresses().at(1), WithToken(kTeamAToken));
  ExpectRoundTrip(by_socket);
}

TEST_F(SecurityTest, DictOutsideTheTokensPrefixesIsPermissionDenied) {
  Client admin(tokens_daemon().address(), WithToken(kAdminToken));
  const std::string theirs = "team-b/" + UniqueDictName();
  admin.create(theirs, {2}).set("x", at::ones({2}));
  Client team_a(tokens_daemon().address(), WithToken(kTeamAToken));
  const auto before = NamespaceSnapshot(kTokensNs);
  ASSERT_FALSE(before.empty());

  struct Denied {
    std::string what;
    std::string dict;  // the name the message must carry
    std::function<void()> call;
  };
  const std::string new_b = "team-b/" + UniqueDictName();
  // A prefix is matched byte for byte: "team-a" and "team-ab/x" are not under "team-a/".
  const std::string no_slash = "team-a";
  const std::string longer = "team-ab/" + UniqueDictName();
  for (const Denied& d : std::vector<Denied>{
           {"open (read)", theirs, [&] { team_a.open(theirs); }},
           {"create", new_b, [&] { team_a.create(new_b, {1}); }},
           {"drop", theirs, [&] { team_a.drop(theirs); }},
           {"create without the slash", no_slash, [&] { team_a.create(no_slash, {1}); }},
           {"create under a longer prefix", longer, [&] { team_a.create(longer, {1}); }}}) {
    Error e = ErrorOf(d.call);
    EXPECT_EQ(e.code(), StatusCode::kPermissionDenied) << d.what << ": " << e.what();
    EXPECT_EQ(e.message(),
              "this token may not access dict '" + d.dict + "' (outside its prefixes)")
        << d.what;
  }
  EXPECT_TRUE(NamespaceSnapshot(kTokensNs) == before) << "a denied call changed Redis";
  EXPECT_TRUE(SameBytes(at::ones({2}), admin.open(theirs).get("x")));
}

TEST_F(SecurityTest, ReadOnlyTokenReadsButCannotWrite) {
  Client admin(tokens_daemon().address(), WithToken(kAdminToken));
  const std::string name = "shared/" + UniqueDictName();
  const at::Tensor x = RandomTensor(at::kFloat, {4, 3}, 1);
  const at::Tensor y = RandomTensor(at::kInt, {4}, 2);
  admin.create(name, {4}).update({{"x", x}, {Key({"nested", "y"}), y}});

  // Every read works.
  Client reader(tokens_daemon().address(), WithToken(kReaderToken));
  Dict td = reader.open(name);
  EXPECT_TRUE(SameBytes(x, td.get("x")));
  EXPECT_TRUE(SameBytes(y, td.get_many({Key("nested")}).at({"nested", "y"})));
  EXPECT_TRUE(SameBytes(x.slice(0, 1, 3), td.index(Slice(1, 3)).at("x")));
  EXPECT_EQ(td.to_local().leaves.size(), 2u);
  EXPECT_EQ(td.keys(true, true), (std::vector<Key>{Key({"nested", "y"}), Key("x")}));
  EXPECT_TRUE(td.contains("nested"));
  EXPECT_EQ(td.describe().leaves.size(), 2u);
  const std::vector<std::string> names = reader.list();
  EXPECT_NE(std::find(names.begin(), names.end(), name), names.end());
  EXPECT_TRUE(reader.server_info().redis_ok);

  // Every write is refused, and changes nothing.
  const auto before = NamespaceSnapshot(kTokensNs);
  ASSERT_FALSE(before.empty());
  const std::string other = "shared/" + UniqueDictName();
  struct Denied {
    std::string what;
    std::string dict;
    std::function<void()> call;
  };
  for (const Denied& d : std::vector<Denied>{
           {"create", other, [&] { reader.create(other, {4}); }},
           {"update", name, [&] { td.update({{"x", at::zeros({4, 3})}}); }},
           {"set a new leaf", name, [&] { td.set("z", at::zeros({4})); }},
           {"set_index", name, [&] { td.set_index(Slice(0, 2), "x", at::zeros({2, 3})); }},
           {"erase a leaf", name, [&] { td.erase({"nested", "y"}); }},
           {"drop", name, [&] { reader.drop(name); }},
           {"rename", name, [&] { reader.rename(name, other); }}}) {
    Error e = ErrorOf(d.call);
    EXPECT_EQ(e.code(), StatusCode::kPermissionDenied) << d.what << ": " << e.what();
    EXPECT_EQ(e.message(), "this token is read-only: it may not change dict '" + d.dict + "'")
        << d.what;
  }
  EXPECT_TRUE(NamespaceSnapshot(kTokensNs) == before) << "a denied call changed Redis";
  EXPECT_TRUE(SameBytes(x, td.get("x")));
}

TEST_F(SecurityTest, RenameNeedsWriteAccessToBothNames) {
  Client admin(tokens_daemon().address(), WithToken(kAdminToken));
  Client team_a(tokens_daemon().address(), WithToken(kTeamAToken));
  const std::string mine = "team-a/" + UniqueDictName();
  const std::string theirs = "team-b/" + UniqueDictName();
  team_a.create(mine, {2}).set("x", at::ones({2}));
  admin.create(theirs, {2}).set("x", at::zeros({2}));
  const auto before = NamespaceSnapshot(kTokensNs);
  ASSERT_FALSE(before.empty());

  // Out of the token's prefixes, and into them from another team's.
  const std::string out_to = "team-b/" + UniqueDictName();
  Error e = ErrorOf([&] { team_a.rename(mine, out_to); });
  EXPECT_EQ(e.code(), StatusCode::kPermissionDenied) << e.what();
  EXPECT_EQ(e.message(), "this token may not access dict '" + out_to + "' (outside its prefixes)");
  e = ErrorOf([&] { team_a.rename(theirs, "team-a/" + UniqueDictName()); });
  EXPECT_EQ(e.code(), StatusCode::kPermissionDenied) << e.what();
  EXPECT_EQ(e.message(), "this token may not access dict '" + theirs + "' (outside its prefixes)");
  EXPECT_TRUE(NamespaceSnapshot(kTokensNs) == before) << "a denied rename changed Redis";

  // Within the prefix it works.
  const std::string renamed = "team-a/" + UniqueDictName();
  team_a.rename(mine, renamed);
  EXPECT_TRUE(SameBytes(at::ones({2}), team_a.open(renamed).get("x")));
}

TEST_F(SecurityTest, ListDictsShowsOnlyTheTokensPrefixes) {
  Client admin(tokens_daemon().address(), WithToken(kAdminToken));
  const std::vector<std::string> created = {
      "team-a/" + UniqueDictName(), "team-b/" + UniqueDictName(),
      "team-ab/" + UniqueDictName(), "other/" + UniqueDictName()};
  for (const std::string& name : created) admin.create(name, {1});
  auto has = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };

  Client team_a(tokens_daemon().address(), WithToken(kTeamAToken));
  const std::vector<std::string> seen = team_a.list();
  EXPECT_TRUE(has(seen, created[0]));
  for (const std::string& name : seen) EXPECT_EQ(name.rfind("team-a/", 0), 0u) << name;

  // "*" sees everything, read-only or not.
  for (const char* token : {kReaderToken, kAdminToken}) {
    Client everyone(tokens_daemon().address(), WithToken(token));
    const std::vector<std::string> all = everyone.list();
    for (const std::string& name : created) EXPECT_TRUE(has(all, name)) << name;
  }
}

// ---- TLS ------------------------------------------------------------------------

TEST_F(SecurityTest, TlsClientTrustingTheRightCaWorks) {
  Client client(tls_daemon().address(), Tls(pki().ca));
  ExpectRoundTrip(client);
  // The certificate's other name, and the unix socket (which gRPC checks
  // against "localhost"): TLS there too.
  ClientOptions by_name = Tls(pki().ca);
  by_name.tls_server_name = "localhost";
  Client named(tls_daemon().address(), by_name);
  EXPECT_TRUE(named.server_info().redis_ok);
  Client by_socket(tls_daemon().addresses().at(1), Tls(pki().ca, kTeamAToken));
  ExpectRoundTrip(by_socket);
}

TEST_F(SecurityTest, TlsClientTrustingAnotherCaIsUnavailable) {
  Client client(tls_daemon().address(), Tls(pki().other_ca));
  Error e = ErrorOf([&] { client.server_info(); });
  EXPECT_EQ(e.code(), StatusCode::kUnavailable) << e.what();
}

TEST_F(SecurityTest, TlsServerNameMustMatchTheCertificate) {
  ClientOptions options = Tls(pki().ca);
  options.tls_server_name = "elsewhere.example";
  Client client(tls_daemon().address(), options);
  Error e = ErrorOf([&] { client.server_info(); });
  EXPECT_EQ(e.code(), StatusCode::kUnavailable) << e.what();
}

TEST_F(SecurityTest, PlaintextClientCannotTalkToTlsServer) {
  for (const std::string& address : tls_daemon().addresses()) {
    Client client(address, WithToken(kAdminToken));
    Error e = ErrorOf([&] { client.server_info(); });
    EXPECT_EQ(e.code(), StatusCode::kUnavailable) << address << ": " << e.what();
  }
}

TEST_F(SecurityTest, TlsClientCannotTalkToPlaintextServer) {
  Client client(tokens_daemon().address(), Tls(pki().ca));
  Error e = ErrorOf([&] { client.server_info(); });
  EXPECT_EQ(e.code(), StatusCode::kUnavailable) << e.what();
}

TEST_F(SecurityTest, MutualTlsNeedsAClientCertificateFromTheCa) {
  // No certificate, and one signed by another CA: refused in the handshake.
  ClientOptions rogue = Tls(pki().ca, "");
  rogue.tls_client_cert_pem = pki().rogue_cert;
  rogue.tls_client_key_pem = pki().rogue_key;
  for (const ClientOptions& options : {Tls(pki().ca, ""), rogue}) {
    Client client(mtls_daemon().address(), options);
    Error e = ErrorOf([&] { client.server_info(); });
    EXPECT_EQ(e.code(), StatusCode::kUnavailable) << e.what();
  }
  ClientOptions signed_by_ca = Tls(pki().ca, "");
  signed_by_ca.tls_client_cert_pem = pki().client_cert;
  signed_by_ca.tls_client_key_pem = pki().client_key;
  Client client(mtls_daemon().address(), signed_by_ca);
  ExpectRoundTrip(client);
}

// The `tdstore` CLI reaches a TLS + tokens daemon with --tls-ca and
// --token-file (or TDSTORE_TOKEN), and fails UNAUTHENTICATED without a token.
TEST_F(SecurityTest, CliUsesTokenAndTls) {
  const std::string dir = suite_->dir;
  WriteFile(dir + "/admin.token", std::string(kAdminToken) + "\n");
  const std::string out = dir + "/cli.out";
  const std::vector<std::string> base = {TDSTORE_CLI_BIN, "--addr", tls_daemon().address(),
                                         "--tls-ca", dir + "/ca.pem"};
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::remove(out.c_str());
    return RunToCompletion(argv, out);
  };
  EXPECT_EQ(run({"--token-file", dir + "/admin.token", "ls"}), 0) << ReadFile(out);
  EXPECT_EQ(run({"--token-file", dir + "/admin.token", "server"}), 0) << ReadFile(out);
  EXPECT_TRUE(Contains(ReadFile(out), "TLS") || Contains(ReadFile(out), "redis")) << ReadFile(out);
  EXPECT_EQ(run({"ls"}), 1);
  EXPECT_TRUE(Contains(ReadFile(out), "UNAUTHENTICATED")) << ReadFile(out);
  EXPECT_FALSE(Contains(ReadFile(out), kAdminToken));
  EXPECT_EQ(run({"--token-file", dir + "/no-such-file", "ls"}), 1);
  EXPECT_TRUE(Contains(ReadFile(out), "no-such-file")) << ReadFile(out);
}

// ---- Secrets and files ------------------------------------------------------------

TEST_F(SecurityTest, LogsNeverHoldATokenEvenAtDebugLevel) {
  // Every token, right or wrong, on every path a token takes.
  const std::vector<std::string> tokens = {kTeamAToken, kReaderToken, kAdminToken, kUnknownToken,
                                           kTruncatedToken};
  for (const std::string& token : tokens) {
    std::vector<Client> clients = {Client(tokens_daemon().address(), WithToken(token)),
                                   Client(tokens_daemon().addresses().at(1), WithToken(token)),
                                   Client(tls_daemon().address(), Tls(pki().ca, token)),
                                   Client(tls_daemon().address(), WithToken(token))};
    for (Client& client : clients) {
      try {
        client.list();
        client.create("team-b/" + UniqueDictName(), {1});
      } catch (const Error& e) {
        EXPECT_FALSE(Contains(e.what(), token)) << e.what();
      }
    }
  }
  for (DaemonProcess* daemon : {&tokens_daemon(), &tls_daemon(), &mtls_daemon()}) {
    const std::string log = ReadFile(daemon->dir() + "/tdstored.log");
    EXPECT_TRUE(Contains(log, "serving on")) << daemon->LogTail();
    for (const std::string& token : tokens) {
      EXPECT_FALSE(Contains(log, token)) << "token in " << daemon->dir() << "/tdstored.log";
    }
  }
  // The debug call lines are there: the check above did look at them.
  EXPECT_TRUE(Contains(ReadFile(tokens_daemon().dir() + "/tdstored.log"), "UNAUTHENTICATED"));
}

TEST_F(SecurityTest, UnixSocketIsOwnerAndGroupOnly) {
  for (DaemonProcess* daemon : {&tokens_daemon(), &tls_daemon()}) {
    struct stat st;
    ASSERT_EQ(stat((daemon->dir() + "/td.sock").c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0660u) << std::oct << (st.st_mode & 07777);
  }
}

// ---- Settings that need a daemon of their own ------------------------------------

TEST(SecurityConfig, TokenIsNeverSentInTheClearBeyondLoopback) {
  ClientOptions options;
  options.token = kAdminToken;
  for (const char* remote : {"10.1.2.3:50051", "tdstore.example:50051", "dns:///10.1.2.3:50051",
                             "127.0.0.1.example:50051"}) {
    const auto start = steady_clock::now();
    Error e = ErrorOf([&] { Client client(remote, options); });
    // Refused in the constructor: no channel exists, so nothing connected.
    EXPECT_LT(steady_clock::now() - start, seconds(1));
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << e.what();
    EXPECT_EQ(e.message(), std::string("refusing to send a token in the clear to ") + remote +
                               ": enable TLS (ClientOptions::tls) or connect over loopback");
    EXPECT_FALSE(Contains(e.what(), kAdminToken));
  }
  // Loopback and unix sockets take a token in the clear; TLS goes anywhere;
  // no token goes anywhere. (A Client does not connect until its first call.)
  for (const char* local : {"127.0.0.1:50051", "localhost:50051", "[::1]:50051",
                            "unix:///run/tdstore/td.sock"}) {
    EXPECT_NO_THROW({ Client client(local, options); }) << local;
  }
  ClientOptions tls = options;
  tls.tls = true;
  EXPECT_NO_THROW({ Client client("10.1.2.3:50051", tls); });
  EXPECT_NO_THROW({ Client client("10.1.2.3:50051", ClientOptions()); });
}

// Tokens rotate without a restart: SIGHUP reloads --tokens-file; a file
// that no longer parses keeps the tokens in force.
TEST(SecurityConfig, SighupReloadsTheTokensFile) {
  DaemonProcess daemon;
  const std::string tokens = daemon.dir() + "/tokens";
  WriteFile(tokens, std::string(kAdminToken) + " rw *\n");
  ASSERT_TRUE(daemon
                  .Start({"--redis", SharedRedis().url(), "--namespace", "sec-hup",
                          "--tokens-file", tokens})
                  .ok());
  {
    Client old_token(daemon.address(), WithToken(kAdminToken));
    Client new_token(daemon.address(), WithToken(kTeamAToken));
    EXPECT_NO_THROW(old_token.list());
    EXPECT_EQ(ErrorOf([&] { new_token.list(); }).code(), StatusCode::kUnauthenticated);

    WriteFile(tokens, std::string(kTeamAToken) + " rw team-a/\n");
    ASSERT_EQ(kill(daemon.pid(), SIGHUP), 0);
    bool swapped = false;
    for (int i = 0; i < 100 && !swapped; ++i) {
      try {
        new_token.list();
        swapped = true;
      } catch (const Error&) {
        std::this_thread::sleep_for(milliseconds(20));
      }
    }
    EXPECT_TRUE(swapped) << daemon.LogTail();
    EXPECT_EQ(ErrorOf([&] { old_token.list(); }).code(), StatusCode::kUnauthenticated);

    // A broken file (no token at all) is refused; the team-a token stays.
    WriteFile(tokens, "# emptied by mistake\n");
    ASSERT_EQ(kill(daemon.pid(), SIGHUP), 0);
    for (int i = 0; i < 100 && !Contains(ReadFile(daemon.dir() + "/tdstored.log"),
                                         "keeping the current tokens");
         ++i) {
      std::this_thread::sleep_for(milliseconds(20));
    }
    EXPECT_TRUE(Contains(ReadFile(daemon.dir() + "/tdstored.log"), "keeping the current tokens"))
        << daemon.LogTail();
    EXPECT_NO_THROW(new_token.list());
    EXPECT_FALSE(Contains(ReadFile(daemon.dir() + "/tdstored.log"), kTeamAToken));
  }
  EXPECT_EQ(daemon.Stop(), 0) << daemon.LogTail();
}

TEST(SecurityConfig, RedisPasswordInTheUrlIsNeverShown) {
  const std::string password = "s3cr3t-pw";
  DaemonProcess daemon;
  const std::string url =
      "redis://:" + password + "@127.0.0.1:" + std::to_string(PickFreePort());  // nobody there
  absl::Status started = daemon.Start({"--redis", url, "--namespace", "sec-pw"});
  ASSERT_TRUE(started.ok()) << started;
  {
    ClientOptions options;
    options.retry_for = milliseconds(0);
    options.timeout = seconds(10);
    Client client(daemon.address(), options);
    // GetServerInfo answers (Redis down is part of its answer) with the
    // address redacted; calls that need Redis fail UNAVAILABLE.
    const Client::ServerInfo info = client.server_info();
    EXPECT_FALSE(info.redis_ok);
    EXPECT_TRUE(Contains(info.backend, ":***@127.0.0.1:")) << info.backend;
    EXPECT_FALSE(Contains(info.backend, password)) << info.backend;
    for (const auto& call : std::vector<std::function<void()>>{
             [&] { client.open("d"); }, [&] { client.list(); },
             [&] { client.create("d", {1}); }}) {
      Error e = ErrorOf(call);
      EXPECT_EQ(e.code(), StatusCode::kUnavailable) << e.what();
      EXPECT_FALSE(Contains(e.what(), password)) << e.what();
    }
  }
  EXPECT_EQ(daemon.Stop(), 0) << daemon.LogTail();
  const std::string log = ReadFile(daemon.dir() + "/tdstored.log");
  EXPECT_TRUE(Contains(log, "serving on")) << log;
  EXPECT_FALSE(Contains(log, password)) << log;
}

TEST(SecurityConfig, RedisPasswordFromFileWorksAndIsNeverShown) {
  const std::string password = "s3cr3t-pw-in-a-file";
  RedisServerOptions redis_options;
  redis_options.password = password;
  RedisServerProcess redis(redis_options);
  ASSERT_TRUE(redis.Start().ok());
  const std::string url = "redis://127.0.0.1:" + std::to_string(redis.port());

  // The right password from --redis-password-file: a full round trip.
  DaemonProcess good;
  WriteFile(good.dir() + "/redis-password", password + "\n");
  absl::Status started = good.Start({"--redis", url, "--redis-password-file",
                                     good.dir() + "/redis-password", "--namespace", "sec-pw"});
  ASSERT_TRUE(started.ok()) << started;
  {
    Client client(good.address(), WithToken(""));
    Dict td = client.create("d", {2});
    td.set("x", at::ones({2}));
    EXPECT_TRUE(SameBytes(at::ones({2}), td.get("x")));
  }
  EXPECT_EQ(good.Stop(), 0) << good.LogTail();
  EXPECT_FALSE(Contains(ReadFile(good.dir() + "/tdstored.log"), password));

  // A wrong one in the URL: calls fail (Redis' AUTH refusal passes through
  // as PERMISSION_DENIED), and say nothing of it.
  const std::string wrong = "wr0ng-s3cr3t-in-the-url";
  DaemonProcess bad;
  started = bad.Start({"--redis", "redis://:" + wrong + "@127.0.0.1:" +
                                      std::to_string(redis.port()),
                       "--namespace", "sec-pw"});
  ASSERT_TRUE(started.ok()) << started;
  {
    Client client(bad.address(), WithToken(""));
    Error e = ErrorOf([&] { client.list(); });
    // Not PERMISSION_DENIED: that would read as a refusal of the caller's
    // token. The operator's problem is named as such.
    EXPECT_EQ(e.code(), StatusCode::kFailedPrecondition) << e.what();
    EXPECT_TRUE(Contains(e.message(), "tdstored cannot use its Redis")) << e.what();
    EXPECT_TRUE(Contains(e.message(), "redis://:***@127.0.0.1:")) << e.what();
    EXPECT_FALSE(Contains(e.what(), wrong)) << e.what();
    EXPECT_FALSE(client.server_info().redis_ok);
  }
  EXPECT_EQ(bad.Stop(), 0) << bad.LogTail();
  const std::string log = ReadFile(bad.dir() + "/tdstored.log");
  EXPECT_FALSE(Contains(log, wrong)) << log;
}

TEST(SecurityConfig, BadTokensFileStopsTheDaemonNamingTheLine) {
  const std::string secret = "b4d-t0ken-never-logged-0123456789";
  struct Case {
    std::string text;     // of the tokens file
    std::string message;  // in the log
    std::string hidden;   // never in the log
  };
  const std::string good_line = std::string(kAdminToken) + " rw *\n";
  for (const Case& c : std::vector<Case>{
           {"# comment\n" + good_line + secret + " rw\n",
            "tokens file line 3: expected 'TOKEN ro|rw PREFIX[,PREFIX...]'", secret},
           {secret + " rx team-a/\n", "tokens file line 1: rights must be 'ro' or 'rw'", secret},
           {"tiny-tok rw *\n", "tokens file line 1: a token needs at least 16 characters",
            "tiny-tok"},
           {secret + " rw a/\n" + secret + " ro b/\n",
            "tokens file line 2: this token is listed twice", secret},
           {secret + " rw ,\n", "tokens file line 1: no dict-name prefix", secret},
           // Tokens enabled with no token at all would let everyone in.
           {"# nobody yet\n\n", "no token", kAdminToken}}) {
    DaemonProcess daemon;
    WriteFile(daemon.dir() + "/tokens", c.text);
    absl::Status started = daemon.Start({"--redis", SharedRedis().url(), "--namespace",
                                         "sec-bad", "--tokens-file", daemon.dir() + "/tokens"});
    EXPECT_FALSE(started.ok());
    EXPECT_TRUE(Contains(std::string(started.message()), "exited with status 2")) << started;
    const std::string log = ReadFile(daemon.dir() + "/tdstored.log");
    EXPECT_TRUE(Contains(log, c.message)) << log;
    EXPECT_FALSE(Contains(log, c.hidden)) << log;
  }
  // A file that is not there stops it too, before anything starts.
  DaemonProcess daemon;
  absl::Status started = daemon.Start({"--redis", SharedRedis().url(), "--namespace", "sec-bad",
                                       "--tokens-file", daemon.dir() + "/missing"});
  EXPECT_TRUE(Contains(std::string(started.message()), "exited with status 2")) << started;
  EXPECT_TRUE(Contains(ReadFile(daemon.dir() + "/tdstored.log"), "--tokens-file: cannot read"));
}

TEST(SecurityConfig, DefaultListenAddressIsLoopback) {
  const std::string dir = MakeTempDir("tdstore-security-help-");
  ASSERT_FALSE(dir.empty());
  EXPECT_EQ(RunToCompletion({TDSTORE_TDSTORED_BIN, "--help"}, dir + "/help.txt"), 0);
  const std::string help = ReadFile(dir + "/help.txt");
  EXPECT_TRUE(Contains(help, "--listen  (env TDSTORE_LISTEN, default '127.0.0.1:50051')")) << help;
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace
}  // namespace tdstore::testing
