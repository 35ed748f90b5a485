#include "client/core/src/schema_copies.h"

#include <algorithm>
#include <exception>

#include "client/core/src/client_impl.h"
#include "client/core/src/convert.h"
#include "client/core/src/schema_floors.h"
#include "common/path.h"

namespace tdstore::core {
namespace {

// A watch that ended is not restarted sooner than this: a daemon that keeps
// refusing or dropping watches costs a stream per second, not per call.
constexpr std::chrono::seconds kRewatchAfter{1};

// Schema lookups poll the watches' socket at most this often (Drain).
constexpr std::chrono::microseconds kDrainEvery{1000};

bool Under(const Key& prefix, const Key& path) {
  const auto& p = prefix.parts();
  const auto& q = path.parts();
  return p.size() <= q.size() && std::equal(p.begin(), p.end(), q.begin());
}

}  // namespace

// One WatchSchema call, on the owner's queue. The owner deletes it once
// its Finish has completed (Drain); until then a Cancel may reach it.
class SchemaCopies::Stream {
 public:
  enum class Step { kStarted, kRead, kFinished };
  // What a completion on the queue carries.
  struct Tag {
    Stream* stream;
    Step step;
  };

  Stream(SchemaCopies* owner, std::string key, const std::string& name, const std::string& id)
      : owner_(owner), key_(std::move(key)) {
    request_.set_dict(name);
    request_.set_dict_id(id);
    // No deadline: a watch lasts as long as the client.
    owner_->impl_->Prepare(&context_, std::chrono::system_clock::time_point::max());
  }
  void Start() {
    reader_ = owner_->impl_->stub->PrepareAsyncWatchSchema(&context_, request_, &owner_->queue_);
    reader_->StartCall(&started_);
  }
  void Cancel() { context_.TryCancel(); }

  // One completion of this stream's; true once it is over (Finish done),
  // and the owner may delete it. One op is outstanding at a time: the
  // start, then a read at a time until the stream ends, then Finish.
  bool Handle(Step step, bool ok) {
    if (step == Step::kFinished) return true;
    if (ok && step == Step::kRead) owner_->OnEvent(key_, event_);
    if (ok) {
      reader_->Read(&event_, &read_);
    } else {  // never started, or ended: the daemon went, or a cancel
      owner_->Finishing(key_, this);
      reader_->Finish(&status_, &finished_);
    }
    return false;
  }

 private:
  SchemaCopies* const owner_;
  const std::string key_;
  grpc::ClientContext context_;
  v1::WatchSchemaRequest request_;
  v1::SchemaEvent event_;
  grpc::Status status_;
  std::unique_ptr<grpc::ClientAsyncReader<v1::SchemaEvent>> reader_;
  Tag started_{this, Step::kStarted};
  Tag read_{this, Step::kRead};
  Tag finished_{this, Step::kFinished};
};

SchemaCopies::~SchemaCopies() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    for (auto& [_, copy] : copies_) {
      if (copy.stream != nullptr) copy.stream->Cancel();
    }
  }
  Drain(/*until_ended=*/true);
  queue_.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue_.Next(&tag, &ok)) {
  }
}

