// The shared-memory regions same-host clients lent tdstored, by token
// (common/shm_protocol.h). The service resolves a call's ShmSpan here; the
// listener (shm_listener.h) adds a region when a client registers one and
// removes it when that client's connection closes.
//
// A span keeps its region mapped: a call that resolved one may go on using
// it after the region was removed (its client died mid-call), and the
// mapping goes with the last span. So tdstored never touches unmapped
// memory, and never keeps a dead client's memory past its calls.
//
// Thread-safe.
#ifndef TDSTORE_SERVER_SHM_REGION_TABLE_H_
#define TDSTORE_SERVER_SHM_REGION_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tdstore::shm {

// One mapping of a lent region, unmapped when destroyed.
class Region {
 public:
  // Takes over a MAP_SHARED mapping of `size` bytes at `base`.
  Region(void* base, size_t size) : base_(static_cast<char*>(base)), size_(size) {}
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  char* data() const { return base_; }
  size_t size() const { return size_; }

 private:
  char* const base_;
  const size_t size_;
};

// Bytes inside a region, which `region` keeps mapped.
struct Span {
  std::shared_ptr<Region> region;
  char* data = nullptr;
  size_t size = 0;
};

class RegionTable {
 public:
  // `max_bytes`: the most all lent regions may add up to.
  explicit RegionTable(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // Adds a region under a new random token, which it returns.
  // RESOURCE_EXHAUSTED when it would pass max_bytes, or kMaxRegions.
  absl::StatusOr<std::string> Add(std::shared_ptr<Region> region);
  // Forgets the token; calls holding spans of it keep them.
  void Remove(const std::string& token);

  // [offset, offset + length) of the region `token` names.
  // FAILED_PRECONDITION "unknown shared-memory region" when no region has
  // that token; OUT_OF_RANGE when the span does not lie inside it.
  absl::StatusOr<Span> Find(std::string_view token, int64_t offset, int64_t length) const;

  int64_t max_bytes() const { return max_bytes_; }
  // What is lent now: regions and their bytes.
  size_t regions() const;
  int64_t bytes() const;

  // Each region costs a descriptor-free mapping, but a listener connection.
  static constexpr size_t kMaxRegions = 1024;

 private:
  const int64_t max_bytes_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Region>, std::less<>> regions_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tdstore::shm

#endif  // TDSTORE_SERVER_SHM_REGION_TABLE_H_
