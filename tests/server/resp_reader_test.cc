// server/redis/resp_reader.h against hiredis' own reader: random replies
// (nested arrays, nils, statuses, errors, integers, bulk strings from empty
// to pooled sizes) written into a socket in random pieces must read back as
// hiredis reads the same bytes. Plus: Buffered() answers only once a reply
// is whole, and bad bytes, a closed peer and a timeout are UNAVAILABLE.
#include "server/redis/resp_reader.h"

#include <hiredis/hiredis.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/redis/reply.h"

namespace tdstore::redis {
namespace {

class SocketPair {
 public:
  SocketPair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    reader_ = fds[0];
    writer_ = fds[1];
  }
  ~SocketPair() {
    CloseWriter();
    close(reader_);
  }
  int reader() const { return reader_; }
  void CloseWriter() {
    if (writer_ >= 0) close(writer_);
    writer_ = -1;
  }
  // Writes `bytes` in pieces of random sizes, each its own write(2).
  void WriteInPieces(const std::string& bytes, uint32_t seed, size_t max_piece) {
    std::mt19937 rng(seed);
    for (size_t at = 0; at < bytes.size();) {
      size_t piece = std::min<size_t>(bytes.size() - at, 1 + rng() % max_piece);
      ssize_t n = write(writer_, bytes.data() + at, piece);
      ASSERT_GT(n, 0);
      at += static_cast<size_t>(n);
    }
  }

 private:
  int reader_ = -1;
  int writer_ = -1;
};

// A random reply, as RESP.
void RandomReply(std::mt19937& rng, int depth, std::string* out) {
  const int kind = static_cast<int>(rng() % (depth < 3 ? 7 : 5));
  auto text = [&](size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>('a' + rng() % 26);
    return s;
  };
  switch (kind) {
    case 0:
      *out += "+" + text(rng() % 12) + "\r\n";
      break;
    case 1:
      *out += "-ERR " + text(rng() % 40) + "\r\n";
      break;
    case 2:
      *out += ":" + std::to_string(static_cast<int64_t>(rng()) - (1ll << 31)) + "\r\n";
      break;
    case 3:
      *out += "$-1\r\n";
      break;
    case 4: {
      // Sizes around the reader's buffer and the pool's threshold.
      static const size_t kSizes[] = {0,
                                      1,
                                      13,
                                      276,
                                      RespReader::kReadBytes - 1,
                                      RespReader::kReadBytes,
                                      RespReader::kReadBytes + 1,
                                      300000,
                                      1 << 20,
                                      (2 << 20) + 7};
      const size_t n = rng() % 3 == 0 ? kSizes[rng() % std::size(kSizes)] : rng() % 600;
      std::string bytes(n, '\0');
      for (char& c : bytes) c = static_cast<char>(rng());  // any byte, CR and LF too
      *out += "$" + std::to_string(n) + "\r\n" + bytes + "\r\n";
      break;
    }
    case 5:
      *out += rng() % 4 == 0 ? "*-1\r\n" : "*0\r\n";
      break;
    default: {
      const size_t n = 1 + rng() % 6;
      *out += "*" + std::to_string(n) + "\r\n";
      for (size_t i = 0; i < n; ++i) RandomReply(rng, depth + 1, out);
    }
  }
}

// Whether our reply says what hiredis' says.
void ExpectSame(const ReplyView& got, const redisReply* want, const std::string& where) {
  switch (want->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      ASSERT_EQ(got.is_string(), want->type == REDIS_REPLY_STRING) << where;
      ASSERT_EQ(got.is_status(), want->type == REDIS_REPLY_STATUS) << where;
      ASSERT_EQ(got.is_error(), want->type == REDIS_REPLY_ERROR) << where;
      ASSERT_EQ(got.str(), std::string_view(want->str, want->len)) << where;
      ASSERT_EQ(got.str().data()[got.str().size()], '\0') << where;
      break;
    case REDIS_REPLY_INTEGER:
      ASSERT_TRUE(got.is_integer()) << where;
      ASSERT_EQ(got.integer(), want->integer) << where;
      break;
    case REDIS_REPLY_NIL:
      ASSERT_TRUE(got.is_nil()) << where;
      break;
    case REDIS_REPLY_ARRAY:
      ASSERT_TRUE(got.is_array()) << where;
      ASSERT_EQ(got.size(), want->elements) << where;
      for (size_t i = 0; i < want->elements; ++i) {
        ExpectSame(got[i], want->element[i], where + "/" + std::to_string(i));
      }
      break;
    default:
      FAIL() << where << ": hiredis read type " << want->type;
  }
}

// hiredis' reading of `resp`: its replies in order.
std::vector<redisReply*> HiredisReplies(const std::string& resp, size_t count) {
  redisReader* reader = redisReaderCreate();
  EXPECT_EQ(redisReaderFeed(reader, resp.data(), resp.size()), REDIS_OK);
  std::vector<redisReply*> out;
  for (size_t i = 0; i < count; ++i) {
    void* r = nullptr;
    EXPECT_EQ(redisReaderGetReply(reader, &r), REDIS_OK);
    out.push_back(static_cast<redisReply*>(r));
  }
  redisReaderFree(reader);
  return out;
}

TEST(RespReaderTest, RandomRepliesInRandomPiecesReadAsHiredisReadsThem) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    const size_t count = 1 + rng() % 30;
    std::string resp;
    for (size_t i = 0; i < count; ++i) RandomReply(rng, 0, &resp);
    std::vector<redisReply*> want = HiredisReplies(resp, count);
    SocketPair pair;
    // Pieces from a few bytes (every line split) to larger than the buffer.
    const size_t max_piece = seed % 3 == 0 ? 7 : (seed % 3 == 1 ? 5000 : 400000);
    std::thread writer([&] { pair.WriteInPieces(resp, seed, max_piece); });
    RespReader reader(pair.reader());
    for (size_t i = 0; i < count; ++i) {
      absl::StatusOr<Reply> got = reader.Next();
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectSame(got->view(), want[i],
                 "seed " + std::to_string(seed) + " reply " + std::to_string(i));
    }
    writer.join();
    for (redisReply* r : want) freeReplyObject(r);
    // Nothing is left over: the next read waits, and sees the close.
    pair.CloseWriter();
    absl::StatusOr<Reply> after = reader.Next();
    EXPECT_EQ(after.status().code(), absl::StatusCode::kUnavailable);
  }
}

