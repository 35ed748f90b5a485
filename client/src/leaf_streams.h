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
void WriteLeaves(const Client::Impl& impl, const std::string& dict,
                 const std::vector<std::pair<Key, at::Tensor>>& leaves);

// Reads every leaf under `paths` (all of the dict when empty). A read that
// the server aborts because a leaf was replaced under it (ABORTED) is retried
// from the start, up to kReadRetries times.
//
// `exact_leaf`, when set, is the one path requested by Dict::get: a stream
// that carries anything else means the path is a nested dict, and the read
// stops at once with INVALID_ARGUMENT rather than download the whole subtree.
LocalDict ReadLeaves(const Client::Impl& impl, const std::string& dict,
                     const std::vector<Key>& paths, const Key* exact_leaf = nullptr);

inline constexpr int kReadRetries = 3;

}  // namespace tdstore

#endif  // TDSTORE_CLIENT_SRC_LEAF_STREAMS_H_
