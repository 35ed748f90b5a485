// The embedded redis-server child of tdstored. See embedded_redis.h.
#include "server/redis/embedded_redis.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "server/redis/connection.h"

extern char** environ;

namespace tdstore::redis {
namespace {

namespace fs = std::filesystem;

// sun_path holds 108 bytes including the NUL.
constexpr size_t kMaxSocketPath = 107;
constexpr std::string_view kSocketName = "/redis.sock";

// A fresh mode-0700 directory under $TMPDIR (or /tmp when $TMPDIR is unset
// or so long that the socket path would not fit in sun_path).
absl::StatusOr<std::string> MakePrivateDir() {
  std::string base = "/tmp";
  if (const char* tmp = getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') base = tmp;
  std::string pattern = base + "/tdstored-redis-XXXXXX";
  if (pattern.size() + kSocketName.size() > kMaxSocketPath) pattern = "/tmp/tdstored-redis-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {  // mkdtemp creates it with mode 0700
    return absl::FailedPreconditionError("cannot create a directory " + pattern + ": " +
                                         strerror(errno));
  }
  return std::string(buf.data());
}

// The path execve should run: `binary` itself if it has a slash, else the
// first executable match on $PATH. Resolved before fork(), because after
// fork() in a threaded process only async-signal-safe calls are allowed.
absl::StatusOr<std::string> ResolveBinary(const std::string& binary) {
  if (binary.find('/') != std::string::npos) {
    if (access(binary.c_str(), X_OK) != 0) {
      return absl::FailedPreconditionError("cannot run " + binary + ": " + strerror(errno));
    }
    return binary;
  }
  const char* path = getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + binary;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::FailedPreconditionError("cannot run " + binary + ": not found on PATH");
}

// The last lines of the log, for start-up error messages.
std::string LogTail(const std::string& log_path) {
  std::ifstream in(log_path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const size_t first = lines.size() > 10 ? lines.size() - 10 : 0;
  std::string tail;
  for (size_t i = first; i < lines.size(); ++i) tail += "\n  " + lines[i];
  return tail.empty() ? " (empty log)" : tail;
}

// fork + execve with the child tied to this thread's life (PDEATHSIG). The
// child's stdout/stderr go to the log too, so errors Redis prints before it
// opens its logfile (bad arguments) are not lost. An exec failure comes back
// through a close-on-exec pipe as the child's errno.
absl::StatusOr<pid_t> Spawn(const std::string& path, const std::vector<std::string>& args,
                            const std::string& log_path) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) {
    return absl::FailedPreconditionError("cannot open " + log_path + ": " + strerror(errno));
  }
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    close(log_fd);
    return absl::FailedPreconditionError(std::string("pipe2: ") + strerror(errno));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(log_fd);
    close(exec_pipe[0]);
    close(exec_pipe[1]);
    return absl::FailedPreconditionError(std::string("fork: ") + strerror(err));
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // parent died before prctl took effect
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);  // undo an inherited SIG_IGN
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execve(path.c_str(), argv.data(), environ);
    const int err = errno;
    ssize_t ignored = write(exec_pipe[1], &err, sizeof(err));
    (void)ignored;
    _exit(127);
  }
  close(log_fd);
  close(exec_pipe[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(exec_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(exec_pipe[0]);
  if (n == sizeof(child_errno)) {
    waitpid(pid, nullptr, 0);
    return absl::FailedPreconditionError("cannot run " + path + ": " + strerror(child_errno));
  }
  return pid;
}

// True once the child has exited (and reaps it).
bool Exited(pid_t pid) {
  int status;
  pid_t r;
  do {
    r = waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  return r == pid || (r < 0 && errno == ECHILD);
}

}  // namespace

int64_t MemoryFraction(int percent) {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  int64_t base = (pages > 0 && page_size > 0) ? int64_t{pages} * page_size : int64_t{4} << 30;
  // Under `ulimit -v` the child inherits the cap: a maxmemory above it
  // would let Redis' allocations fail (and Redis abort) before maxmemory
  // ever refuses a write.
  struct rlimit as;
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY &&
      static_cast<int64_t>(as.rlim_cur) < base) {
    base = static_cast<int64_t>(as.rlim_cur);
  }
  return base / 100 * percent;
}

absl::StatusOr<std::unique_ptr<EmbeddedRedis>> EmbeddedRedis::Start(
    const EmbeddedRedisOptions& options) {
  absl::StatusOr<std::string> binary = ResolveBinary(options.binary);
  if (!binary.ok()) return binary.status();
  absl::StatusOr<std::string> dir = MakePrivateDir();
  if (!dir.ok()) return dir.status();

  // Owns the directory (and later the child) from here: every failure below
  // cleans up through the destructor.
  std::unique_ptr<EmbeddedRedis> redis(new EmbeddedRedis());
  redis->dir_ = *dir;
  redis->address_.kind = RedisAddress::Kind::kUnix;
  redis->address_.path = *dir + std::string(kSocketName);
  redis->log_path_ = *dir + "/redis.log";
  redis->binary_ = *binary;
  redis->start_timeout_ = options.start_timeout;
  redis->persistent_ = !options.data_dir.empty();

  std::string data_dir = *dir;
  if (!options.data_dir.empty()) {
    std::error_code ec;
    fs::create_directories(options.data_dir, ec);
    if (ec) {
      return absl::FailedPreconditionError("cannot create data dir " + options.data_dir + ": " +
                                           ec.message());
    }
    data_dir = fs::absolute(options.data_dir).string();
  }
  redis->args_ = {
      *binary,
      "--port", "0",  // no TCP listener: only this host's processes with the socket
      "--unixsocket", redis->address_.path,
      "--unixsocketperm", "700",
      "--save", "",  // never RDB snapshots; persistence, if any, is the AOF
      "--appendonly", options.data_dir.empty() ? "no" : "yes",
      "--dir", data_dir,
      "--logfile", redis->log_path_,
      "--daemonize", "no",
  };
  if (options.maxmemory_bytes > 0) {
    // noeviction: tdstore's keys are data, never a cache; refuse, don't drop.
    redis->args_.insert(redis->args_.end(), {"--maxmemory", std::to_string(options.maxmemory_bytes),
                                             "--maxmemory-policy", "noeviction"});
  }
  if (auto s = redis->SpawnAndWait(); !s.ok()) return s;
  return redis;
}

absl::Status EmbeddedRedis::SpawnAndWait() {
  pid_t child;
  {
    // Under the lock, so Stop() either sees this child (and kills it) or
    // has already refused it.
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::CancelledError("stopping");
    absl::StatusOr<pid_t> pid = Spawn(binary_, args_, log_path_);
    if (!pid.ok()) return pid.status();
    pid_ = child = *pid;
  }
  auto forget = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    pid_ = -1;
  };

  // Poll until it answers PING on the socket (loading an AOF can take a while).
  const auto deadline = std::chrono::steady_clock::now() + start_timeout_;
  ConnectOptions probe;
  probe.connect_timeout = std::chrono::milliseconds(500);
  probe.io_timeout = std::chrono::milliseconds(2000);
  std::string last_error = "no answer";
  while (std::chrono::steady_clock::now() < deadline) {
    if (Exited(child)) {
      forget();
      return absl::UnavailableError("redis-server exited during start-up; log:" +
                                    LogTail(log_path_));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return absl::CancelledError("stopping");  // Stop() reaps it
    }
    auto conn = Connection::Open(address_, probe);
    if (conn.ok()) {
      const std::string_view ping[] = {"PING"};
      auto reply = (*conn)->Call(ping);
      if (reply.ok() && reply->is_status() && reply->str() == "PONG") return absl::OkStatus();
      last_error = reply.ok() ? std::string(reply->str()) : reply.status().ToString();
    } else {
      last_error = conn.status().ToString();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(child, SIGKILL);
  while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
  }
  forget();
  return absl::UnavailableError("redis-server did not answer PING within " +
                                std::to_string(start_timeout_.count()) + " ms (" + last_error +
                                "); log:" + LogTail(log_path_));
}

void EmbeddedRedis::Supervise(Report report) {
  if (watcher_.joinable()) return;
  report_ = std::move(report);
  watcher_ = std::thread([this] { Watch(); });
}

pid_t EmbeddedRedis::pid() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pid_;
}