TEST(RespReaderTest, BufferedAnswersOnlyOnceAReplyIsWhole) {
  const std::string resp = "*3\r\n$5\r\nhello\r\n:42\r\n*1\r\n+OK\r\n";
  SocketPair pair;
  RespReader reader(pair.reader());
  for (size_t i = 0; i < resp.size(); ++i) {
    absl::StatusOr<std::optional<Reply>> before = reader.Buffered();
    ASSERT_TRUE(before.ok()) << before.status();
    EXPECT_FALSE(before->has_value()) << "after " << i << " bytes";
    pair.WriteInPieces(resp.substr(i, 1), 1, 1);
    ASSERT_TRUE(reader.ReadSome().ok());
  }
  absl::StatusOr<std::optional<Reply>> whole = reader.Buffered();
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(whole->has_value());
  const ReplyView r = (**whole).view();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].str(), "hello");
  EXPECT_EQ(r[1].integer(), 42);
  EXPECT_EQ(r[2][0].str(), "OK");
}

TEST(RespReaderTest, BytesThatAreNotRespAreAProtocolError) {
  const char* bad[] = {"?what\r\n",         "$abc\r\n",       "$-2\r\n",
                       "*-5\r\n",           ":12x\r\n",       "$3\r\nabcXY",
                       "*2\r\n:1\r\n!\r\n", "\r\n",           ":-\r\n",
                       "$99999999999999\r\n"};
  for (const char* bytes : bad) {
    SocketPair pair;
    pair.WriteInPieces(bytes, 3, 100);
    RespReader reader(pair.reader());
    absl::StatusOr<Reply> got = reader.Next();
    ASSERT_FALSE(got.ok()) << bytes;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << bytes;
    EXPECT_NE(got.status().message().find("Protocol error"), std::string::npos)
        << bytes << ": " << got.status();
  }
}

TEST(RespReaderTest, APeerThatClosesMidReplyIsUnavailable) {
  // Cut inside an array, inside a line and inside a long bulk string (read
  // straight into its reply): the partial reply is freed, the error said.
  const std::string long_bulk = "$400000\r\n" + std::string(200000, 'x');
  for (const std::string& cut : {std::string("*2\r\n:1\r\n"), std::string("$5\r\nhe"),
                                 std::string("+O"), long_bulk}) {
    SocketPair pair;
    std::thread writer([&] {
      pair.WriteInPieces(cut, 5, 70000);
      pair.CloseWriter();
    });
    RespReader reader(pair.reader());
    absl::StatusOr<Reply> got = reader.Next();
    writer.join();
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(got.status().message().find("closed"), std::string::npos) << got.status();
  }
}

TEST(RespReaderTest, ASilentPeerTimesOutAtTheSocketsTimeout) {
  SocketPair pair;
  timeval tv{0, 50000};
  ASSERT_EQ(setsockopt(pair.reader(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
  pair.WriteInPieces("$10\r\nabc", 1, 100);  // never finished
  RespReader reader(pair.reader());
  absl::StatusOr<Reply> got = reader.Next();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(got.status().message().find("timed out"), std::string::npos) << got.status();
}

}  // namespace
}  // namespace tdstore::redis
