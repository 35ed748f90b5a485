#include "server/redis_store/retire_queue.h"

#include <utility>

#include "common/str_cat.h"
#include "server/log.h"

namespace tdstore::store {

RetireQueue::RetireQueue(Drop drop, size_t max_queued)
    : drop_(std::move(drop)), max_queued_(max_queued), worker_([this] { Work(); }) {}

RetireQueue::~RetireQueue() { Stop(); }

bool RetireQueue::Push(const DictMeta& meta, const LeafRecord& record) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(Item{meta, record});
  }
  changed_.notify_one();
  return true;
}

void RetireQueue::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_one();
  if (worker_.joinable()) worker_.join();
}

void RetireQueue::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    changed_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    // Stopping drains the queue first: what was promised a drop gets it
    // now rather than at the next sweep.
    if (queue_.empty()) return;
    Item item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    absl::Status s = drop_(item.meta, item.record);
    if (!s.ok()) {
      // Its entry stays parked as expired: the next sweep drops it.
      LogWarning(StrCat("could not delete replaced generation ", item.record.generation,
                        " of dict ", item.meta.id, " (the sweeper will): ", s.ToString()));
    }
    lock.lock();
  }
}

}  // namespace tdstore::store
