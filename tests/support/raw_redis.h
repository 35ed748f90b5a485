// Test harness: minimal raw-hiredis access to a redis-server on 127.0.0.1.
//
// Deliberately independent of server/redis/ (the code under test). Every
// error comes back as text, in the forms the harness's Command() returns:
// "(transport error) ..." for connection problems, "(error) ..." for Redis
// error replies.
//
//   std::string error;
//   raw_redis::ContextPtr c = raw_redis::Connect(port, {"", "secret"}, &error);
//   raw_redis::ReplyPtr r = raw_redis::Run(c.get(), {"INFO", "server"});
//
// Thread notes: the free functions keep no state and may be called from any
// thread; one redisContext must be used by one thread at a time.
#ifndef TDSTORE_TESTS_SUPPORT_RAW_REDIS_H_
#define TDSTORE_TESTS_SUPPORT_RAW_REDIS_H_

#include <hiredis/hiredis.h>

#include <memory>
#include <string>
#include <vector>

namespace tdstore::testing::raw_redis {

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

// Who to AUTH as. No password: no AUTH. No user: "AUTH <password>" (the
// default user), else "AUTH <user> <password>".
struct Credentials {
  std::string user;
  std::string password;
};

// Connects to 127.0.0.1:`port` (2 s connect timeout, then 30 s per command)
// and AUTHs with `creds`. Null on failure, with *error set to
// "(transport error) 127.0.0.1:<port>: <reason>" (connect),
// "(transport error) <reason>" (AUTH lost) or "(error) AUTH: <reply>".
ContextPtr Connect(int port, const Credentials& creds, std::string* error);

// Sends one command (binary-safe arguments) and reads its reply. Null on a
// transport error; then c->errstr says why and `c` is unusable.
ReplyPtr Run(redisContext* c, const std::vector<std::string>& argv);

// Appends `r` to *out as strings: arrays flattened depth-first, integers in
// decimal, nil as "(nil)", errors as "(error) <message>", bulk and status
// replies as their text.
void Flatten(const redisReply* r, std::vector<std::string>* out);

// Connect + Run + Flatten on a fresh connection: the flattened reply, or one
// "(transport error) ..." / "(error) AUTH: ..." element on failure.
std::vector<std::string> Command(int port, const Credentials& creds,
                                 const std::vector<std::string>& argv);

}  // namespace tdstore::testing::raw_redis

#endif  // TDSTORE_TESTS_SUPPORT_RAW_REDIS_H_
