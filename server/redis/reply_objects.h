// The reply objects tdstored's hiredis connections build.
//
// hiredis builds each reply through a table of functions
// (redisReplyObjectFunctions, set as a reader's `fn`). Connection installs
// this table on every context it opens: the objects are hiredis' own
// redisReply structs, so ReplyView reads them unchanged; only where a long
// string's bytes live differs.
//
// Why: hiredis' default table mallocs every string. tdstored fixes glibc's
// mmap threshold at 2 MiB (main.cc), so every string that long came from
// fresh pages and went back to the kernel when freed. A strided read's
// covering ranges (td[::3] of 5 leaves [10000, 64] f32: five 2.5 MiB
// strings per call) spent half of the call in page faults (perf; a shim
// that kept glibc's memory warm took the call from 14.2 to 7.1 ms). Strings
// of kPooledStringBytes or more come from a pool of kept mappings instead,
// warm after their first use.
//
// The pool keeps at most kPoolKeptBytes of freed strings mapped, process
// wide; a string freed beyond that is unmapped. Strings in use are the
// callers' and count against the memory budget as before (an indexed read
// leases its covering ranges); the kept ones are outside it, like malloc's
// own free memory.
//
// Thread safety: every function here may be called from any thread.
#ifndef TDSTORE_SERVER_REDIS_REPLY_OBJECTS_H_
#define TDSTORE_SERVER_REDIS_REPLY_OBJECTS_H_

#include <cstddef>

struct redisReply;
struct redisReplyObjectFunctions;

namespace tdstore::redis {

// Strings about this long or longer (within malloc's 32 bytes of chunk
// overhead) live in the pool: those glibc would map fresh, main.cc fixing
// its mmap threshold at this size. Shorter ones (a read
// window, 1 MiB) are malloc's, as with hiredis' default table, and warm in
// its heaps (main.cc's trim threshold). Pooling from 1 MiB was measured and
// dropped: a 2.5 MiB leaf's read over TCP was 1.23x slower (paired, 5
// rounds), its windows' copy into the socket (_copy_from_iter) twice as
// costly; why was not found.
inline constexpr size_t kPooledStringBytes = 2 << 20;
// What the pool keeps mapped at most, in freed strings waiting for reuse:
// a strided read's ranges of a few leaves.
inline constexpr size_t kPoolKeptBytes = 32 << 20;

// Strings this long or shorter live in their reply's own allocation,
// after the struct (reply_objects.cc says why).
inline constexpr size_t kInlineStringBytes = 4096;

// The table to install as a reader's `fn`. Static; never freed.
redisReplyObjectFunctions* ReplyObjectFunctions();

// The same objects, made one at a time (resp_reader.h builds its replies
// with these), each unlinked and freed by FreeReplyObject. Null when out
// of memory.
// A string, status or error reply (`type`) with room for `len` bytes,
// NUL-terminated, the bytes left for the caller to fill: in the reply's
// own allocation when short (kInlineStringBytes), from the pool when long,
// as the table's strings.
redisReply* NewStringReply(int type, size_t len);
// An array reply of `elements` null elements.
redisReply* NewArrayReply(size_t elements);
redisReply* NewIntegerReply(long long value);
redisReply* NewNilReply();

// Frees a reply built through ReplyObjectFunctions(), with its elements
// (an array may hold null elements: a reply cut short by a protocol error).
// Such a reply must never reach freeReplyObject: a pooled string is not
// malloc's. Null is allowed.
void FreeReplyObject(void* reply);

// The bytes the pool keeps mapped now for reuse (for tests and metrics).
size_t PoolKeptBytes();
// Unmaps every mapping the pool keeps; strings in use are not touched.
void ReleasePoolKept();

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_REPLY_OBJECTS_H_
