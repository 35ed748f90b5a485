#include "client/core/src/shm_arena.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/shm_protocol.h"

namespace tdstore::core {
namespace {

// Spans start on cache lines, so no two calls' bytes share one.
constexpr size_t kAlign = 64;

size_t AlignUp(size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Closes what it holds unless released.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  int release() {
    const int f = fd;
    fd = -1;
    return f;
  }
};

}  // namespace

std::shared_ptr<ShmArena> ShmArena::Lend(const std::string& socket_path, size_t bytes,
                                         std::string* why) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (bytes == 0 || socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) {
    *why = "no usable shared-memory socket path or size";
    return nullptr;
  }
  bytes = AlignUp(bytes);
  Fd memfd{memfd_create("tdstore-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING)};
  if (memfd.fd < 0) {
    *why = Errno("memfd_create");
    return nullptr;
  }
  // Sealed before it is lent: tdstored refuses a region its owner could
  // shrink under it (common/shm_protocol.h).
  if (ftruncate(memfd.fd, static_cast<off_t>(bytes)) != 0) {
    *why = Errno("ftruncate");
    return nullptr;
  }
  if (fcntl(memfd.fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    *why = Errno("F_ADD_SEALS");
    return nullptr;
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd.fd, 0);
  if (base == MAP_FAILED) {
    *why = Errno("mmap");
    return nullptr;
  }
  struct Unmap {
    void* base;
    size_t bytes;
    bool keep = false;
    ~Unmap() {
      if (!keep) munmap(base, bytes);
    }
  } unmap{base, bytes};

  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  Fd sock{socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)};
  if (sock.fd < 0) {
    *why = Errno("socket");
    return nullptr;
  }
  if (connect(sock.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    *why = Errno(("connect " + socket_path).c_str());
    return nullptr;
  }
  // The registration must not hang a call on a tdstored that does not
  // answer: 5 s to send and to hear back.
  timeval limit{5, 0};
  setsockopt(sock.fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  setsockopt(sock.fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  iovec iov{const_cast<char*>(kShmHello), kShmHelloBytes};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &memfd.fd, sizeof(int));
  if (sendmsg(sock.fd, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(kShmHelloBytes)) {
    *why = Errno("sendmsg");
    return nullptr;
  }
  char answer[kShmMaxAnswerBytes];
  const ssize_t n = recv(sock.fd, answer, sizeof(answer), 0);
  if (n <= 0) {
    *why = n == 0 ? "tdstored closed the shared-memory socket" : Errno("recv");
    return nullptr;
  }
  if (answer[0] != kShmAccepted || static_cast<size_t>(n) != 1 + kShmTokenBytes) {
    *why = "tdstored refused the shared-memory region: " +
           std::string(answer + 1, static_cast<size_t>(n) - 1);
    return nullptr;
  }
  unmap.keep = true;
  // The memfd closes here: the two mappings keep the memory.
  return std::shared_ptr<ShmArena>(new ShmArena(sock.release(), static_cast<char*>(base), bytes,
                                                std::string(answer + 1, kShmTokenBytes)));
}

ShmArena::ShmArena(int socket_fd, char* base, size_t size, std::string token)
    : socket_fd_(socket_fd), base_(base), size_(size), token_(std::move(token)), owner_(getpid()) {
  free_.emplace(0, size_);
}

ShmArena::~ShmArena() {
  close(socket_fd_);
  munmap(base_, size_);
}

bool ShmArena::alive() const {
  pollfd p{socket_fd_, POLLIN, 0};
  // tdstored never writes after its answer: readable means closed.
  return poll(&p, 1, 0) == 0;
}

ShmArena::Span ShmArena::Carve(size_t offset, size_t bytes) {
  auto it = free_.find(offset);
  const size_t run = it->second;
  const size_t used = AlignUp(bytes);
  free_.erase(it);
  if (used < run) free_.emplace(offset + used, run - used);
  Span span;
  span.arena_ = shared_from_this();
  span.offset_ = offset;
  span.size_ = bytes;
  return span;
}

ShmArena::Span ShmArena::Take(size_t bytes) {
  if (bytes == 0) return {};
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [offset, length] : free_) {
    if (length >= AlignUp(bytes)) return Carve(offset, bytes);
  }
  return {};
}

ShmArena::Span ShmArena::TakeUpTo(size_t most) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t best = 0, best_length = 0;
  for (const auto& [offset, length] : free_) {
    if (length > best_length) best = offset, best_length = length;
  }
  const size_t bytes = std::min(best_length, most) & ~(kAlign - 1);
  if (bytes == 0) return {};
  return Carve(best, bytes);
}

void ShmArena::Give(size_t offset, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t length = AlignUp(bytes);
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + length == next->first) {
    length += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto before = std::prev(next);
    if (before->first + before->second == offset) {
      before->second += length;
      return;
    }
  }
  free_.emplace(offset, length);
}

char* ShmArena::Span::data() const { return arena_->base_ + offset_; }

ShmArena::Span& ShmArena::Span::operator=(Span&& other) noexcept {
  if (this != &other) {
    Release();
    arena_ = std::move(other.arena_);
    offset_ = other.offset_;
    size_ = other.size_;
    other.arena_ = nullptr;
  }
  return *this;
}

void ShmArena::Span::Release() {
  if (arena_ != nullptr) arena_->Give(offset_, size_);
  arena_ = nullptr;
}

}  // namespace tdstore::core
