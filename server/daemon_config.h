// tdstored's settings: parsed from flags, with TDSTORE_* environment
// variables as defaults (a flag beats its variable).
//
//   --listen 127.0.0.1:50051   TDSTORE_LISTEN
//   --redis URL                TDSTORE_REDIS  ...
//
// DaemonUsage() lists every setting with its default. Pure parsing: no I/O
// except reading the password file named by --redis-password-file.
#ifndef TDSTORE_SERVER_DAEMON_CONFIG_H_
#define TDSTORE_SERVER_DAEMON_CONFIG_H_

#include <chrono>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "server/store/store_options.h"

namespace tdstore {

struct DaemonConfig {
  // TCP address to serve on; empty: no TCP listener.
  std::string listen = "127.0.0.1:50051";
  // Unix socket path to serve on (mode 0660); empty: none.
  std::string unix_socket;
  // Redis URL; empty: start an embedded redis-server.
  std::string redis_url;
  // Overrides the URL's password; from --redis-password-file or
  // TDSTORE_REDIS_PASSWORD. Never logged.
  std::string redis_password;
  // Embedded redis-server: binary and persistence directory.
  std::string redis_server_bin = "redis-server";
  std::string data_dir;
  // Written once serving: one client address per line.
  std::string ready_file;
  std::chrono::milliseconds shutdown_grace{10000};
  std::chrono::milliseconds sweep_interval{30000};
  store::StoreOptions store;
  bool help = false;
};

// Parses argv (without argv[0]) over the given environment. INVALID_ARGUMENT
// naming the offending flag or variable.
absl::StatusOr<DaemonConfig> ParseDaemonConfig(int argc, const char* const* argv,
                                               const std::map<std::string, std::string>& env);

// The --help text.
std::string DaemonUsage();

}  // namespace tdstore

#endif  // TDSTORE_SERVER_DAEMON_CONFIG_H_
