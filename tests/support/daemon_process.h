// Test harness: a real tdstored child process (e2e tests, tdstore-bench).
//
//   DaemonProcess daemon;
//   ASSERT_TRUE(daemon.Start({"--redis", redis.url(), "--namespace", "t"}).ok());
//   tdstore::Client client(daemon.address());     // "127.0.0.1:PORT"
//   EXPECT_EQ(daemon.Stop(), 0);                   // SIGTERM: clean exit
//
// Start() adds `--listen 127.0.0.1:0 --ready-file <dir>/ready` to the given
// flags and waits until tdstored writes the ready file, whose lines are the
// addresses it serves (TCP first, then the unix socket if any; with
// --metrics-listen a last line "metrics http://HOST:PORT/metrics"). The child's
// stdout and stderr go to <dir>/tdstored.log; it dies with the thread that
// started it (PR_SET_PDEATHSIG), so drive it from the test's main thread.
// The destructor stops it and removes its directory.
#ifndef TDSTORE_TESTS_SUPPORT_DAEMON_PROCESS_H_
#define TDSTORE_TESTS_SUPPORT_DAEMON_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tdstore::testing {

class DaemonProcess {
 public:
  explicit DaemonProcess(std::string binary = TDSTORE_TDSTORED_BIN);
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // Spawns tdstored with `args` and waits for its ready file. Error with the
  // log's tail if it exits first or is not ready within `timeout`.
  absl::Status Start(const std::vector<std::string>& args,
                     std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // SIGTERM, then SIGKILL after 20 s; waits for the child and returns its
  // exit status (128 + signal if a signal ended it; -1 if none was running).
  int Stop();
  bool running() const { return pid_ > 0; }
  // The child's process id (-1 when not running), e.g. to read /proc/<pid>.
  pid_t pid() const { return pid_; }

  // First line of the ready file: the TCP address, "127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  // The gRPC addresses of the ready file ("unix:///path" for --unix-socket):
  // every line but the metrics one.
  const std::vector<std::string>& addresses() const { return addresses_; }
  // With --metrics-listen: "http://HOST:PORT/metrics"; else empty.
  const std::string& metrics_url() const { return metrics_url_; }
  // A private directory for this daemon (its log; a place for a socket).
  const std::string& dir() const { return dir_; }
  // The last lines of the daemon's log, for failure messages.
  std::string LogTail() const;

 private:
  std::string binary_;
  std::string dir_;
  pid_t pid_ = -1;
  std::string address_;
  std::vector<std::string> addresses_;
  std::string metrics_url_;
};

}  // namespace tdstore::testing

#endif  // TDSTORE_TESTS_SUPPORT_DAEMON_PROCESS_H_
