#include "tests/store/store_under_test.h"

#include <atomic>
#include <chrono>
#include <mutex>

#include "common/str_cat.h"
#include "server/redis/make_client.h"
#include "server/redis_store/dict_store.h"
#include "server/redis_store/lua_scripts.h"
#include "server/redis_store/redis_store.h"
#include "server/redis_store/schema_watch.h"
#include "server/store/memory_store.h"
#include "tests/support/test_redis.h"

namespace tdstore::store::testing {
namespace {

// One Redis (or cluster) for the whole test binary, started on first use.
absl::StatusOr<tdstore::testing::TestRedis*> SharedRedis() {
  static std::mutex mu;
  static tdstore::testing::TestRedis* redis = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (redis == nullptr) {
    auto made = tdstore::testing::MakeTestRedis();
    if (auto s = made->Start(); !s.ok()) return s;
    redis = made.release();  // lives as long as the process
  }
  return redis;
}

class RedisStoreUnderTest final : public StoreUnderTest {
 public:
  static absl::StatusOr<std::unique_ptr<StoreUnderTest>> Make(StoreOptions options) {
    auto redis = SharedRedis();
    if (!redis.ok()) return redis.status();
    auto client = redis::MakeRedisClient((*redis)->url(), "", redis::ConnectOptions{});
    if (!client.ok()) return client.status();
    // As tdstored does at start-up: a NOSCRIPT reload is for a Redis that
    // restarted or flushed its scripts since, not the first call's path.
    if (auto s = PreloadScripts(**client); !s.ok()) return s;
    static std::atomic<int> next{0};
    options.ns = StrCat("contract", next.fetch_add(1), "_", std::chrono::steady_clock::now()
                                                               .time_since_epoch()
                                                               .count());
    auto sut = std::unique_ptr<RedisStoreUnderTest>(new RedisStoreUnderTest());
    sut->backend_ = (*redis)->backend();
    sut->client_ = *std::move(client);
    sut->dicts_ = std::make_unique<DictStore>(sut->client_.get(), options);
    sut->watch_ = std::make_unique<SchemaWatch>(sut->dicts_.get());
    sut->watch_->Start();
    sut->store_ = std::make_unique<RedisStore>(sut->dicts_.get(), sut->watch_.get());
    return std::unique_ptr<StoreUnderTest>(std::move(sut));
  }

  ~RedisStoreUnderTest() override {
    store_.reset();
    watch_.reset();
    dicts_.reset();
  }

  Store& store() override { return *store_; }
  std::string backend() const override { return backend_; }

 private:
  RedisStoreUnderTest() = default;
  std::string backend_;
  std::unique_ptr<redis::RedisClient> client_;
  std::unique_ptr<DictStore> dicts_;
  std::unique_ptr<SchemaWatch> watch_;
  std::unique_ptr<RedisStore> store_;
};

// A MemoryStore, in this process: no Redis at all.
class MemoryStoreUnderTest final : public StoreUnderTest {
 public:
  explicit MemoryStoreUnderTest(StoreOptions options) : store_(std::move(options)) {}
  Store& store() override { return store_; }
  std::string backend() const override { return "memory"; }

 private:
  MemoryStore store_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StoreUnderTest>> MakeStoreUnderTest(StoreOptions options) {
  if (tdstore::testing::TestBackendName() == "memory") {
    return std::unique_ptr<StoreUnderTest>(new MemoryStoreUnderTest(std::move(options)));
  }
  return RedisStoreUnderTest::Make(std::move(options));
}

}  // namespace tdstore::store::testing
