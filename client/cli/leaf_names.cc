#include "client/cli/leaf_names.h"

#include <vector>

#include "client/cli/args.h"
#include "common/path.h"

namespace tdstore::cli {

std::string JoinLeafName(const Key& path, char separator) {
  std::string name;
  for (const std::string& part : path.parts()) {
    if (!name.empty()) name += separator;
    for (char c : part) {
      if (c == separator || c == '\\') name += '\\';
      name += c;
    }
  }
  return name;
}

Key SplitLeafName(std::string_view name, char separator) {
  auto fail = [&](const std::string& what) -> void {
    throw CliError("tensor name '" + std::string(name) + "': " + what);
  };
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == separator) {
      if (parts.back().empty()) fail(std::string("empty path component (around '") + separator + "')");
      parts.emplace_back();
    } else if (c == '\\') {
      if (i + 1 == name.size() || (name[i + 1] != separator && name[i + 1] != '\\')) {
        fail(std::string("a backslash may only escape '") + separator + "' or '\\'");
      }
      parts.back() += name[++i];
    } else {
      parts.back() += c;
    }
  }
  if (parts.back().empty()) fail("empty path component");
  const absl::Status valid = ValidatePath(parts);
  if (!valid.ok()) fail(std::string(valid.message()));
  return Key(std::move(parts));
}

}  // namespace tdstore::cli
