// The two streaming RPCs: WriteLeaves (tensors -> chunks) and ReadLeaves
// (chunks -> tensors).
#ifndef TDSTORE_CLIENT_SRC_LEAF_STREAMS_H_
#define TDSTORE_CLIENT_SRC_LEAF_STREAMS_H_

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "client/src/client_impl.h"
#include "tdstore/client.h"

namespace tdstore {

// Sends every leaf in one WriteLeaves stream: they become visible together
// when it ends, or none does. Tensors of any device and layout are sent as
// contiguous CPU bytes.
//
// With `index`: an indexed write, td[index] = value for each leaf; each
// header carries the value's own shape (the server broadcasts it).
void WriteLeaves(const Client::Impl& impl, const std::string& dict,
                 const std::vector<std::pair<Key, at::Tensor>>& leaves,
                 const v1::Index* index = nullptr);

// Reads every leaf under `paths` (all of the dict when empty). A read that
// the server aborts because a leaf was replaced under it (ABORTED) is retried
// from the start: kReadRetries times at once, then with backoff while
// ClientOptions::retry_for lasts.
//
// `exact_leaf`, when set, is the one path requested by Dict::get: a stream
// that carries anything else means the path is a nested dict, and the read
// stops at once with INVALID_ARGUMENT rather than download the whole subtree.
//
// With `index`: an indexed read, each leaf at the indexed batch shape (which
// the result's batch_size holds).
LocalDict ReadLeaves(const Client::Impl& impl, const std::string& dict,
                     const std::vector<Key>& paths, const Key* exact_leaf = nullptr,
                     const v1::Index* index = nullptr);

// The largest request or first stream message the client sends: an index
// with more positions than fit is refused before any call, with
// INVALID_ARGUMENT, instead of failing inside gRPC.
inline constexpr int64_t kMaxRequestBytes = 4 << 20;

inline constexpr int kReadRetries = 3;

}  // namespace tdstore

#endif  // TDSTORE_CLIENT_SRC_LEAF_STREAMS_H_
