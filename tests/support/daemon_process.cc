#include "tests/support/daemon_process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace tdstore::testing {
namespace {

using Clock = std::chrono::steady_clock;

// waitpid without blocking; the exit status once the child is gone.
bool Reap(pid_t pid, int* exit_code) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r != pid) return false;
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

}  // namespace

DaemonProcess::DaemonProcess(std::string binary) : binary_(std::move(binary)) {
  std::string pattern = (std::filesystem::temp_directory_path() / "tdstored-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) != nullptr) dir_ = pattern;
}

DaemonProcess::~DaemonProcess() {
  Stop();
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

absl::Status DaemonProcess::Start(const std::vector<std::string>& args,
                                  std::chrono::milliseconds timeout) {
  if (running()) return absl::FailedPreconditionError("tdstored is already running");
  if (dir_.empty()) return absl::InternalError("cannot create a temporary directory");
  const std::string ready_file = dir_ + "/ready";
  const std::string log_file = dir_ + "/tdstored.log";
  std::filesystem::remove(ready_file);

  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls until exec.
  std::vector<std::string> argv_strings = {binary_, "--listen", "127.0.0.1:0", "--ready-file",
                                           ready_file};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int log = open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (log >= 0) {
      dup2(log, STDOUT_FILENO);
      dup2(log, STDERR_FILENO);
    }
    if (null >= 0) dup2(null, STDIN_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;

  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    int exit_code = 0;
    if (Reap(pid_, &exit_code)) {
      pid_ = -1;
      return absl::InternalError("tdstored exited with status " + std::to_string(exit_code) +
                                 " before it was ready:" + LogTail());
    }
    // tdstored writes the file whole (temp file + rename): once it exists,
    // it is complete.
    if (std::filesystem::exists(ready_file)) {
      addresses_ = ReadLines(ready_file);
      if (!addresses_.empty()) {
        address_ = addresses_.front();
        return absl::OkStatus();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Stop();
  return absl::DeadlineExceededError("tdstored was not ready within " +
                                     std::to_string(timeout.count()) + " ms:" + LogTail());
}

int DaemonProcess::Stop() {
  if (!running()) return -1;
  kill(pid_, SIGTERM);
  int exit_code = -1;
  const auto kill_at = Clock::now() + std::chrono::seconds(20);
  while (!Reap(pid_, &exit_code)) {
    if (Clock::now() > kill_at) {
      kill(pid_, SIGKILL);
      while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
      }
      exit_code = 128 + SIGKILL;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = -1;
  return exit_code;
}

std::string DaemonProcess::LogTail() const {
  std::vector<std::string> lines = ReadLines(dir_ + "/tdstored.log");
  std::ostringstream tail;
  for (size_t i = lines.size() > 20 ? lines.size() - 20 : 0; i < lines.size(); ++i) {
    tail << "\n  " << lines[i];
  }
  return tail.str();
}

}  // namespace tdstore::testing
