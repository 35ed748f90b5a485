// The Lua scripts as embedded: a helper of server/lua/lib/ is written once
// and pasted by the build (server/embed_lua.cmake), so no script carries a
// copy of its own, and none is left with an unexpanded include line.
#include "server/redis_store/lua_scripts.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tdstore {
namespace {

int Count(std::string_view text, std::string_view what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

TEST(LuaScripts, ParkingIsWrittenOnceInLibParkLua) {
  const std::vector<std::pair<std::string, std::string_view>> scripts = {
      {"begin_write", lua::kBeginWrite},       {"claim_pending", lua::kClaimPending},
      {"commit_leaves", lua::kCommitLeaves},   {"counter", lua::kCounter},
      {"delete_leaves", lua::kDeleteLeaves},   {"mark_deleting", lua::kMarkDeleting},
      {"publish_dict", lua::kPublishDict},     {"rename_dict", lua::kRenameDict},
      {"rename_leaves", lua::kRenameLeaves},   {"reserve_bytes", lua::kReserveBytes},
      {"reserve_ring", lua::kReserveRing},     {"resize_dict", lua::kResizeDict},
      {"set_locked", lua::kSetLocked},         {"set_meta_name", lua::kSetMetaName},
      {"size_parts", lua::kSizeParts},         {"touch_pending", lua::kTouchPending},
      {"unpublish_dict", lua::kUnpublishDict}, {"update_attrs", lua::kUpdateAttrs},
      {"write_runs", lua::kWriteRuns},
  };
  for (const auto& [name, text] : scripts) {
    SCOPED_TRACE(name);
    EXPECT_EQ(Count(text, "--@"), 0);  // every include was expanded
    const bool parks = name == "commit_leaves" || name == "delete_leaves" ||
                       name == "rename_leaves";
    // The helper once, and the pending entry's "expires_ms=0;" written
    // nowhere else: a script that parks calls park() or park_expired().
    EXPECT_EQ(Count(text, "local function park("), parks ? 1 : 0);
    EXPECT_EQ(Count(text, "local function park_expired("), parks ? 1 : 0);
    EXPECT_EQ(Count(text, "'expires_ms=0;'"), parks ? 1 : 0);
  }
}

}  // namespace
}  // namespace tdstore
