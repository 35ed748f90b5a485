#include "client/core/src/handle.h"

#include "tdstore/core.h"

namespace tdstore {
namespace {

// The version prefix lets a later format coexist with this one.
constexpr char kPrefix[] = "tdstore1|";

[[noreturn]] void Malformed(const std::string& text, const std::string& why) {
  throw Error(StatusCode::kInvalidArgument,
              "malformed dict handle '" + text + "': " + why +
                  " (expected tdstore1|<address>|<name>|<id>)");
}

}  // namespace

std::string FormatHandle(const DictHandle& handle) {
  return kPrefix + handle.address + "|" + handle.name + "|" + handle.id;
}

DictHandle ParseHandle(const std::string& text) {
  const std::string prefix = kPrefix;
  if (text.compare(0, prefix.size(), prefix) != 0) Malformed(text, "unknown prefix");
  const size_t id_sep = text.rfind('|');
  const size_t name_sep = id_sep == std::string::npos || id_sep == 0
                              ? std::string::npos
                              : text.rfind('|', id_sep - 1);
  if (name_sep == std::string::npos || name_sep < prefix.size()) {
    Malformed(text, "missing fields");
  }
  DictHandle handle;
  handle.address = text.substr(prefix.size(), name_sep - prefix.size());
  handle.name = text.substr(name_sep + 1, id_sep - name_sep - 1);
  handle.id = text.substr(id_sep + 1);
  if (handle.address.empty()) Malformed(text, "empty address");
  if (handle.name.empty()) Malformed(text, "empty dict name");
  if (handle.id.empty()) Malformed(text, "empty dict id");
  return handle;
}

}  // namespace tdstore
