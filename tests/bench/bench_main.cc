// tdstore-bench: tdstore against a raw hiredis client doing the ideal Redis
// work, in the same run, on the same Redis. Every figure is a ratio (higher
// is better, 1.0 = as fast as raw). docs/benchmarks.md has a full run and
// what limits each scenario.
//
//   tdstore-bench                  # starts redis-server and tdstored itself
//   tdstore-bench --quick          # small sizes, under 2 minutes (ctest bench_quick)
//   tdstore-bench --cluster        # a 3-master Redis Cluster instead
//   tdstore-bench --unix           # the client talks to tdstored over its unix socket
//   tdstore-bench --scenario c.sample256 --scenario b
//   tdstore-bench --addr 127.0.0.1:50051 --redis redis://127.0.0.1:6379 [--daemon-pid PID]
//   tdstore-bench --json out.json
//
// Exit status: 0 when every scenario produced its numbers, 1 when one failed,
// 2 for bad flags or a failed start. Speed never fails the run.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "tests/bench/bench.h"
#include "tests/support/daemon_process.h"
#include "tests/support/test_redis.h"

namespace tdstore::bench {
namespace {

constexpr char kUsage[] =
    "usage: tdstore-bench [flags]\n"
    "  --quick              small sizes (whole run < 2 minutes)\n"
    "  --json FILE          also write the results as JSON\n"
    "  --unix               client -> tdstored over its unix socket (spawned daemon only)\n"
    "  --cluster            start a 3-master Redis Cluster instead of one redis-server\n"
    "  --scenario NAME      run only rows whose name starts with NAME (repeatable;\n"
    "                       groups: a (seed cases), b (bulk), c (replay buffer), d (threads))\n"
    "  --repeats N          repetitions of the sampling/row-write scenarios (default 3, quick 1)\n"
    "  --seed N             random seed (default 42)\n"
    "  --addr HOST:PORT     use this running tdstored (needs --redis) ...\n"
    "  --redis URL          ... whose Redis is this (redis:// or redis-cluster://)\n"
    "  --namespace NS       that tdstored's --namespace (default td)\n"
    "  --daemon-pid PID     that tdstored's pid, for its memory and CPU figures\n";

[[noreturn]] void Usage(const std::string& error) {
  std::cerr << "tdstore-bench: " << error << "\n" << kUsage;
  std::exit(2);
}

BenchOptions ParseOptions(int argc, char** argv) {
  BenchOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--quick") {
      o.quick = true;
    } else if (arg == "--json") {
      o.json_path = value();
    } else if (arg == "--unix") {
      o.unix_socket = true;
    } else if (arg == "--cluster") {
      o.cluster = true;
    } else if (arg == "--scenario") {
      o.scenarios.push_back(value());
    } else if (arg == "--repeats") {
      o.repeats = std::atoi(value().c_str());
      if (o.repeats < 1) Usage("--repeats must be >= 1");
    } else if (arg == "--seed") {
      o.seed = std::strtoull(value().c_str(), nullptr, 10);
    } else if (arg == "--addr") {
      o.addr = value();
    } else if (arg == "--redis") {
      o.redis = value();
    } else if (arg == "--namespace") {
      o.ns = value();
    } else if (arg == "--daemon-pid") {
      o.daemon_pid = std::atoi(value().c_str());
    } else if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else {
      Usage("unknown flag " + arg);
    }
  }
  if (o.addr.empty() != o.redis.empty()) Usage("--addr and --redis go together");
  if (!o.addr.empty() && (o.cluster || o.unix_socket)) {
    Usage("--cluster and --unix apply to the Redis and tdstored the benchmark starts; with --addr, "
          "pass the address and URL you want");
  }
  return o;
}

std::string FirstLineWith(const std::string& file, const std::string& prefix) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, prefix.size(), prefix) == 0) {
      const size_t colon = line.find(':');
      std::string v = colon == std::string::npos ? line : line.substr(colon + 1);
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.erase(v.begin());
      return v;
    }
  }
  return "unknown";
}

std::string Machine() {
  std::ostringstream o;
  o << "nproc " << std::thread::hardware_concurrency() << ", CPU "
    << FirstLineWith("/proc/cpuinfo", "model name") << ", memory "
    << FirstLineWith("/proc/meminfo", "MemTotal");
  return o.str();
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  }
  return out;
}

