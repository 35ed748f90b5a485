// tdstored: the tdstore daemon. Reads its settings (daemon_config.h),
// connects to Redis or starts an embedded redis-server, serves gRPC until
// SIGTERM/SIGINT, then drains in-flight calls and exits 0.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/daemon_config.h"
#include "server/redis/embedded_redis.h"
#include "server/redis/make_client.h"
#include "server/service/tdstore_service.h"
#include "server/store/dict_store.h"
#include "server/store/lua_scripts.h"
#include "server/store/sweeper.h"

extern char** environ;

namespace tdstore {
namespace {

void Log(const std::string& line) { std::fprintf(stderr, "tdstored: %s\n", line.c_str()); }

std::map<std::string, std::string> Environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

// Writes atomically (temp file + rename) so a watcher never reads half.
bool WriteReadyFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) return false;
    out << text;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

int Run(int argc, char** argv) {
  // Block the shutdown signals before any thread starts, so every thread
  // inherits the mask and only sigwait() below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto config = ParseDaemonConfig(argc - 1, argv + 1, Environment());
  if (!config.ok()) {
    Log(std::string(config.status().message()));
    return 2;
  }
  if (config->help) {
    std::fputs(DaemonUsage().c_str(), stdout);
    return 0;
  }

  // Files and sockets we create (the unix socket above all) are never
  // world-accessible, not even for the moment before chmod.
  umask(0007);

  // --- Redis: the given one, or our own embedded child. ---------------------
  std::unique_ptr<redis::EmbeddedRedis> embedded;
  std::string redis_url = config->redis_url;
  if (redis_url.empty()) {
    redis::EmbeddedRedisOptions options;
    options.binary = config->redis_server_bin;
    options.data_dir = config->data_dir;
    auto started = redis::EmbeddedRedis::Start(options);
    if (!started.ok()) {
      Log("cannot start the embedded redis-server: " + started.status().ToString());
      return 1;
    }
    embedded = *std::move(started);
    redis_url = "unix://" + embedded->address().path;
    Log("started embedded redis-server (pid " + std::to_string(embedded->pid()) + ") at " +
        embedded->address().Redacted() +
        (config->data_dir.empty() ? " without persistence" : " persisting to " + config->data_dir));
  }
  // The embedded Redis has no password: TDSTORE_REDIS_PASSWORD is for --redis.
  auto redis_owner = redis::MakeRedisClient(
      redis_url, embedded ? std::string() : config->redis_password, redis::ConnectOptions{});
  if (!redis_owner.ok()) {
    Log("--redis: " + std::string(redis_owner.status().message()));
    return 2;
  }
  redis::RedisClient& redis_client = **redis_owner;
  {
    auto pong = redis_client.Call("", {"PING"});
    if (!pong.ok()) {
      // Start anyway: calls fail UNAVAILABLE until Redis answers.
      Log("warning: Redis does not answer yet: " + pong.status().ToString());
    } else if (pong->is_error()) {
      Log("warning: Redis refused PING: " + std::string(pong->str()));
    } else if (auto loaded = store::PreloadScripts(redis_client); !loaded.ok()) {
      Log("warning: could not preload the Lua scripts: " + loaded.ToString());
    }
  }

  store::DictStore store(&redis_client, config->store);
  store::Sweeper sweeper(&store);
  sweeper.Start(config->sweep_interval);
  service::TdStoreService service(&store, &redis_client);

  // --- gRPC ---------------------------------------------------------------
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int tcp_port = 0;
  if (!config->listen.empty()) {
    builder.AddListeningPort(config->listen, grpc::InsecureServerCredentials(), &tcp_port);
  }
  if (!config->unix_socket.empty()) {
    struct stat st;
    // A socket file left by a previous run would make bind fail.
    if (lstat(config->unix_socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
      unlink(config->unix_socket.c_str());
    }
    builder.AddListeningPort("unix:" + config->unix_socket, grpc::InsecureServerCredentials());
  }
  if (config->listen.empty() && config->unix_socket.empty()) {
    Log("nothing to listen on: give --listen or --unix-socket");
    return 2;
  }
  // Data moves in chunks of <= 1 MiB; no message needs more than 4 MiB.
  builder.SetMaxReceiveMessageSize(4 << 20);
  builder.SetMaxSendMessageSize(4 << 20);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || (!config->listen.empty() && tcp_port == 0)) {
    Log("cannot listen on " + (config->listen.empty() ? "unix:" + config->unix_socket
                                                       : config->listen));
    return 1;
  }
  if (!config->unix_socket.empty()) chmod(config->unix_socket.c_str(), 0660);

  std::string addresses;
  if (!config->listen.empty()) {
    std::string host = config->listen.substr(0, config->listen.rfind(':'));
    addresses += host + ":" + std::to_string(tcp_port) + "\n";
  }
  if (!config->unix_socket.empty()) addresses += "unix://" + config->unix_socket + "\n";
  std::string shown = addresses.substr(0, addresses.size() - 1);
  std::replace(shown.begin(), shown.end(), '\n', ' ');
  Log("serving on " + shown + " with " + redis_client.Describe());
  if (!config->ready_file.empty() && !WriteReadyFile(config->ready_file, addresses)) {
    Log("cannot write --ready-file " + config->ready_file);
  }

  // --- Wait for SIGTERM/SIGINT, then drain. ----------------------------------
  int sig = 0;
  sigwait(&stop_signals, &sig);
  Log(std::string("got ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") +
      ", finishing in-flight calls");
  server->Shutdown(std::chrono::system_clock::now() + config->shutdown_grace);
  server->Wait();
  sweeper.Stop();
  if (embedded) embedded->Stop();
  if (!config->unix_socket.empty()) unlink(config->unix_socket.c_str());
  Log("stopped");
  return 0;
}

}  // namespace
}  // namespace tdstore

int main(int argc, char** argv) { return tdstore::Run(argc, argv); }
