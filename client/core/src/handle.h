// Dict handles: "tdstore1|<address>|<name>|<id>".
//
// Everything another process needs to open the same dict: where the daemon
// is, the dict's name, and its id, which tells a dict deleted and created
// again under the same name from the original. Dict names and ids cannot
// contain '|'; an address may (a unix socket path), so parsing takes the name
// and id from the right.
#ifndef TDSTORE_CLIENT_CORE_SRC_HANDLE_H_
#define TDSTORE_CLIENT_CORE_SRC_HANDLE_H_

#include <string>

namespace tdstore {

struct DictHandle {
  std::string address;
  std::string name;
  std::string id;
};

std::string FormatHandle(const DictHandle& handle);
// Error(INVALID_ARGUMENT) for a string FormatHandle cannot have produced.
DictHandle ParseHandle(const std::string& text);

}  // namespace tdstore

#endif  // TDSTORE_CLIENT_CORE_SRC_HANDLE_H_
