#include "server/shm/region_table.h"

#include <sys/mman.h>

#include <random>

#include "common/shm_protocol.h"
#include "common/str_cat.h"

namespace tdstore::shm {
namespace {

// 128 random bits: a token is the only thing that lets a call use a
// region, and it is never sent anywhere but to the client that lent it.
std::string NewToken() {
  std::random_device device;
  std::string token(kShmTokenBytes, '\0');
  for (size_t i = 0; i < token.size(); i += sizeof(uint32_t)) {
    const uint32_t word = device();
    for (size_t b = 0; b < sizeof(word) && i + b < token.size(); ++b) {
      token[i + b] = static_cast<char>((word >> (8 * b)) & 0xff);
    }
  }
  return token;
}

}  // namespace

Region::~Region() { munmap(base_, size_); }

absl::StatusOr<std::string> RegionTable::Add(std::shared_ptr<Region> region) {
  const int64_t size = static_cast<int64_t>(region->size());
  absl::MutexLock lock(&mu_);
  if (regions_.size() >= kMaxRegions) {
    return absl::ResourceExhaustedError(
        StrCat("tdstored already holds ", kMaxRegions, " shared-memory regions"));
  }
  if (size > max_bytes_ - bytes_) {
    return absl::ResourceExhaustedError(
        StrCat("a shared-memory region of ", size, " bytes would pass --shm-max-bytes (",
               max_bytes_, "; ", bytes_, " lent now)"));
  }
  std::string token;
  do {
    token = NewToken();
  } while (regions_.count(token) != 0);
  regions_.emplace(token, std::move(region));
  bytes_ += size;
  return token;
}

void RegionTable::Remove(const std::string& token) {
  std::shared_ptr<Region> gone;  // unmapped outside the lock, if last
  absl::MutexLock lock(&mu_);
  auto it = regions_.find(token);
  if (it == regions_.end()) return;
  bytes_ -= static_cast<int64_t>(it->second->size());
  gone = std::move(it->second);
  regions_.erase(it);
}

absl::StatusOr<Span> RegionTable::Find(std::string_view token, int64_t offset,
                                       int64_t length) const {
  std::shared_ptr<Region> region;
  {
    absl::MutexLock lock(&mu_);
    auto it = regions_.find(token);
    if (it == regions_.end()) {
      return absl::FailedPreconditionError(
          "unknown shared-memory region (its client's registration closed, or tdstored "
          "restarted); nothing applied");
    }
    region = it->second;
  }
  const int64_t size = static_cast<int64_t>(region->size());
  // Written so that no sum can overflow: offset and length are the
  // client's, any int64.
  if (offset < 0 || length < 0 || offset > size || length > size - offset) {
    return absl::OutOfRangeError(StrCat("shared-memory span [", offset, ", +", length,
                                        ") is outside its region of ", size, " bytes"));
  }
  Span span;
  span.data = region->data() + offset;
  span.size = static_cast<size_t>(length);
  span.region = std::move(region);
  return span;
}

size_t RegionTable::regions() const {
  absl::MutexLock lock(&mu_);
  return regions_.size();
}

int64_t RegionTable::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace tdstore::shm
