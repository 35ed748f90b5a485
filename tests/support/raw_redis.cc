// Raw hiredis helpers for the test harness: see raw_redis.h.
#include "tests/support/raw_redis.h"

namespace tdstore::testing::raw_redis {

ReplyPtr Run(redisContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const std::string& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  return ReplyPtr(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), ptrs.data(), lens.data())));
}

ContextPtr Connect(int port, const Credentials& creds, std::string* error) {
  ContextPtr c(redisConnectWithTimeout("127.0.0.1", port, timeval{2, 0}));
  if (c == nullptr) {
    *error = "(transport error) out of memory";
    return nullptr;
  }
  if (c->err != 0) {
    *error = "(transport error) 127.0.0.1:" + std::to_string(port) + ": " + c->errstr;
    return nullptr;
  }
  redisSetTimeout(c.get(), timeval{30, 0});
  if (!creds.password.empty()) {
    ReplyPtr auth = creds.user.empty() ? Run(c.get(), {"AUTH", creds.password})
                                       : Run(c.get(), {"AUTH", creds.user, creds.password});
    if (auth == nullptr) {
      *error = std::string("(transport error) ") + c->errstr;
      return nullptr;
    }
    if (auth->type == REDIS_REPLY_ERROR) {
      *error = "(error) AUTH: " + std::string(auth->str, auth->len);
      return nullptr;
    }
  }
  return c;
}

void Flatten(const redisReply* r, std::vector<std::string>* out) {
  switch (r->type) {
    case REDIS_REPLY_ARRAY:
      for (size_t i = 0; i < r->elements; ++i) Flatten(r->element[i], out);
      break;
    case REDIS_REPLY_INTEGER:
      out->push_back(std::to_string(r->integer));
      break;
    case REDIS_REPLY_NIL:
      out->push_back("(nil)");
      break;
    case REDIS_REPLY_ERROR:
      out->push_back("(error) " + std::string(r->str, r->len));
      break;
    default:  // string, status
      out->push_back(std::string(r->str, r->len));
  }
}

std::vector<std::string> Command(int port, const Credentials& creds,
                                 const std::vector<std::string>& argv) {
  std::string error;
  ContextPtr c = Connect(port, creds, &error);
  if (c == nullptr) return {error};
  ReplyPtr reply = Run(c.get(), argv);
  if (reply == nullptr) return {std::string("(transport error) ") + c->errstr};
  std::vector<std::string> out;
  Flatten(reply.get(), &out);
  return out;
}

}  // namespace tdstore::testing::raw_redis
