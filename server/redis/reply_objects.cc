// hiredis reply objects with long strings in a pool of kept mappings. See
// reply_objects.h for why.
#include "server/redis/reply_objects.h"

#include <hiredis/hiredis.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>
#include <mutex>
#include <vector>

namespace tdstore::redis {
namespace {

// A pooled string's mapping starts with its capacity; the string follows.
// 16 bytes keep the string as aligned as malloc's.
constexpr size_t kHeaderBytes = 16;
// Mappings are made in these steps, so strings of slightly different
// lengths (a covering range per leaf) reuse each other's.
constexpr size_t kStepBytes = 64 << 10;

class StringPool {
 public:
  // Room for `bytes` bytes (a string and its NUL), warm if a freed mapping
  // fits; null if the kernel refuses a new one. A kept mapping fits if it
  // is at most twice the size asked for: a small string never holds a large
  // mapping another string would need. The last one freed that fits is
  // taken: it is the likeliest to be in the CPU's caches still (taking the
  // oldest cycled a whole-leaf read's windows through every kept mapping,
  // and made it slower than malloc's reuse).
  char* Take(size_t bytes) {
    const size_t need = bytes + kHeaderBytes;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
        if (it->capacity < need || it->capacity > 2 * need) continue;
        char* base = it->base;
        kept_ -= it->capacity;
        free_.erase(std::next(it).base());
        return base + kHeaderBytes;
      }
    }
    const size_t capacity = (need + kStepBytes - 1) / kStepBytes * kStepBytes;
    void* base = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return nullptr;
    std::memcpy(base, &capacity, sizeof(capacity));
    return static_cast<char*>(base) + kHeaderBytes;
  }

  // Keeps the string's mapping for reuse while the pool holds at most
  // kPoolKeptBytes; else unmaps it.
  void Give(char* str) {
    char* base = str - kHeaderBytes;
    size_t capacity = 0;
    std::memcpy(&capacity, base, sizeof(capacity));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (kept_ + capacity <= kPoolKeptBytes) {
        // Called from Reply's destructor and from hiredis: no exception
        // may leave. Without room to note it, the mapping goes.
        try {
          free_.push_back({capacity, base});
          kept_ += capacity;
          return;
        } catch (...) {
        }
      }
    }
    munmap(base, capacity);
  }

  void ReleaseKept() {
    std::vector<Kept> kept;
    {
      std::lock_guard<std::mutex> lock(mu_);
      kept.swap(free_);
      kept_ = 0;
    }
    for (const Kept& k : kept) munmap(k.base, k.capacity);
  }

  size_t kept() const {
    std::lock_guard<std::mutex> lock(mu_);
    return kept_;
  }

 private:
  struct Kept {
    size_t capacity = 0;
    char* base = nullptr;
  };
  mutable std::mutex mu_;
  std::vector<Kept> free_;  // in the order freed; a few dozen at most
  size_t kept_ = 0;
};

StringPool& Pool() {
  // Never destroyed (replies may outlive main), and made without
  // allocating: this first runs inside hiredis' C code, where an exception
  // must not pass.
  alignas(StringPool) static unsigned char storage[sizeof(StringPool)];
  static StringPool* const pool = new (storage) StringPool();
  return *pool;
}

// Whether a string of `len` bytes lives in the pool: whether glibc would
// map its malloc chunk (the string, its NUL and malloc's header, rounded
// up to 16 bytes), which 32 bytes of margin cover.
bool Pooled(size_t len) { return len + 32 >= kPooledStringBytes; }

// Whether a string of `len` bytes lives in its reply's own allocation,
// right after the struct: one malloc and one free per reply instead of two
// each. A 256-row sample of a record dict reads ~470 replies in one
// pipeline (234 GETRANGEs in MULTI: as many +QUEUED and rows of 276 bytes);
// with their strings apart, parsing them took 272,000 instructions a
// sample, 168,000 with the strings inside (callgrind). Longer strings keep
// an allocation of their own (or the pool's), so a reply struct never holds
// a window.
bool Inline(size_t len) { return len <= kInlineStringBytes; }

