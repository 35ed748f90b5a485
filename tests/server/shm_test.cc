// The same-host data path's two ends without gRPC: tdstored's RegionTable
// and ShmListener (server/shm/) and the client core's ShmArena
// (client/core/src/shm_arena.h), over a real unix socket and real memfds.
//
//   - a region is lent, found by its token, bounds-checked (offsets and
//     lengths near int64's limits included), and forgotten when its
//     connection closes; a span taken before keeps its mapping;
//   - what tdstored refuses, with the reason the client reads: a hello
//     without a memfd, an unsealed memfd, a file that is no memfd, a memfd
//     it cannot map writable (write-sealed, or reopened read-only), a
//     region past --shm-max-bytes; nothing is left in the table;
//   - the arena's spans, taken and given back in random order against a
//     model: never overlapping, always inside, all free again at the end.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/core/src/shm_arena.h"
#include "common/shm_protocol.h"
#include "gtest/gtest.h"
#include "server/shm/region_table.h"
#include "server/shm/shm_listener.h"

namespace tdstore {
namespace {

using shm::RegionTable;
using shm::ShmListener;

// A fresh socket path in a directory of the test's own.
std::string SocketPath() {
  static int n = 0;
  const std::string dir = ::testing::TempDir() + "shm_test." + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  return dir + "/s" + std::to_string(n++) + ".shm";
}

// A memfd of `bytes` with `seals` added.
int Memfd(size_t bytes, int seals) {
  const int fd = memfd_create("shm-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  if (seals != 0) {
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
  }
  return fd;
}

// Speaks the registration by hand: connects, sends `hello` with `fds`
// attached, returns tdstored's answer ("" if it closed without one). The
// connection stays open in *conn.
std::string Register(const std::string& path, const std::string& hello,
                     const std::vector<int>& fds, int* conn) {
  *conn = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  EXPECT_EQ(connect(*conn, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  iovec iov{const_cast<char*>(hello.data()), hello.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  EXPECT_EQ(sendmsg(*conn, &msg, MSG_NOSIGNAL), static_cast<ssize_t>(hello.size()));
  char answer[kShmMaxAnswerBytes];
  const ssize_t n = recv(*conn, answer, sizeof(answer), 0);
  return n <= 0 ? std::string() : std::string(answer, static_cast<size_t>(n));
}

const std::string kHello(kShmHello, kShmHelloBytes);

// Waits until the table holds `regions` regions; the listener removes a
// closed connection's region on its own thread. False after 10 s.
bool AwaitRegions(const RegionTable& table, size_t regions) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (table.regions() != regions) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(ShmRegions, ALentRegionIsFoundBoundsCheckedAndForgottenWhenItsConnectionCloses) {
  RegionTable table(int64_t{1} << 30);
  const std::string path = SocketPath();
  auto listener = ShmListener::Start(path, &table);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const int fd = Memfd(1 << 20, F_SEAL_SHRINK);
  char* mine = static_cast<char*>(mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(mine, MAP_FAILED);
  int conn = -1;
  const std::string answer = Register(path, kHello, {fd}, &conn);
  close(fd);
  ASSERT_EQ(answer.size(), 1 + kShmTokenBytes) << answer;
  ASSERT_EQ(answer[0], kShmAccepted);
  const std::string token = answer.substr(1);
  EXPECT_EQ(table.regions(), 1u);
  EXPECT_EQ(table.bytes(), 1 << 20);

  // Both mappings see one memory.
  std::strcpy(mine + 4096, "from the client");
  auto span = table.Find(token, 4096, 16);
  ASSERT_TRUE(span.ok()) << span.status();
  EXPECT_STREQ(span->data, "from the client");
  std::strcpy(span->data, "from tdstored!!");
  EXPECT_STREQ(mine + 4096, "from tdstored!!");

  // Bounds: the whole region, the empty span at its end, and every way out.
  EXPECT_TRUE(table.Find(token, 0, 1 << 20).ok());
  EXPECT_TRUE(table.Find(token, 1 << 20, 0).ok());
  const int64_t big = std::numeric_limits<int64_t>::max();
  for (auto [offset, length] : std::vector<std::pair<int64_t, int64_t>>{
           {0, (1 << 20) + 1}, {1, 1 << 20}, {(1 << 20) + 1, 0}, {-1, 1}, {0, -1},
           {big, 1}, {1, big}, {big, big}, {std::numeric_limits<int64_t>::min(), 2}}) {
    auto out = table.Find(token, offset, length);
    EXPECT_TRUE(absl::IsOutOfRange(out.status())) << offset << " +" << length << ": "
                                                  << out.status();
  }
  EXPECT_TRUE(absl::IsFailedPrecondition(table.Find(std::string(16, 'x'), 0, 1).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(table.Find("", 0, 0).status()));

  // The client goes: the token is forgotten, the span still maps.
  close(conn);
  ASSERT_TRUE(AwaitRegions(table, 0));
  EXPECT_EQ(table.bytes(), 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(table.Find(token, 0, 1).status()));
  std::strcpy(span->data, "still mapped");
  EXPECT_STREQ(mine + 4096, "still mapped");
  munmap(mine, 1 << 20);
}

TEST(ShmRegions, WhatTdstoredRefusesLeavesNothingLent) {
  RegionTable table(int64_t{4} << 20);
  const std::string path = SocketPath();
  auto listener = ShmListener::Start(path, &table);
  ASSERT_TRUE(listener.ok()) << listener.status();

  struct Case {
    std::string name;
    std::string hello;
    std::vector<int> fds;
    std::string reason;  // part of the refusal
  };
  const int unsealed = Memfd(1 << 16, 0);
  const int write_sealed = Memfd(1 << 16, F_SEAL_SHRINK | F_SEAL_WRITE);
  const int sealed = Memfd(1 << 16, F_SEAL_SHRINK);
  const int read_only =
      open(("/proc/self/fd/" + std::to_string(sealed)).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(read_only, 0);
  const std::string file_path = SocketPath() + ".file";
  const int file = open(file_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_EQ(ftruncate(file, 1 << 16), 0);
  const int too_big = Memfd(8 << 20, F_SEAL_SHRINK);
  const int empty = Memfd(0, F_SEAL_SHRINK);
  const std::vector<Case> cases = {
      {"no descriptor", kHello, {}, "exactly one memfd"},
      {"two descriptors", kHello, {sealed, sealed}, "exactly one memfd"},
      {"another hello", "tdstore-shm/9", {sealed}, "expected the hello"},
      {"unsealed", kHello, {unsealed}, "not sealed against shrinking"},
      {"a plain file", kHello, {file}, "not a memfd"},
      {"write-sealed", kHello, {write_sealed}, "cannot map"},
      {"reopened read-only", kHello, {read_only}, "cannot map"},
      {"past --shm-max-bytes", kHello, {too_big}, "--shm-max-bytes"},
      {"empty", kHello, {empty}, "empty"},
  };
  for (const Case& c : cases) {
    int conn = -1;
    const std::string answer = Register(path, c.hello, c.fds, &conn);
    ASSERT_FALSE(answer.empty()) << c.name;
    EXPECT_EQ(answer[0], kShmRefused) << c.name;
    EXPECT_NE(answer.find(c.reason), std::string::npos) << c.name << ": " << answer;
    // And tdstored hangs up.
    char more;
    EXPECT_EQ(recv(conn, &more, 1, 0), 0) << c.name;
    close(conn);
    EXPECT_EQ(table.regions(), 0u) << c.name;
  }
  // Two of 3 MiB: the second would pass the 4 MiB lent in all.
  const int first = Memfd(3 << 20, F_SEAL_SHRINK), second = Memfd(3 << 20, F_SEAL_SHRINK);
  int conn1 = -1, conn2 = -1;
  EXPECT_EQ(Register(path, kHello, {first}, &conn1)[0], kShmAccepted);
  const std::string refused = Register(path, kHello, {second}, &conn2);
  EXPECT_EQ(refused[0], kShmRefused);
  EXPECT_NE(refused.find("--shm-max-bytes"), std::string::npos) << refused;
  EXPECT_EQ(table.regions(), 1u);
  // A second registration on a lent connection ends it.
  int again = -1;
  iovec iov{const_cast<char*>(kHello.data()), kHello.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  again = conn1;
  EXPECT_EQ(sendmsg(again, &msg, MSG_NOSIGNAL), static_cast<ssize_t>(kHello.size()));
  ASSERT_TRUE(AwaitRegions(table, 0));
  for (int fd : {unsealed, write_sealed, sealed, read_only, file, too_big, empty, first, second,
                 conn1, conn2}) {
    close(fd);
  }
  unlink(file_path.c_str());
}

TEST(ShmRegions, ArenaSpansNeverOverlapAndAllComeBack) {
  RegionTable table(int64_t{1} << 30);
  const std::string path = SocketPath();
  auto listener = ShmListener::Start(path, &table);
  ASSERT_TRUE(listener.ok()) << listener.status();
  std::string why;
  constexpr size_t kBytes = 1 << 20;
  std::shared_ptr<core::ShmArena> arena = core::ShmArena::Lend(path, kBytes, &why);
  ASSERT_NE(arena, nullptr) << why;
  EXPECT_TRUE(arena->alive());
  EXPECT_EQ(arena->size(), kBytes);
  ASSERT_EQ(table.regions(), 1u);

  std::mt19937 random(7);
  std::vector<core::ShmArena::Span> held;
  for (int step = 0; step < 20000; ++step) {
    if (!held.empty() && random() % 2 == 0) {
      held.erase(held.begin() + static_cast<long>(random() % held.size()));
      continue;
    }
    const size_t want = 1 + random() % (kBytes / 8);
    core::ShmArena::Span span =
        random() % 4 == 0 ? arena->TakeUpTo(want) : arena->Take(want);
    if (!span) continue;
    ASSERT_GE(span.offset(), 0);
    ASSERT_LE(span.offset() + span.size(), static_cast<int64_t>(kBytes));
    ASSERT_EQ(span.offset() % 64, 0);
    for (const core::ShmArena::Span& other : held) {
      ASSERT_TRUE(span.offset() + span.size() <= other.offset() ||
                  other.offset() + other.size() <= span.offset())
          << "spans overlap at step " << step;
    }
    // tdstored sees what the client wrote there.
    std::memset(span.data(), step & 0xff, static_cast<size_t>(span.size()));
    auto seen = table.Find(arena->token(), span.offset(), span.size());
    ASSERT_TRUE(seen.ok()) << seen.status();
    ASSERT_EQ(static_cast<unsigned char>(seen->data[span.size() - 1]), step & 0xff);
    held.push_back(std::move(span));
  }
  held.clear();
  // Everything came back, as one run.
  EXPECT_EQ(arena->Take(kBytes).size(), static_cast<int64_t>(kBytes));
  EXPECT_FALSE(arena->Take(kBytes + 1));

  // tdstored goes: the arena notices, and its region is unmapped there.
  listener->reset();
  EXPECT_EQ(table.regions(), 0u);
  EXPECT_FALSE(arena->alive());
}

TEST(ShmRegions, LendingToNoListenerFailsWithAReason) {
  std::string why;
  EXPECT_EQ(core::ShmArena::Lend(SocketPath(), 1 << 20, &why), nullptr);
  EXPECT_NE(why.find("connect"), std::string::npos) << why;
}

}  // namespace
}  // namespace tdstore
