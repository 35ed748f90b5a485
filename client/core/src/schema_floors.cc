#include "client/core/src/schema_floors.h"

#include <pthread.h>

#include <algorithm>
#include <charconv>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "common/protocol_metadata.h"

namespace tdstore::core {
namespace {

struct Floors {
  std::mutex mu;
  std::unordered_map<std::string, int64_t> by_dict;  // address '\n' id; guarded by mu
};

// Why a pointer that a forked child replaces: the child may be forked while
// another thread of the parent holds the lock, and would then wait for it
// forever. The child takes a fresh lock over a copy of the floors (no other
// thread of its own can touch them during the fork), and leaks the old one.
Floors* floors = new Floors;

void AfterForkInChild() {
  Floors* fresh = new Floors;
  fresh->by_dict = floors->by_dict;
  floors = fresh;
}

Floors& Get() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, AfterForkInChild);
    return true;
  }();
  (void)registered;
  return *floors;
}

std::string KeyOf(const std::string& address, std::string_view id) {
  std::string key = address;
  key += '\n';
  key.append(id.data(), id.size());
  return key;
}

}  // namespace

void RaiseSchemaFloor(const std::string& address, const grpc::ClientContext& attempt) {
  const auto& trailers = attempt.GetServerTrailingMetadata();
  auto it = trailers.find(kSchemaVersionTrailer);
  if (it == trailers.end()) return;
  const std::string_view value(it->second.data(), it->second.size());
  // "<id>:<version>"; anything else is ignored (a newer server may say
  // more, and a floor is only ever an optimisation's guard).
  const size_t colon = value.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return;
  int64_t version = 0;
  const char* first = value.data() + colon + 1;
  const char* last = value.data() + value.size();
  auto [end, error] = std::from_chars(first, last, version);
  if (error != std::errc() || end != last) return;
  Floors& f = Get();
  std::lock_guard<std::mutex> lock(f.mu);
  int64_t& floor = f.by_dict[KeyOf(address, value.substr(0, colon))];
  floor = std::max(floor, version);
}

int64_t SchemaFloor(const std::string& address, const std::string& id) {
  Floors& f = Get();
  std::lock_guard<std::mutex> lock(f.mu);
  auto it = f.by_dict.find(KeyOf(address, id));
  return it == f.by_dict.end() ? 0 : it->second;
}

}  // namespace tdstore::core
