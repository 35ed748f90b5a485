#include "server/redis/cluster_client.h"

#include <algorithm>
#include <bitset>
#include <climits>
#include <deque>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "absl/strings/numbers.h"
#include "server/redis/cluster_slot.h"
#include "common/str_cat.h"

namespace tdstore::redis {

static_assert(kClusterSlots == 16384, "ClusterClient::slots_ has one entry per slot");

namespace {

using Clock = std::chrono::steady_clock;

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string NodeName(const std::string& host, int port) {
  return host + ":" + std::to_string(port);
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

// One try of argv on a node: ASKING first when `asking` (both on one
// connection, as the ASK protocol needs), WAIT after a successful reply when
// replicas > 0. *sent is false only when the command surely did not reach
// Redis (no connection could be had, or it could not even be queued): only
// then may the caller send it again.
absl::StatusOr<Reply> Attempt(StandaloneClient& pool, absl::Span<const std::string_view> argv,
                              bool asking, int replicas, std::chrono::milliseconds wait_timeout,
                              bool* sent) {
  *sent = false;
  absl::StatusOr<std::unique_ptr<Connection>> conn = pool.Acquire();
  if (!conn.ok()) return conn.status();
  Connection& c = **conn;
  absl::StatusOr<Reply> reply = [&]() -> absl::StatusOr<Reply> {
    const std::string_view asking_argv[] = {"ASKING"};
    if (asking) {
      if (absl::Status s = c.Append(asking_argv); !s.ok()) return s;
    }
    if (absl::Status s = c.Append(argv); !s.ok()) return s;
    *sent = true;  // from here on, a failure leaves the command's fate unknown
    if (asking) {
      // ASKING's +OK. Should it be an error, the command's reply says more.
      if (absl::StatusOr<Reply> ok = c.GetReply(); !ok.ok()) return ok.status();
    }
    absl::StatusOr<Reply> r = c.GetReply();
    if (!r.ok()) return r;
    if (replicas > 0 && !r->is_error()) {
      if (absl::Status w = c.WaitReplicas(replicas, wait_timeout); !w.ok()) return w;
    }
    return r;
  }();
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
    const int slot = KeySlot(routing_key);
    // Commands of one slot go to one node while any of them is outstanding,
    // even if the map changes meanwhile: that node runs them in order, and
    // redirects them in order too, so Receive re-issues them in order. Sent
    // to two nodes, a GET could run on the new owner before the SET sent
    // ahead of it came back redirected from the old one.
    Pin& pin = pins_[slot];
    if (pin.node == nullptr) {
      auto node = client_->NodeForSlot(slot);
      if (!node.ok()) {
        pins_.erase(slot);
        return Fail(node.status());
      }
      Sub& sub = subs_[node->get()];
      if (sub.pipe == nullptr) {
        sub.node = *node;  // keeps the node (and its pool) alive for sub.pipe
        auto pipe = sub.node->pool->NewPipeline(max_outstanding_);
        if (!pipe.ok()) {
          subs_.erase(node->get());
          pins_.erase(slot);
          return Fail(pipe.status());
        }
        sub.pipe = *std::move(pipe);
      }
      pin.node = node->get();
    }
    if (auto s = subs_.at(pin.node).pipe->Send(routing_key, argv); !s.ok()) return Fail(s);
    ++pin.outstanding;
    Entry& e = order_.emplace_back();
    e.node = pin.node;
    e.slot = slot;
    e.routing_key = std::string(routing_key);
    e.argv.assign(argv.begin(), argv.end());
    return absl::OkStatus();
  }

  absl::Status SendOpen(std::string_view /*routing_key*/,
                        absl::Span<const std::string_view> /*head*/, int64_t /*value_bytes*/,
                        absl::Span<const std::string_view> /*tail*/) override {
    return absl::UnimplementedError("a command sent in pieces needs a standalone Redis");
  }
  absl::Status SendValue(std::string_view /*bytes*/) override {
    return absl::UnimplementedError("a command sent in pieces needs a standalone Redis");
  }

  absl::Status Flush() override {
    if (!failure_.ok()) return failure_;
    for (auto& [_, sub] : subs_) {
      if (auto s = sub.pipe->Flush(); !s.ok()) return Fail(s);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Reply> Receive() override {
    if (!failure_.ok()) return failure_;
    if (order_.empty()) return absl::FailedPreconditionError("Receive with nothing outstanding");
    Entry e = std::move(order_.front());
    order_.pop_front();
    if (auto pin = pins_.find(e.slot); pin != pins_.end() && --pin->second.outstanding == 0) {
      pins_.erase(pin);  // the slot's next command may follow the current map
    }
    auto reply = subs_.at(e.node).pipe->Receive();
    if (!reply.ok()) {
      (void)client_->RefreshSlotsIfIdle();
      return Fail(reply.status());
    }
    if (reply->is_error() && (IsRedirect(reply->str()) || IsTransient(reply->str()))) {
      // The slot moved (or is moving) under us: redo this one command with
      // full redirect handling, on a connection of its own, so it needs its
      // own WAIT. Later commands to the old owner will come back redirected
      // too and take the same path.
      std::vector<std::string_view> argv(e.argv.begin(), e.argv.end());
      ++reissued_;
      reissued_min_replicas_ = std::min(reissued_min_replicas_, reissue_replicas_);
      auto again = client_->RoutedCall(e.routing_key, argv, reissue_replicas_, reissue_timeout_);
      if (!again.ok()) return Fail(again.status());
      return again;
    }
    return reply;
  }

  int outstanding() const override { return static_cast<int>(order_.size()); }


  absl::Status WaitReplicas(int replicas, std::chrono::milliseconds timeout) override {
    if (!failure_.ok()) return failure_;
    if (!order_.empty()) {
      return absl::FailedPreconditionError("WaitReplicas with replies outstanding");
    }
    if (replicas > 0 && reissued_min_replicas_ < replicas) {
      // A re-issued command ran on a pooled connection that the WAITs below
      // do not cover, and it was not waited for when it ran.
      return absl::UnavailableError(StrCat(
          reissued_, " command(s) of this pipeline were re-issued after a redirect without WAIT ",
          replicas, " (Pipeline::set_reissue_replicas was not called); cannot confirm ",
          "replication"));
    }
    for (auto& [_, sub] : subs_) {
      if (auto s = sub.pipe->WaitReplicas(replicas, timeout); !s.ok()) return Fail(s);
    }
    return absl::OkStatus();
  }

  void set_reissue_replicas(int replicas, std::chrono::milliseconds timeout) override {
    reissue_replicas_ = std::max(replicas, 0);
    reissue_timeout_ = timeout;
  }

 private:
  struct Sub {
    std::shared_ptr<ClusterClient::Node> node;  // declared first: outlives pipe
    std::unique_ptr<Pipeline> pipe;
  };
  struct Pin {
    ClusterClient::Node* node = nullptr;  // key of subs_
    int outstanding = 0;                  // the slot's commands not yet Received
  };
  struct Entry {
    ClusterClient::Node* node = nullptr;  // key of subs_
    int slot = 0;
    std::string routing_key;
    std::vector<std::string> argv;
  };

  absl::Status Fail(absl::Status status) {
    failure_ = status;
    return status;
  }

  ClusterClient* const client_;
  const int max_outstanding_;
  // Keyed by the node's address, which cannot be reused while the Sub holds
  // the node.
  std::map<ClusterClient::Node*, Sub> subs_;
  std::unordered_map<int, Pin> pins_;  // by slot
  std::deque<Entry> order_;
  absl::Status failure_;
  int reissue_replicas_ = 0;
  std::chrono::milliseconds reissue_timeout_{0};
  int reissued_ = 0;
  int reissued_min_replicas_ = INT_MAX;  // INT_MAX: nothing re-issued
};

}  // namespace

// One node's CLUSTER SLOTS, parsed but not yet bound to Nodes.
struct ClusterClient::FetchedMap {
  struct Range {
    int first = 0;
    int last = 0;
    std::string host;
    int port = 0;
  };
  std::string from;  // the node that answered
  std::vector<Range> ranges;
  std::vector<std::pair<std::string, int>> replicas;
  int covered = 0;  // distinct slots with a master
};

ClusterClient::ClusterClient(std::vector<RedisAddress> seeds, ConnectOptions options,
                             ClusterOptions cluster_options)
    : seeds_(std::move(seeds)), options_(options), cluster_options_(cluster_options) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const RedisAddress& seed : seeds_) NodeNamed(seed.host, seed.port);
}

ClusterClient::~ClusterClient() = default;

std::shared_ptr<ClusterClient::Node> ClusterClient::NodeNamed(const std::string& host, int port) {
  auto& node = nodes_[NodeName(host, port)];
  if (!node) {
    node = std::make_shared<Node>();
    node->name = NodeName(host, port);
    // Every node shares the seeds' credentials.
    if (!seeds_.empty()) node->address = seeds_.front();
    node->address.kind = RedisAddress::Kind::kTcp;
    node->address.host = host;
    node->address.port = port;
    node->address.path.clear();
    node->address.db = 0;
    node->pool = std::make_unique<StandaloneClient>(node->address, options_);
  }
  return node;
}

absl::Status ClusterClient::RefreshSlots() { return Refresh(/*wait_for_running=*/true); }

absl::Status ClusterClient::RefreshSlotsIfIdle() { return Refresh(/*wait_for_running=*/false); }

absl::StatusOr<std::unique_ptr<Connection>> ClusterClient::ConnectForSubscribe() {
  std::vector<RedisAddress> candidates;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Node* master : slots_) {
      if (master != nullptr &&
          std::none_of(candidates.begin(), candidates.end(), [&](const RedisAddress& a) {
            return a.host == master->address.host && a.port == master->address.port;
          })) {
        candidates.push_back(master->address);
      }
    }
    for (const auto& [_, node] : nodes_) candidates.push_back(node->address);
  }
  candidates.insert(candidates.end(), seeds_.begin(), seeds_.end());
  absl::Status last = absl::UnavailableError("no Redis cluster node known");
  for (const RedisAddress& address : candidates) {
    auto conn = Connection::Open(address, options_);
    if (conn.ok()) return conn;
    last = conn.status();
  }
  return last;
}

