// Bodies of the Lua scripts in server/lua/, embedded at build time by
// server/embed_lua.cmake (one constant per file, named after it), and the
// Script objects (with their SHA1) built from them once.
#ifndef TDSTORE_SERVER_REDIS_STORE_LUA_SCRIPTS_H_
#define TDSTORE_SERVER_REDIS_STORE_LUA_SCRIPTS_H_

#include "absl/status/status.h"
#include "server/redis/redis_client.h"
#include "server/redis/script.h"

namespace tdstore::lua {
extern const char kBeginWrite[];
extern const char kClaimGenerations[];
extern const char kClaimPending[];
extern const char kCommitLeaves[];
extern const char kCounter[];
extern const char kDeleteLeaves[];
extern const char kGuardRuns[];
extern const char kMarkDeleting[];
extern const char kReleaseRuns[];
extern const char kRenameDict[];
extern const char kRenameLeaves[];
extern const char kPublishDict[];
extern const char kReserveBytes[];
extern const char kReserveRing[];
extern const char kResizeDict[];
extern const char kSetLocked[];
extern const char kSetMetaName[];
extern const char kSizeParts[];
extern const char kTouchPending[];
extern const char kUnpublishDict[];
extern const char kUpdateAttrs[];
extern const char kWriteAtOnce[];
extern const char kWriteRuns[];
}  // namespace tdstore::lua

namespace tdstore::store {

// The scripts, built on first use. Thread-safe.
struct Scripts {
  redis::Script begin_write;
  // Sent with EVAL inside a MULTI, with write_at_once (below).
  redis::Script claim_generations;
  redis::Script claim_pending;
  redis::Script commit_leaves;
  redis::Script counter;
  redis::Script delete_leaves;
  // guard_runs and release_runs are sent with EVAL, their whole body, inside
  // a MULTI (indexed_io.cc): an EVALSHA there could meet NOSCRIPT with the
  // block's SETRANGEs queued behind it. Never preloaded.
  redis::Script guard_runs;
  redis::Script mark_deleting;
  redis::Script publish_dict;
  redis::Script release_runs;
  redis::Script rename_dict;
  redis::Script rename_leaves;
  redis::Script reserve_bytes;
  redis::Script reserve_ring;
  redis::Script resize_dict;
  redis::Script set_locked;
  redis::Script set_meta_name;
  redis::Script size_parts;
  redis::Script touch_pending;
  redis::Script unpublish_dict;
  redis::Script update_attrs;
  // Sent with EVAL inside a MULTI, as guard_runs is (leaf_writer.cc's
  // at-once path). Never preloaded.
  redis::Script write_at_once;
  redis::Script write_runs;
};
const Scripts& GetScripts();

// SCRIPT LOADs every script on every master behind `redis`, so the first calls
// need no NOSCRIPT round trip. Calls still recover from NOSCRIPT (a restarted
// or flushed Redis) by loading again, so failing here is not fatal.
absl::Status PreloadScripts(redis::RedisClient& redis);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_LUA_SCRIPTS_H_
