#include "tests/bench/proc_stats.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

namespace tdstore::bench {
namespace {

std::string ProcPath(pid_t pid, const char* file) {
  return pid == 0 ? std::string("/proc/self/") + file
                  : "/proc/" + std::to_string(pid) + "/" + file;
}

// "VmRSS:	  123456 kB" -> bytes.
int64_t StatusField(pid_t pid, const std::string& name) {
  std::ifstream in(ProcPath(pid, "status"));
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, name.size(), name) == 0 && line.size() > name.size() &&
        line[name.size()] == ':') {
      return std::atoll(line.c_str() + name.size() + 1) * 1024;
    }
  }
  return -1;
}

}  // namespace

int64_t ResidentBytes(pid_t pid) { return StatusField(pid, "VmRSS"); }
int64_t PeakResidentBytes(pid_t pid) { return StatusField(pid, "VmHWM"); }
int64_t SharedResidentBytes(pid_t pid) { return StatusField(pid, "RssShmem"); }

bool ResetPeakResident(pid_t pid) {
  std::ofstream out(ProcPath(pid, "clear_refs"));
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

double CpuSeconds(pid_t pid) {
  if (pid == 0) {
    rusage usage{};
    if (getrusage(RUSAGE_SELF, &usage) != 0) return -1;
    return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
           static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  }
  std::ifstream in(ProcPath(pid, "stat"));
  std::string stat;
  if (!std::getline(in, stat)) return -1;
  // The command name (field 2) may hold spaces: fields count from the ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  // Field 3 is the first after ')'; utime and stime are fields 14 and 15.
  std::string skip;
  for (int field = 3; field < 14; ++field) fields >> skip;
  long long utime = 0, stime = 0;
  if (!(fields >> utime >> stime)) return -1;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

MachineCpu ReadMachineCpu() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  MachineCpu out;
  if (cpu != "cpu") return out;
  out.busy = static_cast<double>(user + nice + system + irq + softirq) / tick;
  out.steal = static_cast<double>(steal) / tick;
  return out;
}

double Samples::Percentile(double p) const {
  if (values_.empty()) return 0;
  std::vector<double> sorted = values_;
  std::sort(sorted.begin(), sorted.end());
  // Nearest rank: the smallest value with at least p% of samples <= it.
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const size_t i = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return sorted[std::min(i, sorted.size() - 1)];
}

double Samples::Sum() const { return std::accumulate(values_.begin(), values_.end(), 0.0); }

}  // namespace tdstore::bench