absl::StatusOr<ClusterClient::FetchedMap> ClusterClient::FetchSlots(const Node& node) const {
  ConnectOptions options = options_;
  const std::chrono::milliseconds cap = cluster_options_.slots_io_timeout;
  if (cap.count() > 0 && (options.io_timeout.count() <= 0 || options.io_timeout > cap)) {
    options.io_timeout = cap;
  }
  auto conn = Connection::Open(node.address, options);
  if (!conn.ok()) return conn.status();
  const std::string_view argv[] = {"CLUSTER", "SLOTS"};
  auto reply = (*conn)->Call(argv);
  if (!reply.ok()) return reply.status();
  if (reply->is_error() || !reply->is_array()) {
    return absl::UnavailableError(StrCat("CLUSTER SLOTS from ", node.name, ": ",
                                         reply->is_error() ? reply->str() : "not an array"));
  }
  // One endpoint: [host, port, id, ...]. "" means "the node you asked";
  // "?" an endpoint the node does not know.
  auto endpoint = [&](ReplyView v, std::string* host, int* port) {
    if (v.size() < 2) return false;
    *host = std::string(v[0].str());
    if (host->empty()) *host = node.address.host;
    if (*host == "?") return false;
    *port = static_cast<int>(v[1].integer());
    return *port > 0 && *port <= 65535;
  };
  FetchedMap fetched;
  fetched.from = node.name;
  std::bitset<kClusterSlots> covered;
  for (size_t i = 0; i < reply->size(); ++i) {
    ReplyView range = (*reply)[i];
    if (range.size() < 3) continue;
    const int64_t first = range[0].integer();
    const int64_t last = range[1].integer();
    if (first < 0 || last >= kClusterSlots || first > last) continue;
    FetchedMap::Range r;
    r.first = static_cast<int>(first);
    r.last = static_cast<int>(last);
    if (!endpoint(range[2], &r.host, &r.port)) continue;
    for (int slot = r.first; slot <= r.last; ++slot) covered.set(slot);
    fetched.ranges.push_back(std::move(r));
    for (size_t j = 3; j < range.size(); ++j) {
      std::string host;
      int port = 0;
      if (endpoint(range[j], &host, &port)) fetched.replicas.emplace_back(std::move(host), port);
    }
  }
  fetched.covered = static_cast<int>(covered.count());
  return fetched;
}

