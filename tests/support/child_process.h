// Test harness: spawning and stopping child processes (redis-server,
// redis-cli, tdstored) tied to the test process.
//
//   pid_t pid = -1;
//   absl::Status s = SpawnChild({"/usr/bin/redis-server", "--port", "7000"},
//                               dir + "/redis.log", ChildLog::kAppend, &pid);
//   ...
//   StopChild(pid, std::chrono::seconds(5));  // SIGTERM, SIGKILL after 5 s
//
// Thread notes: a spawned child gets SIGKILL when the *thread* that forked
// it exits (PR_SET_PDEATHSIG), so spawn from a thread that outlives the
// child (the test's main thread). The functions keep no state of their own;
// call them for a given pid from one thread at a time (waitpid reaps once).
// fork() in a multi-threaded process is fine: between fork and exec the
// child makes only async-signal-safe calls.
#ifndef TDSTORE_TESTS_SUPPORT_CHILD_PROCESS_H_
#define TDSTORE_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tdstore::testing {

// How SpawnChild opens the log file (created 0644 if missing).
enum class ChildLog {
  kAppend,    // O_APPEND: keeps what is there (e.g. across restarts)
  kTruncate,  // O_TRUNC: starts empty
};

// Forks and execs argv[0] (a path; no PATH search) with `argv`. In the
// child: SIGKILL when the forking thread dies (and exit 127 at once if the
// parent is already gone), an empty signal mask, stdin from /dev/null,
// stdout and stderr to `log_path`; exit status 127 if exec fails (which the
// parent only sees when it reaps the child).
// Returns OK with *pid set, or INTERNAL "fork: <strerror>" (*pid untouched).
absl::Status SpawnChild(std::vector<std::string> argv, const std::string& log_path,
                        ChildLog log_mode, pid_t* pid);

// Reaps `pid` without blocking. True if it is gone: it was reaped now
// (*wait_status, if given, gets the raw waitpid status) or it is not our
// child (ECHILD: already reaped; *wait_status untouched). False while it runs.
bool TryReapChild(pid_t pid, int* wait_status = nullptr);

// A raw wait status as an exit code: the exit status, or 128 + the signal
// that ended the process.
int ExitCodeOf(int wait_status);

// SIGKILL, then waits for `pid` (immediate; leaves no zombie).
void KillChild(pid_t pid);

// SIGTERM, then polls until `pid` exits; SIGKILL (and a blocking wait) if it
// is still running after `grace`. Returns its exit code as ExitCodeOf() does
// (128 + SIGKILL when it had to be killed), or -1 if it was not our child.
int StopChild(pid_t pid, std::chrono::milliseconds grace);

// StopChild for several children at once: SIGTERM to all, one shared
// `grace`, SIGKILL to those still running after it; reaps all.
void StopChildren(const std::vector<pid_t>& pids, std::chrono::milliseconds grace);

}  // namespace tdstore::testing

#endif  // TDSTORE_TESTS_SUPPORT_CHILD_PROCESS_H_