void SchemaCopies::Drain(bool until_ended) {
  // Why a lookup may skip the poll: a poll is a pass of gRPC's poller, and
  // gRPC gives the polling thread whatever I/O the channel has pending.
  // With nothing in flight that is about 0.9 us, which doubled `key in td`
  // (0.9 -> 1.8 us). With a write behind in flight it is 20-30 us: the
  // lookup's thread (the trainer's) then sends and reads the writer
  // thread's call. A torchrl extend makes six lookups, and polling every
  // 50 us made its 0.1 ms of Python 0.3 ms (docs/benchmarks.md, *A lookup
  // polls once a millisecond*). So a lookup within kDrainEvery of the last
  // poll answers without one: another client's change, once its event
  // reached the socket, waits at most that much longer. This client's own
  // changes never wait for the watch (Wrote and the floors).
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  if (!until_ended && now - last_drain_ns_.load(std::memory_order_relaxed) <
                          std::chrono::nanoseconds(kDrainEvery).count()) {
    return;
  }
  // A lookup while another thread drains does not wait for it: that
  // thread polls for both.
  std::unique_lock<std::mutex> drain(drain_mu_, std::defer_lock);
  if (until_ended) {
    drain.lock();
  } else if (!drain.try_lock()) {
    return;
  }
  last_drain_ns_.store(now, std::memory_order_relaxed);
  for (;;) {
    if (until_ended) {
      std::lock_guard<std::mutex> lock(mu_);
      if (streams_ == 0) return;
    }
    void* tag = nullptr;
    bool ok = false;
    // A deadline already past still makes one pass of gRPC's poller: it
    // reads what has reached the socket unless another thread is the
    // poller (a call of this client's waiting, or gRPC's backup poller),
    // which then reads it itself and queues the event here.
    const gpr_timespec deadline = until_ended ? gpr_inf_future(GPR_CLOCK_MONOTONIC)
                                              : gpr_time_0(GPR_CLOCK_MONOTONIC);
    if (queue_.AsyncNext(&tag, &ok, deadline) != grpc::CompletionQueue::GOT_EVENT) return;
    const Stream::Tag& t = *static_cast<Stream::Tag*>(tag);
    if (t.stream->Handle(t.step, ok)) {
      delete t.stream;
      std::lock_guard<std::mutex> lock(mu_);
      --streams_;
    }
  }
}

std::string SchemaCopies::KeyOf(const std::string& name, const std::string& id) {
  return name + '\n' + id;  // a dict name never holds a newline
}

bool SchemaCopies::IsTrusted(const Copy& copy) {
  return copy.stream != nullptr && !copy.gone && copy.info != nullptr &&
         copy.info->version >= copy.trusted_from;
}

std::shared_ptr<const DictInfo> SchemaCopies::Trusted(const std::string& name,
                                                      const std::string& id) {
  Drain(/*until_ended=*/false);
  Stream* start = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_ || id.empty()) return nullptr;
    const std::string key = KeyOf(name, id);
    Copy& copy = copies_[key];
    // Never older than what a reply of this process has shown (causal
    // reads, schema_floors.h): a newer floor waits for the watch's event,
    // or for the caller's round trip to bring the copy up (Known).
    if (IsTrusted(copy) && copy.info->version >= SchemaFloor(impl_->address, id)) {
      return copy.info;
    }
    const auto now = std::chrono::steady_clock::now();
    if (copy.stream == nullptr && !copy.gone &&
        (copy.ended == std::chrono::steady_clock::time_point{} ||
         now - copy.ended >= kRewatchAfter)) {
      copy.stream = start = new Stream(this, key, name, id);
      ++streams_;
    }
  }
  if (start != nullptr) start->Start();
  return nullptr;
}

void SchemaCopies::ApplyOwnChange(const std::string& name, const std::string& id,
                                  int64_t version,
                                  const std::function<void(std::vector<LeafMeta>&)>& edit) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = copies_.find(KeyOf(name, id));
  if (it == copies_.end()) return;  // never watched
  Copy& copy = it->second;
  if (copy.info != nullptr && version <= copy.info->version) return;  // known already
  if (IsTrusted(copy) && version == copy.info->version + 1) {
    // Our change is the only one between the two versions: apply it (to a
    // new copy: callers may hold the old one).
    auto next = std::make_shared<DictInfo>(*copy.info);
    edit(next->leaves);
    next->version = version;
    copy.info = std::move(next);
    return;
  }
  copy.trusted_from = std::max(copy.trusted_from, version);
}

void SchemaCopies::Wrote(const std::string& name, const std::string& id, int64_t version,
                         const std::vector<LeafMeta>& written) {
  ApplyOwnChange(name, id, version, [&](std::vector<LeafMeta>& leaves) {
    for (const LeafMeta& leaf : written) {
      auto same = std::find_if(leaves.begin(), leaves.end(),
                               [&](const LeafMeta& l) { return l.path == leaf.path; });
      if (same != leaves.end()) {
        *same = leaf;
      } else {
        leaves.push_back(leaf);
      }
    }
    // In tdstored's order: by encoded path.
    std::sort(leaves.begin(), leaves.end(), [](const LeafMeta& a, const LeafMeta& b) {
      return EncodePath(a.path.parts()) < EncodePath(b.path.parts());
    });
  });
}

