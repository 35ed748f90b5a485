// The same-host data path, client side (docs/protocol.md, "Same-host data
// path"): one memfd region lent to tdstored (common/shm_protocol.h), and
// the spans that calls take of it for their bytes.
//
// A call that takes a span gives it back only when tdstored has answered
// the call: then tdstored is done with the span. A call that ends without
// tdstored's answer (a deadline, a broken connection) cannot know that, so
// it retires the whole arena instead (Client::Impl::RetireSharedMemory):
// a span is never reused while a handler might still copy into or out of
// it. Thread-safe.
#ifndef TDSTORE_CLIENT_CORE_SRC_SHM_ARENA_H_
#define TDSTORE_CLIENT_CORE_SRC_SHM_ARENA_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace tdstore::core {

class ShmArena : public std::enable_shared_from_this<ShmArena> {
 public:
  // Creates a memfd of `bytes`, seals it against shrinking, maps it and
  // lends it on the unix socket `socket_path`. Null, with `*why` set, when
  // any step fails (no memfd, no memory, tdstored refused): the caller
  // sends its bytes over the gRPC socket instead.
  static std::shared_ptr<ShmArena> Lend(const std::string& socket_path, size_t bytes,
                                        std::string* why);
  // Closes the lending connection (tdstored forgets the region) and unmaps.
  ~ShmArena();
  ShmArena(const ShmArena&) = delete;
  ShmArena& operator=(const ShmArena&) = delete;

  const std::string& token() const { return token_; }
  size_t size() const { return size_; }
  // The process that lent it: a forked child must lend its own.
  pid_t owner() const { return owner_; }
  // Whether the lending connection is still open, so tdstored still holds
  // the region (false after tdstored restarted). One poll(), no blocking.
  bool alive() const;

  // A span of the region, returned to it when destroyed.
  class Span {
   public:
    Span() = default;
    Span(Span&& other) noexcept { *this = std::move(other); }
    Span& operator=(Span&& other) noexcept;
    ~Span() { Release(); }
    explicit operator bool() const { return arena_ != nullptr; }
    char* data() const;
    int64_t offset() const { return static_cast<int64_t>(offset_); }
    int64_t size() const { return static_cast<int64_t>(size_); }
    const ShmArena& arena() const { return *arena_; }

   private:
    friend class ShmArena;
    void Release();
    std::shared_ptr<ShmArena> arena_;
    size_t offset_ = 0;
    size_t size_ = 0;
  };
  // A span of exactly `bytes`, or an empty one when no free run is that
  // long (the call then uses the socket).
  Span Take(size_t bytes);
  // A span of up to `most` bytes: the longest free run, cut to `most`
  // (empty when nothing is free).
  Span TakeUpTo(size_t most);

 private:
  ShmArena(int socket_fd, char* base, size_t size, std::string token);
  Span Carve(size_t offset, size_t bytes);  // mu_ held
  void Give(size_t offset, size_t bytes);

  const int socket_fd_;
  char* const base_;
  const size_t size_;
  const std::string token_;
  const pid_t owner_;
  std::mutex mu_;
  std::map<size_t, size_t> free_;  // offset -> length, never adjacent
};

}  // namespace tdstore::core

#endif  // TDSTORE_CLIENT_CORE_SRC_SHM_ARENA_H_
