#include "server/redis_store/generation_leases.h"

#include "common/str_cat.h"
#include "server/redis_store/lua_scripts.h"
#include "server/redis_store/redis_errors.h"

namespace tdstore::store {

absl::StatusOr<int64_t> GenerationLeases::Take(const DictMeta& meta, int64_t count) {
  if (count < 1 || count > kLeasedPerTrip) {
    return absl::InternalError(StrCat("cannot lease ", count, " generations at once"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ranges_.find(meta.id);
    if (it != ranges_.end() && it->second.end - it->second.next >= count) {
      const int64_t first = it->second.next;
      it->second.next += count;
      return first;
    }
  }
  // Outside the lock: two threads short of generations at once each lease
  // a range, and the one that leaves more behind is kept.
  const std::string meta_key = keys_->Meta(meta.id);
  auto reply = redis_->Eval(GetScripts().lease_generations, {meta_key},
                            {StrCat(kLeasedPerTrip)});
  if (!reply.ok()) return reply.status();
  if (ErrorTag(*reply) == "TDNODICT") {
    return absl::NotFoundError(StrCat("dict '", meta.name, "' was deleted during the write"));
  }
  if (auto s = ReplyStatus(*reply, "lease generations"); !s.ok()) return s;
  const int64_t end = reply->integer() + 1;
  const int64_t first = end - kLeasedPerTrip;
  std::lock_guard<std::mutex> lock(mu_);
  if (ranges_.size() >= kMaxDicts) ranges_.clear();
  Range& kept = ranges_[meta.id];
  if (end - (first + count) > kept.end - kept.next) kept = {first + count, end};
  return first;
}

}  // namespace tdstore::store
