#include "server/store/lua_scripts.h"

namespace tdstore::store {

const Scripts& GetScripts() {
  // Built once (thread-safe static init); hashing happens here, not per call.
  static const Scripts* scripts = new Scripts{
      redis::Script("begin_write", lua::kBeginWrite),
      redis::Script("claim_pending", lua::kClaimPending),
      redis::Script("commit_leaves", lua::kCommitLeaves),
      redis::Script("delete_leaves", lua::kDeleteLeaves),
      redis::Script("read_runs", lua::kReadRuns),
      redis::Script("rename_dict", lua::kRenameDict),
      redis::Script("touch_pending", lua::kTouchPending),
      redis::Script("write_runs", lua::kWriteRuns),
  };
  return *scripts;
}

}  // namespace tdstore::store
