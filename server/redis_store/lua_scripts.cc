#include "server/redis_store/lua_scripts.h"

#include <string>

namespace tdstore::store {

const Scripts& GetScripts() {
  // Built once (thread-safe static init); hashing happens here, not per call.
  static const Scripts* scripts = new Scripts{
      redis::Script("begin_write", lua::kBeginWrite),
      redis::Script("claim_generations", lua::kClaimGenerations),
      redis::Script("claim_pending", lua::kClaimPending),
      redis::Script("commit_leaves", lua::kCommitLeaves),
      redis::Script("counter", lua::kCounter),
      redis::Script("delete_leaves", lua::kDeleteLeaves),
      redis::Script("guard_runs", lua::kGuardRuns),
      redis::Script("mark_deleting", lua::kMarkDeleting),
      redis::Script("publish_dict", lua::kPublishDict),
      redis::Script("release_runs", lua::kReleaseRuns),
      redis::Script("rename_dict", lua::kRenameDict),
      redis::Script("rename_leaves", lua::kRenameLeaves),
      redis::Script("reserve_bytes", lua::kReserveBytes),
      redis::Script("reserve_ring", lua::kReserveRing),
      redis::Script("resize_dict", lua::kResizeDict),
      redis::Script("set_locked", lua::kSetLocked),
      redis::Script("set_meta_name", lua::kSetMetaName),
      redis::Script("size_parts", lua::kSizeParts),
      redis::Script("touch_pending", lua::kTouchPending),
      redis::Script("unpublish_dict", lua::kUnpublishDict),
      redis::Script("update_attrs", lua::kUpdateAttrs),
      redis::Script("write_at_once", lua::kWriteAtOnce),
      redis::Script("write_runs", lua::kWriteRuns),
  };
  return *scripts;
}

absl::Status PreloadScripts(redis::RedisClient& redis) {
  const Scripts& s = GetScripts();
  for (const redis::Script* script :
       {&s.begin_write, &s.claim_pending, &s.commit_leaves, &s.counter, &s.delete_leaves,
        &s.mark_deleting, &s.publish_dict, &s.rename_dict, &s.rename_leaves, &s.reserve_bytes, &s.reserve_ring,
        &s.resize_dict, &s.set_locked, &s.set_meta_name, &s.size_parts, &s.touch_pending,
        &s.unpublish_dict, &s.update_attrs, &s.write_runs}) {
    auto replies = redis.CallOnEveryMaster({"SCRIPT", "LOAD", script->body()});
    if (!replies.ok()) return replies.status();
    for (const redis::Reply& reply : *replies) {
      if (reply.is_error()) {
        return absl::InternalError("SCRIPT LOAD " + script->name() + ": " +
                                   std::string(reply.str()));
      }
      if (reply.str() != script->sha1()) {
        return absl::InternalError("SCRIPT LOAD " + script->name() +
                                   " returned an unexpected SHA1");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tdstore::store
