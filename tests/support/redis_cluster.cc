// RedisClusterProcess: see redis_cluster.h.
//
// Raw hiredis only (hiredis 0.14 has no cluster support: the routing here is
// a deliberately small, separate implementation from server/redis/'s).
#include "tests/support/redis_cluster.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "server/redis/cluster_slot.h"
#include "tests/support/child_process.h"
#include "tests/support/raw_redis.h"
#include "tests/support/redis_server.h"

namespace tdstore::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSlots = 16384;

// ---------------------------------------------------------------------------
// Processes.

std::string ReadTail(const std::string& path, size_t max_lines) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string tail;
  for (size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i) {
    tail += "\n    " + lines[i];
  }
  return tail;
}

// SpawnChild (stdout/stderr appended to `log`), after checking that
// args[0] is executable.
absl::Status Spawn(std::vector<std::string> args, const std::string& log, pid_t* pid_out) {
  if (access(args[0].c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(args[0] + " is not executable: " + strerror(errno));
  }
  return SpawnChild(std::move(args), log, ChildLog::kAppend, pid_out);
}

std::string PercentEncode(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// hiredis.

using raw_redis::Connect;
using raw_redis::ContextPtr;
using raw_redis::Credentials;
using raw_redis::Flatten;
using raw_redis::ReplyPtr;
using raw_redis::Run;

// One command on one port; the reply flattened, errors as "(error) ..." or
// "(transport error) ...".
std::vector<std::string> RunOn(int port, const Credentials& creds,
                               const std::vector<std::string>& argv) {
  return raw_redis::Command(port, creds, argv);
}

bool IsError(const std::vector<std::string>& reply) {
  return reply.empty() || reply[0].rfind("(error)", 0) == 0 ||
         reply[0].rfind("(transport error)", 0) == 0;
}

// A bulk/status reply as text; "" with *error set otherwise.
std::string TextOn(int port, const Credentials& creds, const std::vector<std::string>& argv,
                   std::string* error) {
  std::vector<std::string> reply = RunOn(port, creds, argv);
  if (reply.size() != 1 || IsError(reply)) {
    *error = reply.empty() ? "empty reply" : reply[0];
    return "";
  }
  return reply[0];
}

// The value of `name:` in an INFO or CLUSTER INFO text, "" when absent.
std::string InfoField(const std::string& info, const std::string& name) {
  const std::string needle = name + ":";
  for (size_t pos = info.find(needle); pos != std::string::npos;
       pos = info.find(needle, pos + 1)) {
    if (pos == 0 || info[pos - 1] == '\n') {
      const size_t begin = pos + needle.size();
      const size_t end = info.find_first_of("\r\n", begin);
      return info.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    }
  }
  return "";
}

// CLUSTER SLOTS of the node on `port` as slot -> master port (0: none).
bool SlotMapOn(int port, const Credentials& creds, std::vector<int>* owner, std::string* error) {
  ContextPtr c = Connect(port, creds, error);
  if (c == nullptr) return false;
  ReplyPtr reply = Run(c.get(), {"CLUSTER", "SLOTS"});
  if (reply == nullptr) {
    *error = std::string("(transport error) ") + c->errstr;
    return false;
  }
  if (reply->type != REDIS_REPLY_ARRAY) {
    *error = reply->type == REDIS_REPLY_ERROR ? std::string(reply->str, reply->len)
                                              : "CLUSTER SLOTS: not an array";
    return false;
  }
  owner->assign(kSlots, 0);
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* range = reply->element[i];
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3) continue;
    const redisReply* master = range->element[2];
    if (range->element[0]->type != REDIS_REPLY_INTEGER ||
        range->element[1]->type != REDIS_REPLY_INTEGER || master->type != REDIS_REPLY_ARRAY ||
        master->elements < 2 || master->element[1]->type != REDIS_REPLY_INTEGER) {
      continue;
    }
    const long long first = std::max(0LL, range->element[0]->integer);
    const long long last = std::min<long long>(kSlots - 1, range->element[1]->integer);
    for (long long s = first; s <= last; ++s) (*owner)[s] = static_cast<int>(master->element[1]->integer);
  }
  return true;
}

struct NodeLine {
  std::string id;
  int port = 0;
  std::set<std::string> flags;
  std::string master_id;  // "-" for masters
};

