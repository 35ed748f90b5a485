// The same-host data path's registration, as both ends speak it
// (docs/protocol.md, "Same-host data path"). Pure constants; no I/O.
//
// A client on tdstored's host lends it a shared-memory region: it connects
// to the unix socket ServerInfo.shm_socket names and sends one message,
// kShmHello, with the region's file descriptor attached (SCM_RIGHTS). The
// descriptor must be a memfd sealed against shrinking (F_SEAL_SHRINK), so
// that no later ftruncate can pull pages out from under tdstored's mapping.
// tdstored answers one message: kShmAccepted and the region's token
// (kShmTokenBytes), or kShmRefused and a UTF-8 reason. The region stays
// lent while that connection is open: when it closes (the client ends or is
// killed), tdstored forgets the token and unmaps the region once no call
// still uses it.
#ifndef TDSTORE_COMMON_SHM_PROTOCOL_H_
#define TDSTORE_COMMON_SHM_PROTOCOL_H_

#include <cstddef>
#include <cstdint>

namespace tdstore {

inline constexpr char kShmHello[] = "tdstore-shm/1";  // sent without its NUL
inline constexpr size_t kShmHelloBytes = sizeof(kShmHello) - 1;
inline constexpr char kShmAccepted = 'A';
inline constexpr char kShmRefused = 'R';
inline constexpr size_t kShmTokenBytes = 16;
// The longest answer: a refusal's reason is cut to fit.
inline constexpr size_t kShmMaxAnswerBytes = 512;
// The trailing metadata of a call that named a region tdstored does not
// hold (FAILED_PRECONDITION, nothing applied): the client lends a new one,
// or sends the call's bytes over the socket.
inline constexpr char kShmMetadataKey[] = "tdstore-shm";
inline constexpr char kShmUnknownRegion[] = "unknown-region";

}  // namespace tdstore

#endif  // TDSTORE_COMMON_SHM_PROTOCOL_H_
