#include "tests/support/daemon_process.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/child_process.h"

namespace tdstore::testing {
namespace {

using Clock = std::chrono::steady_clock;

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

  std::vector<std::string> argv = {binary_, "--listen", "127.0.0.1:0", "--ready-file", ready_file};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = -1;
  absl::Status spawned = SpawnChild(std::move(argv), log_file, ChildLog::kTruncate, &pid);
  if (!spawned.ok()) return spawned;
  pid_ = pid;

  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    int wait_status = 0;
    if (TryReapChild(pid_, &wait_status)) {
      pid_ = -1;
      return absl::InternalError("tdstored exited with status " +
                                 std::to_string(ExitCodeOf(wait_status)) +
                                 " before it was ready:" + LogTail());
    }
    // tdstored writes the file whole (temp file + rename): once it exists,
    // it is complete.
    if (std::filesystem::exists(ready_file)) {
      addresses_.clear();
      metrics_url_.clear();
      for (std::string& line : ReadLines(ready_file)) {
        if (line.rfind("metrics ", 0) == 0) {
          metrics_url_ = line.substr(8);
        } else {
          addresses_.push_back(std::move(line));
        }
      }
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
  const int exit_code = StopChild(pid_, std::chrono::seconds(20));
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