absl::Status ClusterClient::Refresh(bool wait_for_running) {
  std::vector<std::shared_ptr<Node>> candidates;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (refreshing_) {
      // Calls keep routing with the map they have; only a thread with no
      // map at all needs the running refresh's result.
      if (!wait_for_running && have_map_) return absl::OkStatus();
      const uint64_t seen = refreshes_done_;
      refresh_done_.wait(lock, [&] { return refreshes_done_ != seen; });
      return last_refresh_;
    }
    refreshing_ = true;
    // The node that answered last, the map's masters, the other nodes we
    // know (replicas: after a failover one of them is a master), then the
    // seeds, which may be long gone.
    std::set<const Node*> added;
    auto add = [&](const std::shared_ptr<Node>& node) {
      if (node != nullptr && added.insert(node.get()).second) candidates.push_back(node);
    };
    if (auto it = nodes_.find(last_answered_); it != nodes_.end()) add(it->second);
    Node* previous = nullptr;
    for (Node* node : slots_) {
      if (node != nullptr && node != previous) add(node->shared_from_this());
      previous = node;
    }
    std::set<std::string> seed_names;
    for (const RedisAddress& seed : seeds_) seed_names.insert(NodeName(seed.host, seed.port));
    for (const auto& [name, node] : nodes_) {
      if (seed_names.count(name) == 0) add(node);
    }
    for (const RedisAddress& seed : seeds_) add(NodeNamed(seed.host, seed.port));
  }

  // Network I/O, without the lock. A map covering every slot ends the
  // search; a partial one (a node just reset, or still joining) is kept only
  // in case nothing better turns up.
  std::optional<FetchedMap> best;
  absl::Status last = absl::UnavailableError("no Redis Cluster node known");
  absl::Status refused;  // the first AUTH refusal
  for (const std::shared_ptr<Node>& candidate : candidates) {
    absl::StatusOr<FetchedMap> fetched = FetchSlots(*candidate);
    if (!fetched.ok()) {
      const absl::Status& s = fetched.status();
      if (refused.ok() && (absl::IsPermissionDenied(s) || absl::IsUnauthenticated(s))) {
        refused = s;
      }
      last = s;
      continue;
    }
    if (fetched->covered == 0) {
      last = absl::UnavailableError(
          StrCat("CLUSTER SLOTS from ", candidate->name, " assigns no slot"));
      continue;
    }
    if (!best.has_value() || fetched->covered > best->covered) best = *std::move(fetched);
    if (best->covered == kClusterSlots) break;
  }

  absl::Status result;
  std::vector<std::shared_ptr<Node>> dropped;  // destroyed after the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (best.has_value()) {
      InstallLocked(*best, &dropped);
    } else if (!refused.ok()) {
      result = refused;  // bad credentials are not transient: keep their code
    } else {
      result = absl::UnavailableError(
          StrCat("cannot read the Redis Cluster slot map: ", last.message()));
    }
    refreshing_ = false;
    ++refreshes_done_;
    last_refresh_ = result;
  }
  refresh_done_.notify_all();
  return result;
}

