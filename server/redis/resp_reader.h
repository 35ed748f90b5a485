// Reads Redis' replies (RESP2) from a connected blocking socket.
//
//   RespReader reader(fd);                 // SO_RCVTIMEO is the timeout
//   absl::StatusOr<Reply> r = reader.Next();  // reads until one is whole
//
// The replies are hiredis' redisReply structs, made by reply_objects.h
// (long strings pooled), so ReplyView reads them unchanged and
// FreeReplyObject frees them.
//
// Why not hiredis' reader: it reads 16 KiB per read(2), appends each read
// to its own buffer, grows that buffer by reallocation until a whole bulk
// string is in it, and then copies the string into its reply. A td[::3]
// read's five 2.5 MB covering ranges were copied three times in tdstored
// before its own gather (perf: memmove was 47% of tdstored's CPU, 23 points
// of it in the reader). Here a bulk string's reply is made as soon as its
// length is known; the bytes already read are copied into it, and the rest
// is read from the socket straight into it.
//
// Errors: UNAVAILABLE for a closed socket, a timeout, a read error or bytes
// that are not RESP (a protocol error). After an error the reader's state is
// unknown and its connection must be dropped; the reply in progress is freed.
//
// One thread at a time.
#ifndef TDSTORE_SERVER_REDIS_RESP_READER_H_
#define TDSTORE_SERVER_REDIS_RESP_READER_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/redis/reply.h"

struct redisReply;

namespace tdstore::redis {

class RespReader {
 public:
  // Reads `fd`, which the caller owns and keeps open while this lives.
  explicit RespReader(int fd) : fd_(fd) {}
  ~RespReader();
  RespReader(const RespReader&) = delete;
  RespReader& operator=(const RespReader&) = delete;

  // The next reply, reading the socket as long as it takes (each read
  // blocks for at most the socket's timeout).
  absl::StatusOr<Reply> Next();
  // The next reply if the bytes read so far complete it; else nullopt,
  // without reading.
  absl::StatusOr<std::optional<Reply>> Buffered();
  // One read(2) into the buffer: blocks until the socket has something.
  absl::Status ReadSome();

  // Bytes one ReadSome takes at most; a bulk string's bytes beyond what
  // is buffered go straight into its reply, in reads of any size.
  static constexpr size_t kReadBytes = 128 << 10;
  // Longest bulk string accepted (Redis' proto-max-bulk-len default).
  static constexpr long long kMaxBulkBytes = 512ll << 20;

 private:
  // Parses what is buffered: true with *done set when a reply is whole,
  // false when more bytes are needed; a protocol error is returned.
  absl::StatusOr<bool> Parse(redisReply** done);
  // A new element made: hung in the array being filled, or the root.
  void Hang(redisReply* r);
  // An element is complete: moves on in the arrays it completes. True
  // when the root is complete.
  bool Completed();
  // Reads into the bulk string being filled, from the socket directly.
  absl::Status ReadIntoBulk();
  absl::Status ReadError(long n);
  // Frees the reply in progress and forgets the parse.
  void Reset();
  absl::Status ProtocolError(const std::string& what);

  struct Level {
    redisReply* array;
    size_t next;  // the element being read
  };

  const int fd_;
  std::unique_ptr<char[]> buf_;  // kReadBytes, made on first read
  size_t capacity_ = 0;
  size_t begin_ = 0, end_ = 0;  // the unparsed bytes: buf_[begin_, end_)
  redisReply* root_ = nullptr;  // the reply in progress, owned
  std::vector<Level> open_;     // its arrays being filled, outermost first
  redisReply* bulk_ = nullptr;  // a bulk string being filled (hung already)
  size_t bulk_filled_ = 0;
};

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_RESP_READER_H_
