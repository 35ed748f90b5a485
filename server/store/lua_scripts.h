// Bodies of the Lua scripts in server/lua/, embedded at build time by
// server/embed_lua.cmake (one constant per file, named after it).
#ifndef TDSTORE_SERVER_STORE_LUA_SCRIPTS_H_
#define TDSTORE_SERVER_STORE_LUA_SCRIPTS_H_

namespace tdstore::lua {
extern const char kCommitLeaves[];
extern const char kDeleteLeaves[];
extern const char kRenameDict[];
}  // namespace tdstore::lua

#endif  // TDSTORE_SERVER_STORE_LUA_SCRIPTS_H_