void ClusterClient::InstallLocked(const FetchedMap& fetched,
                                  std::vector<std::shared_ptr<Node>>* dropped) {
  std::array<Node*, kClusterSlots> fresh{};
  for (const FetchedMap::Range& range : fetched.ranges) {
    Node* owner = NodeNamed(range.host, range.port).get();
    std::fill(fresh.begin() + range.first, fresh.begin() + range.last + 1, owner);
  }
  // A MOVED reply is its node's word on its slot; the map may come from a
  // node that has not heard of the move yet. Reapplied once: a later MOVED
  // says so if the slot moved on.
  for (const auto& [slot, target] : moved_) fresh[slot] = NodeNamed(target.first, target.second).get();
  moved_.clear();
  slots_ = fresh;
  have_map_ = true;
  last_answered_ = fetched.from;

  // Keep the masters, their replicas and the seeds; drop the rest (a dead
  // master replaced in a failover, a redirect target that owns nothing).
  // Calls and pipelines still using a dropped node hold it until they end.
  std::set<std::string> keep;
  for (Node* node : slots_) {
    if (node != nullptr) keep.insert(node->name);
  }
  for (const auto& [host, port] : fetched.replicas) keep.insert(NodeNamed(host, port)->name);
  for (const RedisAddress& seed : seeds_) keep.insert(NodeName(seed.host, seed.port));
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    if (keep.count(it->first) == 0) {
      dropped->push_back(std::move(it->second));
      it = nodes_.erase(it);
    } else {
      ++it;
    }
  }
}

