#include "server/redis/make_client.h"

#include "server/redis/cluster_client.h"
#include "server/redis/redis_address.h"
#include "server/redis/standalone_client.h"

namespace tdstore::redis {

absl::StatusOr<std::unique_ptr<RedisClient>> MakeRedisClient(std::string_view url,
                                                             const std::string& password_override,
                                                             const ConnectOptions& options) {
  if (IsClusterUrl(url)) {
    auto seeds = ParseClusterUrl(url);
    if (!seeds.ok()) return seeds.status();
    if (!password_override.empty()) {
      for (RedisAddress& seed : *seeds) seed.password = password_override;
    }
    return std::unique_ptr<RedisClient>(new ClusterClient(*std::move(seeds), options));
  }
  auto address = ParseRedisUrl(url);
  if (!address.ok()) return address.status();
  if (!password_override.empty()) address->password = password_override;
  return std::unique_ptr<RedisClient>(new StandaloneClient(*std::move(address), options));
}

}  // namespace tdstore::redis
