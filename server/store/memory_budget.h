// A process-wide bound on the bytes tdstored buffers for calls: indexed
// selections gathered in memory, indexed write values and their expansion,
// and the window pipelines of whole-leaf reads and writes. Every place that
// buffers call data takes a lease first; when the budget is used up a call
// waits (at most `max_wait`) for leases to be returned, then is refused with
// RESOURCE_EXHAUSTED naming --memory-budget-bytes. A lease larger than the
// whole budget is refused at once (it could never be granted).
//
//   auto lease = budget.Acquire(bytes, "indexed write values");
//   if (!lease.ok()) return lease.status();   // nothing buffered yet
//   ... buffer up to `bytes` ...
//   // the lease returns its bytes when destroyed
//
// A call may grow its lease (Grow) as it learns what it needs; it keeps what
// it holds while it waits, so two calls that each hold part of the budget
// and wait for more can block each other until one's wait times out (then
// it fails and releases). The wait is bounded, so this never deadlocks for
// good.
//
// The budget counts tdstored's own buffers, not gRPC's: each stream also
// has gRPC's flow-control window (a few MiB) and at most one 4 MiB message
// in flight, outside the budget (docs/operations.md, *Memory*).
//
// Thread-safe.
#ifndef TDSTORE_SERVER_STORE_MEMORY_BUDGET_H_
#define TDSTORE_SERVER_STORE_MEMORY_BUDGET_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tdstore::store {

class MemoryBudget {
 public:
  // total_bytes > 0; max_wait >= 0 (0: never wait).
  MemoryBudget(int64_t total_bytes, std::chrono::milliseconds max_wait);

  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { Release(); }

    // Adds `bytes` to the lease, waiting as Acquire does. On failure the
    // lease keeps what it held. A default-constructed lease cannot grow.
    absl::Status Grow(int64_t bytes, std::string_view what);
    int64_t bytes() const { return bytes_; }
    void Release();

   private:
    friend class MemoryBudget;
    Lease(MemoryBudget* budget, int64_t bytes) : budget_(budget), bytes_(bytes) {}
    MemoryBudget* budget_ = nullptr;
    int64_t bytes_ = 0;
  };

  // A lease of `bytes` (>= 0). `what` names the buffer in the error
  // message. RESOURCE_EXHAUSTED if it does not fit within max_wait.
  absl::StatusOr<Lease> Acquire(int64_t bytes, std::string_view what);
  // A lease of `bytes` if they fit right now, else nullopt; never waits.
  // For buffers that only speed a call up and that it can do without.
  std::optional<Lease> TryAcquire(int64_t bytes);
  // An empty lease to Grow later.
  Lease Empty() { return Lease(this, 0); }

  int64_t total_bytes() const { return total_; }
  int64_t used_bytes() const;
  // The most bytes ever leased at once (for tests and metrics).
  int64_t peak_bytes() const;

 private:
  absl::Status Take(int64_t bytes, std::string_view what);
  void Give(int64_t bytes);

  const int64_t total_;
  const std::chrono::milliseconds max_wait_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  int64_t used_ = 0;
  int64_t peak_ = 0;
};

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_STORE_MEMORY_BUDGET_H_