absl::Status ClusterClient::EnsureMap() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (have_map_) return absl::OkStatus();
  }
  return RefreshSlots();  // on success have_map_ is true (it never goes back)
}

absl::StatusOr<std::shared_ptr<ClusterClient::Node>> ClusterClient::NodeForSlot(int slot) {
  if (slot < 0 || slot >= kClusterSlots) {
    return absl::InvalidArgumentError(StrCat("no Redis Cluster slot ", slot));
  }
  if (absl::Status s = EnsureMap(); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  Node* node = slots_[slot];
  if (node == nullptr) {
    return absl::UnavailableError(StrCat("Redis Cluster slot ", slot, " has no master"));
  }
  return node->shared_from_this();
}

void ClusterClient::NoteMoved(int slot, const std::string& host, int port) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    slots_[slot] = NodeNamed(host, port).get();
    moved_[slot] = {host, port};
  }
  // Other slots probably moved too. If a refresh is running already, it
  // installs its map with this MOVED on top.
  (void)RefreshSlotsIfIdle();
}

std::vector<std::string> ClusterClient::Masters() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> names;
  for (const Node* node : slots_) {
    if (node != nullptr) names.insert(node->name);
  }
  return std::vector<std::string>(names.begin(), names.end());
}

absl::StatusOr<std::vector<std::shared_ptr<ClusterClient::Node>>> ClusterClient::MasterNodes() {
  if (absl::Status s = EnsureMap(); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Node>> masters;
  std::set<const Node*> seen;
  for (Node* node : slots_) {
    if (node != nullptr && seen.insert(node).second) masters.push_back(node->shared_from_this());
  }
  return masters;
}

absl::StatusOr<Reply> ClusterClient::RoutedCall(std::string_view routing_key,
                                                absl::Span<const std::string_view> argv,
                                                int replicas,
                                                std::chrono::milliseconds wait_timeout) {
  return RoutedCallVia(routing_key, argv, replicas, wait_timeout, nullptr);
}

absl::StatusOr<Reply> ClusterClient::RoutedCallVia(std::string_view routing_key,
                                                   absl::Span<const std::string_view> argv,
                                                   int replicas,
                                                   std::chrono::milliseconds wait_timeout,
                                                   std::shared_ptr<Node>* answered_by) {
  if (answered_by != nullptr) answered_by->reset();
  const int slot = KeySlot(routing_key);
  const auto deadline = Clock::now() + cluster_options_.retry_window;
  std::chrono::milliseconds backoff(20);
  std::shared_ptr<Node> ask_target;
  int redirects = 0;
  absl::Status last;
  while (true) {
    const bool asking = ask_target != nullptr;
    std::shared_ptr<Node> node = std::move(ask_target);
    ask_target.reset();
    bool refresh_before_retry = true;
    if (node == nullptr) {
      auto owner = NodeForSlot(slot);
      if (owner.ok()) {
        node = *std::move(owner);
      } else if (!absl::IsUnavailable(owner.status())) {
        return owner.status();  // e.g. a wrong password: retrying cannot help
      } else {
        last = owner.status();
      }
    }
    if (node != nullptr) {
      bool sent = false;
      absl::StatusOr<Reply> reply =
          Attempt(*node->pool, argv, asking, replicas, wait_timeout, &sent);
      if (!reply.ok()) {
        if (sent) {
          // Lost in flight: it may have run, so it is not sent again. The
          // node is probably gone: let the next call find its successor.
          (void)RefreshSlotsIfIdle();
          return reply.status();
        }
        // Not sent. Refused credentials (or anything else that is not a
        // transport failure) will not get better by retrying.
        if (!absl::IsUnavailable(reply.status())) return reply.status();
        last = reply.status();  // could not connect: retry
      } else if (!reply->is_error()) {
        if (answered_by != nullptr) *answered_by = node;
        return reply;
      } else {
        std::string_view e = reply->str();
        std::string host;
        int port = 0;
        if (IsRedirect(e) && ParseRedirect(e, &host, &port)) {
          if (++redirects > cluster_options_.max_redirects) {
            return absl::UnavailableError(StrCat("too many Redis Cluster redirects: ", e));
          }
          if (StartsWith(e, "ASK ")) {
            std::lock_guard<std::mutex> lock(mu_);
            ask_target = NodeNamed(host, port);
          } else {
            NoteMoved(slot, host, port);  // refreshes the map too
          }
          // The first redirect means a stale map: follow it at once. More
          // mean the slot is moving right now or the nodes disagree (a
          // failover, a reshard): give them time.
          if (redirects == 1) continue;
          refresh_before_retry = false;
          last = absl::UnavailableError(StrCat("Redis Cluster: ", e));
        } else if (!IsTransient(e)) {
          if (answered_by != nullptr) *answered_by = node;
          return reply;  // an ordinary error reply
        } else {
          last = absl::UnavailableError(StrCat("Redis Cluster: ", e));
        }
      }
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      return absl::UnavailableError(StrCat("Redis Cluster unavailable: ", last.message()));
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
    if (refresh_before_retry) (void)RefreshSlotsIfIdle();
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
  std::shared_ptr<Node> answered;
  auto reply = RoutedCallVia(keys[0], argv, replicas, timeout, &answered);
  // A new or promoted master without our script: load it where the
  // NOSCRIPT came from (the slot's owner, or the ASK target) and retry. A
  // few rounds, should the slot move to yet another such node meanwhile.
  for (int round = 0; round < 3 && reply.ok() && reply->is_error() &&
                      StartsWith(reply->str(), "NOSCRIPT") && answered != nullptr;
       ++round) {
    const std::string_view load[] = {"SCRIPT", "LOAD", script.body()};
    auto loaded = answered->pool->Call("", load);
    if (!loaded.ok()) return loaded.status();
    if (loaded->is_error()) return loaded;
    reply = RoutedCallVia(keys[0], argv, replicas, timeout, &answered);
  }
  return reply;
}

absl::StatusOr<std::vector<Reply>> ClusterClient::CallOnEveryMaster(
    absl::Span<const std::string_view> argv) {
  auto masters = MasterNodes();
  if (!masters.ok()) return masters.status();
  std::vector<Reply> replies;
  for (const std::shared_ptr<Node>& node : *masters) {
    auto reply = node->pool->Call("", argv);
    if (!reply.ok()) {
      (void)RefreshSlotsIfIdle();
      return reply.status();
    }
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