int Main(int argc, char** argv) {
  BenchEnv env;
  env.opt = ParseOptions(argc, argv);
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);

  std::unique_ptr<testing::TestRedis> redis;
  std::unique_ptr<testing::DaemonProcess> daemon;
  if (env.opt.addr.empty()) {
    env.backend = env.opt.cluster ? "cluster" : "standalone";
    std::cerr << "starting " << env.backend << " Redis ...\n";
    redis = testing::MakeTestRedis(env.backend, {});
    if (auto s = redis->Start(); !s.ok()) {
      std::cerr << "tdstore-bench: cannot start Redis: " << s << "\n";
      return 2;
    }
    env.redis_url = redis->url();
    daemon = std::make_unique<testing::DaemonProcess>();
    if (auto s = daemon->Start({"--redis", env.redis_url, "--namespace", env.opt.ns,
                                "--unix-socket", daemon->dir() + "/td.sock"});
        !s.ok()) {
      std::cerr << "tdstore-bench: cannot start tdstored: " << s << "\n";
      return 2;
    }
    if (env.opt.unix_socket && daemon->addresses().size() < 2) {
      std::cerr << "tdstore-bench: tdstored announced no unix socket\n";
      return 2;
    }
    env.address = env.opt.unix_socket ? daemon->addresses()[1] : daemon->address();
    env.daemon_pid = daemon->pid();
  } else {
    env.address = env.opt.addr;
    env.redis_url = env.opt.redis;
    env.backend = env.opt.redis.rfind("redis-cluster://", 0) == 0 ? "cluster" : "standalone";
    env.daemon_pid = env.opt.daemon_pid;
  }

  try {
    env.raw = Check(RawRedis::Connect(env.redis_url), "raw connect");
    env.ops = Check(RawOps::Make(*env.raw), "raw scripts");
    env.client = std::make_unique<Client>(env.address);
    const Client::ServerInfo info = env.client->server_info();
    std::cerr << "tdstored " << info.version << " at " << env.address << ", " << info.backend
              << "\n";
  } catch (const std::exception& e) {
    std::cerr << "tdstore-bench: " << e.what() << "\n";
    return 2;
  }
  if (env.daemon_pid > 0) env.daemon_idle_rss = ResidentBytes(env.daemon_pid);
  // One thread for torch's own work (filling source tensors): the machine's
  // cores belong to the client, tdstored and Redis being measured.
  at::set_num_threads(1);

  // What the rest of the machine is doing before we start (a shared
  // machine's other workloads are the main source of noise).
  double background = 0;
  {
    const MachineCpu m0 = ReadMachineCpu();
    const double w0 = Now();
    std::this_thread::sleep_for(std::chrono::milliseconds(env.opt.quick ? 500 : 2000));
    background = (ReadMachineCpu().busy - m0.busy) / (Now() - w0);
  }
  const double t0 = Now();
  std::cerr << "scenarios (" << (env.opt.quick ? "quick" : "full") << "):\n";
  RunSeedScenarios(env);
  RunBulkScenarios(env);
  RunReplayScenarios(env);
  const double total = Now() - t0;

  std::ostringstream header;
  header << "Machine: " << Machine() << "\n"
         << "Command: " << command << "\n"
         << "Redis: " << env.backend << "; client -> tdstored over "
         << (env.address.rfind("unix:", 0) == 0 ? "a unix socket" : "TCP") << "; tdstored idle RSS "
         << (env.daemon_idle_rss >= 0 ? std::to_string(env.daemon_idle_rss >> 20) + " MiB" : "n/a")
         << "; run took " << static_cast<int>(total) << " s; machine busy before the run: "
         << static_cast<int>(background * 100) << "% CPU (of " << std::thread::hardware_concurrency() * 100
         << "%)\n"
         << "Ratio: higher is better, 1.0 = as fast as raw (tdstore/raw for throughput, "
            "raw/tdstore for latency).\n\n";
  std::cout << header.str() << env.report.Table();

  if (!env.opt.json_path.empty()) {
    std::ostringstream run;
    run << "{\"machine\": \"" << JsonEscape(Machine()) << "\", \"command\": \""
        << JsonEscape(command) << "\", \"backend\": \"" << env.backend << "\", \"transport\": \""
        << (env.address.rfind("unix:", 0) == 0 ? "unix" : "tcp") << "\", \"quick\": "
        << (env.opt.quick ? "true" : "false") << ", \"tdstored_idle_rss_bytes\": "
        << env.daemon_idle_rss << ", \"seconds\": " << total
        << ", \"background_cpu_before_run\": " << background << "}";
    std::ofstream out(env.opt.json_path);
    out << env.report.Json(run.str());
    if (!out) {
      std::cerr << "tdstore-bench: cannot write " << env.opt.json_path << "\n";
      return 1;
    }
  }
  if (env.report.rows().empty()) {
    std::cerr << "tdstore-bench: no scenario matched\n";
    return 1;
  }
  if (env.report.any_error()) {
    std::cerr << "tdstore-bench: some scenarios failed (see ERROR rows)\n";
    return 1;
  }
  if (daemon) daemon->Stop();
  return 0;
}

}  // namespace
}  // namespace tdstore::bench

int main(int argc, char** argv) { return tdstore::bench::Main(argc, argv); }
