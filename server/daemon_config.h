// tdstored's settings. Each has one name, settable three ways:
//
//   flag          --listen 127.0.0.1:50051   (or --listen=127.0.0.1:50051)
//   environment   TDSTORE_LISTEN=127.0.0.1:50051
//   config file   listen = 127.0.0.1:50051   (file named by --config or
//                                             TDSTORE_CONFIG)
//
// Precedence: a flag beats its environment variable, which beats the config
// file, which beats the default. DaemonUsage() lists every setting with its
// default. An invalid or unknown setting is an INVALID_ARGUMENT naming it
// (and the file and line for the config file) so start-up stops there.
//
// Only I/O: reading the config file and the files some settings name
// (--redis-password-file, TLS files, --tokens-file is read by main).
//
// A default is written once: in the struct initialisers below and in
// ServiceLimits' and StoreOptions'. The settings table (daemon_config.cc),
// which the parser applies, shows each setting's value in a default config
// as its --help default; daemon_config_test parses every one back.
#ifndef TDSTORE_SERVER_DAEMON_CONFIG_H_
#define TDSTORE_SERVER_DAEMON_CONFIG_H_

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/redis/local_tcp.h"
#include "server/service/service_limits.h"
#include "server/store/store_options.h"

namespace tdstore {

struct DaemonConfig {
  // Where dicts live: "redis" (Redis, given or embedded) or "memory" (this
  // process only: not durable, not shared; for trying tdstore and tests).
  std::string backend = "redis";
  // TCP address to serve on; empty: no TCP listener.
  std::string listen = "127.0.0.1:50051";
  // Unix socket path to serve on (mode 0660); empty: none.
  std::string unix_socket;
  // The same-host data path's socket, on which clients lend shared memory
  // (server/shm/): "auto" is <unix_socket>.shm when there is a unix socket,
  // none otherwise; "none": no shared memory.
  std::string shm_socket = "auto";
  // The most all lent regions may add up to.
  int64_t shm_max_bytes = int64_t{1} << 30;
  // Who may lend a region: "local", a client on this host that reaches
  // tdstored through the unix socket or through TCP on loopback; "unix",
  // only through the unix socket (ServerInfo then leaves out capability
  // shared_memory_loopback, which loopback clients wait for).
  std::string shm_clients = "local";
  // Redis URL; empty: start an embedded redis-server.
  std::string redis_url;
  // Overrides the URL's password; from --redis-password-file or
  // TDSTORE_REDIS_PASSWORD. Never logged.
  std::string redis_password;
  // TCP congestion control of tdstored's connections to a Redis on this
  // host (redis/local_tcp.h); empty: the host's default.
  std::string redis_local_congestion = redis::kDefaultLocalCongestion;
  // Embedded redis-server: binary and persistence directory.
  std::string redis_server_bin = "redis-server";
  std::string data_dir;
  // Embedded redis-server's maxmemory (it runs with noeviction): bytes if
  // > 0, else this percentage of the machine's RAM (or of tdstored's
  // address-space limit, if smaller: the child inherits it).
  int64_t redis_maxmemory_bytes = 0;
  int redis_maxmemory_percent = 50;
  // --namespace-quota-bytes auto: 3/4 of the embedded redis-server's
  // maxmemory, none with --redis. Cleared when a number is given.
  bool namespace_quota_auto = true;
  // Written once serving: one client address per line.
  std::string ready_file;
  std::chrono::milliseconds shutdown_grace{10000};
  std::chrono::milliseconds sweep_interval{30000};
  // For tests: each schema change is handed to watchers this much later,
  // so that a client's copy can be observed before its event arrives.
  std::chrono::milliseconds schema_event_delay{0};
  // The config file read, if any (for the start-up log line).
  std::string config_file;
  // "debug", "info", "warning" or "error".
  std::string log_level = "info";
  // Prometheus /metrics on this HOST:PORT; empty: no metrics endpoint.
  std::string metrics_listen;
  // TLS for the gRPC listeners (TCP and unix socket): PEM contents, read at
  // parse time. Empty cert: plaintext. client_ca set: clients must present a
  // certificate signed by it (mutual TLS).
  std::string tls_cert_pem;
  std::string tls_key_pem;
  std::string tls_client_ca_pem;
  // Bearer tokens (server/service/access_control.h); empty: no tokens, every
  // caller may do everything (fine on loopback or a 0660 unix socket).
  std::string tokens_file;
  service::ServiceLimits limits;
  store::StoreOptions store;
  bool help = false;
  bool version = false;  // --version: print the version and exit
};

// Parses argv (without argv[0]) over the given environment. INVALID_ARGUMENT
// naming the offending flag or variable.
// The shared-memory socket's path `config` asks for; empty: none.
std::string ShmSocketPath(const DaemonConfig& config);

absl::StatusOr<DaemonConfig> ParseDaemonConfig(int argc, const char* const* argv,
                                               const std::map<std::string, std::string>& env);

// The --help text: every setting with its default, shown as
// ShowDaemonSettings(DaemonConfig{}) shows it.
std::string DaemonUsage();

// Every setting (flag name, in --help's order, the environment-only
// redis-password too) with its value in `config`, written as the parser
// reads it. Secrets and files' contents (the Redis password, TLS files) show
// only "(set)" or ""; --redis-password-file always shows "" (the file's name
// is not kept).
std::vector<std::pair<std::string, std::string>> ShowDaemonSettings(const DaemonConfig& config);

}  // namespace tdstore

#endif  // TDSTORE_SERVER_DAEMON_CONFIG_H_
