// The newest schema version of each dict that any call of this process has
// seen tdstored report: the floor below which no schema copy of it may be
// trusted (docs/protocol.md, "Causal schema reads").
//
// Why process-wide and not per Client: a program may open one dict through
// several Clients (two TensorDictStore objects, a DataLoader's dataset and
// the trainer's dict). Once a call through any of them has returned,
// whatever follows it in the program must not see an older schema through
// another. Floors are kept per daemon address and dict id: ids are only
// unique within one Redis, and two addresses may front two Redis servers.
// (Two daemons sharing one Redis are two addresses here: a change seen
// through one reaches the other's copies by their watch, a pub/sub hop
// later.)
//
// Thread-safe; a process forked from this one starts with the parent's
// floors and a lock of its own.
#ifndef TDSTORE_CLIENT_CORE_SRC_SCHEMA_FLOORS_H_
#define TDSTORE_CLIENT_CORE_SRC_SCHEMA_FLOORS_H_

#include <grpcpp/client_context.h>

#include <cstdint>
#include <string>

namespace tdstore::core {

// Raises the floor of the dict that `attempt`'s trailing metadata names
// (kSchemaVersionTrailer), if it names one. Call it after every finished
// attempt of a call on a dict, failed or not.
void RaiseSchemaFloor(const std::string& address, const grpc::ClientContext& attempt);

// The floor of dict `id` behind `address`: 0 if no call has reported one.
int64_t SchemaFloor(const std::string& address, const std::string& id);

}  // namespace tdstore::core

#endif  // TDSTORE_CLIENT_CORE_SRC_SCHEMA_FLOORS_H_
