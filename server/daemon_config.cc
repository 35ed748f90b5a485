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
      {"redis-server-bin", "redis-server binary for the embedded default", "redis-server",
       Text(&DaemonConfig::redis_server_bin)},
      {"data-dir", "embedded redis-server persists here (append-only file); empty: no persistence",
       "", Text(&DaemonConfig::data_dir)},
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
      {"shutdown-grace-ms", "on SIGTERM/SIGINT, time in-flight calls get to finish", "10000",
       [](DaemonConfig& c, const std::string& v) {
         auto n = ParsePositive("shutdown-grace-ms", v);
         if (!n.ok()) return n.status();
         c.shutdown_grace = ms(*n);
         return absl::OkStatus();
       }},
      {"ready-file", "once serving, write the client addresses here, one per line", "",
       Text(&DaemonConfig::ready_file)},
  };
}

std::string EnvName(const std::string& flag) {
  std::string out = "TDSTORE_";
  for (char ch : flag) out += (ch == '-') ? '_' : absl::ascii_toupper(ch);
  return out;
}

}  // namespace

std::string DaemonUsage() {
  std::string out =
      "usage: tdstored [--flag value | --flag=value]...\n"
      "Serves tdstore's gRPC API and keeps the data in Redis.\n"
      "Every flag may also be set by its environment variable; a flag wins.\n\n";
  for (const Setting& s : Settings()) {
    if (s.name == "redis-password") {
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
  // Environment first, so flags override it.
  for (const Setting& s : settings) {
    auto it = env.find(EnvName(s.name));
    if (it == env.end()) continue;
    if (auto st = s.apply(config, it->second); !st.ok()) {
      return absl::InvalidArgumentError(StrCat(EnvName(s.name), ": ", st.message()));
    }
  }
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      config.help = true;
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
    const Setting* setting = nullptr;
    for (const Setting& s : settings) {
      if (s.name == name && s.name != "redis-password") setting = &s;
    }
    if (setting == nullptr) {
      return absl::InvalidArgumentError(StrCat("unknown flag '--", name, "' (see --help)"));
    }
    if (!has_value) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(StrCat("--", name, " needs a value"));
      value = argv[++i];
    }
    if (auto st = setting->apply(config, value); !st.ok()) return st;
  }
  return config;
}

}  // namespace tdstore
