// The revision of the wire contract (proto/tdstore/v1/tdstore.proto) that
// this build implements, and what it does beyond revision 1, by name: what
// GetServerInfo reports (docs/protocol.md, "Compatibility"). Pure
// constants; no I/O.
//
// Revisions: 1, the first tdstore.v1; 2, SmallWrite and SmallRead (sent to
// every client: the bug revision 3 fixed); 3, optional frames only for a
// client that accepts them (ReadLeavesRequest.accepts), the schema-version
// trailer, and ServerInfo's revision and capabilities; 4, the same-host
// data path (ShmSpan; capability "shared_memory", reported only by a
// tdstored that offers it, with ServerInfo.shm_socket) and counted
// indexed writes (WriteBegin.count_after); 5, WriteLeavesShared and its
// shm_data chunks (capability "shared_memory_chunks", reported with
// "shared_memory"); 6, ReadLeavesShared and ReadChunk.shm_data (capability
// "shared_memory_read_chunks", reported with "shared_memory"); 7,
// shm_data chunks on WriteLeaves, lent to the call's end (capability
// "shared_memory_lent_chunks", reported with "shared_memory").
#ifndef TDSTORE_COMMON_PROTOCOL_REVISION_H_
#define TDSTORE_COMMON_PROTOCOL_REVISION_H_

namespace tdstore {

inline constexpr int kProtocolRevision = 7;

inline constexpr const char* kServerCapabilities[] = {
    "small_write",             // takes WriteChunk.small
    "small_read",              // sends ReadChunk.small to a client accepting FRAME_SMALL_READ
    "schema_version_trailer",  // trailing metadata tdstore-schema-version
    "ring_append",             // WriteBegin.ring
    "record_layout",           // DICT_LAYOUT_RECORD
    "count_after",             // WriteBegin.count_after
};
// Reported beside kServerCapabilities when tdstored has a shared-memory
// socket.
inline constexpr const char* kSharedMemoryCapability = "shared_memory";
inline constexpr const char* kSharedMemoryChunksCapability = "shared_memory_chunks";
inline constexpr const char* kSharedMemoryReadChunksCapability = "shared_memory_read_chunks";
inline constexpr const char* kSharedMemoryLentChunksCapability = "shared_memory_lent_chunks";
// Also reported beside "shared_memory" unless tdstored runs with
// --shm-clients unix: a client that reaches it over loopback TCP may lend
// too. No new revision: a tdstored without it (older, or unix-only) is
// lent to only through its unix socket, as before.
inline constexpr const char* kSharedMemoryLoopbackCapability = "shared_memory_loopback";

}  // namespace tdstore

#endif  // TDSTORE_COMMON_PROTOCOL_REVISION_H_
