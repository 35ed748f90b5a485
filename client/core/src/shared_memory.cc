// Client::Impl's same-host data path: when to lend a region, and when to
// stop using one (client_impl.h, shm_arena.h).
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "client/core/src/address.h"
#include "client/core/src/client_impl.h"
#include "common/protocol_revision.h"

namespace tdstore::core {
namespace {

constexpr std::chrono::seconds kRetryLend{30};
constexpr std::chrono::seconds kRetryAsk{1};

}  // namespace

std::shared_ptr<ShmArena> Client::Impl::SharedMemory(ShmRings* rings) const {
  if (rings != nullptr) *rings = ShmRings();
  if (options.shared_memory_bytes <= 0) return nullptr;
  // Who may lend: a client on tdstored's host, which it reaches through
  // the unix socket, or through TCP on loopback (the default address,
  // 127.0.0.1:50051, is a sidecar's) when tdstored says loopback clients
  // may (capability shared_memory_loopback). Over loopback, the
  // shared-memory socket tdstored names may still belong to another
  // daemon (a port forwarded into a container, a second daemon's path): a
  // region lent there carries a random token the daemon behind the channel
  // does not hold, so the first call naming it fails FAILED_PRECONDITION
  // with nothing applied and goes again over the socket (AfterShmCall):
  // no byte of such a region is ever used.
  const std::string grpc_path = UnixSocketPath(address);
  const bool loopback = grpc_path.empty() && IsLoopbackTcp(address);
  if (grpc_path.empty() && !loopback) return nullptr;
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
  auto named = [&](const char* capability) {
    return std::find(caps.begin(), caps.end(), capability) != caps.end();
  };
  if (info.shm_socket().empty() || !named(kSharedMemoryCapability) ||
      (loopback && !named(kSharedMemoryLoopbackCapability))) {
    return nullptr;
  }
  // The path tdstored names is its own view of the file system; a client
  // in another mount namespace (a container beside it) sees the socket
  // beside the gRPC one instead, as --shm-socket auto puts it.
  std::vector<std::string> paths = {info.shm_socket()};
  if (!grpc_path.empty() && grpc_path + ".shm" != info.shm_socket()) {
    paths.push_back(grpc_path + ".shm");
  }
  for (const std::string& path : paths) {
    std::string why;
    shm_arena =
        ShmArena::Lend(path, static_cast<size_t>(options.shared_memory_bytes), &why);
    if (shm_arena != nullptr) {
      shm_next_try = {};
      shm_rings.write = named(kSharedMemoryChunksCapability);
      shm_rings.read = named(kSharedMemoryReadChunksCapability);
      shm_rings.lent_chunks = named(kSharedMemoryLentChunksCapability);
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