int EmbeddedRedis::restarts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return restarts_;
}

namespace {

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) {
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "stopped";
}

}  // namespace

void EmbeddedRedis::Watch() {
  for (;;) {
    pid_t child;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      child = pid_;
    }
    if (child > 0) {
      // Wait for the exit without reaping: the pid stays ours (not reused)
      // until we reap it under the lock, so Stop() never signals a stranger.
      siginfo_t info;
      int r;
      do {
        r = waitid(P_PID, child, &info, WEXITED | WNOWAIT);
      } while (r < 0 && errno == EINTR);
      int status = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;  // Stop() reaps it
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
      }
      report_(true, "embedded redis-server (pid " + std::to_string(child) + ") " +
                        DescribeExit(status) + "; restarting it" +
                        (persistent_ ? " from its append-only file"
                                    : ": it had no persistence (no --data-dir), so EVERY DICT "
                                      "IT HELD IS LOST"));
    }
    // Restart, with backoff while starts fail.
    for (auto backoff = std::chrono::milliseconds(100);;
         backoff = std::min<std::chrono::milliseconds>(backoff * 2, std::chrono::seconds(5))) {
      absl::Status started = SpawnAndWait();
      if (started.ok()) break;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (stopping_) return;
        report_(true, "cannot restart the embedded redis-server (retrying in " +
                          std::to_string(backoff.count()) + " ms): " + started.ToString());
        if (wake_.wait_for(lock, backoff, [this] { return stopping_; })) return;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++restarts_;
      child = pid_;
    }
    report_(false, "restarted the embedded redis-server (pid " + std::to_string(child) + ")");
  }
}

EmbeddedRedis::~EmbeddedRedis() { Stop(); }

void EmbeddedRedis::Stop() {
  pid_t child;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    child = pid_;
  }
  wake_.notify_all();
  // SIGTERM lets Redis flush the AOF (and wakes the watcher); SIGKILL only
  // if it hangs.
  if (child > 0) kill(child, SIGTERM);
  if (watcher_.joinable()) watcher_.join();
  if (child > 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    bool gone = Exited(child);
    while (!gone && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      gone = Exited(child);
    }
    if (!gone) {
      kill(child, SIGKILL);
      while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    pid_ = -1;
  }
  if (!dir_.empty()) {
    std::error_code ec;  // best effort: nothing useful to do on failure
    fs::remove_all(dir_, ec);
    dir_.clear();
  }
}

}  // namespace tdstore::redis
