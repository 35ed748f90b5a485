#include "client/core/src/schema_copies.h"

#include <algorithm>

#include "client/core/src/client_impl.h"
#include "client/core/src/convert.h"
#include "client/core/src/schema_floors.h"
#include "common/path.h"

namespace tdstore::core {
namespace {

// A watch that ended is not restarted sooner than this: a daemon that keeps
// refusing or dropping watches costs a stream per second, not per call.
constexpr std::chrono::seconds kRewatchAfter{1};

bool Under(const Key& prefix, const Key& path) {
  const auto& p = prefix.parts();
  const auto& q = path.parts();
  return p.size() <= q.size() && std::equal(p.begin(), p.end(), q.begin());
}

}  // namespace

// One WatchSchema call. gRPC owns it from Start() and deletes it in OnDone.
//
// Why the hold: ~SchemaCopies cancels the streams still open, and a cancel
// must never reach a call gRPC has already released (which it does just
// before OnDone). The hold keeps the call alive until the stream has told
// its owner it is over (Finishing, under the owner's lock, after which the
// owner no longer cancels it); only then may gRPC finish it.
class SchemaCopies::Stream final : public grpc::ClientReadReactor<v1::SchemaEvent> {
 public:
  Stream(SchemaCopies* owner, std::string key, const std::string& name, const std::string& id)
      : owner_(owner), key_(std::move(key)) {
    request_.set_dict(name);
    request_.set_dict_id(id);
    // No deadline: a watch lasts as long as the client.
    owner_->impl_->Prepare(&context_, std::chrono::system_clock::time_point::max());
  }
  void Start() {
    owner_->impl_->stub->async()->WatchSchema(&context_, &request_, this);
    AddHold();
    StartRead(&event_);
    StartCall();
  }
  void Cancel() { context_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the stream ended (a read is always outstanding until then)
      owner_->Finishing(key_, this);
      RemoveHold();  // OnDone may follow at once
      return;
    }
    owner_->OnEvent(key_, event_);
    StartRead(&event_);
  }
  void OnDone(const grpc::Status& /*status*/) override {
    SchemaCopies* owner = owner_;
    delete this;
    owner->OnEnded();  // last: the owner may be destroyed right after
  }

 private:
  SchemaCopies* const owner_;
  const std::string key_;
  grpc::ClientContext context_;
  v1::WatchSchemaRequest request_;
  v1::SchemaEvent event_;
};

SchemaCopies::~SchemaCopies() {
  std::unique_lock<std::mutex> lock(mu_);
  closing_ = true;
  for (auto& [_, copy] : copies_) {
    if (copy.stream != nullptr) copy.stream->Cancel();
  }
  streams_ended_.wait(lock, [&] { return streams_ == 0; });
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
  // Outside the lock: gRPC may call back on this thread.
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
  auto info = std::make_shared<const DictInfo>(FromProto(event.info()));
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

void SchemaCopies::OnEnded() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--streams_ == 0) streams_ended_.notify_all();
}

}  // namespace tdstore::core
