#include "server/daemon_config.h"

#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "common/str_cat.h"

namespace tdstore {

namespace {

// One setting: its flag name (also its env var, upper-cased with a TDSTORE_
// prefix), a help line, its default as shown, and how to apply a value.
struct Setting {
  std::string name;
  std::string help;
  std::string shown_default;
  std::function<absl::Status(DaemonConfig&, const std::string&)> apply;
};

absl::StatusOr<int64_t> ParsePositive(const std::string& name, const std::string& value) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v) || v <= 0) {
    return absl::InvalidArgumentError(
        StrCat("--", name, ": expected a positive integer, got '", value, "'"));
  }
  return v;
}

using Apply = std::function<absl::Status(DaemonConfig&, const std::string&)>;

// A positive integer setting in [1, max], stored through `store`.
Apply Positive(const std::string& name, int64_t max,
               std::function<void(DaemonConfig&, int64_t)> store) {
  return [name, max, store](DaemonConfig& c, const std::string& v) {
    auto n = ParsePositive(name, v);
    if (!n.ok()) return n.status();
    if (*n > max) {
      return absl::InvalidArgumentError(StrCat("--", name, ": at most ", max, ", got ", *n));
    }
    store(c, *n);
    return absl::OkStatus();
  };
}

// A setting in [0, max] (0 meaning "none" or "do not wait").
Apply NonNegative(const std::string& name, int64_t max,
                  std::function<void(DaemonConfig&, int64_t)> store) {
  return [name, max, store](DaemonConfig& c, const std::string& v) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(v, &n) || n < 0 || n > max) {
      return absl::InvalidArgumentError(
          StrCat("--", name, ": expected an integer in 0..", max, ", got '", v, "'"));
    }
    store(c, n);
    return absl::OkStatus();
  };
}

