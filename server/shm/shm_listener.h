// The unix socket on which same-host clients lend tdstored shared-memory
// regions (common/shm_protocol.h has the exchange). One thread serves every
// connection with poll(): it answers each registration at once and removes
// a region from the RegionTable when its connection closes, so a client
// that ends or is killed takes its region with it.
//
// The socket is SOCK_SEQPACKET (a registration is one message, its
// descriptor attached) and created mode 0660, as the gRPC unix socket: who
// may connect to tdstored may lend it memory. A region is refused, with a
// reason the client reads, when its descriptor is not a memfd sealed
// against shrinking, cannot be mapped for reading and writing, is empty, or
// would pass the table's --shm-max-bytes.
#ifndef TDSTORE_SERVER_SHM_SHM_LISTENER_H_
#define TDSTORE_SERVER_SHM_SHM_LISTENER_H_

#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/shm/region_table.h"

namespace tdstore::shm {

class ShmListener {
 public:
  // Binds `path` (replacing a socket file a previous run left) and starts
  // serving into `table`, which must outlive the listener.
  static absl::StatusOr<std::unique_ptr<ShmListener>> Start(const std::string& path,
                                                            RegionTable* table);
  // Stops the thread, closes every connection (their regions leave the
  // table) and removes the socket file.
  ~ShmListener();

  const std::string& path() const { return path_; }

 private:
  ShmListener(std::string path, RegionTable* table, int listen_fd, int wake_fd);
  void Serve();
  void Accept();
  // Serves the connection's message; false when it is to be closed.
  bool OnMessage(int fd);
  void Close(int fd);

  const std::string path_;
  RegionTable* const table_;
  const int listen_fd_;
  const int wake_fd_;  // an eventfd: written to stop Serve()
  // Open connections (the thread's own state) and the token each lent,
  // empty until it registered.
  std::map<int, std::string> connections_;
  std::thread thread_;
};

}  // namespace tdstore::shm

#endif  // TDSTORE_SERVER_SHM_SHM_LISTENER_H_
