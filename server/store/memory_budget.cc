#include "server/store/memory_budget.h"

#include <algorithm>
#include <utility>

#include "common/str_cat.h"

namespace tdstore::store {

MemoryBudget::MemoryBudget(int64_t total_bytes, std::chrono::milliseconds max_wait)
    : total_(std::max<int64_t>(1, total_bytes)), max_wait_(max_wait) {}

MemoryBudget::Lease::Lease(Lease&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

MemoryBudget::Lease& MemoryBudget::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

absl::Status MemoryBudget::Lease::Grow(int64_t bytes, std::string_view what) {
  if (bytes <= 0) return absl::OkStatus();
  if (budget_ == nullptr) return absl::InternalError("growing an unbound memory lease");
  if (auto s = budget_->Take(bytes_ + bytes > budget_->total_ ? bytes_ + bytes : bytes, what);
      !s.ok()) {
    return s;
  }
  bytes_ += bytes;
  return absl::OkStatus();
}

void MemoryBudget::Lease::Release() {
  if (budget_ != nullptr && bytes_ > 0) budget_->Give(bytes_);
  bytes_ = 0;
}

absl::StatusOr<MemoryBudget::Lease> MemoryBudget::Acquire(int64_t bytes, std::string_view what) {
  bytes = std::max<int64_t>(0, bytes);
  if (auto s = Take(bytes, what); !s.ok()) return s;
  return Lease(this, bytes);
}

std::optional<MemoryBudget::Lease> MemoryBudget::TryAcquire(int64_t bytes) {
  bytes = std::max<int64_t>(0, bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (used_ + bytes > total_) return std::nullopt;
  used_ += bytes;
  peak_ = std::max(peak_, used_);
  return Lease(this, bytes);
}

absl::Status MemoryBudget::Take(int64_t bytes, std::string_view what) {
  // Checked before waiting: a request bigger than the whole budget would
  // wait in vain. (Grow passes the lease's would-be total here when that
  // is over the budget, so the same message names the full size.)
  if (bytes > total_) {
    return absl::ResourceExhaustedError(
        StrCat(what, " needs ", bytes, " bytes of tdstored's memory, more than its whole budget (",
               "--memory-budget-bytes ", total_, "); use a smaller request"));
  }
  std::unique_lock<std::mutex> lock(mu_);
  const bool fits = freed_.wait_for(lock, max_wait_, [&] { return used_ + bytes <= total_; });
  if (!fits) {
    return absl::ResourceExhaustedError(
        StrCat(what, " needs ", bytes, " bytes of tdstored's memory, but ", used_, " of its ",
               total_, " (--memory-budget-bytes) are in use by other calls and stayed so for ",
               max_wait_.count(), " ms (--memory-budget-wait-ms); retry later"));
  }
  used_ += bytes;
  peak_ = std::max(peak_, used_);
  return absl::OkStatus();
}

void MemoryBudget::Give(int64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    used_ -= bytes;
  }
  freed_.notify_all();
}

int64_t MemoryBudget::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

int64_t MemoryBudget::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

}  // namespace tdstore::store