// CLUSTER NODES text, one NodeLine per line.
std::vector<NodeLine> ParseClusterNodes(const std::string& text) {
  std::vector<NodeLine> nodes;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::vector<std::string> fields;
    for (size_t p = begin; p < end;) {
      size_t q = text.find(' ', p);
      if (q == std::string::npos || q > end) q = end;
      if (q > p) fields.push_back(text.substr(p, q - p));
      p = q + 1;
    }
    begin = end + 1;
    if (fields.size() < 8) continue;
    NodeLine node;
    node.id = fields[0];
    // ip:port@cport[,hostname]
    const std::string& addr = fields[1];
    const size_t at = addr.find('@');
    const size_t colon = addr.rfind(':', at);
    if (colon != std::string::npos) {
      node.port = atoi(addr.substr(colon + 1, (at == std::string::npos ? addr.size() : at) - colon - 1).c_str());
    }
    for (size_t p = 0; p <= fields[2].size();) {
      size_t q = fields[2].find(',', p);
      if (q == std::string::npos) q = fields[2].size();
      node.flags.insert(fields[2].substr(p, q - p));
      p = q + 1;
    }
    node.master_id = fields[3];
    nodes.push_back(std::move(node));
  }
  return nodes;
}

// CLUSTER NODES as seen by the first of `ports` that answers.
std::vector<NodeLine> ClusterNodes(const std::vector<int>& ports, const Credentials& creds) {
  for (int port : ports) {
    std::string error;
    const std::string text = TextOn(port, creds, {"CLUSTER", "NODES"}, &error);
    if (error.empty()) return ParseClusterNodes(text);
  }
  return {};
}

Credentials CredentialsOf(const RedisClusterOptions& options) {
  if (!options.acl_user.empty() && !options.acl_password.empty()) {
    return {options.acl_user, options.acl_password};
  }
  return {"", options.password};
}


std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  return s;
}

// "MOVED 3999 127.0.0.1:6381" / "ASK ..." -> 6381; 0 when unparsable.
int RedirectPort(const std::string& error) {
  const size_t colon = error.rfind(':');
  return colon == std::string::npos ? 0 : atoi(error.c_str() + colon + 1);
}

}  // namespace

// ---------------------------------------------------------------------------
// Life cycle.

RedisClusterProcess::RedisClusterProcess(RedisClusterOptions options)
    : options_(std::move(options)) {}

RedisClusterProcess::~RedisClusterProcess() { Stop(); }

bool RedisClusterProcess::running() const {
  return std::any_of(nodes_.begin(), nodes_.end(), [](const Node& n) { return n.pid > 0; });
}

void RedisClusterProcess::SetPid(int i, pid_t pid) {
  std::lock_guard<std::mutex> lock(pid_mu_);
  nodes_[i].pid = pid;
}

absl::Status RedisClusterProcess::Start() {
  if (running()) return absl::FailedPreconditionError("the cluster is already running");
  if (options_.masters < 3) {
    return absl::InvalidArgumentError("redis-cli --cluster create needs at least 3 masters");
  }
  if (options_.replicas_per_master < 0) {
    return absl::InvalidArgumentError("replicas_per_master < 0");
  }
  const size_t count =
      static_cast<size_t>(options_.masters) * (1 + static_cast<size_t>(options_.replicas_per_master));
  if (nodes_.size() != count) nodes_.assign(count, Node{});
  absl::Status status = StartOnce();
  if (!status.ok()) Stop();
  return status;
}

absl::Status RedisClusterProcess::StartOnce() {
  const char* tmp = getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/tdstore-test-cluster-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    return absl::InternalError("mkdtemp " + pattern + ": " + strerror(errno));
  }
  base_dir_ = buf.data();
  std::vector<int> all;
  for (int i = 0; i < node_count(); ++i) {
    nodes_[i].dir = base_dir_ + "/node" + std::to_string(i);
    std::error_code ec;
    std::filesystem::create_directory(nodes_[i].dir, ec);
    if (ec) return absl::InternalError("mkdir " + nodes_[i].dir + ": " + ec.message());
    all.push_back(i);
  }
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    slot_cache_.clear();
  }

  // Ports are picked once and kept for later starts.
  const bool pick_ports = nodes_[0].port == 0;
  absl::Status status = LaunchNodes(all, pick_ports, /*truncate_logs=*/true);
  if (!status.ok()) return status;

  // The first `masters` nodes become the masters (one host: redis-cli keeps
  // the given order), the others their replicas.
  std::vector<std::string> create = {"--cluster", "create"};
  for (const Node& node : nodes_) create.push_back("127.0.0.1:" + std::to_string(node.port));
  create.insert(create.end(), {"--cluster-replicas", std::to_string(options_.replicas_per_master),
                               "--cluster-yes"});
  status = RunCli(create, std::chrono::seconds(60), "redis-cli --cluster create");
  if (!status.ok()) return status;

  const auto deadline = Clock::now() + std::chrono::seconds(30);
  std::string problem;
  while (!(problem = StartProblem()).empty()) {
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError("the cluster did not come up in 30 s: " + problem +
                                         "\n  logs:" + LogTails(15));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  seed_ports_ = MasterPorts();
  return absl::OkStatus();
}

