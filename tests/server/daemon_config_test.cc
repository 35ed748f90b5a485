// tdstored's settings: every setting works as flag, environment variable
// and config-file line, with that precedence, and a bad one stops start-up
// with a message naming it.
#include "server/daemon_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace tdstore {
namespace {

using Env = std::map<std::string, std::string>;

absl::StatusOr<DaemonConfig> Parse(std::vector<std::string> args, const Env& env = {}) {
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return ParseDaemonConfig(static_cast<int>(argv.size()), argv.data(), env);
}

// A temporary file holding `text`, removed with the object.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/tdstore-config-test-XXXXXX";
    int fd = mkstemp(name);
    path_ = name;
    ssize_t written = write(fd, text.data(), text.size());
    (void)written;
    close(fd);
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(DaemonConfig, DefaultsAreSafe) {
  auto c = Parse({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->listen, "127.0.0.1:50051");  // loopback unless told otherwise
  EXPECT_TRUE(c->tls_cert_pem.empty());
  EXPECT_TRUE(c->tokens_file.empty());
  EXPECT_EQ(c->log_level, "info");
  EXPECT_EQ(c->limits.max_concurrent_streams, 64);
  EXPECT_EQ(c->store.max_indexed_bytes, 256ll << 20);
}

TEST(DaemonConfig, FlagBeatsEnvironmentBeatsFile) {
  TempFile file(
      "# a comment\n"
      "\n"
      "namespace = from-file\n"
      "rows-per-block = 7\n"
      "max-dicts = 11\n"
      "log-level = \"debug\"\n");
  auto c = Parse({"--config", file.path(), "--namespace", "from-flag"},
                 {{"TDSTORE_NAMESPACE", "from-env"}, {"TDSTORE_ROWS_PER_BLOCK", "9"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->store.ns, "from-flag");
  EXPECT_EQ(c->store.default_rows_per_block, 9);
  EXPECT_EQ(c->store.max_dicts, 11);
  EXPECT_EQ(c->log_level, "debug");
  EXPECT_EQ(c->config_file, file.path());

  // TDSTORE_CONFIG names the file too; --flag=value works.
  c = Parse({"--max-leaves-per-call=5"}, {{"TDSTORE_CONFIG", file.path()}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->store.ns, "from-file");
  EXPECT_EQ(c->limits.max_leaves_per_call, 5);
}

TEST(DaemonConfig, EveryLimitIsSettable) {
  auto c = Parse({"--max-call-bytes", "1000", "--max-index-length", "10",
                  "--max-leaves-per-call", "3", "--max-concurrent-streams", "2",
                  "--max-name-bytes", "16", "--max-path-bytes", "20", "--max-dicts", "4",
                  "--idle-stream-timeout-ms", "800", "--max-indexed-bytes", "4096"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->limits.max_call_bytes, 1000);
  EXPECT_EQ(c->limits.max_index_length, 10);
  EXPECT_EQ(c->limits.max_leaves_per_call, 3);
  EXPECT_EQ(c->limits.max_concurrent_streams, 2);
  EXPECT_EQ(c->limits.max_name_bytes, 16);
  EXPECT_EQ(c->limits.max_path_bytes, 20);
  EXPECT_EQ(c->store.max_dicts, 4);
  EXPECT_EQ(c->limits.idle_stream_timeout.count(), 800);
  EXPECT_EQ(c->store.max_indexed_bytes, 4096);
}

TEST(DaemonConfig, ProtectionSettingsAreFlagsVariablesAndFileLines) {
  auto c = Parse({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->namespace_quota_auto);
  EXPECT_EQ(c->store.dict_quota_bytes, 0);
  EXPECT_EQ(c->redis_maxmemory_percent, 50);
  EXPECT_EQ(c->redis_maxmemory_bytes, 0);
  EXPECT_EQ(c->store.memory_budget_bytes, int64_t{2} << 30);
  EXPECT_EQ(c->store.memory_budget_wait.count(), 10000);

  TempFile file("namespace-quota-bytes = 5000\nmemory-budget-bytes = 7000\n");
  c = Parse({"--config", file.path(), "--dict-quota-bytes", "300", "--redis-maxmemory", "25%"},
            {{"TDSTORE_MEMORY_BUDGET_WAIT_MS", "0"}, {"TDSTORE_MEMORY_BUDGET_BYTES", "9000"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->namespace_quota_auto);
  EXPECT_EQ(c->store.namespace_quota_bytes, 5000);
  EXPECT_EQ(c->store.dict_quota_bytes, 300);
  EXPECT_EQ(c->store.memory_budget_bytes, 9000);  // the variable beats the file
  EXPECT_EQ(c->store.memory_budget_wait.count(), 0);
  EXPECT_EQ(c->redis_maxmemory_percent, 25);

  c = Parse({"--redis-maxmemory", "1073741824", "--namespace-quota-bytes", "0"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->redis_maxmemory_bytes, 1073741824);
  EXPECT_FALSE(c->namespace_quota_auto);
  EXPECT_EQ(c->store.namespace_quota_bytes, 0);  // no quota
}

TEST(DaemonConfig, BadSettingsNameThemselves) {
  struct Case {
    std::vector<std::string> args;
    Env env;
    std::string must_mention;
  };
  const std::vector<Case> cases = {
      {{"--no-such-flag", "1"}, {}, "--no-such-flag"},
      {{"--max-dicts", "0"}, {}, "--max-dicts"},
      {{"--max-dicts", "lots"}, {}, "--max-dicts"},
      {{"--max-name-bytes", "129"}, {}, "--max-name-bytes"},
      {{"--log-level", "chatty"}, {}, "--log-level"},
      {{"--metrics-listen", "9464"}, {}, "--metrics-listen"},
      {{}, {{"TDSTORE_MAX_CALL_BYTES", "-5"}}, "TDSTORE_MAX_CALL_BYTES"},
      {{"--tls-cert", "/nonexistent/cert.pem"}, {}, "--tls-cert"},
      {{"--tokens-file", "/nonexistent/tokens"}, {}, "--tokens-file"},
      {{"--config", "/nonexistent/tdstored.conf"}, {}, "--config"},
      {{"--listen", "none"}, {}, "nothing to listen on"},
      {{"--redis-password", "x"}, {}, "--redis-password"},  // environment or config file only
      {{"--namespace"}, {}, "--namespace needs a value"},
      {{"--namespace-quota-bytes", "-1"}, {}, "--namespace-quota-bytes"},
      {{"--dict-quota-bytes", "some"}, {}, "--dict-quota-bytes"},
      {{"--redis-maxmemory", "101%"}, {}, "--redis-maxmemory"},
      {{"--redis-maxmemory", "1000"}, {}, "--redis-maxmemory"},
      {{"--memory-budget-bytes", "0"}, {}, "--memory-budget-bytes"},
      {{"--memory-budget-wait-ms", "-3"}, {}, "--memory-budget-wait-ms"},
  };
  for (const Case& c : cases) {
    auto parsed = Parse(c.args, c.env);
    ASSERT_FALSE(parsed.ok()) << c.must_mention;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(parsed.status().message()).find(c.must_mention), std::string::npos)
        << parsed.status();
  }
}

TEST(DaemonConfig, ConfigFileErrorsNameFileAndLine) {
  TempFile unknown("namespace = a\nbogus = 1\n");
  auto c = Parse({"--config", unknown.path()});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find(unknown.path() + ":2"), std::string::npos)
      << c.status();
  EXPECT_NE(std::string(c.status().message()).find("bogus"), std::string::npos);

  TempFile invalid("max-dicts = -1\n");
  c = Parse({"--config", invalid.path()});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find(invalid.path() + ":1"), std::string::npos)
      << c.status();

  TempFile no_equals("namespace a\n");
  c = Parse({"--config", no_equals.path()});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("name = value"), std::string::npos);
}

TEST(DaemonConfig, TlsSettingsGoTogether) {
  TempFile pem("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
  TempFile not_pem("hello\n");
  EXPECT_FALSE(Parse({"--tls-cert", pem.path()}).ok());  // no key
  EXPECT_FALSE(Parse({"--tls-client-ca", pem.path()}).ok());  // no cert
  EXPECT_FALSE(Parse({"--tls-cert", not_pem.path(), "--tls-key", pem.path()}).ok());
  auto c = Parse({"--tls-cert", pem.path(), "--tls-key", pem.path()});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->tls_cert_pem.empty());
}

TEST(DaemonConfig, PasswordsComeFromFileOrEnvironmentAndAreNeverEchoed) {
  TempFile password("s3cret-from-file\n");
  auto c = Parse({"--redis-password-file", password.path()});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->redis_password, "s3cret-from-file");
  c = Parse({}, {{"TDSTORE_REDIS_PASSWORD", "s3cret-env"}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->redis_password, "s3cret-env");
  // A stray argument may be a URL with a password: it is not repeated.
  c = Parse({"redis://:hunter2@host:6379"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(std::string(c.status().message()).find("hunter2"), std::string::npos);
}

TEST(DaemonConfig, VersionIsAFlagOfItsOwnAndSkipsTheRest) {
  auto c = Parse({"--version"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->version);
  EXPECT_FALSE(c->help);
  // Nothing else is read or checked: a config file that does not exist
  // does not stop it.
  c = Parse({"--config", "/no/such/file", "--version"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->version);
  EXPECT_FALSE(Parse({}).value().version);
  EXPECT_NE(DaemonUsage().find("--version"), std::string::npos);
}

TEST(DaemonConfig, HelpListsEverySettingWithItsDefault) {
  const std::string help = DaemonUsage();
  for (const char* name :
       {"--config", "--listen", "--unix-socket", "--redis", "--tls-cert", "--tls-key",
        "--tls-client-ca", "--tokens-file", "--max-call-bytes", "--max-index-length",
        "--max-leaves-per-call", "--max-concurrent-streams", "--max-name-bytes",
        "--max-path-bytes", "--max-dicts", "--idle-stream-timeout-ms", "--metrics-listen",
        "--log-level", "TDSTORE_REDIS_PASSWORD"}) {
    EXPECT_NE(help.find(name), std::string::npos) << name;
  }
  EXPECT_NE(help.find("default '127.0.0.1:50051'"), std::string::npos);
}

// One setting's line in --help: "  --NAME  (env ENV, default 'VALUE')".
struct HelpDefault {
  std::string name, env, value;
};

// Every setting --help gives a default for, read from the text itself
// (--config, outside the table, is left out).
std::vector<HelpDefault> HelpDefaults() {
  std::vector<HelpDefault> out;
  std::istringstream help(DaemonUsage());
  const std::string env_tag = "  (env ", default_tag = ", default '";
  for (std::string line; std::getline(help, line);) {
    if (line.rfind("  --", 0) != 0) continue;
    const size_t env_at = line.find(env_tag);
    const size_t default_at = line.find(default_tag);
    if (env_at == std::string::npos || default_at == std::string::npos) continue;  // --version
    EXPECT_EQ(line.substr(line.size() - 2), "')") << line;
    HelpDefault d;
    d.name = line.substr(4, env_at - 4);
    if (d.name.find(' ') != std::string::npos) continue;  // "--config FILE"
    d.env = line.substr(env_at + env_tag.size(), default_at - env_at - env_tag.size());
    const size_t value_at = default_at + default_tag.size();
    d.value = line.substr(value_at, line.size() - 2 - value_at);
    out.push_back(d);
  }
  return out;
}

// A default is written once, in the structs' initialisers; --help shows it
// by reading a default config. Each default --help shows must therefore be
// what a config gets with nothing set, and read back as a flag, a variable
// and a config-file line, must give that same config.
TEST(DaemonConfig, HelpDefaultsAreWhatNothingSetGivesAndParseBack) {
  auto defaults = Parse({});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  const auto want = ShowDaemonSettings(*defaults);
  const std::vector<HelpDefault> help = HelpDefaults();

  // --help has a line for every setting but the environment-only one, in
  // the table's order, showing the default config's value.
  std::vector<std::pair<std::string, std::string>> shown;
  for (const HelpDefault& d : help) shown.emplace_back(d.name, d.value);
  std::vector<std::pair<std::string, std::string>> want_shown;
  for (const auto& [name, value] : want) {
    if (name != "redis-password") want_shown.emplace_back(name, value);
  }
  EXPECT_EQ(shown, want_shown);
  ASSERT_GE(help.size(), 30u);  // the parse above found the lines

  std::string file_text;
  for (const HelpDefault& d : help) {
    SCOPED_TRACE(d.name + " = '" + d.value + "'");
    auto flag = Parse({"--" + d.name, d.value});
    ASSERT_TRUE(flag.ok()) << flag.status();
    EXPECT_EQ(ShowDaemonSettings(*flag), want);
    auto variable = Parse({}, {{d.env, d.value}});
    ASSERT_TRUE(variable.ok()) << variable.status();
    EXPECT_EQ(ShowDaemonSettings(*variable), want);
    file_text += d.name + " = " + d.value + "\n";
  }
  TempFile file(file_text);
  auto from_file = Parse({"--config", file.path()});
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(ShowDaemonSettings(*from_file), want);

  // Spot checks against the structs themselves, so that a show reading
  // the wrong field cannot hide a wrong default.
  const DaemonConfig fresh;
  std::map<std::string, std::string> by_name(shown.begin(), shown.end());
  EXPECT_EQ(by_name["listen"], fresh.listen);
  EXPECT_EQ(by_name["max-dicts"], std::to_string(fresh.store.max_dicts));
  EXPECT_EQ(by_name["max-call-bytes"], std::to_string(fresh.limits.max_call_bytes));
  EXPECT_EQ(by_name["idle-stream-timeout-ms"],
            std::to_string(fresh.limits.idle_stream_timeout.count()));
  EXPECT_EQ(by_name["pending-timeout-ms"], std::to_string(fresh.store.pending_timeout.count()));
  EXPECT_EQ(by_name["sweep-interval-ms"], std::to_string(fresh.sweep_interval.count()));
}

// ShowDaemonSettings shows what was parsed, in the parser's syntax, and
// never a secret.
TEST(DaemonConfig, ShowShowsParsedValuesButNoSecret) {
  TempFile pem("-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleQ==\n-----END PRIVATE KEY-----\n");
  auto c = Parse({"--listen", "none", "--unix-socket", "/tmp/td.sock", "--max-dicts", "4",
                  "--redis-maxmemory", "25%", "--pending-timeout-ms", "1500", "--tls-cert",
                  pem.path(), "--tls-key", pem.path()},
                 {{"TDSTORE_REDIS_PASSWORD", "s3cret-env"}});
  ASSERT_TRUE(c.ok()) << c.status();
  std::map<std::string, std::string> shown;
  for (const auto& [name, value] : ShowDaemonSettings(*c)) {
    EXPECT_EQ(value.find("s3cret"), std::string::npos) << name;
    EXPECT_EQ(value.find("c2VjcmV0"), std::string::npos) << name;
    shown[name] = value;
  }
  EXPECT_EQ(shown["listen"], "none");
  EXPECT_EQ(shown["unix-socket"], "/tmp/td.sock");
  EXPECT_EQ(shown["max-dicts"], "4");
  EXPECT_EQ(shown["redis-maxmemory"], "25%");
  EXPECT_EQ(shown["pending-timeout-ms"], "1500");
  EXPECT_EQ(shown["tls-key"], "(set)");
  EXPECT_EQ(shown["redis-password"], "(set)");
  EXPECT_EQ(shown["namespace-quota-bytes"], "auto");
}

}  // namespace
}  // namespace tdstore
