#include "server/daemon_config.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "common/str_cat.h"

namespace tdstore {

namespace {

using Apply = std::function<absl::Status(DaemonConfig&, const std::string&)>;
using Show = std::function<std::string(const DaemonConfig&)>;

// One row of the settings table, the one place a setting is described: its
// flag name (its environment variable is the name upper-cased with a
// TDSTORE_ prefix, EnvName), its help line, how to show its value and how to
// apply one. Its default is not written here: it is the value `show` finds
// in a default DaemonConfig, whose struct initialisers (daemon_config.h,
// service_limits.h, store_options.h) are the only place defaults are
// written. --help shows that value, and daemon_config_test checks that it
// parses back to the default.
struct Setting {
  std::string name;
  std::string help;
  // The setting's value in a config, written as `apply` reads it (a
  // secret shows as "(set)" when set).
  Show show;
  Apply apply;
};

constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

// An integer setting in [min, max]; the error names the setting.
absl::StatusOr<int64_t> ParseInteger(const std::string& name, const std::string& value,
                                     int64_t min, int64_t max) {
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < min || n > max) {
    const std::string range = max != kNoMax ? StrCat("an integer in ", min, "..", max)
                              : min == 1    ? std::string("a positive integer")
                                            : StrCat("an integer >= ", min);
    return absl::InvalidArgumentError(
        StrCat("--", name, ": expected ", range, ", got '", value, "'"));
  }
  return n;
}

// A setting kept in one field of DaemonConfig. `field` reaches it from a
// config, const or not, so reading and writing cannot name different fields:
//   [](auto& c) -> auto& { return c.limits.max_dicts; }
// An integer field (int or int64_t) in [min, max].
template <typename Field>
Setting Integer(std::string name, std::string help, int64_t min, int64_t max, Field field) {
  using T = std::decay_t<decltype(field(std::declval<DaemonConfig&>()))>;
  static_assert(std::is_integral_v<T>);
  Apply apply = [name, min, max, field](DaemonConfig& c, const std::string& v) {
    auto n = ParseInteger(name, v, min, max);
    if (!n.ok()) return n.status();
    field(c) = static_cast<T>(*n);
    return absl::OkStatus();
  };
  Show show = [field](const DaemonConfig& c) { return StrCat(field(c)); };
  return {std::move(name), std::move(help), std::move(show), std::move(apply)};
}

// A duration field, in milliseconds in [min, max].
template <typename Field>
Setting Millis(std::string name, std::string help, int64_t min, int64_t max, Field field) {
  Apply apply = [name, min, max, field](DaemonConfig& c, const std::string& v) {
    auto n = ParseInteger(name, v, min, max);
    if (!n.ok()) return n.status();
    field(c) = std::chrono::milliseconds(*n);
    return absl::OkStatus();
  };
  Show show = [field](const DaemonConfig& c) { return StrCat(field(c).count()); };
  return {std::move(name), std::move(help), std::move(show), std::move(apply)};
}

// A text field taken as given.
Setting Text(std::string name, std::string help, std::string DaemonConfig::*field) {
  return {std::move(name), std::move(help),
          [field](const DaemonConfig& c) { return c.*field; },
          [field](DaemonConfig& c, const std::string& v) {
            c.*field = v;
            return absl::OkStatus();
          }};
}

// A text field that must be one of `words` ("expected a, b or c" otherwise).
Setting Choice(std::string name, std::string help, std::string DaemonConfig::*field,
               std::vector<std::string> words) {
  std::string expected;
  for (size_t i = 0; i < words.size(); ++i) {
    expected += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  }
  std::string flag = "--" + name;
  return {std::move(name), std::move(help),
          [field](const DaemonConfig& c) { return c.*field; },
          [field, words = std::move(words), expected = std::move(expected),
           flag = std::move(flag)](DaemonConfig& c, const std::string& v) {
            if (std::find(words.begin(), words.end(), v) == words.end()) {
              return absl::InvalidArgumentError(
                  StrCat(flag, ": expected ", expected, ", got '", v, "'"));
            }
            c.*field = v;
            return absl::OkStatus();
          }};
}

// Reads a whole file named by a setting; the error names the setting.
absl::StatusOr<std::string> ReadSettingFile(const std::string& name, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(StrCat("--", name, ": cannot read '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A secret, or a file's contents, is never shown: only whether it is set.
std::string SetOrNot(const std::string& value) { return value.empty() ? "" : "(set)"; }

// A setting naming a PEM file: stores the file's contents ('' clears them).
Setting PemFile(std::string name, std::string help, std::string DaemonConfig::*field) {
  Apply apply = [name, field](DaemonConfig& c, const std::string& v) {
    if (v.empty()) {
      c.*field = "";
      return absl::OkStatus();
    }
    auto text = ReadSettingFile(name, v);
    if (!text.ok()) return text.status();
    if (text->find("-----BEGIN ") == std::string::npos) {
      return absl::InvalidArgumentError(StrCat("--", name, ": '", v, "' is not a PEM file"));
    }
    c.*field = *std::move(text);
    return absl::OkStatus();
  };
  Show show = [field](const DaemonConfig& c) { return SetOrNot(c.*field); };
  return {std::move(name), std::move(help), std::move(show), std::move(apply)};
}

// The table. Each row's field appears once, in its accessor or its show and
// apply; ranges and checks are the row's own.
std::vector<Setting> Settings() {
  return {
      {"listen", "TCP address to serve gRPC on; 'none' for no TCP listener",
       [](const DaemonConfig& c) { return c.listen.empty() ? std::string("none") : c.listen; },
       [](DaemonConfig& c, const std::string& v) {
         c.listen = (v == "none") ? "" : v;
         return absl::OkStatus();
       }},
      Text("unix-socket", "also serve on this unix socket path (created mode 0660)",
           &DaemonConfig::unix_socket),
      Text("shm-socket",
           "where same-host clients lend shared memory for their data (created mode 0660): a "
           "path; auto: the unix socket's path + .shm when there is one, else none; none: off",
           &DaemonConfig::shm_socket),
      Integer("shm-max-bytes", "bytes of shared memory all clients together may lend", 1,
              int64_t{1} << 50, [](auto& c) -> auto& { return c.shm_max_bytes; }),
      Choice("shm-clients",
             "which clients may lend shared memory: local (through the unix socket, or through "
             "TCP on loopback: 127.0.0.1, localhost, [::1]) or unix (through the unix socket "
             "only)",
             &DaemonConfig::shm_clients, {"local", "unix"}),
      Choice("backend",
             "where dicts live: redis (the --redis server, or an embedded redis-server), or "
             "memory (this daemon's memory only: not durable, not shared with other daemons; "
             "for trying tdstore and for tests)",
             &DaemonConfig::backend, {"redis", "memory"}),
      Text("redis",
           "redis://[user:password@]host:port[/db], unix:///path.sock, or "
           "redis-cluster://[user:password@]host1:port1,host2:port2 (seed nodes); empty starts "
           "an embedded redis-server",
           &DaemonConfig::redis_url),
      // The file's name is not kept (only the password read from it), so
      // this shows '' whatever was given.
      {"redis-password-file",
       "read the Redis password from this file (overrides the URL's); empty: none",
       [](const DaemonConfig&) { return std::string(); },
       [](DaemonConfig& c, const std::string& v) {
         if (v.empty()) return absl::OkStatus();
         auto text = ReadSettingFile("redis-password-file", v);
         if (!text.ok()) return text.status();
         c.redis_password = std::string(absl::StripTrailingAsciiWhitespace(*text));
         return absl::OkStatus();
       }},
      {"redis-password", "(TDSTORE_REDIS_PASSWORD or the config file, never a flag) the Redis password",
       [](const DaemonConfig& c) { return SetOrNot(c.redis_password); },
       [](DaemonConfig& c, const std::string& v) {
         c.redis_password = v;
         return absl::OkStatus();
       }},
      Text("redis-local-congestion",
           "TCP congestion control of the connections to a Redis on this host (loopback, or "
           "this host's own address), where the host's default may pace what is sent (bbr) "
           "although nothing is congested; empty: the host's default. Connections to other "
           "hosts always keep it",
           &DaemonConfig::redis_local_congestion),
      Text("redis-server-bin",
           "redis-server binary for the embedded default (redis-server: the one beside tdstored "
           "if there is one, as a wheel installs it, else from PATH)",
           &DaemonConfig::redis_server_bin),
      Text("data-dir",
           "embedded redis-server persists here (append-only file); empty: no persistence",
           &DaemonConfig::data_dir),
      {"redis-maxmemory",
       "maxmemory of the embedded redis-server (noeviction): bytes, or N% of the machine's RAM "
       "(of the address-space limit if lower)",
       [](const DaemonConfig& c) {
         return c.redis_maxmemory_bytes > 0 ? StrCat(c.redis_maxmemory_bytes)
                                            : StrCat(c.redis_maxmemory_percent, "%");
       },
       [](DaemonConfig& c, const std::string& v) {
         int64_t n = 0;
         if (!v.empty() && v.back() == '%') {
           if (!absl::SimpleAtoi(v.substr(0, v.size() - 1), &n) || n < 1 || n > 100) {
             return absl::InvalidArgumentError(
                 StrCat("--redis-maxmemory: expected 1%..100%, got '", v, "'"));
           }
           c.redis_maxmemory_percent = static_cast<int>(n);
           c.redis_maxmemory_bytes = 0;
           return absl::OkStatus();
         }
         if (!absl::SimpleAtoi(v, &n) || n < (int64_t{1} << 20)) {
           return absl::InvalidArgumentError(StrCat(
               "--redis-maxmemory: expected bytes (at least 1048576) or N%, got '", v, "'"));
         }
         c.redis_maxmemory_bytes = n;
         return absl::OkStatus();
       }},
      {"namespace-quota-bytes",
       "bytes the namespace may store (0: no quota); auto: 3/4 of the embedded redis-server's "
       "maxmemory, no quota with --redis",
       [](const DaemonConfig& c) {
         return c.namespace_quota_auto ? std::string("auto")
                                       : StrCat(c.store.namespace_quota_bytes);
       },
       [](DaemonConfig& c, const std::string& v) {
         if (v == "auto") {
           c.namespace_quota_auto = true;
           return absl::OkStatus();
         }
         int64_t n = 0;
         if (!absl::SimpleAtoi(v, &n) || n < 0) {
           return absl::InvalidArgumentError(StrCat(
               "--namespace-quota-bytes: expected auto or bytes (0: no quota), got '", v, "'"));
         }
         c.namespace_quota_auto = false;
         c.store.namespace_quota_bytes = n;
         return absl::OkStatus();
       }},
      Integer("dict-quota-bytes", "bytes one dict may store (0: no quota but the namespace's)", 0,
              int64_t{1} << 60, [](auto& c) -> auto& { return c.store.dict_quota_bytes; }),
      Integer("memory-budget-bytes",
              "bytes tdstored may buffer for all calls together (indexed selections, write "
              "values, window pipelines)",
              1, int64_t{1} << 50, [](auto& c) -> auto& { return c.store.memory_budget_bytes; }),
      Millis("memory-budget-wait-ms",
             "how long a call waits for its share of --memory-budget-bytes before "
             "RESOURCE_EXHAUSTED",
             0, int64_t{1} << 40, [](auto& c) -> auto& { return c.store.memory_budget_wait; }),
      {"namespace", "prefix of every Redis key", [](const DaemonConfig& c) { return c.store.ns; },
       [](DaemonConfig& c, const std::string& v) {
         if (v.empty() || v.find_first_of("{}: ") != std::string::npos) {
           return absl::InvalidArgumentError(
               StrCat("--namespace: '", v, "' must be non-empty without '{', '}', ':' or spaces"));
         }
         c.store.ns = v;
         return absl::OkStatus();
       }},
      Integer("rows-per-block", "default rows of batch dim 0 per storage block", 1, kNoMax,
              [](auto& c) -> auto& { return c.store.default_rows_per_block; }),
      Integer("part-bytes", "default largest Redis value of one block part (<= 256 MiB)", 1,
              int64_t{256} << 20, [](auto& c) -> auto& { return c.store.default_part_bytes; }),
      Integer("write-replicas",
              "wait until this many replicas acknowledge every write (Redis WAIT); 0: do not wait",
              0, 16, [](auto& c) -> auto& { return c.store.write_replicas; }),
      Millis("write-replicas-timeout-ms", "how long a write waits for --write-replicas", 1,
             kNoMax, [](auto& c) -> auto& { return c.store.write_replicas_timeout; }),
      Millis("pending-timeout-ms", "an uncommitted write idle this long is swept", 1, kNoMax,
             [](auto& c) -> auto& { return c.store.pending_timeout; }),
      Millis("sweep-interval-ms", "how often abandoned writes are looked for", 1, kNoMax,
             [](auto& c) -> auto& { return c.sweep_interval; }),
      Millis("test-schema-event-delay-ms",
             "for tests only: delay each schema-watch event this long", 0, kNoMax,
             [](auto& c) -> auto& { return c.schema_event_delay; }),
      Millis("shutdown-grace-ms", "on SIGTERM/SIGINT, time in-flight calls get to finish", 1,
             kNoMax, [](auto& c) -> auto& { return c.shutdown_grace; }),
      Text("ready-file", "once serving, write the client addresses here, one per line",
           &DaemonConfig::ready_file),
      Choice("log-level", "debug (one line per call), info, warning or error",
             &DaemonConfig::log_level, {"debug", "info", "warning", "error"}),
      {"metrics-listen", "serve Prometheus /metrics on this HOST:PORT; empty: no metrics",
       [](const DaemonConfig& c) { return c.metrics_listen; },
       [](DaemonConfig& c, const std::string& v) {
         if (!v.empty() && v.rfind(':') == std::string::npos) {
           return absl::InvalidArgumentError(
               StrCat("--metrics-listen: expected HOST:PORT, got '", v, "'"));
         }
         c.metrics_listen = v;
         return absl::OkStatus();
       }},
      // --- access control (docs/security.md) ---
      PemFile("tls-cert", "PEM server certificate (chain); serves TLS instead of plaintext",
              &DaemonConfig::tls_cert_pem),
      PemFile("tls-key", "PEM private key of --tls-cert", &DaemonConfig::tls_key_pem),
      PemFile("tls-client-ca",
              "PEM CA bundle: clients must present a certificate it signed (mTLS)",
              &DaemonConfig::tls_client_ca_pem),
      {"tokens-file",
       "bearer tokens, one per line: TOKEN ro|rw PREFIX[,PREFIX...]; empty: no tokens needed",
       [](const DaemonConfig& c) { return c.tokens_file; },
       [](DaemonConfig& c, const std::string& v) {
         if (!v.empty()) {
           if (auto text = ReadSettingFile("tokens-file", v); !text.ok()) return text.status();
         }
         c.tokens_file = v;
         return absl::OkStatus();
       }},
      // --- limits (server/service/service_limits.h; max-indexed-bytes and max-dicts are the
      // store's own, server/store/store_options.h) ---
      Integer("max-call-bytes", "data bytes one read or write call may move", 1,
              int64_t{1} << 50, [](auto& c) -> auto& { return c.limits.max_call_bytes; }),
      Integer("max-indexed-bytes", "bytes one indexed read or write may select (held in memory)",
              1, int64_t{4} << 30, [](auto& c) -> auto& { return c.store.max_indexed_bytes; }),
      Integer("max-index-length", "positions (index tensor elements) one call's index may carry",
              1, int64_t{1} << 34, [](auto& c) -> auto& { return c.limits.max_index_length; }),
      Integer("max-leaves-per-call", "leaves one call may name, carry or declare", 1, 1 << 20,
              [](auto& c) -> auto& { return c.limits.max_leaves_per_call; }),
      Integer("max-concurrent-streams",
              "read and write streams in progress at once; more are refused", 1, 1 << 16,
              [](auto& c) -> auto& { return c.limits.max_concurrent_streams; }),
      Integer("max-name-bytes", "bytes of a dict name (at most 128)", 1, 128,
              [](auto& c) -> auto& { return c.limits.max_name_bytes; }),
      Integer("max-path-bytes", "bytes of a leaf path written a/b/c", 1, 1 << 16,
              [](auto& c) -> auto& { return c.limits.max_path_bytes; }),
      Integer("max-dicts", "dicts the namespace may hold", 1, int64_t{1} << 40,
              [](auto& c) -> auto& { return c.store.max_dicts; }),
      Millis("idle-stream-timeout-ms",
             "a stream without progress this long is cancelled (rolled back)", 1,
             int64_t{1} << 40, [](auto& c) -> auto& { return c.limits.idle_stream_timeout; }),
  };
}

std::string EnvName(const std::string& flag) {
  std::string out = "TDSTORE_";
  for (char ch : flag) out += (ch == '-') ? '_' : absl::ascii_toupper(ch);
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  return s;
}

// Settings only the environment may carry (a flag would show in `ps`).
bool EnvOnly(const std::string& name) { return name == "redis-password"; }

// Parses a config file: "name = value" lines, '#' comments, blank lines;
// a value may be wrapped in double quotes. Returns (line number, name,
// value) triples; INVALID_ARGUMENT naming the file and line.
struct FileSetting {
  int line;
  std::string name;
  std::string value;
};
absl::StatusOr<std::vector<FileSetting>> ReadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(StrCat("--config: cannot read '", path, "'"));
  std::vector<FileSetting> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::string_view text = Trim(line);
    if (text.empty() || text[0] == '#') continue;
    size_t eq = text.find('=');
    if (eq == std::string_view::npos) {
      return absl::InvalidArgumentError(
          StrCat(path, ":", number, ": expected 'name = value'"));
    }
    std::string name(Trim(text.substr(0, eq)));
    std::string value(Trim(text.substr(eq + 1)));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    out.push_back({number, std::move(name), std::move(value)});
  }
  return out;
}

// Settings that only make sense together.
absl::Status CheckCombinations(const DaemonConfig& c) {
  if (c.tls_cert_pem.empty() != c.tls_key_pem.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key must be given together");
  }
  if (!c.tls_client_ca_pem.empty() && c.tls_cert_pem.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  if (c.listen.empty() && c.unix_socket.empty()) {
    return absl::InvalidArgumentError("nothing to listen on: give --listen or --unix-socket");
  }
  return absl::OkStatus();
}

}  // namespace

std::string ShmSocketPath(const DaemonConfig& config) {
  if (config.shm_socket == "none") return "";
  if (config.shm_socket == "auto") {
    return config.unix_socket.empty() ? "" : config.unix_socket + ".shm";
  }
  return config.shm_socket;
}

std::string DaemonUsage() {
  std::string out =
      "usage: tdstored [--flag value | --flag=value]...\n"
      "Serves tdstore's gRPC API and keeps the data in Redis.\n\n"
      "Every setting may be given as a flag, as an environment variable, or as\n"
      "'name = value' in the config file; a flag beats the variable, which beats\n"
      "the file.\n\n"
      "  --version\n"
      "      print the version and exit\n"
      "  --config FILE  (env TDSTORE_CONFIG, default '')\n"
      "      read settings from FILE: 'name = value' lines, '#' comments\n";
  // The defaults are read from a default config, not written here.
  const DaemonConfig defaults;
  for (const Setting& s : Settings()) {
    if (EnvOnly(s.name)) {
      out += StrCat("  (env ", EnvName(s.name), ")\n      ", s.help, "\n");
      continue;
    }
    out += StrCat("  --", s.name, "  (env ", EnvName(s.name), ", default '", s.show(defaults),
                  "')\n      ", s.help, "\n");
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> ShowDaemonSettings(const DaemonConfig& config) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Setting& s : Settings()) out.emplace_back(s.name, s.show(config));
  return out;
}

absl::StatusOr<DaemonConfig> ParseDaemonConfig(int argc, const char* const* argv,
                                               const std::map<std::string, std::string>& env) {
  DaemonConfig config;
  std::vector<Setting> settings = Settings();
  auto find = [&](const std::string& name) -> const Setting* {
    for (const Setting& s : settings) {
      if (s.name == name) return &s;
    }
    return nullptr;
  };

  // 1. Split the command line into (name, value) pairs, checking names.
  std::vector<std::pair<std::string, std::string>> flags;
  std::string config_file;
  if (auto it = env.find("TDSTORE_CONFIG"); it != env.end()) config_file = it->second;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      config.help = true;
      continue;
    }
    if (arg == "--version") {
      config.version = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      // Not repeated: a stray argument may be a URL with a password in it.
      return absl::InvalidArgumentError(
          StrCat("unexpected argument #", i + 1, ": settings are --name value (see --help)"));
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (name != "config" && (find(name) == nullptr || EnvOnly(name))) {
      return absl::InvalidArgumentError(StrCat("unknown flag '--", name, "' (see --help)"));
    }
    if (!has_value) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(StrCat("--", name, " needs a value"));
      value = argv[++i];
    }
    if (name == "config") {
      config_file = value;
    } else {
      flags.emplace_back(name, value);
    }
  }
  if (config.help || config.version) return config;

  // 2. The config file, lowest precedence.
  if (!config_file.empty()) {
    auto lines = ReadConfigFile(config_file);
    if (!lines.ok()) return lines.status();
    for (const FileSetting& line : *lines) {
      const Setting* s = find(line.name);
      if (s == nullptr || line.name == "config") {
        return absl::InvalidArgumentError(
            StrCat(config_file, ":", line.line, ": unknown setting '", line.name, "'"));
      }
      if (auto st = s->apply(config, line.value); !st.ok()) {
        return absl::InvalidArgumentError(
            StrCat(config_file, ":", line.line, ": ", st.message()));
      }
    }
    config.config_file = config_file;
  }
  // 3. Environment, then 4. flags.
  for (const Setting& s : settings) {
    auto it = env.find(EnvName(s.name));
    if (it == env.end()) continue;
    if (auto st = s.apply(config, it->second); !st.ok()) {
      return absl::InvalidArgumentError(StrCat(EnvName(s.name), ": ", st.message()));
    }
  }
  for (const auto& [name, value] : flags) {
    if (auto st = find(name)->apply(config, value); !st.ok()) return st;
  }
  if (auto st = CheckCombinations(config); !st.ok()) return st;
  return config;
}

}  // namespace tdstore
