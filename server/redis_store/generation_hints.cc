#include "server/redis_store/generation_hints.h"

#include <algorithm>

namespace tdstore::store {

int64_t GenerationHints::Propose(std::string_view id, int64_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  if (next_.size() >= kMaxDicts) next_.clear();
  int64_t& next = next_[std::string(id)];
  const int64_t first = std::max<int64_t>(next, 1);
  next = first + count;
  return first;
}

void GenerationHints::Saw(std::string_view id, int64_t counter) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t& next = next_[std::string(id)];
  next = std::max(next, counter + 1);
}

}  // namespace tdstore::store
