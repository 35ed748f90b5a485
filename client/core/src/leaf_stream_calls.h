// The two streaming RPCs: WriteLeaves (caller's bytes -> chunks) and
// ReadLeaves (chunks -> the caller's ReadSink). Stream framing (one header
// per leaf, then its data in chunks of at most ClientOptions::chunk_bytes)
// lives here and only here on the client side.
#ifndef TDSTORE_CLIENT_CORE_SRC_LEAF_STREAM_CALLS_H_
#define TDSTORE_CLIENT_CORE_SRC_LEAF_STREAM_CALLS_H_

#include <string>
#include <vector>

#include "common/protocol_limits.h"
#include "client/core/src/client_impl.h"
#include "tdstore/core.h"

namespace tdstore::core {

// Dict::write_counted: the counter an indexed write counts its rows in.
struct CountAfter {
  std::string counter;
  int64_t add = 0;
};

// Dict::write (core.h): every leaf in one WriteLeaves stream, visible
// together when it ends, or none is. Retried on UNAVAILABLE within
// retry_for: writing the same values again leaves the same state. Returns
// tdstored's answer (the leaves written, the schema version after); an
// empty list makes no call and returns an empty answer. With `ring`
// (Dict::append_ring), the rows are the ring's instead of options.index,
// and the call is repeated only if tdstored says it changed nothing; so is
// it with `count` (Dict::write_counted: WriteBegin.count_after).
v1::WriteLeavesResponse WriteLeaves(const Client::Impl& impl, const std::string& dict,
                                    const std::string& dict_id,
                                    const std::vector<LeafData>& leaves,
                                    const WriteOptions& options,
                                    const RingAppend* ring = nullptr,
                                    const CountAfter* count = nullptr);

// Dict::read (core.h). `expected_bytes`: what the reply is expected to
// carry (from the schema copy, for a whole read or rows by one index
// term; -1: not known). A reply expected not to fit
// the reply span crosses through a ring of its slots (ReadLeavesShared)
// where tdstored takes one; any other read, whatever its size, is served
// by ReadLeaves, through the span when it fits and the socket otherwise.
void ReadLeaves(const Client::Impl& impl, const std::string& dict, const std::string& dict_id,
                const std::vector<Key>& paths, ReadSink& sink, const ReadOptions& options,
                int64_t expected_bytes = -1);

// The largest request or first stream message the client sends
// (common/protocol_limits.h): an index with more positions than fit is
// refused before any call, with INVALID_ARGUMENT, instead of failing inside
// gRPC.
inline constexpr int64_t kMaxRequestBytes = kMaxMessageBytes;

inline constexpr int kReadRetries = 3;

}  // namespace tdstore::core

#endif  // TDSTORE_CLIENT_CORE_SRC_LEAF_STREAM_CALLS_H_
