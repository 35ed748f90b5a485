// The gRPC metadata keys of the wire contract (docs/protocol.md), for the
// daemon and every client alike. Pure constants; no I/O.
#ifndef TDSTORE_COMMON_PROTOCOL_METADATA_H_
#define TDSTORE_COMMON_PROTOCOL_METADATA_H_

namespace tdstore {

// Trailing metadata of a failed call that changed nothing, so any client
// may retry it as it is (docs/protocol.md, "Retries"). Its one value.
inline constexpr char kAppliedTrailer[] = "tdstore-applied";
inline constexpr char kAppliedNone[] = "none";

// Trailing metadata of every call on a dict, failed or not:
// "<dict id>:<schema version>", a version read at or after the moment the
// call took effect (docs/protocol.md, "Causal schema reads"). A client
// trusts no copy of that dict's schema older than it.
inline constexpr char kSchemaVersionTrailer[] = "tdstore-schema-version";

}  // namespace tdstore

#endif  // TDSTORE_COMMON_PROTOCOL_METADATA_H_
