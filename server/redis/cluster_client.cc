#include "server/redis/cluster_client.h"

#include <algorithm>
#include <deque>
#include <thread>

#include "absl/strings/numbers.h"
#include "common/cluster_slot.h"
#include "common/str_cat.h"

namespace tdstore::redis {

namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381" -> host, port.
bool ParseRedirect(std::string_view error, std::string* host, int* port) {
  size_t second_space = error.find(' ', error.find(' ') + 1);
  if (second_space == std::string_view::npos) return false;
  std::string_view target = error.substr(second_space + 1);
  size_t colon = target.rfind(':');
  if (colon == std::string_view::npos) return false;
  *host = std::string(target.substr(0, colon));
  return absl::SimpleAtoi(std::string(target.substr(colon + 1)), port);
}

// Errors after which the same command may be sent again unchanged.
bool IsRedirect(std::string_view e) { return StartsWith(e, "MOVED ") || StartsWith(e, "ASK "); }
bool IsTransient(std::string_view e) {
  return StartsWith(e, "TRYAGAIN") || StartsWith(e, "CLUSTERDOWN");
}

// Sends ASKING and the command on one connection, as the ASK protocol needs.
absl::StatusOr<Reply> AskingCall(StandaloneClient& pool, absl::Span<const std::string_view> argv,
                                 int replicas, std::chrono::milliseconds wait_timeout) {
  auto conn = pool.Acquire();
  if (!conn.ok()) return conn.status();
  const std::string_view asking[] = {"ASKING"};
  absl::Status s = (*conn)->Append(asking);
  if (s.ok()) s = (*conn)->Append(argv);
  absl::StatusOr<Reply> reply = absl::UnknownError("not sent");
  if (!s.ok()) reply = s;
  if (s.ok()) reply = (*conn)->GetReply();              // +OK of ASKING
  if (reply.ok()) reply = (*conn)->GetReply();          // the command's reply
  if (replicas > 0 && reply.ok() && !reply->is_error()) {
    if (absl::Status w = (*conn)->WaitReplicas(replicas, wait_timeout); !w.ok()) reply = w;
  }
  pool.Release(*std::move(conn));
  return reply;
}

// A pipeline over several nodes: one sub-pipeline per node, replies handed
// out in send order. Keeps each command's argv so that a redirected command
// can be re-issued on its own.
class ClusterPipeline : public Pipeline {
 public:
  ClusterPipeline(ClusterClient* client, int max_outstanding)
      : client_(client), max_outstanding_(max_outstanding) {}

  absl::Status Send(std::string_view routing_key,
                    absl::Span<const std::string_view> argv) override {
    if (!failure_.ok()) return failure_;
    auto node = client_->NodeForSlot(KeySlot(routing_key));
    if (!node.ok()) return Fail(node.status());
    auto& sub = subs_[*node];
    if (!sub) {
      auto pipe = (*node)->pool->NewPipeline(max_outstanding_);
      if (!pipe.ok()) return Fail(pipe.status());
      sub = *std::move(pipe);
    }
    if (auto s = sub->Send(routing_key, argv); !s.ok()) return Fail(s);
    Entry& e = order_.emplace_back();
    e.node = *node;
    e.routing_key = std::string(routing_key);
    e.argv.assign(argv.begin(), argv.end());
    return absl::OkStatus();
  }

