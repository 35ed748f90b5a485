// Thin accessors over hiredis' redisReply. A null reply (a default-constructed
// Reply) answers false to every is_*() and has no bytes.
#include "server/redis/reply.h"

#include <hiredis/hiredis.h>

#include "server/redis/reply_objects.h"

namespace tdstore::redis {

bool ReplyView::is_string() const { return r_ != nullptr && r_->type == REDIS_REPLY_STRING; }
bool ReplyView::is_status() const { return r_ != nullptr && r_->type == REDIS_REPLY_STATUS; }
bool ReplyView::is_error() const { return r_ != nullptr && r_->type == REDIS_REPLY_ERROR; }
bool ReplyView::is_integer() const { return r_ != nullptr && r_->type == REDIS_REPLY_INTEGER; }
bool ReplyView::is_nil() const { return r_ != nullptr && r_->type == REDIS_REPLY_NIL; }
bool ReplyView::is_array() const { return r_ != nullptr && r_->type == REDIS_REPLY_ARRAY; }

std::string_view ReplyView::str() const {
  if (is_string() || is_status() || is_error()) return std::string_view(r_->str, r_->len);
  return {};
}

char* Reply::mutable_str() { return is_string() ? r_->str : nullptr; }

int64_t ReplyView::integer() const { return is_integer() ? r_->integer : 0; }

size_t ReplyView::size() const { return is_array() ? r_->elements : 0; }

ReplyView ReplyView::operator[](size_t i) const {
  // Out of range (or not an array) gives a null view rather than UB.
  return ReplyView(i < size() ? r_->element[i] : nullptr);
}

Reply::Reply(redisReply* r) : r_(r) {}

// Connection builds every reply through ReplyObjectFunctions().
void Reply::Deleter::operator()(redisReply* r) const { FreeReplyObject(r); }

}  // namespace tdstore::redis