void SchemaCopies::Removed(const std::string& name, const std::string& id, int64_t version,
                           const std::vector<Key>& removed) {
  ApplyOwnChange(name, id, version, [&](std::vector<LeafMeta>& leaves) {
    leaves.erase(std::remove_if(leaves.begin(), leaves.end(),
                                [&](const LeafMeta& l) {
                                  return std::any_of(removed.begin(), removed.end(),
                                                     [&](const Key& r) { return Under(r, l.path); });
                                }),
                 leaves.end());
  });
}

void SchemaCopies::RenamedLeaves(const std::string& name, const std::string& id,
                                 int64_t version, const std::vector<std::pair<Key, Key>>& moved,
                                 const std::vector<Key>& replaced) {
  ApplyOwnChange(name, id, version, [&](std::vector<LeafMeta>& leaves) {
    leaves.erase(std::remove_if(leaves.begin(), leaves.end(),
                                [&](const LeafMeta& l) {
                                  return std::find(replaced.begin(), replaced.end(), l.path) !=
                                         replaced.end();
                                }),
                 leaves.end());
    for (LeafMeta& leaf : leaves) {
      for (const auto& [before, after] : moved) {
        if (leaf.path == before) {
          leaf.path = after;
          break;
        }
      }
    }
    std::sort(leaves.begin(), leaves.end(), [](const LeafMeta& a, const LeafMeta& b) {
      return EncodePath(a.path.parts()) < EncodePath(b.path.parts());
    });
  });
}

void SchemaCopies::Known(const std::string& name, const std::string& id, const DictInfo& info) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = copies_.find(KeyOf(name, id));
  if (it == copies_.end()) return;  // never watched
  Copy& copy = it->second;
  if (copy.info != nullptr && info.version <= copy.info->version) return;  // known already
  copy.info = std::make_shared<const DictInfo>(info);
}

void SchemaCopies::Distrust(Copy& copy) {
  const int64_t known = copy.info != nullptr ? copy.info->version : 0;
  copy.trusted_from = std::max(copy.trusted_from, known + 1);
}

void SchemaCopies::NameEnded(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string prefix = name + '\n';
  for (auto it = copies_.lower_bound(prefix);
       it != copies_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    Distrust(it->second);
  }
}

void SchemaCopies::Unsure(const std::string& name, const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = copies_.find(KeyOf(name, id));
  if (it != copies_.end()) Distrust(it->second);
}

void SchemaCopies::OnEvent(const std::string& key, const v1::SchemaEvent& event) {
  std::lock_guard<std::mutex> lock(mu_);
  Copy& copy = copies_[key];
  if (event.gone()) {
    copy.gone = true;
    copy.info.reset();
    return;
  }
  std::shared_ptr<const DictInfo> info;
  try {
    info = std::make_shared<const DictInfo>(FromProto(event.info()));
  } catch (const std::exception&) {
    // A schema this client cannot read (a newer tdstored's dtype or leaf
    // kind): no answer from the copy, so the caller's round trip meets the
    // error; the stream reads on. Letting it escape would leave the stream
    // with no read outstanding, its copy trusted as it was, and the
    // destructor waiting for it forever.
    Distrust(copy);
    return;
  }
  // Versions only grow; an older event (sent before a change this client
  // derived already) must not roll the copy back.
  if (copy.info == nullptr || info->version >= copy.info->version) copy.info = std::move(info);
}

void SchemaCopies::Finishing(const std::string& key, Stream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  Copy& copy = copies_[key];
  if (copy.stream == stream) {
    copy.stream = nullptr;
    copy.ended = std::chrono::steady_clock::now();
  }
}

}  // namespace tdstore::core