redisReply* NewReply(int type) {
  auto* r = static_cast<redisReply*>(std::calloc(1, sizeof(redisReply)));
  if (r != nullptr) r->type = type;
  return r;
}

// Hangs `r` in its parent array, where it has one. hiredis' reader calls
// the table's functions depth first: the parent array exists, with room
// for task->idx.
void* Link(const redisReadTask* task, redisReply* r) {
  if (task->parent != nullptr) {
    auto* parent = static_cast<redisReply*>(task->parent->obj);
    parent->element[task->idx] = r;
  }
  return r;
}

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  // A string, a status or an error. Null: hiredis reports "out of memory"
  // and the read fails.
  redisReply* r = NewStringReply(task->type, len);
  if (r == nullptr) return nullptr;
  std::memcpy(r->str, str, len);
  return Link(task, r);
}

void* CreateArray(const redisReadTask* task, int elements) {
  redisReply* r = NewArrayReply(elements > 0 ? static_cast<size_t>(elements) : 0);
  return r == nullptr ? nullptr : Link(task, r);
}

void* CreateInteger(const redisReadTask* task, long long value) {
  redisReply* r = NewIntegerReply(value);
  return r == nullptr ? nullptr : Link(task, r);
}

void* CreateNil(const redisReadTask* task) {
  redisReply* r = NewNilReply();
  return r == nullptr ? nullptr : Link(task, r);
}

redisReplyObjectFunctions kFunctions = {CreateString, CreateArray, CreateInteger, CreateNil,
                                        FreeReplyObject};

}  // namespace

redisReplyObjectFunctions* ReplyObjectFunctions() { return &kFunctions; }

redisReply* NewStringReply(int type, size_t len) {
  if (Inline(len)) {
    auto* r = static_cast<redisReply*>(std::malloc(sizeof(redisReply) + len + 1));
    if (r == nullptr) return nullptr;
    std::memset(r, 0, sizeof(redisReply));
    r->type = type;
    r->str = reinterpret_cast<char*>(r + 1);
    r->str[len] = '\0';
    r->len = len;
    return r;
  }
  redisReply* r = NewReply(type);
  if (r == nullptr) return nullptr;
  char* bytes = Pooled(len) ? Pool().Take(len + 1) : static_cast<char*>(std::malloc(len + 1));
  if (bytes == nullptr) {
    std::free(r);
    return nullptr;
  }
  bytes[len] = '\0';
  r->str = bytes;
  r->len = len;
  return r;
}

redisReply* NewArrayReply(size_t elements) {
  redisReply* r = NewReply(REDIS_REPLY_ARRAY);
  if (r == nullptr) return nullptr;
  if (elements > 0) {
    r->element = static_cast<redisReply**>(std::calloc(elements, sizeof(redisReply*)));
    if (r->element == nullptr) {
      std::free(r);
      return nullptr;
    }
    r->elements = elements;
  }
  return r;
}

redisReply* NewIntegerReply(long long value) {
  redisReply* r = NewReply(REDIS_REPLY_INTEGER);
  if (r != nullptr) r->integer = value;
  return r;
}

redisReply* NewNilReply() { return NewReply(REDIS_REPLY_NIL); }

void FreeReplyObject(void* reply) {
  auto* r = static_cast<redisReply*>(reply);
  if (r == nullptr) return;
  switch (r->type) {
    case REDIS_REPLY_ARRAY:
      for (size_t i = 0; i < r->elements; ++i) FreeReplyObject(r->element[i]);
      std::free(r->element);
      break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      // Where the bytes live follows from the length alone, fixed when
      // NewStringReply chose: in the reply itself, the pool, or malloc's.
      if (r->str != nullptr && !Inline(r->len)) {
        if (Pooled(r->len)) {
          Pool().Give(r->str);
        } else {
          std::free(r->str);
        }
      }
      break;
    default:
      break;
  }
  std::free(r);
}

size_t PoolKeptBytes() { return Pool().kept(); }

void ReleasePoolKept() { Pool().ReleaseKept(); }

}  // namespace tdstore::redis
