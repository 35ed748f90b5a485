// The limits the wire contract itself sets (proto/tdstore/v1/tdstore.proto,
// docs/protocol.md "Limits"), for the daemon and every client alike. The
// daemon's own, tunable limits are server/service/service_limits.h.
//
// Pure constants; no I/O.
#ifndef TDSTORE_COMMON_PROTOCOL_LIMITS_H_
#define TDSTORE_COMMON_PROTOCOL_LIMITS_H_

#include <cstdint>

namespace tdstore {

// The most data bytes one stream message (WriteChunk / ReadChunk) carries.
inline constexpr int64_t kMaxChunkBytes = int64_t{1} << 20;
// A stream whose leaves add up to at most this many bytes may travel as one
// message (SmallWrite / SmallRead): a small call's header and data together.
inline constexpr int64_t kMaxSmallStreamBytes = int64_t{64} << 10;
// ...and tdstored sends a read that way only up to this many leaves, so that
// their headers (paths of up to 1 KiB) keep the message far below
// kMaxMessageBytes.
inline constexpr int64_t kMaxSmallReadLeaves = 256;
// A dict's attributes (DictInfo.attrs): at most kMaxAttrs names of
// 1..kMaxAttrNameBytes bytes, each value at most kMaxAttrValueBytes. All of
// them together stay near 1 MiB, well inside a describe reply.
inline constexpr int kMaxAttrs = 256;
inline constexpr int kMaxAttrNameBytes = 256;
inline constexpr int kMaxAttrValueBytes = 4096;
// A dict's counters (CounterRequest): at most this many names (of
// 1..kMaxAttrNameBytes bytes each).
inline constexpr int kMaxCounters = 1024;
// The largest message either side sends: no request or reply exceeds it,
// whatever the tensor size (bulk data streams in chunks instead).
inline constexpr int64_t kMaxMessageBytes = int64_t{4} << 20;
// What gRPC is told to accept: the largest message plus room for framing
// fields around a full chunk.
inline constexpr int kMaxReceiveMessageBytes = static_cast<int>(kMaxMessageBytes + (64 << 10));

}  // namespace tdstore

#endif  // TDSTORE_COMMON_PROTOCOL_LIMITS_H_