absl::Status RedisClusterProcess::LaunchNodes(const std::vector<int>& which, bool pick_ports,
                                              bool truncate_logs) {
  const Credentials creds = CredentialsOf(options_);
  std::vector<int> pending = which;
  absl::Status last;
  for (int attempt = 0; attempt < (pick_ports ? 5 : 1) && !pending.empty(); ++attempt) {
    if (pick_ports) {
      // Two distinct ports per node (client and cluster bus), distinct from
      // every other node's: the default bus port (port + 10000) may be taken
      // or beyond 65535.
      std::set<int> taken;
      for (int i = 0; i < node_count(); ++i) {
        if (std::find(pending.begin(), pending.end(), i) != pending.end()) continue;
        taken.insert(nodes_[i].port);
        taken.insert(nodes_[i].bus_port);
      }
      for (int i : pending) {
        for (int* p : {&nodes_[i].port, &nodes_[i].bus_port}) {
          int port = 0;
          for (int tries = 0; tries < 100 && (port == 0 || taken.count(port) != 0); ++tries) {
            port = PickFreePort();
          }
          if (port == 0 || taken.count(port) != 0) return absl::InternalError("no free TCP port");
          taken.insert(port);
          *p = port;
        }
      }
    }
    for (int i : pending) {
      Node& node = nodes_[i];
      const std::string log = node.dir + "/redis.log";
      if (truncate_logs) std::ofstream(log, std::ios::trunc).close();
      std::vector<std::string> args = {options_.server_binary,
                                       "--port", std::to_string(node.port),
                                       "--bind", "127.0.0.1",
                                       "--cluster-enabled", "yes",
                                       "--cluster-config-file", "nodes.conf",
                                       "--cluster-node-timeout", std::to_string(options_.node_timeout_ms),
                                       "--cluster-port", std::to_string(node.bus_port),
                                       "--save", "",
                                       "--appendonly", "no",
                                       // Replicas sync at once, not after 5 s.
                                       "--repl-diskless-sync-delay", "0",
                                       "--dir", node.dir,
                                       "--logfile", log,
                                       "--daemonize", "no"};
      if (!options_.password.empty()) {
        args.insert(args.end(), {"--requirepass", options_.password});
      }
      if (!options_.acl_user.empty() && !options_.acl_password.empty()) {
        args.insert(args.end(), {"--user", options_.acl_user, "on", ">" + options_.acl_password,
                                 "~*", "&*", "+@all", "--masteruser", options_.acl_user,
                                 "--masterauth", options_.acl_password});
      } else if (!options_.password.empty()) {
        args.insert(args.end(), {"--masterauth", options_.password});
      }
      args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
      pid_t pid = -1;
      absl::Status spawned = Spawn(std::move(args), log, &pid);
      if (!spawned.ok()) return spawned;
      SetPid(i, pid);
    }

    // Wait until each answers as *itself* (its pid in INFO server): a
    // process that won the race for the port would answer too.
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    std::vector<int> waiting = pending;
    std::vector<int> retry;
    std::string failures;
    while (!waiting.empty()) {
      for (auto it = waiting.begin(); it != waiting.end();) {
        Node& node = nodes_[*it];
        const std::string log = node.dir + "/redis.log";
        if (TryReapChild(node.pid)) {
          SetPid(*it, -1);
          const std::string tail = ReadTail(log, 15);
          if (tail.find("in use") != std::string::npos) retry.push_back(*it);
          failures += "\n  node " + std::to_string(*it) + " (port " + std::to_string(node.port) +
                      ") exited during start-up; log:" + tail;
          it = waiting.erase(it);
          continue;
        }
        std::string error;
        const std::string info = TextOn(node.port, creds, {"INFO", "server"}, &error);
        if (InfoField(info, "process_id") == std::to_string(node.pid)) {
          it = waiting.erase(it);
          continue;
        }
        ++it;
      }
      if (waiting.empty()) break;
      if (Clock::now() >= deadline) {
        for (int i : waiting) {
          KillChild(nodes_[i].pid);
          SetPid(i, -1);
          failures += "\n  node " + std::to_string(i) + " (port " + std::to_string(nodes_[i].port) +
                      ") did not answer in 10 s; log:" + ReadTail(nodes_[i].dir + "/redis.log", 15);
        }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (failures.empty()) return absl::OkStatus();
    last = absl::InternalError("redis-server failed:" + failures);
    // Only lost port races are worth another try (with new ports).
    size_t failed = 0;
    for (int i : pending) failed += nodes_[i].pid > 0 ? 0 : 1;
    if (retry.size() != failed) return last;
    pending = retry;
  }
  return last;
}

void RedisClusterProcess::Stop() {
  std::vector<pid_t> pids;
  for (const Node& node : nodes_) {
    if (node.pid > 0) pids.push_back(node.pid);
  }
  StopChildren(pids, std::chrono::seconds(5));
  for (int i = 0; i < node_count(); ++i) {
    SetPid(i, -1);
    nodes_[i].dir.clear();
  }
  if (!base_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(base_dir_, ec);
    base_dir_.clear();
  }
  std::lock_guard<std::mutex> lock(cache_mu_);
  slot_cache_.clear();
}

void RedisClusterProcess::KillNode(int i) {
  const pid_t pid = nodes_.at(i).pid;
  if (pid <= 0) return;
  KillChild(pid);  // immediate after SIGKILL; no zombie
  SetPid(i, -1);
}

absl::Status RedisClusterProcess::RestartNode(int i) {
  if (i < 0 || i >= node_count()) return absl::InvalidArgumentError("no such node");
  if (nodes_[i].pid > 0) return absl::FailedPreconditionError("node is running");
  if (nodes_[i].dir.empty()) return absl::FailedPreconditionError("the cluster is stopped");
  std::ofstream(nodes_[i].dir + "/redis.log", std::ios::app) << "---- restarted by the test\n";
  return LaunchNodes({i}, /*pick_ports=*/false, /*truncate_logs=*/false);
}

absl::Status RedisClusterProcess::RunCli(std::vector<std::string> args,
                                         std::chrono::seconds timeout,
                                         const std::string& what) const {
  std::vector<std::string> argv = {options_.cli_binary};
  for (std::string& a : CliAuthArgs()) argv.push_back(std::move(a));
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string log = base_dir_ + "/redis-cli.log";
  std::ofstream(log, std::ios::trunc).close();
  pid_t pid = -1;
  absl::Status spawned = Spawn(argv, log, &pid);
  if (!spawned.ok()) return spawned;
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  while (!TryReapChild(pid, &status)) {
    if (Clock::now() >= deadline) {
      KillChild(pid);
      return absl::DeadlineExceededError(what + " did not finish in " +
                                         std::to_string(timeout.count()) + " s; output:" +
                                         ReadTail(log, 30) + "\n  logs:" + LogTails(10));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(what + " failed (wait status " + std::to_string(status) +
                               "); output:" + ReadTail(log, 30) + "\n  logs:" + LogTails(10));
  }
  return absl::OkStatus();
}

std::vector<std::string> RedisClusterProcess::CliAuthArgs() const {
  if (!options_.acl_user.empty() && !options_.acl_password.empty()) {
    return {"--user", options_.acl_user, "--pass", options_.acl_password, "--no-auth-warning"};
  }
  if (!options_.password.empty()) return {"-a", options_.password, "--no-auth-warning"};
  return {};
}

std::string RedisClusterProcess::LogTails(size_t lines) const {
  std::string out;
  for (int i = 0; i < node_count(); ++i) {
    if (nodes_[i].dir.empty()) continue;
    out += "\n  node " + std::to_string(i) + " (port " + std::to_string(nodes_[i].port) +
           (nodes_[i].pid > 0 ? "" : ", not running") + "):" +
           ReadTail(nodes_[i].dir + "/redis.log", lines);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Topology.

std::vector<int> RedisClusterProcess::LivePorts() const {
  std::lock_guard<std::mutex> lock(pid_mu_);
  std::vector<int> ports;
  for (const Node& node : nodes_) {
    if (node.pid > 0) ports.push_back(node.port);
  }
  return ports;
}

bool RedisClusterProcess::IsLivePort(int port) const {
  std::lock_guard<std::mutex> lock(pid_mu_);
  for (const Node& node : nodes_) {
    if (node.port == port) return node.pid > 0;
  }
  return false;
}

int RedisClusterProcess::NodeIndexOfPort(int port) const {
  for (int i = 0; i < node_count(); ++i) {
    if (nodes_[i].port == port) return i;
  }
  return -1;
}

std::string RedisClusterProcess::NodeId(int i) const {
  std::vector<std::string> reply = CommandOnNode(i, {"CLUSTER", "MYID"});
  return reply.size() == 1 && !IsError(reply) ? reply[0] : "";
}


std::vector<int> RedisClusterProcess::MasterPorts() const {
  std::vector<int> ports;
  for (const NodeLine& node : ClusterNodes(LivePorts(), CredentialsOf(options_))) {
    if (node.flags.count("master") != 0 && node.flags.count("fail") == 0 &&
        IsLivePort(node.port)) {
      ports.push_back(node.port);
    }
  }
  std::sort(ports.begin(), ports.end());
  return ports;
}

std::vector<int> RedisClusterProcess::ReplicaPortsOf(int master_port) const {
  const std::vector<NodeLine> nodes = ClusterNodes(LivePorts(), CredentialsOf(options_));
  std::string master_id;
  for (const NodeLine& node : nodes) {
    if (node.port == master_port) master_id = node.id;
  }
  std::vector<int> ports;
  for (const NodeLine& node : nodes) {
    if (!master_id.empty() && node.master_id == master_id && node.flags.count("fail") == 0 &&
        IsLivePort(node.port)) {
      ports.push_back(node.port);
    }
  }
  std::sort(ports.begin(), ports.end());
  return ports;
}

std::vector<int> RedisClusterProcess::FetchSlotMap() const {
  const Credentials creds = CredentialsOf(options_);
  for (int port : LivePorts()) {
    std::vector<int> owner;
    std::string error;
    if (SlotMapOn(port, creds, &owner, &error)) return owner;
  }
  return {};
}

std::vector<int> RedisClusterProcess::SlotMap() const { return FetchSlotMap(); }

int RedisClusterProcess::MasterOfSlot(int slot) const {
  if (slot < 0 || slot >= kSlots) return 0;
  const std::vector<int> owner = FetchSlotMap();
  return owner.empty() ? 0 : owner[slot];
}

std::string RedisClusterProcess::ClusterProblem() const {
  const Credentials creds = CredentialsOf(options_);
  const std::vector<int> live = LivePorts();
  if (live.empty()) return "no node is running";
  std::vector<int> reference;
  int reference_port = 0;
  for (int port : live) {
    const std::string node = "node 127.0.0.1:" + std::to_string(port);
    std::string error;
    const std::string info = TextOn(port, creds, {"CLUSTER", "INFO"}, &error);
    if (!error.empty()) return node + ": CLUSTER INFO: " + error;
    if (InfoField(info, "cluster_state") != "ok") {
      // What the node sees, so that a wait that runs out says why: which
      // slots it counts failing, and its view of every node.
      std::string why = node + ": cluster_state:" + InfoField(info, "cluster_state");
      for (const char* field : {"cluster_slots_pfail", "cluster_slots_fail", "cluster_size",
                                "cluster_current_epoch", "cluster_my_epoch"}) {
        why += std::string(" ") + field + ":" + InfoField(info, field);
      }
      return why + "\n  its CLUSTER NODES:\n" + TextOn(port, creds, {"CLUSTER", "NODES"}, &error);
    }
    if (InfoField(info, "cluster_slots_assigned") != std::to_string(kSlots)) {
      return node + ": cluster_slots_assigned:" + InfoField(info, "cluster_slots_assigned");
    }
    std::vector<int> owner;
    if (!SlotMapOn(port, creds, &owner, &error)) return node + ": CLUSTER SLOTS: " + error;
    for (int s = 0; s < kSlots; ++s) {
      if (owner[s] == 0) return node + ": slot " + std::to_string(s) + " has no master";
      if (!IsLivePort(owner[s])) {
        return node + ": slot " + std::to_string(s) + " is on dead master 127.0.0.1:" +
               std::to_string(owner[s]);
      }
    }
    if (reference.empty()) {
      reference = std::move(owner);
      reference_port = port;
    } else if (owner != reference) {
      int s = 0;
      while (owner[s] == reference[s]) ++s;
      return node + " and node 127.0.0.1:" + std::to_string(reference_port) +
             " disagree on slot " + std::to_string(s) + " (" + std::to_string(owner[s]) + " vs " +
             std::to_string(reference[s]) + ")";
    }
  }

  // Every live node sees every live node as healthy and in the role that
  // node claims for itself (a restarted node is still "fail", or a master,
  // to the others until gossip catches up).
  std::map<int, std::vector<NodeLine>> views;
  std::map<int, NodeLine> self;
  for (int port : live) {
    std::string error;
    const std::string text = TextOn(port, creds, {"CLUSTER", "NODES"}, &error);
    if (!error.empty()) return "node 127.0.0.1:" + std::to_string(port) + ": CLUSTER NODES: " + error;
    views[port] = ParseClusterNodes(text);
    for (const NodeLine& line : views[port]) {
      if (line.flags.count("myself") != 0) self[port] = line;
    }
    if (self.count(port) == 0) return "node 127.0.0.1:" + std::to_string(port) + ": no myself line";
  }
  for (const auto& [viewer, lines] : views) {
    for (int port : live) {
      const NodeLine& truth = self[port];
      const std::string where = "node 127.0.0.1:" + std::to_string(viewer) + " sees 127.0.0.1:" +
                                std::to_string(port);
      auto line = std::find_if(lines.begin(), lines.end(),
                               [&](const NodeLine& l) { return l.id == truth.id; });
      if (line == lines.end()) return where + ": unknown";
      for (const char* bad : {"fail", "fail?", "handshake", "noaddr"}) {
        if (line->flags.count(bad) != 0) return where + " as " + bad;
      }
      if (line->port != port) return where + " on port " + std::to_string(line->port);
      if ((line->flags.count("master") != 0) != (truth.flags.count("master") != 0) ||
          line->master_id != truth.master_id) {
        return where + " in another role (master id " + line->master_id + " vs " +
               truth.master_id + ")";
      }
    }
  }
  return "";
}

std::string RedisClusterProcess::ReplicaProblem() const {
  const Credentials creds = CredentialsOf(options_);
  for (int port : LivePorts()) {
    const std::string node = "node 127.0.0.1:" + std::to_string(port);
    std::string error;
    const std::string info = TextOn(port, creds, {"INFO", "replication"}, &error);
    if (!error.empty()) return node + ": INFO replication: " + error;
    if (InfoField(info, "role") != "slave") continue;
    if (InfoField(info, "master_link_status") != "up") {
      return node + ": replica of 127.0.0.1:" + InfoField(info, "master_port") +
             " has master_link_status:" + InfoField(info, "master_link_status");
    }
    if (!IsLivePort(atoi(InfoField(info, "master_port").c_str()))) {
      return node + ": replica of dead 127.0.0.1:" + InfoField(info, "master_port");
    }
  }
  return "";
}

std::string RedisClusterProcess::StartProblem() const {
  std::string problem = ClusterProblem();
  if (!problem.empty()) return problem;
  problem = ReplicaProblem();
  if (!problem.empty()) return problem;
  const Credentials creds = CredentialsOf(options_);
  int masters = 0;
  for (int i = 0; i < node_count(); ++i) {
    const std::string node = "node 127.0.0.1:" + std::to_string(nodes_[i].port);
    std::string error;
    const std::string info = TextOn(nodes_[i].port, creds, {"CLUSTER", "INFO"}, &error);
    if (InfoField(info, "cluster_known_nodes") != std::to_string(node_count())) {
      return node + ": cluster_known_nodes:" + InfoField(info, "cluster_known_nodes");
    }
    const std::string repl = TextOn(nodes_[i].port, creds, {"INFO", "replication"}, &error);
    if (InfoField(repl, "role") == "master") {
      ++masters;
      if (InfoField(repl, "connected_slaves") != std::to_string(options_.replicas_per_master)) {
        return node + ": connected_slaves:" + InfoField(repl, "connected_slaves");
      }
    }
  }
  if (masters != options_.masters) return std::to_string(masters) + " masters";
  return "";
}

absl::Status RedisClusterProcess::WaitForClusterOk(std::chrono::milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const std::string problem = ClusterProblem();
    if (problem.empty()) return absl::OkStatus();
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError("cluster not ok after " + std::to_string(timeout.count()) +
                                         " ms: " + problem + "\n  logs:" + LogTails(8));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

absl::Status RedisClusterProcess::WaitForReplicasInSync(std::chrono::milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const std::string problem = ReplicaProblem();
    if (problem.empty()) return absl::OkStatus();
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError("replicas not in sync after " +
                                         std::to_string(timeout.count()) + " ms: " + problem +
                                         "\n  logs:" + LogTails(8));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string RedisClusterProcess::url() const {
  std::string credentials;
  if (!options_.acl_user.empty() && !options_.acl_password.empty()) {
    credentials = PercentEncode(options_.acl_user) + ":" + PercentEncode(options_.acl_password) + "@";
  } else if (!options_.password.empty()) {
    credentials = ":" + PercentEncode(options_.password) + "@";
  }
  std::string hosts;
  for (int port : seed_ports_) {
    hosts += (hosts.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(port);
  }
  return "redis-cluster://" + credentials + hosts;
}

absl::Status RedisClusterProcess::MoveSlots(int count, int from_master_port, int to_master_port) {
  if (count <= 0) return absl::InvalidArgumentError("count must be positive");
  // redis-cli refuses to reshard a cluster whose nodes disagree.
  absl::Status ok = WaitForClusterOk(std::chrono::seconds(10));
  if (!ok.ok()) return absl::FailedPreconditionError("before resharding: " + std::string(ok.message()));
  std::string from_id, to_id;
  for (const NodeLine& node : ClusterNodes(LivePorts(), CredentialsOf(options_))) {
    if (node.port == from_master_port) from_id = node.id;
    if (node.port == to_master_port) to_id = node.id;
  }
  if (from_id.empty() || to_id.empty()) {
    return absl::InvalidArgumentError("no node on port " +
                                      std::to_string(from_id.empty() ? from_master_port : to_master_port));
  }
  absl::Status status = RunCli({"--cluster", "reshard", "127.0.0.1:" + std::to_string(from_master_port),
                                "--cluster-from", from_id, "--cluster-to", to_id, "--cluster-slots",
                                std::to_string(count), "--cluster-yes"},
                               std::chrono::seconds(120), "redis-cli --cluster reshard");
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    slot_cache_.clear();
  }
  if (!status.ok()) return status;
  return WaitForClusterOk(std::chrono::seconds(10));
}

// ---------------------------------------------------------------------------
// Commands.

std::vector<std::string> RedisClusterProcess::CommandOnNode(
    int i, const std::vector<std::string>& argv) const {
  return RunOn(nodes_.at(i).port, CredentialsOf(options_), argv);
}

std::vector<std::string> RedisClusterProcess::OnPort(int port,
                                                     const std::vector<std::string>& argv) const {
  return RunOn(port, CredentialsOf(options_), argv);
}

int RedisClusterProcess::CachedOwner(int slot, bool refresh) const {
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (refresh || slot_cache_.empty()) slot_cache_ = FetchSlotMap();
  return slot_cache_.empty() ? 0 : slot_cache_[slot];
}

int RedisClusterProcess::AnyLiveMaster() const {
  const std::vector<int> masters = MasterPorts();
  return masters.empty() ? 0 : masters.front();
}

std::vector<std::string> RedisClusterProcess::Routed(int slot,
                                                     const std::vector<std::string>& argv) const {
  const Credentials creds = CredentialsOf(options_);
  int port = slot >= 0 ? CachedOwner(slot, false) : AnyLiveMaster();
  bool asking = false;
  for (int attempt = 0; attempt < 16; ++attempt) {
    if (port == 0) return {"(error) CLUSTERDOWN no live master known (test harness)"};
    std::string error;
    ContextPtr c = Connect(port, creds, &error);
    if (c == nullptr) {
      // A stale map may point at a dead node: refresh once and retry.
      const int fresh = slot >= 0 ? CachedOwner(slot, true) : AnyLiveMaster();
      if (fresh == port || attempt > 0) return {error};
      port = fresh;
      asking = false;
      continue;
    }
    if (asking) {
      ReplyPtr ok = Run(c.get(), {"ASKING"});
      if (ok == nullptr) return {std::string("(transport error) ") + c->errstr};
    }
    ReplyPtr reply = Run(c.get(), argv);
    if (reply == nullptr) return {std::string("(transport error) ") + c->errstr};
    if (reply->type == REDIS_REPLY_ERROR) {
      const std::string message(reply->str, reply->len);
      if (message.rfind("MOVED ", 0) == 0) {
        port = RedirectPort(message);
        asking = false;
        std::lock_guard<std::mutex> lock(cache_mu_);
        slot_cache_.clear();  // refreshed on the next lookup
        continue;
      }
      if (message.rfind("ASK ", 0) == 0) {
        port = RedirectPort(message);
        asking = true;
        continue;
      }
      if (message.rfind("TRYAGAIN", 0) == 0) {  // multi-key command mid-migration
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        port = slot >= 0 ? CachedOwner(slot, true) : AnyLiveMaster();
        asking = false;
        continue;
      }
    }
    std::vector<std::string> out;
    Flatten(reply.get(), &out);
    return out;
  }
  return {"(error) too many redirects (test harness)"};
}

std::vector<std::string> RedisClusterProcess::Command(const std::vector<std::string>& argv) const {
  if (argv.empty()) return {"(error) ERR empty command"};
  const std::string name = Upper(argv[0]);

  // Whole-data-set commands: every live master.
  if (name == "FLUSHALL" || name == "FLUSHDB" || name == "SCRIPT" || name == "FUNCTION" ||
      name == "DBSIZE" || name == "KEYS") {
    const std::vector<int> masters = MasterPorts();
    if (masters.empty()) return {"(error) CLUSTERDOWN no live master known (test harness)"};
    if (name == "KEYS") {
      std::vector<std::string> keys;
      for (int port : masters) {
        std::vector<std::string> part = OnPort(port, argv);
        if (!part.empty() && IsError(part)) return part;
        keys.insert(keys.end(), part.begin(), part.end());
      }
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      return keys;
    }
    const bool exists = name == "SCRIPT" && argv.size() > 1 && Upper(argv[1]) == "EXISTS";
    std::vector<std::string> result;
    long long total = 0;
    for (size_t m = 0; m < masters.size(); ++m) {
      std::vector<std::string> reply = OnPort(masters[m], argv);
      if (IsError(reply)) return reply;
      if (name == "DBSIZE") {
        total += atoll(reply[0].c_str());
      } else if (m == 0) {
        result = reply;
      } else if (exists) {
        for (size_t k = 0; k < result.size() && k < reply.size(); ++k) {
          if (reply[k] != "1") result[k] = "0";
        }
      }
    }
    if (name == "DBSIZE") return {std::to_string(total)};
    return result;
  }

  // Which argument is the key (MOVED/ASK fix any guess that is wrong).
  static const std::set<std::string> kKeyless = {
      "PING",   "ECHO",     "INFO",  "CLUSTER",   "CONFIG",    "CLIENT", "COMMAND", "TIME",
      "SCAN",   "RANDOMKEY", "DEBUG", "SLOWLOG",  "LATENCY",   "WAIT",   "LASTSAVE", "ROLE",
      "ACL",    "AUTH",     "HELLO", "SELECT",    "PUBLISH",   "SAVE",   "BGSAVE",  "MEMORY",
      "OBJECT", "READONLY", "READWRITE"};
  int slot = -1;
  if (name == "EVAL" || name == "EVALSHA" || name == "EVAL_RO" || name == "EVALSHA_RO" ||
      name == "FCALL" || name == "FCALL_RO") {
    if (argv.size() > 3 && atoi(argv[2].c_str()) > 0) slot = KeySlot(argv[3]);
  } else if ((name == "MEMORY" || name == "OBJECT") && argv.size() > 2) {
    slot = KeySlot(argv[2]);
  } else if (kKeyless.count(name) == 0 && argv.size() > 1) {
    slot = KeySlot(argv[1]);
  }
  return Routed(slot, argv);
}

std::vector<std::string> RedisClusterProcess::KeysOnNode(int i, const std::string& pattern) const {
  const Credentials creds = CredentialsOf(options_);
  std::vector<std::string> keys;
  std::string error;
  ContextPtr c = Connect(nodes_.at(i).port, creds, &error);
  if (c == nullptr) return keys;
  std::string cursor = "0";
  do {
    ReplyPtr page = Run(c.get(), {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (page == nullptr || page->type != REDIS_REPLY_ARRAY || page->elements != 2) break;
    cursor = std::string(page->element[0]->str, page->element[0]->len);
    const redisReply* batch = page->element[1];
    for (size_t k = 0; k < batch->elements; ++k) {
      keys.emplace_back(batch->element[k]->str, batch->element[k]->len);
    }
  } while (cursor != "0");
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());  // SCAN may repeat keys
  return keys;
}

std::vector<std::string> RedisClusterProcess::Keys(const std::string& pattern) const {
  std::vector<std::string> keys;
  for (int port : MasterPorts()) {
    const int i = NodeIndexOfPort(port);
    if (i < 0) continue;
    std::vector<std::string> part = KeysOnNode(i, pattern);
    keys.insert(keys.end(), part.begin(), part.end());
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

int64_t RedisClusterProcess::TotalNetOutputBytes() const {
  const Credentials creds = CredentialsOf(options_);
  int64_t total = 0;
  for (int port : MasterPorts()) {
    std::string error;
    const std::string info = TextOn(port, creds, {"INFO", "stats"}, &error);
    // Redis 7 counts the replication stream in the total as well.
    total += atoll(InfoField(info, "total_net_output_bytes").c_str()) -
             atoll(InfoField(info, "total_net_repl_output_bytes").c_str());
  }
  return total;
}

}  // namespace tdstore::testing
