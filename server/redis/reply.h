// Owning wrapper and read-only view of one hiredis reply.
//
// Replies are read straight from hiredis' buffers: str() is a view into the
// reply and lives as long as the owning Reply.
//
// A Reply is not thread-safe; move it between threads freely.
#ifndef TDSTORE_SERVER_REDIS_REPLY_H_
#define TDSTORE_SERVER_REDIS_REPLY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

struct redisReply;

namespace tdstore::redis {

// Non-owning view of a reply or of an element of an array reply.
class ReplyView {
 public:
  explicit ReplyView(const redisReply* r) : r_(r) {}

  bool is_string() const;   // bulk string
  bool is_status() const;   // +OK style
  bool is_error() const;    // -ERR style; str() has the message
  bool is_integer() const;
  bool is_nil() const;
  bool is_array() const;

  // Bytes of a string, status or error reply; empty otherwise.
  std::string_view str() const;
  int64_t integer() const;
  // Elements of an array reply; 0 otherwise.
  size_t size() const;
  ReplyView operator[](size_t i) const;

 private:
  const redisReply* r_;
};

class Reply {
 public:
  Reply() = default;
  // Takes ownership of a reply a Connection read: one built by
  // ReplyObjectFunctions() (reply_objects.h), freed with FreeReplyObject.
  explicit Reply(redisReply* r);

  ReplyView view() const { return ReplyView(r_.get()); }
  bool is_string() const { return view().is_string(); }
  bool is_status() const { return view().is_status(); }
  bool is_error() const { return view().is_error(); }
  bool is_integer() const { return view().is_integer(); }
  bool is_nil() const { return view().is_nil(); }
  bool is_array() const { return view().is_array(); }
  std::string_view str() const { return view().str(); }
  int64_t integer() const { return view().integer(); }
  size_t size() const { return view().size(); }
  ReplyView operator[](size_t i) const { return view()[i]; }
  // A bulk string reply's bytes (str().size() of them), this object's own,
  // to change in place: an indexed write patches a range it read and sends
  // it back. Null for any other reply.
  char* mutable_str();

 private:
  struct Deleter {
    void operator()(redisReply* r) const;
  };
  std::unique_ptr<redisReply, Deleter> r_;
};

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_REPLY_H_
