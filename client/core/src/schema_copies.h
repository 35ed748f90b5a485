// The client's copies of dict schemas, each proven current by a
// WatchSchema stream, so that keys(), contains() and describe() cost no
// round trip (the proto's "Schema watch").
//
// When a copy may be trusted: its stream is open, and the copy is the last
// schema the stream sent, or one this client derived from a trusted copy
// by its own change, whose response named the very next version. Not
// trusted (callers make the round trip instead):
//   - before the stream's first event, and after the stream ended (the
//     daemon lost its Redis subscription, restarted, or the dict is gone);
//   - after a change by this client it cannot derive (one that failed with
//     its outcome unknown, or that came while the copy was not trusted),
//     until the stream reports that version or a newer one.
// Another client's change becomes visible here when its event arrives:
// the daemon publishes it in the same Redis step as the change, so this
// lags the change by a pub/sub hop and a schema load (sub-millisecond on
// one machine), never more while the stream is open.
//
// A stream is started by the first Trusted() miss for a dict and lives
// until the Client's last copy goes away. Thread-safe.
//
// Who reads the streams: the callers. The streams' events complete on a
// queue of this object's that no thread waits on; Trusted() first takes
// what has arrived (Drain), without blocking, unless another lookup did
// within the last millisecond. The socket itself is read by whichever thread
// polls: a lookup, a call of this client's while it waits, or gRPC's
// backup poller (every 5 s by default) in an idle client.
//
// Why not a thread of its own (gRPC's callback API, as before): gRPC's
// pollers share one epoll set, and a thread parked on the watch was the
// one woken by every answer to this client's calls, which it handed to the
// caller with a second wake-up. That cost a call 0.06 ms of wall time and
// 0.05 ms of the client's CPU on this 2-vCPU machine (0.29 against 0.37 ms
// for counter_get; docs/benchmarks.md, *The watch read by its callers*).
// What it changes: an event waits in the queue until a lookup takes it,
// at most 1 ms after the last lookup that looked.
#ifndef TDSTORE_CLIENT_CORE_SRC_SCHEMA_COPIES_H_
#define TDSTORE_CLIENT_CORE_SRC_SCHEMA_COPIES_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tdstore/core.h"
#include "tdstore/v1/tdstore.grpc.pb.h"

namespace tdstore::core {

class SchemaCopies {
 public:
  // `impl` (its stub and options) must outlive this object.
  explicit SchemaCopies(const Client::Impl* impl) : impl_(impl) {}
  // Cancels every stream and waits until gRPC is done with them.
  ~SchemaCopies();
  SchemaCopies(const SchemaCopies&) = delete;
  SchemaCopies& operator=(const SchemaCopies&) = delete;

  // The dict's schema if a trusted copy exists; otherwise nullopt, after
  // starting its watch if none runs.
  // Shared, never changed afterwards (a change makes a new copy).
  std::shared_ptr<const DictInfo> Trusted(const std::string& name, const std::string& id);

  // The calls below are this client's own changes to the dict `name`, `id`.

  // This client's write left the schema at `version`, writing `written`
  // (every leaf it touched, as it is now: added, replaced, or created by an
  // indexed write). If the copy was trusted at version - 1, it is updated
  // and stays trusted; at `version` already, nothing changes; otherwise it
  // is not trusted until the stream reports `version`.
  void Wrote(const std::string& name, const std::string& id, int64_t version,
             const std::vector<LeafMeta>& written);
  // This client removed `removed` (leaves or subtrees) at `version`; as Wrote.
  void Removed(const std::string& name, const std::string& id, int64_t version,
               const std::vector<Key>& removed);
  // This client renamed leaves at `version`: each `moved` pair is a path
  // before and after; `replaced` leaves (at the target) are gone. As Wrote.
  void RenamedLeaves(const std::string& name, const std::string& id, int64_t version,
                     const std::vector<std::pair<Key, Key>>& moved,
                     const std::vector<Key>& replaced);
  // tdstored answered this client with the schema `info` (a create, an
  // open, a describe, a lock or attribute change): the copy becomes it
  // unless the stream already reported a newer version. A snapshot of the
  // server's, so the copy stays trusted while the stream is open.
  void Known(const std::string& name, const std::string& id, const DictInfo& info);
  // This client deletes or renames the dict `name` (whichever id it has):
  // from now on no copy under that name is trusted before its stream
  // reports a newer version (a delete or rename that failed changed nothing,
  // and the copy stays untrusted; calls ask tdstored).
  void NameEnded(const std::string& name);
  // A change by this client failed in a way that may have changed the
  // schema anyway (UNAVAILABLE, DEADLINE_EXCEEDED, ...): no trust until the
  // stream reports a version newer than the copy's.
  void Unsure(const std::string& name, const std::string& id);

 private:
  class Stream;  // one WatchSchema call
  // Handles the completions that have arrived, without waiting; with
  // `until_ended`, waits until every stream has ended (the destructor).
  void Drain(bool until_ended);
  // A copy per (name, id): a rename makes the old name's copy gone while
  // the new name's is fresh.
  struct Copy {
    std::shared_ptr<const DictInfo> info;  // the newest schema known
    int64_t trusted_from = 0;      // info is trusted only at this version or later
    Stream* stream = nullptr;      // the open watch, if any
    bool gone = false;             // the dict was deleted or renamed: never watched again
    std::chrono::steady_clock::time_point ended{};  // when the last stream ended
  };
  static std::string KeyOf(const std::string& name, const std::string& id);
  static bool IsTrusted(const Copy& copy);
  // This client's change at `version`, made by `edit` on the leaves: applied
  // to a new copy if it is the very next version of a trusted one,
  // otherwise trust waits for the stream to report that version.
  void ApplyOwnChange(const std::string& name, const std::string& id, int64_t version,
                      const std::function<void(std::vector<LeafMeta>&)>& edit);
  // No answer from the copy until the stream reports a newer version.
  static void Distrust(Copy& copy);
  // From the streams (under drain_mu_); `key` is KeyOf.
  void OnEvent(const std::string& key, const v1::SchemaEvent& event);
  // The stream's start or last read failed: it is over, and no longer
  // cancelled.
  void Finishing(const std::string& key, Stream* stream);

  const Client::Impl* const impl_;
  // The streams' completions. Drained under drain_mu_, which is taken
  // before mu_, never after.
  grpc::CompletionQueue queue_;
  std::mutex drain_mu_;
  // When a lookup last polled (steady clock, ns): lookups within
  // kDrainEvery of it do not poll again.
  std::atomic<int64_t> last_drain_ns_{0};
  std::mutex mu_;
  std::map<std::string, Copy> copies_;  // by KeyOf; guarded by mu_
  int streams_ = 0;                     // started, not yet deleted; guarded by mu_
  bool closing_ = false;                // guarded by mu_
};

}  // namespace tdstore::core

#endif  // TDSTORE_CLIENT_CORE_SRC_SCHEMA_COPIES_H_
