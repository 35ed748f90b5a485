// tdstored: the tdstore daemon. Reads its settings (daemon_config.h),
// connects to Redis or starts an embedded redis-server (or, with --backend
// memory, keeps everything in its own memory), serves gRPC until
// SIGTERM/SIGINT, then drains in-flight calls and exits 0.
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/protocol_limits.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/daemon_config.h"
#include "server/health_monitor.h"
#include "server/log.h"
#include "server/metrics/call_interceptor.h"
#include "server/metrics/prometheus_metrics.h"
#include "server/redis/embedded_redis.h"
#include "server/redis/local_tcp.h"
#include "server/redis/make_client.h"
#include "server/redis/reply_objects.h"
#include "server/service/tdstore_service.h"
#include "server/redis_store/dict_store.h"
#include "server/redis_store/indexed_access.h"
#include "server/redis_store/redis_store.h"
#include "server/redis_store/lua_scripts.h"
#include "server/redis_store/schema_watch.h"
#include "server/redis_store/sweeper.h"
#include "server/shm/shm_listener.h"
#include "server/store/memory_store.h"

extern char** environ;

namespace tdstore {
namespace {

std::map<std::string, std::string> Environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

// Reads and parses --tokens-file; the error names the file and the line,
// never a token.
absl::StatusOr<service::AccessControl> LoadTokens(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError("--tokens-file " + path + ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  auto access = service::AccessControl::Parse(text.str());
  if (!access.ok()) {
    return absl::InvalidArgumentError("--tokens-file " + path + ": " +
                                      std::string(access.status().message()));
  }
  return access;
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

// The redis-server for the embedded default: the one named, except that the
// default name ("redis-server") means the binary beside tdstored's own when
// there is one (a wheel installs the two together), else PATH's.
std::string RedisServerBinary(const std::string& named) {
  if (named != "redis-server") return named;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return named;
  std::string beside(self, static_cast<size_t>(n));
  beside = beside.substr(0, beside.rfind('/') + 1) + "redis-server";
  return access(beside.c_str(), X_OK) == 0 ? beside : named;
}

int Run(int argc, char** argv) {
  // Buffers of call data (indexed values and selections, up to hundreds of
  // MiB) come and go; glibc's default raises its mmap threshold each time
  // such a buffer is freed, after which the next ones come from the heap,
  // and freed heap memory stays resident. Fixing the threshold returns every
  // large buffer to the kernel when freed, so the resident set follows the
  // memory budget (--memory-budget-bytes) instead of its high-water mark.
  // Redis replies' strings that long come from a pool of kept mappings
  // instead (reply_objects.h): the same size, so every such string is the
  // pool's.
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(redis::kPooledStringBytes));
  // Below that threshold, buffers of about a window (1 MiB: a Redis reply,
  // a stream message) come and go on every call. glibc gives the top of a
  // heap back to the kernel once 128 KiB of it are free, so each such
  // buffer used to start on fresh pages: page faults took a quarter of a
  // whole-leaf read's CPU (perf, 2.5 MiB reads). Keeping up to 8 MiB free
  // per heap (a pipeline's windows) makes them warm; it costs at most that
  // per malloc arena (glibc makes up to 8 per core), outside the budget.
  mallopt(M_TRIM_THRESHOLD, 8 << 20);
  // Debian builds abseil without NDEBUG, so its Mutex (which gRPC locks
  // many times per call) keeps a lock graph for deadlock detection: each
  // Lock and Unlock takes a global spin lock and looks the mutex up in that
  // graph (GraphCycles::GetId in a profile of 256-row samples; about 23 ns
  // per uncontended Lock/Unlock pair against 6 without). Detection is a
  // debugging aid; a release tdstored turns it off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Block the shutdown signals before any thread starts, so every thread
  // inherits the mask and only sigwait() below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);  // not a stop: reloads --tokens-file
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto config = ParseDaemonConfig(argc - 1, argv + 1, Environment());
  if (!config.ok()) {
    LogError(std::string(config.status().message()));
    return 2;
  }
  if (config->help) {
    std::fputs(DaemonUsage().c_str(), stdout);
    return 0;
  }
  if (config->version) {
    std::printf("tdstored %s\n", TDSTORE_VERSION);
    return 0;
  }
  LogLevel log_level = LogLevel::kInfo;
  ParseLogLevel(config->log_level, &log_level);  // ParseDaemonConfig checked the name
  SetLogLevel(log_level);

  // Files and sockets we create (the unix socket above all) are never
  // world-accessible, not even for the moment before chmod.
  umask(0007);

  // --- Metrics first: the Redis client and the sweeper report to them. ------
  std::unique_ptr<metrics::PrometheusMetrics> metrics_owner;
  if (!config->metrics_listen.empty()) {
    auto started = metrics::PrometheusMetrics::Start(config->metrics_listen, TDSTORE_VERSION);
    if (!started.ok()) {
      LogError(std::string(started.status().message()));
      return 1;
    }
    metrics_owner = *std::move(started);
  }

  // --- Redis: the given one, or our own embedded child; none for memory. ----
  const bool in_memory = config->backend == "memory";
  std::unique_ptr<redis::EmbeddedRedis> embedded;
  std::string redis_url = config->redis_url;
  if (in_memory) {
    LogWarning("--backend memory: dicts live in this process only (not durable, not shared with "
               "other daemons); for trying tdstore and for tests");
  } else if (redis_url.empty()) {
    redis::EmbeddedRedisOptions options;
    options.binary = RedisServerBinary(config->redis_server_bin);
    options.data_dir = config->data_dir;
    options.maxmemory_bytes = config->redis_maxmemory_bytes > 0
                                  ? config->redis_maxmemory_bytes
                                  : redis::MemoryFraction(config->redis_maxmemory_percent);
    // The quota stays below maxmemory: Redis needs room of its own (keys,
    // hash records, the AOF rewrite buffer), and a replaced leaf is held
    // twice until its old generation is deleted.
    if (config->namespace_quota_auto) {
      config->store.namespace_quota_bytes = options.maxmemory_bytes / 4 * 3;
    }
    auto started = redis::EmbeddedRedis::Start(options);
    if (!started.ok()) {
      LogError("cannot start the embedded redis-server: " + started.status().ToString());
      return 1;
    }
    embedded = *std::move(started);
    redis_url = "unix://" + embedded->address().path;
    LogInfo("started embedded redis-server (pid " + std::to_string(embedded->pid()) + ") at " +
        embedded->address().Redacted() +
        (config->data_dir.empty() ? " without persistence" : " persisting to " + config->data_dir) +
        ", maxmemory " + std::to_string(options.maxmemory_bytes) + " bytes (noeviction)");
  }
  if (config->store.namespace_quota_bytes > 0) {
    LogInfo("namespace '" + config->store.ns + "' may store " +
            std::to_string(config->store.namespace_quota_bytes) + " bytes (--namespace-quota-bytes)");
  } else if (!embedded && !in_memory) {
    LogInfo("no --namespace-quota-bytes: set it (and Redis' own maxmemory) so that one request "
            "cannot fill Redis");
  }
  LogInfo("memory budget " + std::to_string(config->store.memory_budget_bytes) +
          " bytes for buffered call data (--memory-budget-bytes)");
  // The embedded Redis has no password: TDSTORE_REDIS_PASSWORD is for --redis.
  std::unique_ptr<redis::RedisClient> redis_client;
  if (!in_memory) {
    redis::ConnectOptions connect_options;
    connect_options.events = metrics_owner.get();  // null: no metrics
    connect_options.local_congestion = config->redis_local_congestion;
    if (!connect_options.local_congestion.empty()) {
      absl::Status allowed = redis::CheckCongestionControl(connect_options.local_congestion);
      if (!allowed.ok()) {
        LogError("--redis-local-congestion: " + std::string(allowed.message()));
        return 2;
      }
    }
    auto made = redis::MakeRedisClient(
        redis_url, embedded ? std::string() : config->redis_password, connect_options);
    if (!made.ok()) {
      LogError("--redis: " + std::string(made.status().message()));
      return 2;
    }
    redis_client = *std::move(made);
  }

  service::ServiceOptions service_options;
  service_options.limits = config->limits;
  if (!config->tokens_file.empty()) {
    auto access = LoadTokens(config->tokens_file);
    if (!access.ok()) {
      LogError(std::string(access.status().message()));
      return 2;
    }
    service_options.access = *std::move(access);
  }

  // The store: in memory, or on Redis with its sweeper and schema watch.
  std::unique_ptr<store::DictStore> dicts;
  std::unique_ptr<store::Sweeper> sweeper;
  std::unique_ptr<store::SchemaWatch> schema_watch;
  std::unique_ptr<store::Store> store_owner;
  store::MemoryStore* memory_store = nullptr;
  if (in_memory) {
    auto memory = std::make_unique<store::MemoryStore>(config->store);
    memory_store = memory.get();
    store_owner = std::move(memory);
  } else {
    dicts = std::make_unique<store::DictStore>(redis_client.get(), config->store);
    // A write's replaced generation is deleted after its answer, on a worker
    // (redis_store/retire_queue.h); the sweeper covers a crash in between.
    dicts->RetireInBackground();
    sweeper = std::make_unique<store::Sweeper>(dicts.get(), metrics_owner.get());
    sweeper->Start(config->sweep_interval);
    // Subscribes to schema changes, for WatchSchema (redis_store/schema_watch.h).
    schema_watch = std::make_unique<store::SchemaWatch>(dicts.get(), config->schema_event_delay);
    schema_watch->Start();
    store_owner = std::make_unique<store::RedisStore>(dicts.get(), schema_watch.get());
  }
  const int64_t max_write_lease =
      store_owner->IndexedWriteLease(config->store.max_indexed_bytes, true);
  if (config->store.memory_budget_bytes < max_write_lease) {
    LogWarning("--memory-budget-bytes is below what one indexed write of --max-indexed-bytes "
               "needs (" + std::to_string(max_write_lease) + " bytes): such writes will be refused");
  }
  // The same-host data path: regions lent on the shm socket, which is
  // listening before the first client can learn of it from ServerInfo.
  shm::RegionTable shm_regions(config->shm_max_bytes);
  std::unique_ptr<shm::ShmListener> shm_listener;
  if (const std::string shm_path = ShmSocketPath(*config); !shm_path.empty()) {
    auto listener = shm::ShmListener::Start(shm_path, &shm_regions);
    if (!listener.ok()) {
      LogError(std::string(listener.status().message()));
      return 1;
    }
    shm_listener = *std::move(listener);
    service_options.shm_regions = &shm_regions;
    service_options.shm_socket = shm_path;
    service_options.shm_loopback = config->shm_clients == "local";
  }
  service::TdStoreService service(store_owner.get(), std::move(service_options));

  // --- gRPC ---------------------------------------------------------------
  // TLS when a certificate is given; the unix socket gets the same
  // credentials, so a token never crosses any listener in the clear.
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!config->tls_cert_pem.empty()) {
    grpc::SslServerCredentialsOptions tls(
        config->tls_client_ca_pem.empty()
            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    tls.pem_root_certs = config->tls_client_ca_pem;
    tls.pem_key_cert_pairs.push_back({config->tls_key_pem, config->tls_cert_pem});
    credentials = grpc::SslServerCredentials(tls);
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int tcp_port = 0;
  if (!config->listen.empty()) {
    builder.AddListeningPort(config->listen, credentials, &tcp_port);
  }
  if (!config->unix_socket.empty()) {
    struct stat st;
    // A socket file left by a previous run would make bind fail.
    if (lstat(config->unix_socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
      unlink(config->unix_socket.c_str());
    }
    builder.AddListeningPort("unix:" + config->unix_socket, credentials);
  }
  // Data moves in chunks of <= 1 MiB; no message needs more than 4 MiB.
  builder.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  builder.SetMaxSendMessageSize(kMaxReceiveMessageBytes);
  // How much of a client's stream gRPC may receive ahead of the handler.
  // With BDP probing on (gRPC's default), the HTTP/2 window of a fast
  // client's write stream grew until tdstored held 200+ MiB of received
  // chunks during a 2 GiB put (VmHWM 223 MiB against 17 at launch). Fixed
  // at kStreamWindowBytes it bounds that to the window per stream: the same
  // put peaked at 42 MiB, at the same throughput (docs/benchmarks.md). Four
  // chunks ahead keep a put streaming at a 1 ms round trip (4 GB/s).
  constexpr int kStreamWindowBytes = 4 << 20;
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kStreamWindowBytes);
  builder.RegisterService(&service);
  // Per-call metrics and the debug call log, outside the handlers.
  if (metrics_owner != nullptr || LogEnabled(LogLevel::kDebug)) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(std::make_unique<metrics::CallInterceptorFactory>(
        metrics_owner.get(), std::vector<std::string>{v1::TdStore::service_full_name()},
        service::TdStoreService::RawMethods()));
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || (!config->listen.empty() && tcp_port == 0)) {
    LogError("cannot listen on " + (config->listen.empty() ? "unix:" + config->unix_socket
                                                            : config->listen));
    return 1;
  }
  if (!config->unix_socket.empty()) chmod(config->unix_socket.c_str(), 0660);

  // Health: NOT_SERVING until Redis answers, and whenever it stops.
  // The memory store has no back end to lose: SERVING from now on.
  std::unique_ptr<HealthMonitor> health;
  if (in_memory) {
    server->GetHealthCheckService()->SetServingStatus(true);
  } else {
    health = std::make_unique<HealthMonitor>(
        redis_client.get(), server->GetHealthCheckService(),
        [](bool healthy, const std::string& reason) {
          Log(healthy ? LogLevel::kInfo : LogLevel::kWarning,
              healthy ? "Redis is reachable: SERVING (" + reason + ")"
                      : "Redis is unreachable: NOT_SERVING (" + reason + ")");
        });
    health->Start();
  }
  if (embedded) {
    // If it dies (OOM killer, a crash, kill -9), it is restarted; health
    // goes NOT_SERVING at once and SERVING again once it answers.
    embedded->Supervise([&health](bool error, const std::string& line) {
      Log(error ? LogLevel::kError : LogLevel::kWarning, line);
      if (error) health->ReportDown(line);
    });
  }

  std::string addresses;
  if (!config->listen.empty()) {
    std::string host = config->listen.substr(0, config->listen.rfind(':'));
    addresses += host + ":" + std::to_string(tcp_port) + "\n";
  }
  if (!config->unix_socket.empty()) addresses += "unix://" + config->unix_socket + "\n";
  std::string shown = addresses.substr(0, addresses.size() - 1);
  std::replace(shown.begin(), shown.end(), '\n', ' ');
  LogInfo("serving on " + shown + " with " + store_owner->Ping().backend +
      (config->tls_cert_pem.empty() ? ", plaintext"
                                    : config->tls_client_ca_pem.empty() ? ", TLS" : ", mutual TLS") +
      (config->tokens_file.empty() ? ", no tokens" : ", bearer tokens required"));
  if (!config->listen.empty()) {
    const std::string host = config->listen.substr(0, config->listen.rfind(':'));
    const bool loopback = host == "127.0.0.1" || host == "localhost" || host == "[::1]";
    if (!loopback && (config->tls_cert_pem.empty() || config->tokens_file.empty())) {
      LogWarning("listening on " + config->listen +
          " beyond loopback without both TLS and tokens: anyone who can reach it can read "
          "and write every dict");
    }
  }
  if (metrics_owner != nullptr) {
    // Last line of the ready file: tests find a port picked with :0 there.
    const std::string host = config->metrics_listen.substr(0, config->metrics_listen.rfind(':'));
    const std::string url =
        "http://" + host + ":" + std::to_string(metrics_owner->port()) + "/metrics";
    LogInfo("metrics on " + url);
    addresses += "metrics " + url + "\n";
  }
  if (!config->ready_file.empty() && !WriteReadyFile(config->ready_file, addresses)) {
    LogError("cannot write --ready-file " + config->ready_file);
  }

  // --- Wait for SIGTERM/SIGINT, then drain; SIGHUP reloads the tokens. -------
  int sig = 0;
  while (sigwait(&stop_signals, &sig) == 0 && sig == SIGHUP) {
    if (config->tokens_file.empty()) {
      LogWarning("got SIGHUP: no --tokens-file to reload");
      continue;
    }
    // A file that no longer parses keeps the grants in force: a typo must
    // neither lock everyone out nor let everyone in.
    auto access = LoadTokens(config->tokens_file);
    if (!access.ok()) {
      LogError("got SIGHUP: keeping the current tokens: " + std::string(access.status().message()));
      continue;
    }
    service.ReplaceAccessControl(*std::move(access));
    LogInfo("got SIGHUP: reloaded " + config->tokens_file);
  }
  LogInfo(std::string("got ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") +
      ", finishing in-flight calls");
  // NOT_SERVING first, so load balancers and probes stop sending; then new
  // calls are refused (retryable) while those in flight get the grace
  // period; then the server shuts down without waiting on idle clients.
  if (health) {
    health->Stop();
  } else {
    server->GetHealthCheckService()->SetServingStatus(false);
  }
  service.StartDraining();
  // Ends every watch stream: clients stop trusting their copies.
  if (schema_watch) schema_watch->Stop();
  if (memory_store != nullptr) memory_store->Stop();
  if (!service.WaitIdle(std::chrono::system_clock::now() + config->shutdown_grace)) {
    LogWarning("calls still running after --shutdown-grace-ms: cancelling them");
  }
  server->Shutdown(std::chrono::system_clock::now());
  server->Wait();
  // Before the sweeper: what the last writes retired is dropped now.
  if (dicts) dicts->StopRetiring();
  if (sweeper) sweeper->Stop();
  if (embedded) embedded->Stop();
  if (!config->unix_socket.empty()) unlink(config->unix_socket.c_str());
  LogInfo("stopped");
  return 0;
}

}  // namespace
}  // namespace tdstore

int main(int argc, char** argv) { return tdstore::Run(argc, argv); }
