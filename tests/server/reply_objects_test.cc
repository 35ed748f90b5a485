// tdstored's hiredis reply table (server/redis/reply_objects.h), driven
// through a real hiredis reader fed RESP bytes: replies read as hiredis'
// default table reads them, short strings live inside their reply, long
// strings come from the pool and go back to it, the pool keeps at most
// kPoolKeptBytes, and a reply cut short by a protocol error is freed whole.
#include "server/redis/reply_objects.h"

#include <hiredis/hiredis.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/redis/reply.h"

namespace tdstore::redis {
namespace {

struct ReaderFree {
  void operator()(redisReader* r) const { redisReaderFree(r); }
};
using Reader = std::unique_ptr<redisReader, ReaderFree>;

// A reader of a fresh reader and an empty pool (tests of one binary share
// the pool).
Reader NewReader(redisReplyObjectFunctions* fn) {
  ReleasePoolKept();
  Reader r(redisReaderCreateWithFunctions(fn));
  r->maxbuf = 0;
  return r;
}

std::string Bulk(const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }

// Feeds `resp` in pieces of `piece` bytes and reads one reply.
void* ReadOne(redisReader* reader, const std::string& resp, size_t piece) {
  void* reply = nullptr;
  for (size_t at = 0; at < resp.size(); at += piece) {
    EXPECT_EQ(redisReaderFeed(reader, resp.data() + at, std::min(piece, resp.size() - at)),
              REDIS_OK);
  }
  EXPECT_EQ(redisReaderGetReply(reader, &reply), REDIS_OK);
  return reply;
}

// The same reply read by hiredis' default table and by ours: the same tree.
void ExpectSame(const redisReply* ours, const redisReply* theirs) {
  ASSERT_NE(ours, nullptr);
  ASSERT_NE(theirs, nullptr);
  ASSERT_EQ(ours->type, theirs->type);
  EXPECT_EQ(ours->integer, theirs->integer);
  ASSERT_EQ(ours->len, theirs->len);
  if (theirs->str != nullptr) {
    ASSERT_NE(ours->str, nullptr);
    EXPECT_EQ(std::string(ours->str, ours->len), std::string(theirs->str, theirs->len));
    EXPECT_EQ(ours->str[ours->len], '\0');
  }
  ASSERT_EQ(ours->elements, theirs->elements);
  for (size_t i = 0; i < theirs->elements; ++i) ExpectSame(ours->element[i], theirs->element[i]);
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// A random reply: strings short and pooled, statuses (QUEUED, the reply
// to each command of a MULTI, among them), errors, integers, nils,
// nested arrays (an EXEC's).
std::string RandomResp(std::mt19937_64& rng, int depth) {
  switch (rng() % (depth < 2 ? 7 : 6)) {
    case 0:  // short, or about the longest kept inside its reply
      return Bulk(RandomBytes(rng, rng() % 2 ? rng() % 300 : kInlineStringBytes - 2 + rng() % 5));
    case 1: return Bulk(RandomBytes(rng, kPooledStringBytes - 2 + rng() % 5));
    case 2: return Bulk(RandomBytes(rng, kPooledStringBytes + rng() % (3 << 20)));
    case 3: {
      static const char* const kStatuses[] = {"+OK\r\n", "+QUEUED\r\n", "+PONG\r\n", "+OKAY\r\n"};
      return kStatuses[rng() % 4];
    }
    case 4: return (rng() % 2 ? "-TDSTALE gone\r\n" : ":" + std::to_string(int64_t(rng())) + "\r\n");
    case 5: return "$-1\r\n";
    default: {
      const int n = static_cast<int>(rng() % 6);
      std::string s = "*" + std::to_string(n) + "\r\n";
      for (int i = 0; i < n; ++i) s += RandomResp(rng, depth + 1);
      return s;
    }
  }
}

TEST(ReplyObjects, RandomRepliesReadAsHiredisDefaultReadsThem) {
  std::mt19937_64 rng(20261205);
  for (int round = 0; round < 200; ++round) {
    const std::string resp = RandomResp(rng, 0);
    const size_t piece = 1 + rng() % (64 << 10);
    Reader ours = NewReader(ReplyObjectFunctions());
    Reader theirs(redisReaderCreate());
    void* a = ReadOne(ours.get(), resp, piece);
    void* b = ReadOne(theirs.get(), resp, piece);
    ExpectSame(static_cast<redisReply*>(a), static_cast<redisReply*>(b));
    FreeReplyObject(a);
    freeReplyObject(b);
  }
}

TEST(ReplyObjects, AShortStringLivesInItsReplyAndALongerOneApart) {
  for (size_t len : {size_t{0}, size_t{5}, kInlineStringBytes, kInlineStringBytes + 1,
                     size_t{1} << 20}) {
    for (int type : {REDIS_REPLY_STRING, REDIS_REPLY_STATUS, REDIS_REPLY_ERROR}) {
      redisReply* r = NewStringReply(type, len);
      ASSERT_NE(r, nullptr);
      EXPECT_EQ(r->type, type);
      EXPECT_EQ(r->len, len);
      EXPECT_EQ(r->str[len], '\0');
      EXPECT_EQ(r->str == reinterpret_cast<char*>(r + 1), len <= kInlineStringBytes) << len;
      std::memset(r->str, 'x', len);  // all of it is the reply's to write
      FreeReplyObject(r);
    }
  }
}

TEST(ReplyObjects, ALongStringIsPooledAndReusedWarm) {
  Reader reader = NewReader(ReplyObjectFunctions());
  const std::string value(kPooledStringBytes + 12345, 'x');
  const size_t kept_before = PoolKeptBytes();
  EXPECT_EQ(kept_before, 0u);
  void* first = ReadOne(reader.get(), Bulk(value), 1 << 16);
  const char* where = static_cast<redisReply*>(first)->str;
  FreeReplyObject(first);
  EXPECT_GT(PoolKeptBytes(), kept_before);
  // The next string of about that length takes the same mapping.
  const std::string other(kPooledStringBytes + 999, 'y');
  void* second = ReadOne(reader.get(), Bulk(other), 1 << 16);
  EXPECT_EQ(static_cast<redisReply*>(second)->str, where);
  EXPECT_EQ(std::string(static_cast<redisReply*>(second)->str, other.size()), other);
  EXPECT_EQ(PoolKeptBytes(), kept_before);
  // Through the owning wrapper too, as Connection hands replies out.
  { Reply owned(static_cast<redisReply*>(second)); EXPECT_EQ(owned.str(), other); }
  EXPECT_GT(PoolKeptBytes(), kept_before);
}

TEST(ReplyObjects, ThePoolKeepsAtMostItsBound) {
  Reader reader = NewReader(ReplyObjectFunctions());
  // More long strings alive at once than the pool may keep; all freed.
  std::vector<void*> replies;
  const size_t each = 3 << 20;
  for (size_t held = 0; held < 2 * kPoolKeptBytes; held += each) {
    replies.push_back(ReadOne(reader.get(), Bulk(std::string(each, 'z')), 1 << 20));
  }
  for (void* r : replies) FreeReplyObject(r);
  EXPECT_LE(PoolKeptBytes(), kPoolKeptBytes);
  EXPECT_GE(PoolKeptBytes(), kPoolKeptBytes - (each + (64 << 10)));
  ReleasePoolKept();
  EXPECT_EQ(PoolKeptBytes(), 0u);
}

TEST(ReplyObjects, AReplyCutShortByAProtocolErrorIsFreedWhole) {
  // An EXEC-like array whose third element is not RESP: hiredis frees what
  // it built (a pooled string among it) through the table's freeObject.
  Reader reader = NewReader(ReplyObjectFunctions());
  const std::string resp = "*3\r\n" + Bulk(std::string(kPooledStringBytes + 1, 'a')) + ":7\r\n" +
                           "?garbage\r\n";
  const size_t kept_before = PoolKeptBytes();
  ASSERT_EQ(redisReaderFeed(reader.get(), resp.data(), resp.size()), REDIS_OK);
  void* reply = nullptr;
  EXPECT_EQ(redisReaderGetReply(reader.get(), &reply), REDIS_ERR);
  EXPECT_EQ(reply, nullptr);
  // The string went back to the pool (kept: the pool was empty), not leaked.
  EXPECT_GT(PoolKeptBytes(), kept_before);
}

TEST(ReplyObjects, NullAndEmptyRepliesFree) {
  FreeReplyObject(nullptr);
  Reader reader = NewReader(ReplyObjectFunctions());
  void* empty_array = ReadOne(reader.get(), "*0\r\n", 4);
  EXPECT_EQ(static_cast<redisReply*>(empty_array)->elements, 0u);
  FreeReplyObject(empty_array);
  void* nil_array = ReadOne(reader.get(), "*-1\r\n", 5);
  EXPECT_EQ(static_cast<redisReply*>(nil_array)->type, REDIS_REPLY_NIL);
  FreeReplyObject(nil_array);
  void* empty_string = ReadOne(reader.get(), "$0\r\n\r\n", 6);
  EXPECT_EQ(static_cast<redisReply*>(empty_string)->len, 0u);
  FreeReplyObject(empty_string);
}

}  // namespace
}  // namespace tdstore::redis
