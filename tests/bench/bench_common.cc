// Meter, TimeOps, Report and the small helpers of bench.h.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sstream>

#include "tests/bench/bench.h"

namespace tdstore::bench {
namespace {

std::string Fmt(double v) {
  char buf[64];
  const double a = std::fabs(v);
  if (a >= 1000) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else if (a >= 100) {
    std::snprintf(buf, sizeof buf, "%.1f", v);
  } else if (a >= 1) {
    std::snprintf(buf, sizeof buf, "%.2f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  }
  return buf;
}

std::string Bytes(double b) {
  char buf[64];
  if (b < 0) return "n/a";
  if (b >= 10.0 * kMiB) {
    std::snprintf(buf, sizeof buf, "%.0f MiB", b / kMiB);
  } else if (b >= kMiB) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / kMiB);
  } else if (b >= 10 * 1024) {
    std::snprintf(buf, sizeof buf, "%.0f KiB", b / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f B", b);
  }
  return buf;
}

std::string Pct(double cpu_seconds, double wall) {
  if (cpu_seconds < 0 || wall <= 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", 100.0 * cpu_seconds / wall);
  return buf;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string SideJson(const Side& s) {
  std::ostringstream o;
  o << "{\"wall_seconds\": " << JsonNumber(s.wall_seconds) << ", \"ops\": " << s.ops
    << ", \"redis_in_bytes\": " << s.redis_in << ", \"redis_out_bytes\": " << s.redis_out
    << ", \"redis_cpu_seconds\": " << JsonNumber(s.redis_cpu)
    << ", \"daemon_cpu_seconds\": " << JsonNumber(s.daemon_cpu)
    << ", \"client_cpu_seconds\": " << JsonNumber(s.client_cpu)
    << ", \"machine_busy_cpu_seconds\": " << JsonNumber(s.machine_cpu)
    << ", \"steal_cpu_seconds\": " << JsonNumber(s.steal_cpu)
    << ", \"daemon_peak_rss_above_start_bytes\": " << s.daemon_peak
    << ", \"daemon_peak_rss_bytes\": " << s.daemon_peak_rss
    << ", \"daemon_shared_rss_bytes\": " << s.daemon_shared_rss
    << ", \"daemon_own_peak_rss_bytes\": " << s.daemon_own_peak_rss
    << ", \"client_peak_rss_above_start_bytes\": " << s.client_peak << "}";
  return o.str();
}

double PerOp(int64_t bytes, int64_t ops) {
  return ops > 0 ? static_cast<double>(bytes) / static_cast<double>(ops) : -1;
}

}  // namespace

bool BenchOptions::Selected(const std::string& name) const {
  if (scenarios.empty()) return true;
  for (const std::string& s : scenarios) {
    // "--scenario c" selects c.*; "--scenario a.read" selects a.read_leaf[...];
    // a row name also selects its group ("a.keys" runs group a's setup).
    if (name.compare(0, s.size(), s) == 0 || s.compare(0, name.size(), name) == 0) return true;
  }
  return false;
}

void Side::Merge(const Side& o) {
  wall_seconds += o.wall_seconds;
  ops += o.ops;
  redis_in += o.redis_in;
  redis_out += o.redis_out;
  redis_cpu += o.redis_cpu;
  daemon_cpu = (daemon_cpu < 0 || o.daemon_cpu < 0) ? std::max(daemon_cpu, o.daemon_cpu)
                                                    : daemon_cpu + o.daemon_cpu;
  client_cpu += o.client_cpu;
  machine_cpu += o.machine_cpu;
  steal_cpu += o.steal_cpu;
  daemon_peak = std::max(daemon_peak, o.daemon_peak);
  daemon_peak_rss = std::max(daemon_peak_rss, o.daemon_peak_rss);
  daemon_shared_rss = std::max(daemon_shared_rss, o.daemon_shared_rss);
  daemon_own_peak_rss = std::max(daemon_own_peak_rss, o.daemon_own_peak_rss);
  client_peak = std::max(client_peak, o.client_peak);
}

double Row::ratio() const {
  if (tdstore <= 0 || raw <= 0) return 0;
  return higher_is_better ? tdstore / raw : raw / tdstore;
}

void Report::Add(Row row) {
  std::fprintf(stderr, "  %-24s %-10s tdstore %-10s raw %-10s ratio %s%s%s\n", row.scenario.c_str(),
               row.metric.c_str(), Fmt(row.tdstore).c_str(), Fmt(row.raw).c_str(),
               Fmt(row.ratio()).c_str(), row.error.empty() ? "" : "  ERROR: ", row.error.c_str());
  rows_.push_back(std::move(row));
}

bool Report::any_error() const {
  for (const Row& r : rows_) {
    if (!r.error.empty()) return true;
  }
  return false;
}

std::string Report::Table() const {
  std::ostringstream o;
  o << "| scenario | metric | tdstore | raw | ratio | Redis bytes/op tdstore | Redis bytes/op raw | "
       "payload/op | CPU% tdstored | CPU% Redis td/raw | CPU% client td/raw | CPU% others td/raw | "
       "tdstored peak above start | client extra | target |\n";
  o << "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n";
  for (const Row& r : rows_) {
    if (!r.error.empty()) {
      o << "| " << r.scenario << " | ERROR: " << r.error << " ||||||||||||||\n";
      continue;
    }
    std::string targets;
    for (const Target& t : r.targets) {
      targets += (targets.empty() ? "" : "; ") + t.what + (t.met ? " met" : " **not met**");
    }
    o << "| " << r.scenario << " | " << r.metric << " | " << Fmt(r.tdstore) << " | " << Fmt(r.raw)
      << " | " << Fmt(r.ratio()) << " | " << Bytes(PerOp(r.td.redis_in + r.td.redis_out, r.td.ops))
      << " | " << Bytes(PerOp(r.rw.redis_in + r.rw.redis_out, r.rw.ops)) << " | "
      << Bytes(static_cast<double>(r.payload_bytes)) << " | "
      << Pct(r.td.daemon_cpu, r.td.wall_seconds) << " | " << Pct(r.td.redis_cpu, r.td.wall_seconds)
      << "/" << Pct(r.rw.redis_cpu, r.rw.wall_seconds) << " | "
      << Pct(r.td.client_cpu, r.td.wall_seconds) << "/" << Pct(r.rw.client_cpu, r.rw.wall_seconds)
      << " | " << Pct(r.td.others_cpu(), r.td.wall_seconds) << "/"
      << Pct(r.rw.others_cpu(), r.rw.wall_seconds) << " | " << Bytes(static_cast<double>(r.td.daemon_peak)) << " | "
      << (r.client_memory_relevant ? Bytes(static_cast<double>(r.client_extra())) : "-") << " | "
      << targets << " |\n";
  }
  std::string notes;
  for (const Row& r : rows_) {
    if (!r.note.empty()) notes += "- " + r.scenario + ": " + r.note + "\n";
  }
  if (!notes.empty()) o << "\nNotes:\n" << notes;
  std::string targets;
  for (const Row& r : rows_) {
    for (const Target& t : r.targets) {
      targets += "- " + r.scenario + ": " + t.what + ": " + (t.met ? "met" : "NOT met") + "\n";
    }
  }
  if (!targets.empty()) o << "\nTargets:\n" << targets;
  return o.str();
}

std::string Report::Json(const std::string& header_json) const {
  std::ostringstream o;
  o << "{\n  \"run\": " << header_json << ",\n  \"results\": [";
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    o << (i == 0 ? "\n" : ",\n") << "    {\"scenario\": " << JsonString(r.scenario)
      << ", \"metric\": " << JsonString(r.metric)
      << ", \"higher_is_better\": " << (r.higher_is_better ? "true" : "false")
      << ", \"tdstore\": " << JsonNumber(r.tdstore) << ", \"raw\": " << JsonNumber(r.raw)
      << ", \"ratio\": " << JsonNumber(r.ratio()) << ", \"payload_bytes_per_op\": " << r.payload_bytes
      << ", \"result_bytes_per_op\": " << r.result_bytes
      << ", \"bytes_moved_per_op\": {\"tdstore\": "
      << JsonNumber(PerOp(r.td.redis_in + r.td.redis_out, r.td.ops))
      << ", \"raw\": " << JsonNumber(PerOp(r.rw.redis_in + r.rw.redis_out, r.rw.ops)) << "}"
      << ", \"tdstored_peak_rss_above_idle_bytes\": " << r.td.daemon_peak
      << ", \"client_peak_rss_above_result_bytes\": " << r.client_extra()
      << ",\n     \"tdstore_side\": " << SideJson(r.td) << ",\n     \"raw_side\": " << SideJson(r.rw)
      << ",\n     \"targets\": [";
    for (size_t t = 0; t < r.targets.size(); ++t) {
      o << (t == 0 ? "" : ", ") << "{\"target\": " << JsonString(r.targets[t].what)
        << ", \"met\": " << (r.targets[t].met ? "true" : "false") << "}";
    }
    o << "], \"note\": " << JsonString(r.note) << ", \"error\": " << JsonString(r.error) << "}";
  }
  o << "\n  ]\n}\n";
  return o.str();
}

namespace {

bool Tracing() {
  static const bool on = [] {
    const char* v = std::getenv("TDSTORE_BENCH_TRACE");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return on;
}

void Trace(const std::string& label, const char* what) {
  if (!Tracing()) return;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  std::fprintf(stderr, "trace %s %s %.6f\n", label.c_str(), what,
               static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9);
}

}  // namespace

void Meter::Start(const std::string& label) {
  label_ = label;
  if (env_.daemon_pid > 0) {
    ResetPeakResident(env_.daemon_pid);
    daemon_rss0_ = ResidentBytes(env_.daemon_pid);
    daemon_shared0_ = SharedResidentBytes(env_.daemon_pid);
    daemon_cpu0_ = CpuSeconds(env_.daemon_pid);
  }
  ResetPeakResident(0);
  client_rss0_ = ResidentBytes(0);
  redis0_ = Check(env_.raw->Counters(), "INFO");
  client_cpu0_ = CpuSeconds(0);
  machine0_ = ReadMachineCpu();
  Trace(label_, "start");
  wall0_ = Now();
}

Side Meter::Stop(int64_t ops) {
  Side s;
  s.wall_seconds = Now() - wall0_;
  Trace(label_, "stop");
  const MachineCpu machine1 = ReadMachineCpu();
  s.machine_cpu = machine1.busy - machine0_.busy;
  s.steal_cpu = machine1.steal - machine0_.steal;
  s.client_cpu = CpuSeconds(0) - client_cpu0_;
  s.ops = ops;
  const int64_t info_bytes = env_.raw->last_counters_reply_bytes();
  const RedisCounters redis1 = Check(env_.raw->Counters(), "INFO");
  s.redis_in = redis1.net_input_bytes - redis0_.net_input_bytes;
  // The first INFO's reply is counted in the delta; take it out (the INFO
  // commands themselves are a few dozen bytes of input, left in).
  s.redis_out = redis1.net_output_bytes - redis0_.net_output_bytes - info_bytes;
  s.redis_cpu = redis1.cpu_seconds - redis0_.cpu_seconds;
  if (env_.daemon_pid > 0 && daemon_rss0_ >= 0) {
    s.daemon_cpu = CpuSeconds(env_.daemon_pid) - daemon_cpu0_;
    // VmRSS is summed from per-thread counters the kernel folds in lazily,
    // so a peak can read a little below the start: that is 0.
    s.daemon_peak_rss = PeakResidentBytes(env_.daemon_pid);
    s.daemon_shared_rss = SharedResidentBytes(env_.daemon_pid);
    if (s.daemon_peak_rss >= 0) {
      const int64_t shared_throughout =
          std::max<int64_t>(0, std::min(daemon_shared0_, s.daemon_shared_rss));
      s.daemon_own_peak_rss = s.daemon_peak_rss - shared_throughout;
    }
    s.daemon_peak = std::max<int64_t>(0, s.daemon_peak_rss - daemon_rss0_);
  }
  if (client_rss0_ >= 0) s.client_peak = std::max<int64_t>(0, PeakResidentBytes(0) - client_rss0_);
  return s;
}

void Check(const absl::Status& status, const std::string& what) {
  if (!status.ok()) throw std::runtime_error(what + ": " + status.ToString());
}

Side TimeOps(BenchEnv& env, int reps, const std::function<void()>& op, Samples* latency,
             const std::function<void()>& after) {
  op();
  if (after) after();
  Meter meter(env);
  meter.Start();
  for (int i = 0; i < reps; ++i) {
    const double t0 = Now();
    op();
    latency->Add(Now() - t0);
    if (after) after();
  }
  return meter.Stop(reps);
}

RawDict LoadDict(BenchEnv& env, const std::string& name) {
  return Check(LoadRawDict(*env.raw, env.opt.ns, name), "reading the layout of " + name);
}

Dict CreateDict(BenchEnv& env, const std::string& name, std::vector<int64_t> batch) {
  try {
    env.client->drop(name);
  } catch (const Error& e) {
    if (e.code() != StatusCode::kNotFound) throw;
  }
  return env.client->create(name, std::move(batch));
}

void Guard(BenchEnv& env, const std::string& scenario, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    Row row;
    row.scenario = scenario;
    row.error = e.what();
    env.report.Add(std::move(row));
  }
}

}  // namespace tdstore::bench
