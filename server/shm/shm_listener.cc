#include "server/shm/shm_listener.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/shm_protocol.h"
#include "common/str_cat.h"
#include "server/log.h"

namespace tdstore::shm {
namespace {

// Connections beyond the regions a table holds: room for registrations
// under way.
constexpr size_t kMaxConnections = RegionTable::kMaxRegions + 64;

void Answer(int fd, char status, const std::string& body) {
  std::string message(1, status);
  message += body.substr(0, kShmMaxAnswerBytes - 1);
  // One message on a SEQPACKET socket; a client gone already is no matter.
  (void)send(fd, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// Maps the lent descriptor, or says why not (the client reads the reason).
absl::StatusOr<std::shared_ptr<Region>> MapRegion(int fd, int64_t max_bytes) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError("the descriptor is not a memfd");
  }
  // Why the seal: a region's owner could otherwise ftruncate it smaller
  // while tdstored copies into it, and tdstored would die of SIGBUS.
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) return absl::InvalidArgumentError("the descriptor is not a memfd");
  if ((seals & F_SEAL_SHRINK) == 0) {
    return absl::InvalidArgumentError("the memfd is not sealed against shrinking (F_SEAL_SHRINK)");
  }
  if (st.st_size <= 0) return absl::InvalidArgumentError("the memfd is empty");
  if (st.st_size > max_bytes) {
    return absl::ResourceExhaustedError(StrCat("a region of ", st.st_size,
                                               " bytes is larger than --shm-max-bytes (",
                                               max_bytes, ")"));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    return absl::PermissionDeniedError(
        StrCat("tdstored cannot map the memfd for reading and writing: ", std::strerror(errno)));
  }
  return std::make_shared<Region>(base, size);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmListener>> ShmListener::Start(const std::string& path,
                                                                 RegionTable* table) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(StrCat("shared-memory socket path '", path,
                                             "' is empty or longer than ",
                                             sizeof(addr.sun_path) - 1, " bytes"));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  struct stat st;
  if (lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path.c_str());
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::InternalError(StrCat("socket: ", std::strerror(errno)));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 64) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(
        StrCat("cannot listen on the shared-memory socket ", path, ": ", std::strerror(err)));
  }
  chmod(path.c_str(), 0660);
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    close(fd);
    return absl::InternalError(StrCat("eventfd: ", std::strerror(errno)));
  }
  std::unique_ptr<ShmListener> listener(new ShmListener(path, table, fd, wake));
  listener->thread_ = std::thread([l = listener.get()] { l->Serve(); });
  return listener;
}

ShmListener::ShmListener(std::string path, RegionTable* table, int listen_fd, int wake_fd)
    : path_(std::move(path)), table_(table), listen_fd_(listen_fd), wake_fd_(wake_fd) {}

ShmListener::~ShmListener() {
  const uint64_t one = 1;
  (void)write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  while (!connections_.empty()) Close(connections_.begin()->first);
  close(listen_fd_);
  close(wake_fd_);
  unlink(path_.c_str());
}

void ShmListener::Serve() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const auto& [fd, token] : connections_) fds.push_back({fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      LogError(StrCat("shared-memory socket: poll: ", std::strerror(errno)));
      return;
    }
    if (fds[0].revents != 0) return;
    if (fds[1].revents & POLLIN) Accept();
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      // POLLHUP/POLLERR or a message: OnMessage reads the end or the
      // registration and says whether the connection stays.
      if (!OnMessage(fds[i].fd)) Close(fds[i].fd);
    }
  }
}

void ShmListener::Accept() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN: none left (or a client gone already)
    if (connections_.size() >= kMaxConnections) {
      Answer(fd, kShmRefused, "tdstored holds too many shared-memory registrations");
      close(fd);
      continue;
    }
    connections_.emplace(fd, std::string());
  }
}

bool ShmListener::OnMessage(int fd) {
  char buffer[64];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  iovec iov{buffer, sizeof(buffer)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  // Every descriptor that came along is ours to close, whatever we do.
  std::vector<int> received;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); n >= 0 && c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int one;
      std::memcpy(&one, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      received.push_back(one);
    }
  }
  struct Closer {
    std::vector<int>& fds;
    ~Closer() {
      for (int f : fds) close(f);
    }
  } closer{received};
  if (n <= 0) return false;  // the end: the client closed or died
  if (!connections_[fd].empty()) return false;  // one registration per connection
  if (static_cast<size_t>(n) != kShmHelloBytes ||
      std::memcmp(buffer, kShmHello, kShmHelloBytes) != 0 || (msg.msg_flags & MSG_CTRUNC) ||
      received.size() != 1) {
    Answer(fd, kShmRefused, "expected the hello and exactly one memfd");
    return false;
  }
  auto region = MapRegion(received[0], table_->max_bytes());
  if (!region.ok()) {
    Answer(fd, kShmRefused, std::string(region.status().message()));
    return false;
  }
  auto token = table_->Add(*std::move(region));
  if (!token.ok()) {
    Answer(fd, kShmRefused, std::string(token.status().message()));
    return false;
  }
  connections_[fd] = *token;
  Answer(fd, kShmAccepted, *token);
  return true;
}

void ShmListener::Close(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  if (!it->second.empty()) table_->Remove(it->second);
  connections_.erase(it);
  close(fd);
}

}  // namespace tdstore::shm