  absl::Status Flush() override {
    if (!failure_.ok()) return failure_;
    for (auto& [_, sub] : subs_) {
      if (auto s = sub->Flush(); !s.ok()) return Fail(s);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Reply> Receive() override {
    if (!failure_.ok()) return failure_;
    if (order_.empty()) return absl::FailedPreconditionError("Receive with nothing outstanding");
    Entry e = std::move(order_.front());
    order_.pop_front();
    auto reply = subs_[e.node]->Receive();
    if (!reply.ok()) {
      (void)client_->RefreshSlots();
      return Fail(reply.status());
    }
    if (reply->is_error() && (IsRedirect(reply->str()) || IsTransient(reply->str()))) {
      // The slot moved (or is moving) under us: redo this one command with
      // full redirect handling. Later commands to the old owner will come
      // back redirected too and take the same path.
      std::vector<std::string_view> argv(e.argv.begin(), e.argv.end());
      return client_->RoutedCall(e.routing_key, argv);
    }
    return reply;
  }

  int outstanding() const override { return static_cast<int>(order_.size()); }

  absl::Status WaitReplicas(int replicas, std::chrono::milliseconds timeout) override {
    if (!failure_.ok()) return failure_;
    // Commands re-issued after a redirect ran on other connections through
    // RoutedCall, without WAIT; the masters' own WAITs below still cover
    // every write of this pipeline's connections.
    for (auto& [_, sub] : subs_) {
      if (auto s = sub->WaitReplicas(replicas, timeout); !s.ok()) return Fail(s);
    }
    return absl::OkStatus();
  }

 private:
  struct Entry {
    ClusterClient::Node* node = nullptr;
    std::string routing_key;
    std::vector<std::string> argv;
  };

  absl::Status Fail(absl::Status status) {
    failure_ = status;
    return status;
  }

  ClusterClient* const client_;
  const int max_outstanding_;
  std::map<ClusterClient::Node*, std::unique_ptr<Pipeline>> subs_;
  std::deque<Entry> order_;
  absl::Status failure_;
};

}  // namespace

ClusterClient::ClusterClient(std::vector<RedisAddress> seeds, ConnectOptions options,
                             ClusterOptions cluster_options)
    : seeds_(std::move(seeds)), options_(options), cluster_options_(cluster_options) {}

ClusterClient::~ClusterClient() = default;

ClusterClient::Node* ClusterClient::NodeNamed(const std::string& host, int port) {
  const std::string name = host + ":" + std::to_string(port);
  auto& node = nodes_[name];
  if (!node) {
    // Every node shares the seeds' credentials.
    RedisAddress address = seeds_.front();
    address.kind = RedisAddress::Kind::kTcp;
    address.host = host;
    address.port = port;
    address.db = 0;
    node = std::make_unique<Node>(Node{name, std::make_unique<StandaloneClient>(address, options_)});
  }
  return node.get();
}

absl::Status ClusterClient::RefreshSlots() {
  std::lock_guard<std::mutex> lock(mu_);
  return RefreshSlotsLocked();
}

absl::Status ClusterClient::RefreshSlotsLocked() {
  // Ask the seeds first, then every node we have seen: after a failover the
  // seeds may be the ones that died.
  std::vector<Node*> candidates;
  for (const RedisAddress& seed : seeds_) candidates.push_back(NodeNamed(seed.host, seed.port));
  for (auto& [_, node] : nodes_) {
    if (std::find(candidates.begin(), candidates.end(), node.get()) == candidates.end()) {
      candidates.push_back(node.get());
    }
  }
  absl::Status last = absl::UnavailableError("no Redis Cluster node known");
  for (Node* candidate : candidates) {
    const std::string_view argv[] = {"CLUSTER", "SLOTS"};
    auto reply = candidate->pool->Call("", argv);
    if (!reply.ok()) {
      last = reply.status();
      continue;
    }
    if (reply->is_error() || !reply->is_array()) {
      last = absl::UnavailableError(
          StrCat("CLUSTER SLOTS from ", candidate->name, ": ", reply->str()));
      continue;
    }
    std::array<Node*, kClusterSlots> fresh{};
    const std::string candidate_host = candidate->name.substr(0, candidate->name.rfind(':'));
    for (size_t i = 0; i < reply->size(); ++i) {
      ReplyView range = (*reply)[i];
      if (range.size() < 3 || range[2].size() < 2) continue;
      std::string host(range[2][0].str());
      if (host.empty()) host = candidate_host;  // "" means "the node you asked"
      Node* owner = NodeNamed(host, static_cast<int>(range[2][1].integer()));
      for (int64_t slot = range[0].integer(); slot <= range[1].integer(); ++slot) {
        if (slot >= 0 && slot < kClusterSlots) fresh[slot] = owner;
      }
    }
    slots_ = fresh;
    have_map_ = true;
    return absl::OkStatus();
  }
  // Bad credentials are not a transient failure: say so, with their code.
  if (absl::IsPermissionDenied(last) || absl::IsUnauthenticated(last)) return last;
  return absl::UnavailableError(StrCat("cannot read the Redis Cluster slot map: ", last.message()));
}

absl::StatusOr<ClusterClient::Node*> ClusterClient::NodeForSlot(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!have_map_) {
    if (auto s = RefreshSlotsLocked(); !s.ok()) return s;
  }
  Node* node = slots_[slot];
  if (node == nullptr) {
    return absl::UnavailableError(StrCat("Redis Cluster slot ", slot, " has no master"));
  }
  return node;
}

std::vector<std::string> ClusterClient::Masters() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (Node* node : slots_) {
    if (node != nullptr && std::find(names.begin(), names.end(), node->name) == names.end()) {
      names.push_back(node->name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<Reply> ClusterClient::RoutedCall(std::string_view routing_key,
                                                absl::Span<const std::string_view> argv,
                                                int replicas,
                                                std::chrono::milliseconds wait_timeout) {
  const int slot = KeySlot(routing_key);
  const auto deadline = std::chrono::steady_clock::now() + cluster_options_.retry_window;
  std::chrono::milliseconds backoff(20);
  Node* ask_target = nullptr;
  int redirects = 0;
  absl::Status last;
  while (true) {
    Node* node = ask_target;
    if (node == nullptr) {
      auto owner = NodeForSlot(slot);
      if (owner.ok()) {
        node = *owner;
      } else if (!absl::IsUnavailable(owner.status())) {
        return owner.status();  // e.g. a wrong password: retrying cannot help
      } else {
        last = owner.status();
      }
    }
    if (node != nullptr) {
      absl::StatusOr<Reply> reply;
      if (ask_target != nullptr) {
        reply = AskingCall(*node->pool, argv, replicas, wait_timeout);
      } else {
        // Connect first, separately: a command that was never sent can be
        // retried safely; one lost in flight cannot (it may have run).
        auto conn = node->pool->Acquire();
        if (conn.ok()) {
          reply = (*conn)->Call(argv);
          if (replicas > 0 && reply.ok() && !reply->is_error()) {
            if (absl::Status w = (*conn)->WaitReplicas(replicas, wait_timeout); !w.ok()) {
              reply = w;
            }
          }
          node->pool->Release(*std::move(conn));
          if (!reply.ok()) {
            (void)RefreshSlots();
            return reply.status();
          }
        } else if (absl::IsPermissionDenied(conn.status()) ||
                   absl::IsUnauthenticated(conn.status())) {
          return conn.status();
        } else {
          reply = conn.status();
        }
      }
      ask_target = nullptr;
      if (reply.ok() && !reply->is_error()) return reply;
      if (reply.ok()) {
        std::string_view e = reply->str();
        std::string host;
        int port = 0;
        if (IsRedirect(e) && ParseRedirect(e, &host, &port)) {
          if (++redirects > cluster_options_.max_redirects) {
            return absl::UnavailableError(StrCat("too many Redis Cluster redirects: ", e));
          }
          std::lock_guard<std::mutex> lock(mu_);
          Node* target = NodeNamed(host, port);
          if (StartsWith(e, "ASK ")) {
            ask_target = target;
          } else {
            // MOVED: the slot's owner changed for good; learn the whole map.
            slots_[slot] = target;
            (void)RefreshSlotsLocked();
          }
          continue;
        }
        if (!IsTransient(e)) return reply;  // an ordinary error reply
        last = absl::UnavailableError(StrCat("Redis Cluster: ", e));
      } else {
        last = reply.status();  // could not connect: nothing was sent
      }
    }
    if (std::chrono::steady_clock::now() + backoff > deadline) {
      return absl::UnavailableError(StrCat("Redis Cluster unavailable: ", last.message()));
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
    (void)RefreshSlots();
  }
}

absl::StatusOr<Reply> ClusterClient::Call(std::string_view routing_key,
                                          absl::Span<const std::string_view> argv) {
  return RoutedCall(routing_key, argv);
}

absl::StatusOr<Reply> ClusterClient::Eval(const Script& script,
                                          absl::Span<const std::string_view> keys,
                                          absl::Span<const std::string_view> args) {
  return EvalDurable(script, keys, args, 0, std::chrono::milliseconds(0));
}

absl::StatusOr<Reply> ClusterClient::EvalDurable(const Script& script,
                                                 absl::Span<const std::string_view> keys,
                                                 absl::Span<const std::string_view> args,
                                                 int replicas,
                                                 std::chrono::milliseconds timeout) {
  if (keys.empty()) return absl::InvalidArgumentError("a script needs a key to route by");
  const std::string numkeys = std::to_string(keys.size());
  std::vector<std::string_view> argv{"EVALSHA", script.sha1(), numkeys};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  auto reply = RoutedCall(keys[0], argv, replicas, timeout);
  if (reply.ok() && reply->is_error() && StartsWith(reply->str(), "NOSCRIPT")) {
    // A new or failed-over master without our scripts: load them everywhere
    // (cheap, idempotent) and retry once.
    const std::string_view load[] = {"SCRIPT", "LOAD", script.body()};
    if (auto loaded = CallOnEveryMaster(load); !loaded.ok()) return loaded.status();
    reply = RoutedCall(keys[0], argv, replicas, timeout);
  }
  return reply;
}

absl::StatusOr<std::vector<Reply>> ClusterClient::CallOnEveryMaster(
    absl::Span<const std::string_view> argv) {
  if (!have_map_) {
    if (auto s = RefreshSlots(); !s.ok()) return s;
  }
  std::vector<Node*> masters;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Node* node : slots_) {
      if (node != nullptr && std::find(masters.begin(), masters.end(), node) == masters.end()) {
        masters.push_back(node);
      }
    }
  }
  std::vector<Reply> replies;
  for (Node* node : masters) {
    auto reply = node->pool->Call("", argv);
    if (!reply.ok()) return reply.status();
    replies.push_back(*std::move(reply));
  }
  return replies;
}

absl::StatusOr<std::unique_ptr<Pipeline>> ClusterClient::NewPipeline(int max_outstanding) {
  if (max_outstanding < 1) return absl::InvalidArgumentError("max_outstanding must be >= 1");
  return std::unique_ptr<Pipeline>(new ClusterPipeline(this, max_outstanding));
}

std::string ClusterClient::Describe() const {
  std::string seeds;
  for (const RedisAddress& seed : seeds_) {
    seeds += (seeds.empty() ? "" : ",") + seed.host + ":" + std::to_string(seed.port);
  }
  return StrCat("cluster of ", Masters().size(), " masters (seeds ", seeds, ")");
}

}  // namespace tdstore::redis
