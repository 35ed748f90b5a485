// Removes the blocks of writes nobody will commit.
//
// Every generation being written or waiting for deletion is listed in its
// dict's pending hash with an expiry (server/redis_store/leaf_record_text.h): live writes refresh
// theirs; generations retired by a commit or a leaf deletion are parked with
// expiry 0. An entry past its expiry belongs to a writer that died (client
// gone and daemon killed) or to cleanup that was cut short. SweepOnce claims
// each such entry atomically (claim_pending.lua: only if unchanged since it
// was read, so a writer that commits or refreshes meanwhile wins) and deletes
// its blocks: it swaps the entry for a lease, deletes the blocks, then
// removes the entry if it still holds the lease. It also finishes dict
// deletions that were cut short (DictStore::FinishDelete), and deletes
// dicts built before their name whose builder died (an expired
// '/creating/<id>' record with no live pending write: DictStore::AbandonDict).
//
// Several daemons may sweep the same Redis; claims keep them from fighting.
//
// Thread-safe. Start() runs SweepOnce on a background thread every
// `interval` until Stop() or destruction, and logs what it removed or why it
// failed.
#ifndef TDSTORE_SERVER_REDIS_STORE_SWEEPER_H_
#define TDSTORE_SERVER_REDIS_STORE_SWEEPER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "absl/status/statusor.h"
#include "server/redis_store/dict_store.h"

namespace tdstore::store {

// Told what each pass did (for tdstored's metrics). Called on the thread
// running SweepOnce; implementations must be thread-safe if several
// sweepers share one.
class SweepObserver {
 public:
  virtual ~SweepObserver() = default;
  // After each SweepOnce: the abandoned generations whose blocks it deleted,
  // the dict deletions it finished, and whether it met an error (the counts
  // then cover the work done before and after the error).
  virtual void OnSweep(int generations, int deletions, bool ok) = 0;
};

class Sweeper {
 public:
  // `observer` may be null; not owned, must outlive the sweeper.
  explicit Sweeper(DictStore* store, SweepObserver* observer = nullptr)
      : store_(store), observer_(observer) {}
  ~Sweeper() { Stop(); }

  // One pass over every dict; returns how many generations (and unfinished
  // dict deletions) it removed. A failure on one dict does not stop the
  // pass; the first error is returned after it.
  absl::StatusOr<int> SweepOnce(int64_t now_ms);

  void Start(std::chrono::milliseconds interval);
  void Stop();

 private:
  // SweepOnce's work; counts what it removed, also when it fails midway.
  absl::Status SweepAll(int64_t now_ms, int* generations, int* deletions);
  // Adds the generations it removed to *removed, also when it fails midway.
  absl::Status SweepDict(const std::string& id, int64_t now_ms, int* removed);
  // Whether dict `id` has a pending write that has not expired.
  absl::StatusOr<bool> HasLivePending(const std::string& id, int64_t now_ms);

  DictStore* const store_;
  SweepObserver* const observer_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_SWEEPER_H_
