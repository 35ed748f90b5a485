// RESP2 replies read into reply_objects.h's structs. See resp_reader.h.
#include "server/redis/resp_reader.h"

#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/redis/reply_objects.h"

namespace tdstore::redis {
namespace {

// A RESP line's number ("-1", "42"): strict, no sign but a leading minus,
// no spaces, no overflow.
bool ParseNumber(const char* from, const char* to, long long* out) {
  if (from == to) return false;
  auto [end, ec] = std::from_chars(from, to, *out);
  return ec == std::errc() && end == to && (*from != '-' || to - from > 1);
}

}  // namespace

RespReader::~RespReader() { Reset(); }

void RespReader::Reset() {
  FreeReplyObject(root_);  // an array cut short holds null elements: fine
  root_ = nullptr;
  open_.clear();
  bulk_ = nullptr;
  bulk_filled_ = 0;
}

absl::Status RespReader::ProtocolError(const std::string& what) {
  Reset();
  begin_ = end_ = 0;
  return absl::UnavailableError(absl::StrCat("Protocol error: ", what));
}

void RespReader::Hang(redisReply* r) {
  if (open_.empty()) {
    root_ = r;
  } else {
    open_.back().array->element[open_.back().next] = r;
  }
}

bool RespReader::Completed() {
  while (!open_.empty()) {
    Level& level = open_.back();
    if (++level.next < level.array->elements) return false;
    open_.pop_back();  // the array is whole: an element of its parent
  }
  return true;
}

absl::StatusOr<bool> RespReader::Parse(redisReply** done) {
  for (;;) {
    if (bulk_ != nullptr) {
      // Its bytes, then its CRLF.
      const size_t want = bulk_->len - bulk_filled_;
      const size_t take = std::min(want, end_ - begin_);
      std::memcpy(bulk_->str + bulk_filled_, buf_.get() + begin_, take);
      bulk_filled_ += take;
      begin_ += take;
      if (bulk_filled_ < bulk_->len || end_ - begin_ < 2) return false;
      if (buf_[begin_] != '\r' || buf_[begin_ + 1] != '\n') {
        return ProtocolError("a bulk string is not followed by CRLF");
      }
      begin_ += 2;
      bulk_ = nullptr;
      bulk_filled_ = 0;
      if (Completed()) {
        *done = root_;
        root_ = nullptr;
        return true;
      }
      continue;
    }
    // A line: its type byte, then up to CRLF.
    const char* const line = buf_.get() + begin_;
    const char* const stop = buf_.get() + end_;
    const char* cr = line;
    for (;;) {
      cr = static_cast<const char*>(std::memchr(cr, '\r', static_cast<size_t>(stop - cr)));
      if (cr == nullptr || cr + 1 >= stop) return false;  // not all here yet
      if (cr[1] == '\n') break;
      ++cr;
    }
    const size_t next = static_cast<size_t>(cr + 2 - buf_.get());
    if (cr == line) return ProtocolError("an empty line");
    redisReply* made = nullptr;
    bool open_array = false;
    long long n = 0;
    switch (line[0]) {
      case '+':
      case '-':
        made = NewStringReply(line[0] == '+' ? REDIS_REPLY_STATUS : REDIS_REPLY_ERROR,
                              static_cast<size_t>(cr - line - 1));
        if (made != nullptr) std::memcpy(made->str, line + 1, made->len);
        break;
      case ':':
        if (!ParseNumber(line + 1, cr, &n)) return ProtocolError("a bad integer");
        made = NewIntegerReply(n);
        break;
      case '$':
        if (!ParseNumber(line + 1, cr, &n) || n < -1 || n > kMaxBulkBytes) {
          return ProtocolError("a bad bulk string length");
        }
        made = n < 0 ? NewNilReply() : NewStringReply(REDIS_REPLY_STRING, static_cast<size_t>(n));
        if (made != nullptr && n >= 0) {
          bulk_ = made;
          bulk_filled_ = 0;
        }
        break;
      case '*':
        if (!ParseNumber(line + 1, cr, &n) || n < -1 || n > INT32_MAX) {
          return ProtocolError("a bad array length");
        }
        made = n < 0 ? NewNilReply() : NewArrayReply(static_cast<size_t>(n));
        open_array = n > 0;
        break;
      default:
        return ProtocolError(absl::StrCat("a reply of unknown type byte ",
                                          static_cast<int>(static_cast<unsigned char>(line[0]))));
    }
    if (made == nullptr) return ProtocolError("out of memory");
    begin_ = next;
    Hang(made);
    if (open_array) {
      open_.push_back({made, 0});
      continue;
    }
    if (bulk_ != nullptr) continue;  // complete once its bytes are in
    if (Completed()) {
      *done = root_;
      root_ = nullptr;
      return true;
    }
  }
}

absl::StatusOr<std::optional<Reply>> RespReader::Buffered() {
  if (begin_ == end_ && bulk_ == nullptr && root_ == nullptr) return std::nullopt;
  redisReply* done = nullptr;
  absl::StatusOr<bool> whole = Parse(&done);
  if (!whole.ok()) return whole.status();
  if (!*whole) return std::nullopt;
  return std::optional<Reply>(Reply(done));
}

absl::StatusOr<Reply> RespReader::Next() {
  for (;;) {
    absl::StatusOr<std::optional<Reply>> reply = Buffered();
    if (!reply.ok()) return reply.status();
    if (reply->has_value()) return std::move(**reply);
    // Parse took every buffered byte it could. A bulk string's remaining
    // bytes go straight into it, past the buffer; but a short rest is read
    // with what follows it (the next replies, often), in one read.
    absl::Status read = (bulk_ != nullptr && bulk_->len - bulk_filled_ >= kReadBytes)
                            ? ReadIntoBulk()
                            : ReadSome();
    if (!read.ok()) return read;
  }
}

absl::Status RespReader::ReadSome() {
  if (buf_ == nullptr) {
    buf_.reset(new char[kReadBytes]);
    capacity_ = kReadBytes;
  }
  if (begin_ == end_) {
    begin_ = end_ = 0;
  } else if (capacity_ - end_ < kReadBytes / 2) {
    // Room at the end: move the unparsed bytes (part of a line, or less
    // than kReadBytes of a bulk) to the front, or grow for a line longer
    // than the buffer (an error message of a script, say).
    if (begin_ == 0) {
      std::unique_ptr<char[]> bigger(new char[2 * capacity_]);
      std::memcpy(bigger.get(), buf_.get(), end_);
      buf_ = std::move(bigger);
      capacity_ *= 2;
    } else {
      std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
  }
  for (;;) {
    const ssize_t n = ::read(fd_, buf_.get() + end_, capacity_ - end_);
    if (n > 0) {
      end_ += static_cast<size_t>(n);
      return absl::OkStatus();
    }
    if (n < 0 && errno == EINTR) continue;
    return ReadError(n);
  }
}

absl::Status RespReader::ReadIntoBulk() {
  // The buffer is empty here: Parse copied what it held into the string.
  for (;;) {
    const ssize_t n = ::read(fd_, bulk_->str + bulk_filled_, bulk_->len - bulk_filled_);
    if (n > 0) {
      bulk_filled_ += static_cast<size_t>(n);
      return absl::OkStatus();
    }
    if (n < 0 && errno == EINTR) continue;
    return ReadError(n);
  }
}

absl::Status RespReader::ReadError(long n) {
  const int err = errno;
  Reset();
  if (n == 0) return absl::UnavailableError("Server closed the connection");
  if (err == EAGAIN || err == EWOULDBLOCK) return absl::UnavailableError("read timed out");
  return absl::UnavailableError(absl::StrCat("read: ", std::strerror(err)));
}

}  // namespace tdstore::redis
