// Limits the gRPC front end enforces on every call, so that no client —
// buggy, slow or hostile — can make tdstored hold unbounded memory, threads
// or Redis keys. Each one is a tdstored setting (daemon_config.h), whose
// default is written only here: tdstored --help reads it back.
//
// What a client sees when it crosses one (docs/protocol.md, "Limits"):
//   - RESOURCE_EXHAUSTED for amounts: bytes per call, index length, leaves
//     per call, concurrent streams;
//   - INVALID_ARGUMENT for malformed sizes: name and path lengths;
//   - CANCELLED for a stream idle longer than idle_stream_timeout.
// A call rejected by a limit writes nothing. The limits the store enforces
// itself (dicts per namespace, bytes per indexed call, quotas) are its own
// options (server/store/store_options.h), not repeated here.
#ifndef TDSTORE_SERVER_SERVICE_SERVICE_LIMITS_H_
#define TDSTORE_SERVER_SERVICE_SERVICE_LIMITS_H_

#include <chrono>
#include <cstdint>

namespace tdstore::service {

struct ServiceLimits {
  // Data bytes one WriteLeaves or ReadLeaves call may move (summed over its
  // leaves). Whole-leaf transfers stream, so this is a policy limit, not a
  // memory one; indexed calls are further bounded by the store's
  // max_indexed_bytes because they gather their selection in memory.
  int64_t max_call_bytes = 64ll << 30;
  // Positions one call's index may carry: the elements of all its int
  // tensors and bool masks, plus one per int/slice/ellipsis item.
  int64_t max_index_length = 1 << 24;
  // Leaves (paths) one call may name or carry: reads, writes, deletes and a
  // CreateDict schema.
  int max_leaves_per_call = 4096;
  // WriteLeaves + ReadLeaves calls in progress at once; the next one is
  // refused at once rather than queued, so a flood of stalled streams cannot
  // pin every thread.
  int max_concurrent_streams = 64;
  // Bytes of a dict name (at most common/path.h's kMaxDictNameBytes).
  int max_name_bytes = 128;
  // Bytes of a leaf path, encoded as "a/b/c" (common/path.h).
  int max_path_bytes = 1024;
  // A stream that makes no progress (no message received or sent) for this
  // long is cancelled and, for writes, rolled back.
  std::chrono::milliseconds idle_stream_timeout{60000};
};

}  // namespace tdstore::service

#endif  // TDSTORE_SERVER_SERVICE_SERVICE_LIMITS_H_
