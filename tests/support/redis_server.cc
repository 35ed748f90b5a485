// RedisServerProcess: see redis_server.h.
//
// Talks to the server with raw hiredis, not server/redis/, so a bug in the
// code under test cannot hide behind the harness.
#include "tests/support/redis_server.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/child_process.h"
#include "tests/support/raw_redis.h"

namespace tdstore::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string LogTail(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string tail;
  for (size_t i = lines.size() > 15 ? lines.size() - 15 : 0; i < lines.size(); ++i) {
    tail += "\n  " + lines[i];
  }
  return tail;
}

std::string PercentEncode(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

using raw_redis::ContextPtr;
using raw_redis::ReplyPtr;

// The server's default user (Connect() here never AUTHs as acl_user).
raw_redis::Credentials CredentialsOf(const RedisServerOptions& options) {
  return {"", options.password};
}

// Starts redis-server on `port` and waits until it answers. *pid is set on
// success only.
absl::Status Launch(const RedisServerOptions& options, int port, const std::string& dir,
                    pid_t* pid_out) {
  const std::string log = dir + "/redis.log";
  // Truncate the log so the tail in errors is about this start.
  std::ofstream(log, std::ios::trunc).close();

  std::vector<std::string> args = {options.binary,
                                   "--port", std::to_string(port),
                                   "--bind", "127.0.0.1",
                                   "--save", "",
                                   "--appendonly", "no",
                                   "--dir", dir,
                                   "--logfile", log,
                                   "--daemonize", "no"};
  if (!options.password.empty()) {
    args.insert(args.end(), {"--requirepass", options.password});
  }
  if (!options.acl_user.empty() && !options.acl_password.empty()) {
    args.insert(args.end(), {"--user", options.acl_user, "on", ">" + options.acl_password, "~*",
                             "&*", "+@all"});
  }
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  pid_t pid = -1;
  absl::Status spawned = SpawnChild(std::move(args), log, ChildLog::kAppend, &pid);
  if (!spawned.ok()) return spawned;

  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    if (TryReapChild(pid)) {
      return absl::InternalError(options.binary + " exited during start-up; log:" + LogTail(log));
    }
    // Rather than PING, check that the server answering is *ours*: if
    // another process won the race for the port, our child is about to exit
    // with "Address already in use" while theirs answers.
    std::string error;
    if (ContextPtr c = raw_redis::Connect(port, CredentialsOf(options), &error)) {
      ReplyPtr info = raw_redis::Run(c.get(), {"INFO", "server"});
      if (info != nullptr && info->type == REDIS_REPLY_STRING &&
          std::string(info->str, info->len).find("process_id:" + std::to_string(pid) + "\r\n") !=
              std::string::npos) {
        *pid_out = pid;
        return absl::OkStatus();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  KillChild(pid);
  return absl::InternalError("redis-server did not answer PING in 10 s; log:" + LogTail(log));
}

}  // namespace

int PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

RedisServerProcess::RedisServerProcess(RedisServerOptions options) : options_(std::move(options)) {}

RedisServerProcess::~RedisServerProcess() {
  Stop();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

absl::Status RedisServerProcess::Start() {
  if (running()) return absl::FailedPreconditionError("redis-server already running");
  if (dir_.empty()) {
    const char* tmp = getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/tdstore-test-redis-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) {
      return absl::InternalError("mkdtemp " + pattern + ": " + strerror(errno));
    }
    dir_ = buf.data();
  }
  // The port picked on first start is kept for restarts. A first start can
  // lose the race for it to another process; then pick another port.
  const bool first_start = port_ == 0;
  absl::Status status;
  for (int attempt = 0; attempt < (first_start ? 5 : 1); ++attempt) {
    if (first_start) port_ = PickFreePort();
    if (port_ == 0) return absl::InternalError("no free TCP port");
    status = Launch(options_, port_, dir_, &pid_);
    if (status.ok()) return status;
    if (!first_start ||
        std::string(status.message()).find("Address already in use") == std::string::npos) {
      break;
    }
  }
  return status;
}

void RedisServerProcess::Stop() {
  if (pid_ <= 0) return;
  StopChild(pid_, std::chrono::seconds(5));
  pid_ = -1;
}

void RedisServerProcess::Kill() {
  if (pid_ <= 0) return;
  KillChild(pid_);  // immediate after SIGKILL; avoids a zombie
  pid_ = -1;
}

std::string RedisServerProcess::url() const {
  std::string credentials;
  if (!options_.acl_user.empty() && !options_.acl_password.empty()) {
    credentials = PercentEncode(options_.acl_user) + ":" + PercentEncode(options_.acl_password) + "@";
  } else if (!options_.password.empty()) {
    credentials = ":" + PercentEncode(options_.password) + "@";
  }
  return "redis://" + credentials + "127.0.0.1:" + std::to_string(port_);
}

std::vector<std::string> RedisServerProcess::Command(const std::vector<std::string>& argv) const {
  return raw_redis::Command(port_, CredentialsOf(options_), argv);
}

std::vector<std::string> RedisServerProcess::Keys(const std::string& pattern) const {
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    // Reply: [cursor, [keys...]] flattened to cursor, keys...
    std::vector<std::string> page = Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (page.empty() || page[0].rfind("(", 0) == 0) break;  // error: return what we have
    cursor = page[0];
    keys.insert(keys.end(), page.begin() + 1, page.end());
  } while (cursor != "0");
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());  // SCAN may repeat keys
  return keys;
}

}  // namespace tdstore::testing