// Reads a whole file named by a setting; the error names the setting.
absl::StatusOr<std::string> ReadSettingFile(const std::string& name, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(StrCat("--", name, ": cannot read '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A setting naming a PEM file: stores the file's contents.
Apply PemFile(const std::string& name, std::string DaemonConfig::*field) {
  return [name, field](DaemonConfig& c, const std::string& v) {
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
}

std::function<absl::Status(DaemonConfig&, const std::string&)> Text(
    std::string DaemonConfig::*field) {
  return [field](DaemonConfig& c, const std::string& v) {
    c.*field = v;
    return absl::OkStatus();
  };
}

std::vector<Setting> Settings() {
  using ms = std::chrono::milliseconds;
  return {
      {"listen", "TCP address to serve gRPC on; 'none' for no TCP listener", "127.0.0.1:50051",
       [](DaemonConfig& c, const std::string& v) {
         c.listen = (v == "none") ? "" : v;
         return absl::OkStatus();
       }},
      {"unix-socket", "also serve on this unix socket path (created mode 0660)", "",
       Text(&DaemonConfig::unix_socket)},
      {"redis",
       "redis://[user:password@]host:port[/db], unix:///path.sock, or "
       "redis-cluster://[user:password@]host1:port1,host2:port2 (seed nodes); empty starts "
       "an embedded redis-server",
       "", Text(&DaemonConfig::redis_url)},
      {"redis-password-file", "read the Redis password from this file (overrides the URL's)", "",
       [](DaemonConfig& c, const std::string& v) {
         std::ifstream in(v);
         if (!in) {
           return absl::InvalidArgumentError(
               StrCat("--redis-password-file: cannot read '", v, "'"));
         }
         std::stringstream ss;
         ss << in.rdbuf();
         c.redis_password = std::string(absl::StripTrailingAsciiWhitespace(ss.str()));
         return absl::OkStatus();
       }},
      {"redis-password", "(environment only: TDSTORE_REDIS_PASSWORD) the Redis password", "",
       Text(&DaemonConfig::redis_password)},
      {"redis-server-bin",
       "redis-server binary for the embedded default (redis-server: the one beside tdstored "
       "if there is one, as a wheel installs it, else from PATH)",
       "redis-server",
       Text(&DaemonConfig::redis_server_bin)},
      {"data-dir", "embedded redis-server persists here (append-only file); empty: no persistence",
       "", Text(&DaemonConfig::data_dir)},
      {"redis-maxmemory",
       "maxmemory of the embedded redis-server (noeviction): bytes, or N% of the machine's RAM "
       "(of the address-space limit if lower)",
       "50%",
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
       "auto",
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
      {"dict-quota-bytes", "bytes one dict may store (0: no quota but the namespace's)", "0",
       NonNegative("dict-quota-bytes", int64_t{1} << 60,
                   [](DaemonConfig& c, int64_t n) { c.store.dict_quota_bytes = n; })},
      {"memory-budget-bytes",
       "bytes tdstored may buffer for all calls together (indexed selections, write values, "
       "window pipelines)",
       "2147483648",
       Positive("memory-budget-bytes", int64_t{1} << 50,
                [](DaemonConfig& c, int64_t n) { c.store.memory_budget_bytes = n; })},
      {"memory-budget-wait-ms",
       "how long a call waits for its share of --memory-budget-bytes before RESOURCE_EXHAUSTED",
       "10000",
       NonNegative("memory-budget-wait-ms", int64_t{1} << 40, [](DaemonConfig& c, int64_t n) {
         c.store.memory_budget_wait = std::chrono::milliseconds(n);
       })},
      {"namespace", "prefix of every Redis key", "td",
       [](DaemonConfig& c, const std::string& v) {
         if (v.empty() || v.find_first_of("{}: ") != std::string::npos) {
           return absl::InvalidArgumentError(
               StrCat("--namespace: '", v, "' must be non-empty without '{', '}', ':' or spaces"));
         }
         c.store.ns = v;
         return absl::OkStatus();
       }},
      {"rows-per-block", "default rows of batch dim 0 per storage block", "16384",
       [](DaemonConfig& c, const std::string& v) {
         auto n = ParsePositive("rows-per-block", v);
         if (!n.ok()) return n.status();
         c.store.default_rows_per_block = *n;
         return absl::OkStatus();
       }},
      {"part-bytes", "default largest Redis value of one block part (<= 256 MiB)", "67108864",
       [](DaemonConfig& c, const std::string& v) {
         auto n = ParsePositive("part-bytes", v);
         if (!n.ok()) return n.status();
         if (*n > (256ll << 20)) return absl::InvalidArgumentError("--part-bytes: at most 256 MiB");
         c.store.default_part_bytes = *n;
         return absl::OkStatus();
       }},
      {"write-replicas",
       "wait until this many replicas acknowledge every write (Redis WAIT); 0: do not wait",
       "0",
       [](DaemonConfig& c, const std::string& v) {
         int64_t n = 0;
         if (!absl::SimpleAtoi(v, &n) || n < 0 || n > 16) {
           return absl::InvalidArgumentError(
               StrCat("--write-replicas: expected 0..16, got '", v, "'"));
         }
         c.store.write_replicas = static_cast<int>(n);
         return absl::OkStatus();
       }},
      {"write-replicas-timeout-ms", "how long a write waits for --write-replicas", "1000",
       [](DaemonConfig& c, const std::string& v) {
         auto n = ParsePositive("write-replicas-timeout-ms", v);
         if (!n.ok()) return n.status();
         c.store.write_replicas_timeout = ms(*n);
         return absl::OkStatus();
       }},
      {"pending-timeout-ms", "an uncommitted write idle this long is swept", "300000",
       [](DaemonConfig& c, const std::string& v) {
         auto n = ParsePositive("pending-timeout-ms", v);
         if (!n.ok()) return n.status();
         c.store.pending_timeout = ms(*n);
         return absl::OkStatus();
       }},
      {"sweep-interval-ms", "how often abandoned writes are looked for", "30000",
       [](DaemonConfig& c, const std::string& v) {
         auto n = ParsePositive("sweep-interval-ms", v);
         if (!n.ok()) return n.status();
         c.sweep_interval = ms(*n);
         return absl::OkStatus();
       }},
      {"test-schema-event-delay-ms",
       "for tests only: delay each schema-watch event this long", "0",
       [](DaemonConfig& c, const std::string& v) {
         int64_t n = 0;
         if (!absl::SimpleAtoi(v, &n) || n < 0) {
           return absl::InvalidArgumentError(
               StrCat("--test-schema-event-delay-ms: expected a number >= 0, got '", v, "'"));
         }
         c.schema_event_delay = ms(n);
         return absl::OkStatus();
       }},
      {"shutdown-grace-ms", "on SIGTERM/SIGINT, time in-flight calls get to finish", "10000",
       [](DaemonConfig& c, const std::string& v) {
         auto n = ParsePositive("shutdown-grace-ms", v);
         if (!n.ok()) return n.status();
         c.shutdown_grace = ms(*n);
         return absl::OkStatus();
       }},
      {"ready-file", "once serving, write the client addresses here, one per line", "",
       Text(&DaemonConfig::ready_file)},
      {"log-level", "debug (one line per call), info, warning or error", "info",
       [](DaemonConfig& c, const std::string& v) {
         if (v != "debug" && v != "info" && v != "warning" && v != "error") {
           return absl::InvalidArgumentError(
               StrCat("--log-level: expected debug, info, warning or error, got '", v, "'"));
         }
         c.log_level = v;
         return absl::OkStatus();
       }},
      {"metrics-listen", "serve Prometheus /metrics on this HOST:PORT; empty: no metrics", "",
       [](DaemonConfig& c, const std::string& v) {
         if (!v.empty() && v.rfind(':') == std::string::npos) {
           return absl::InvalidArgumentError(
               StrCat("--metrics-listen: expected HOST:PORT, got '", v, "'"));
         }
         c.metrics_listen = v;
         return absl::OkStatus();
       }},
      // --- access control (docs/security.md) ---
      {"tls-cert", "PEM server certificate (chain); serves TLS instead of plaintext", "",
       PemFile("tls-cert", &DaemonConfig::tls_cert_pem)},
      {"tls-key", "PEM private key of --tls-cert", "", PemFile("tls-key", &DaemonConfig::tls_key_pem)},
      {"tls-client-ca", "PEM CA bundle: clients must present a certificate it signed (mTLS)", "",
       PemFile("tls-client-ca", &DaemonConfig::tls_client_ca_pem)},
      {"tokens-file",
       "bearer tokens, one per line: TOKEN ro|rw PREFIX[,PREFIX...]; empty: no tokens needed",
       "",
       [](DaemonConfig& c, const std::string& v) {
         if (!v.empty()) {
           if (auto text = ReadSettingFile("tokens-file", v); !text.ok()) return text.status();
         }
         c.tokens_file = v;
         return absl::OkStatus();
       }},
      // --- limits (server/service/service_limits.h; max-indexed-bytes and max-dicts are the
      // store's own, server/store/store_options.h) ---
      {"max-call-bytes", "data bytes one read or write call may move", "68719476736",
       Positive("max-call-bytes", int64_t{1} << 50,
                [](DaemonConfig& c, int64_t n) { c.limits.max_call_bytes = n; })},
      {"max-indexed-bytes", "bytes one indexed read or write may select (held in memory)",
       "268435456",
       Positive("max-indexed-bytes", int64_t{4} << 30,
                [](DaemonConfig& c, int64_t n) { c.store.max_indexed_bytes = n; })},
      {"max-index-length", "positions (index tensor elements) one call's index may carry",
       "16777216",
       Positive("max-index-length", int64_t{1} << 34,
                [](DaemonConfig& c, int64_t n) { c.limits.max_index_length = n; })},
      {"max-leaves-per-call", "leaves one call may name, carry or declare", "4096",
       Positive("max-leaves-per-call", 1 << 20,
                [](DaemonConfig& c, int64_t n) { c.limits.max_leaves_per_call = int(n); })},
      {"max-concurrent-streams", "read and write streams in progress at once; more are refused",
       "64",
       Positive("max-concurrent-streams", 1 << 16,
                [](DaemonConfig& c, int64_t n) { c.limits.max_concurrent_streams = int(n); })},
      {"max-name-bytes", "bytes of a dict name (at most 128)", "128",
       Positive("max-name-bytes", 128,
                [](DaemonConfig& c, int64_t n) { c.limits.max_name_bytes = int(n); })},
      {"max-path-bytes", "bytes of a leaf path written a/b/c", "1024",
       Positive("max-path-bytes", 1 << 16,
                [](DaemonConfig& c, int64_t n) { c.limits.max_path_bytes = int(n); })},
      {"max-dicts", "dicts the namespace may hold", "100000",
       Positive("max-dicts", int64_t{1} << 40,
                [](DaemonConfig& c, int64_t n) { c.store.max_dicts = n; })},
      {"idle-stream-timeout-ms", "a stream without progress this long is cancelled (rolled back)",
       "60000",
       Positive("idle-stream-timeout-ms", int64_t{1} << 40, [](DaemonConfig& c, int64_t n) {
         c.limits.idle_stream_timeout = std::chrono::milliseconds(n);
       })},
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
  for (const Setting& s : Settings()) {
    if (EnvOnly(s.name)) {
      out += StrCat("  (env ", EnvName(s.name), ")\n      ", s.help, "\n");
      continue;
    }
    out += StrCat("  --", s.name, "  (env ", EnvName(s.name), ", default '", s.shown_default,
                  "')\n      ", s.help, "\n");
  }
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
