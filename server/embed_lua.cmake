# Writes OUT: a C++ file defining one string constant per LUA_DIR/*.lua,
# tdstore::lua::k<Name> where <Name> is the file name in CamelCase
# (commit_leaves.lua -> kCommitLeaves). Run with cmake -P.
#
# A script line '--@include NAME.lua' is replaced by LUA_DIR/lib/NAME.lua,
# so a helper several scripts need (lib/park.lua) is written once. Redis
# runs each script as one self-contained body, so the helper is pasted in
# rather than loaded.
file(GLOB files ${LUA_DIR}/*.lua)
list(SORT files)
set(body "// Generated from server/lua/*.lua by server/embed_lua.cmake. Do not edit.\n")
string(APPEND body "#include \"server/redis_store/lua_scripts.h\"\n\nnamespace tdstore::lua {\n")
foreach(f ${files})
  get_filename_component(stem ${f} NAME_WE)
  string(REPLACE "_" ";" words ${stem})
  set(name "k")
  foreach(w ${words})
    string(SUBSTRING ${w} 0 1 first)
    string(TOUPPER ${first} first)
    string(SUBSTRING ${w} 1 -1 rest)
    string(APPEND name "${first}${rest}")
  endforeach()
  file(READ ${f} text)
  string(REGEX MATCHALL "--@include [a-z_]+\\.lua\n" includes "${text}")
  foreach(line ${includes})
    string(REGEX REPLACE "--@include ([a-z_]+\\.lua)\n" "\\1" lib "${line}")
    if(NOT EXISTS ${LUA_DIR}/lib/${lib})
      message(FATAL_ERROR "${f}: '--@include ${lib}': no ${LUA_DIR}/lib/${lib}")
    endif()
    file(READ ${LUA_DIR}/lib/${lib} helper)
    string(REPLACE "${line}" "${helper}" text "${text}")
  endforeach()
  # A misspelt marker would otherwise be a comment, and the helper missing
  # from the script would only show when Redis runs it.
  if(text MATCHES "--@")
    message(FATAL_ERROR "${f}: a '--@' line that is not '--@include NAME.lua'")
  endif()
  # What Redis is sent: no comment lines and no indentation. Why: a script
  # run inside MULTI is sent whole (EVAL) and hashed by Redis twice, as it
  # is queued and as EXEC runs it; write_at_once.lua and its helper were
  # 9.7 KB, two thirds of it comments. Every newline stays, so a Lua error
  # names the line it named before. Safe because no script
  # has a string or comment spanning lines ([[...]], [=[...]=], a trailing
  # backslash); the check below keeps it so.
  if(text MATCHES "\\[=*\\[" OR text MATCHES "\\\\\n")
    message(FATAL_ERROR "${f}: a string spanning lines; embed_lua.cmake strips comment lines")
  endif()
  string(PREPEND text "\n")
  string(REGEX REPLACE "\n[ \t]*--[^\n]*" "\n" text "${text}")
  string(REGEX REPLACE "\n[ \t]+" "\n" text "${text}")
  string(SUBSTRING "${text}" 1 -1 text)
  string(APPEND body "const char ${name}[] = R\"tdlua(${text})tdlua\";\n")
endforeach()
string(APPEND body "}  // namespace tdstore::lua\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
