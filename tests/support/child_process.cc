// Child processes for the test harness: see child_process.h.
#include "tests/support/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

namespace tdstore::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kPoll(5);

void WaitBlocking(pid_t pid) {
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

absl::Status SpawnChild(std::vector<std::string> argv_strings, const std::string& log_path,
                        ChildLog log_mode, pid_t* pid_out) {
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls until exec.
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  const char* log = log_path.c_str();
  const int log_flags = O_WRONLY | O_CREAT | O_CLOEXEC |
                        (log_mode == ChildLog::kTruncate ? O_TRUNC : O_APPEND);
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    // Dies with the test (even when the test crashes).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in >= 0) dup2(in, STDIN_FILENO);
    const int out = open(log, log_flags, 0644);
    if (out >= 0) {
      dup2(out, STDOUT_FILENO);
      dup2(out, STDERR_FILENO);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  *pid_out = pid;
  return absl::OkStatus();
}

bool TryReapChild(pid_t pid, int* wait_status) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid && wait_status != nullptr) *wait_status = status;
  return r == pid || (r < 0 && errno == ECHILD);
}

int ExitCodeOf(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

void KillChild(pid_t pid) {
  kill(pid, SIGKILL);
  WaitBlocking(pid);
}

int StopChild(pid_t pid, std::chrono::milliseconds grace) {
  kill(pid, SIGTERM);
  const auto kill_at = Clock::now() + grace;
  int status = -1;
  while (!TryReapChild(pid, &status)) {
    if (Clock::now() >= kill_at) {
      KillChild(pid);
      return 128 + SIGKILL;
    }
    std::this_thread::sleep_for(kPoll);
  }
  return status == -1 ? -1 : ExitCodeOf(status);
}

void StopChildren(const std::vector<pid_t>& pids, std::chrono::milliseconds grace) {
  for (pid_t pid : pids) kill(pid, SIGTERM);
  const auto kill_at = Clock::now() + grace;
  std::vector<pid_t> left = pids;
  for (;;) {
    left.erase(std::remove_if(left.begin(), left.end(), [](pid_t p) { return TryReapChild(p); }),
               left.end());
    if (left.empty()) return;
    if (Clock::now() >= kill_at) {
      for (pid_t pid : left) KillChild(pid);
      return;
    }
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace tdstore::testing
