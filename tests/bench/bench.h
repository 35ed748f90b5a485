// tdstore-bench: the pieces every scenario uses.
//
// A scenario runs each job twice in the same process against the same
// Redis: through tdstore (client library -> gRPC -> tdstored -> Redis) and
// through the raw baseline (raw_ops.h: a hiredis client doing the ideal
// Redis work on the same key layout). Each job becomes one Row: both
// figures, their ratio (higher is better, 1.0 = as fast as raw), and what a
// Meter saw around each side: Redis traffic and CPU, tdstored's CPU and peak
// RSS, the client's CPU and peak RSS.
#ifndef TDSTORE_TESTS_BENCH_BENCH_H_
#define TDSTORE_TESTS_BENCH_BENCH_H_

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tdstore/client.h"
#include "tests/bench/proc_stats.h"
#include "tests/bench/raw_ops.h"
#include "tests/bench/raw_client.h"

namespace tdstore::bench {

constexpr int64_t kMiB = 1 << 20;

struct BenchOptions {
  bool quick = false;
  std::string json_path;
  bool unix_socket = false;
  bool cluster = false;
  std::vector<std::string> scenarios;  // name prefixes; empty: all
  std::string addr;                    // connect to this tdstored ...
  std::string redis;                   // ... and this Redis
  std::string ns = "td";
  pid_t daemon_pid = -1;  // with --addr: the daemon's pid, for its memory and CPU
  int repeats = 0;        // 0: 3 (1 with --quick)
  uint64_t seed = 42;

  // True if a row (or a group, by its prefix) named `name` is selected.
  bool Selected(const std::string& name) const;
  int Repeats() const { return repeats > 0 ? repeats : (quick ? 1 : 3); }
};

// One side (tdstore or raw) of a row: totals over every metered run.
struct Side {
  double wall_seconds = 0;
  int64_t ops = 0;
  int64_t redis_in = 0;   // bytes Redis received from clients
  int64_t redis_out = 0;  // bytes Redis sent to clients
  double redis_cpu = 0;   // seconds
  double daemon_cpu = -1;  // seconds; -1: unknown (no daemon pid)
  double client_cpu = 0;   // seconds, this process (all threads)
  double machine_cpu = 0;  // seconds every process on the machine was busy
  double steal_cpu = 0;    // seconds the hypervisor gave to others
  int64_t daemon_peak = -1;  // peak RSS above the RSS at the start; -1: unknown
  int64_t daemon_peak_rss = -1;  // the peak RSS itself (VmHWM)
  // Shared memory tdstored maps at the end (RssShmem): the clients' lent
  // regions, the clients' memory and not tdstored's own.
  int64_t daemon_shared_rss = -1;
  // An upper bound of tdstored's own peak: VmHWM less the shared pages
  // resident both at the start and at the end. A lent region stays mapped
  // while its client's channel lives and its pages only grow, so those
  // pages were in the peak too (-1: unknown).
  int64_t daemon_own_peak_rss = -1;
  int64_t client_peak = -1;  // same for this process

  void Merge(const Side& o);
  // CPU seconds of everything else on the machine (other workloads; on a
  // cluster also the replicas): the noise in this side's figures.
  double others_cpu() const {
    const double others = machine_cpu - redis_cpu - client_cpu - std::max(0.0, daemon_cpu);
    return others > 0 ? others : 0;
  }
};

struct Target {
  std::string what;  // "ratio >= 0.70", "tdstored <= 64 MiB"
  bool met = false;
};

struct Row {
  std::string scenario;
  std::string metric;             // "p50 ms", "GB/s", "rows/s", ...
  bool higher_is_better = false;  // of the metric: GB/s yes, ms no
  double tdstore = 0;
  double raw = 0;
  int64_t payload_bytes = 0;  // per op: the bytes the job asks for
  int64_t result_bytes = 0;   // per op: what the client allocates for the result
  // Whether client_extra() means something: large transfers only. Small
  // calls reuse heap the warm-up freed, so their RSS does not move.
  bool client_memory_relevant = false;
  Side td, rw;
  std::vector<Target> targets;
  std::string note;
  std::string error;  // non-empty: the scenario failed

  // > 1: tdstore faster than raw.
  double ratio() const;
  // Client peak above its start and above the result it allocates.
  int64_t client_extra() const {
    // Below 0 when the result reused memory the process already held.
    if (td.client_peak < 0 || !client_memory_relevant) return -1;
    return td.client_peak > result_bytes ? td.client_peak - result_bytes : 0;
  }
};

class Report {
 public:
  void Add(Row row);
  const std::vector<Row>& rows() const { return rows_; }
  bool any_error() const;
  // Markdown table, then the targets.
  std::string Table() const;
  std::string Json(const std::string& header_json) const;

 private:
  std::vector<Row> rows_;
};

struct BenchEnv {
  BenchOptions opt;
  std::string address;    // what the client connects to
  std::string redis_url;  // what the raw baseline connects to
  std::string backend;    // "standalone" or "cluster"
  pid_t daemon_pid = -1;
  int64_t daemon_idle_rss = -1;
  std::unique_ptr<Client> client;
  std::unique_ptr<RawRedis> raw;  // the main thread's baseline connection
  std::unique_ptr<RawOps> ops;
  Report report;
};

// Measures around one run of one side. Start() resets the peak RSS of
// tdstored and of this process and reads Redis' counters.
//
// With TDSTORE_BENCH_TRACE=1 in the environment, Start and Stop print
// "trace <label> start|stop <CLOCK_MONOTONIC seconds>" to stderr, to cut a
// profile of the same run into phases (`perf record -k CLOCK_MONOTONIC`,
// then `perf report --time start,stop`).
class Meter {
 public:
  explicit Meter(BenchEnv& env) : env_(env) {}
  void Start(const std::string& label = "run");
  Side Stop(int64_t ops);

 private:
  BenchEnv& env_;
  std::string label_;
  double wall0_ = 0, daemon_cpu0_ = -1, client_cpu0_ = 0;
  MachineCpu machine0_;
  int64_t daemon_rss0_ = -1, daemon_shared0_ = -1, client_rss0_ = -1;
  RedisCounters redis0_;
};

// Throws std::runtime_error for a failed status (a scenario error).
void Check(const absl::Status& status, const std::string& what);
template <typename T>
T Check(absl::StatusOr<T> value, const std::string& what) {
  Check(value.status(), what);
  return *std::move(value);
}

// Runs `op` once untimed (warm-up), then `reps` times under a Meter; each
// call's latency (seconds) goes to *latency. `after` (optional) runs after
// each call, untimed but metered (cleanup such as deleting keys).
Side TimeOps(BenchEnv& env, int reps, const std::function<void()>& op, Samples* latency,
             const std::function<void()>& after = nullptr);

// The dict's fresh layout as tdstored wrote it.
RawDict LoadDict(BenchEnv& env, const std::string& name);
// Drops `name` if it exists; creates it.
Dict CreateDict(BenchEnv& env, const std::string& name, std::vector<int64_t> batch);

// Runs fn; a thrown exception becomes an error row named `scenario`.
void Guard(BenchEnv& env, const std::string& scenario, const std::function<void()>& fn);

// The scenarios (issue 5).
void RunSeedScenarios(BenchEnv& env);    // a.*
void RunBulkScenarios(BenchEnv& env);    // b.*
void RunReplayScenarios(BenchEnv& env);  // c.* and d.*

}  // namespace tdstore::bench

#endif  // TDSTORE_TESTS_BENCH_BENCH_H_
