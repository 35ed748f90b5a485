// Bytes handed on together with what keeps them alive, so the next layer
// may keep them past the call (a gRPC frame sends a Redis reply's bytes
// without copying them: tdstore/v1/data_frames.h).
#ifndef TDSTORE_SERVER_STORE_SHARED_BYTES_H_
#define TDSTORE_SERVER_STORE_SHARED_BYTES_H_

#include <memory>
#include <string>
#include <string_view>

namespace tdstore::store {

struct SharedBytes {
  // Valid as long as `owner` (or a copy of it) is held.
  std::string_view bytes;
  std::shared_ptr<const void> owner;
};

// Takes `bytes` over: no copy.
inline SharedBytes ShareString(std::string bytes) {
  auto owned = std::make_shared<const std::string>(std::move(bytes));
  return {*owned, owned};
}

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_STORE_SHARED_BYTES_H_
