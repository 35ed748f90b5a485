// What tdstore-bench reads about processes: resident memory and its peak
// (/proc/<pid>/status VmRSS / VmHWM, the peak reset through clear_refs) and
// CPU time (/proc/<pid>/stat utime + stime; getrusage for this process).
//
// Linux only. Every reader returns -1 when the value cannot be read (no such
// process, /proc not mounted), so a report can say "n/a" instead of failing.
#ifndef TDSTORE_TESTS_BENCH_PROC_STATS_H_
#define TDSTORE_TESTS_BENCH_PROC_STATS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace tdstore::bench {

// A pid of 0 means this process ("self").
int64_t ResidentBytes(pid_t pid);  // VmRSS
int64_t PeakResidentBytes(pid_t pid);  // VmHWM
// Resident pages of shared memory the process maps (RssShmem): for
// tdstored, the clients' lent regions its copies touched. They are the
// clients' memory, counted in VmRSS and VmHWM of every process mapping them.
int64_t SharedResidentBytes(pid_t pid);
// Resets VmHWM to the current VmRSS (`echo 5 > /proc/<pid>/clear_refs`).
// False if the kernel refused (then VmHWM is the peak since the start).
bool ResetPeakResident(pid_t pid);
// User + system CPU seconds the process used so far (all its threads).
double CpuSeconds(pid_t pid);

// CPU seconds the whole machine spent busy (user, nice, system, irq,
// softirq) and stolen by the hypervisor, summed over CPUs (/proc/stat).
struct MachineCpu {
  double busy = 0;
  double steal = 0;
};
MachineCpu ReadMachineCpu();

// Seconds on a monotonic clock.
inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Latency or throughput samples; percentiles by nearest rank.
class Samples {
 public:
  void Add(double v) { values_.push_back(v); }
  size_t size() const { return values_.size(); }
  bool empty() const { return values_.empty(); }
  // p in [0, 100]. 0 when empty.
  double Percentile(double p) const;
  double Median() const { return Percentile(50); }
  double Sum() const;

 private:
  std::vector<double> values_;
};

}  // namespace tdstore::bench

#endif  // TDSTORE_TESTS_BENCH_PROC_STATS_H_
