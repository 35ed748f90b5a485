// Client::Impl's same-host data path: when to lend a region, and when to
// stop using one (client_impl.h, shm_arena.h).
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "client/core/src/client_impl.h"
#include "common/protocol_revision.h"

namespace tdstore::core {
namespace {

constexpr std::chrono::seconds kRetryLend{30};
constexpr std::chrono::seconds kRetryAsk{1};

// The socket file of a "unix:" target (gRPC's forms: unix:path,
// unix:/path, unix:///path); empty for any other target.
std::string UnixPath(const std::string& address) {
  if (address.rfind("unix:", 0) != 0) return "";
  std::string path = address.substr(5);
  if (path.rfind("//", 0) == 0) path = path.substr(2);
  return path;
}

}  // namespace

std::shared_ptr<ShmArena> Client::Impl::SharedMemory(ShmRings* rings) const {
  if (rings != nullptr) *rings = ShmRings();
  if (options.shared_memory_bytes <= 0) return nullptr;
  const std::string grpc_path = UnixPath(address);
  if (grpc_path.empty()) return nullptr;
  std::lock_guard<std::mutex> lock(shm_mu);
  if (shm_arena != nullptr && shm_arena->owner() == getpid() && shm_arena->alive()) {
    if (rings != nullptr) *rings = shm_rings;
    return shm_arena;
  }
  shm_arena = nullptr;
  const auto now = std::chrono::steady_clock::now();
  if (now < shm_next_try) return nullptr;

  // Asked as any read is (retried while tdstored restarts). Unreachable is
  // no answer: a call a second later asks again (not every call, which
  // would each wait out the retries first); what tdstored answers waits
  // kRetryLend.
  v1::ServerInfo info;
  try {
    Call(&v1::TdStore::Stub::GetServerInfo, v1::GetServerInfoRequest(), &info,
         Retrier::kIdempotent);
  } catch (const Error&) {
    shm_next_try = std::chrono::steady_clock::now() + kRetryAsk;
    return nullptr;
  }
  shm_next_try = now + kRetryLend;
  const auto& caps = info.capabilities();
  if (info.shm_socket().empty() ||
      std::find(caps.begin(), caps.end(), kSharedMemoryCapability) == caps.end()) {
    return nullptr;
  }
  // The path tdstored names is its own view of the file system; a client
  // in another mount namespace (a container beside it) sees the socket
  // beside the gRPC one instead, as --shm-socket auto puts it.
  std::vector<std::string> paths = {info.shm_socket()};
  if (grpc_path + ".shm" != info.shm_socket()) paths.push_back(grpc_path + ".shm");
  for (const std::string& path : paths) {
    std::string why;
    shm_arena =
        ShmArena::Lend(path, static_cast<size_t>(options.shared_memory_bytes), &why);
    if (shm_arena != nullptr) {
      shm_next_try = {};
      auto named = [&](const char* capability) {
        return std::find(caps.begin(), caps.end(), capability) != caps.end();
      };
      shm_rings.write = named(kSharedMemoryChunksCapability);
      shm_rings.read = named(kSharedMemoryReadChunksCapability);
      if (rings != nullptr) *rings = shm_rings;
      return shm_arena;
    }
  }
  return nullptr;
}

void Client::Impl::RetireSharedMemory(const ShmArena* arena, bool back_off) const {
  std::lock_guard<std::mutex> lock(shm_mu);
  if (shm_arena.get() == arena) shm_arena = nullptr;
  if (back_off) shm_next_try = std::chrono::steady_clock::now() + kRetryLend;
}

}  // namespace tdstore::core
