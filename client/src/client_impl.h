// Client::Impl: the state every copy of a Client and every Dict it opened
// share — one gRPC channel and stub, the address and the options.
#ifndef TDSTORE_CLIENT_SRC_CLIENT_IMPL_H_
#define TDSTORE_CLIENT_SRC_CLIENT_IMPL_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <memory>
#include <string>

#include "tdstore/client.h"
#include "tdstore/v1/tdstore.grpc.pb.h"

namespace tdstore {

struct Client::Impl {
  Impl(std::string address, ClientOptions options);

  // Sets the call's deadline: now + options.timeout.
  void Prepare(grpc::ClientContext* context) const;
  // Throws the tdstore::Error for a failed call.
  [[noreturn]] void Fail(const grpc::Status& status) const;
  // Prepare + unary call + Fail on error: the shape of most RPCs.
  template <typename Request, typename Response>
  void Call(grpc::Status (v1::TdStore::Stub::*method)(grpc::ClientContext*, const Request&,
                                                       Response*),
            const Request& request, Response* response) const {
    grpc::ClientContext context;
    Prepare(&context);
    grpc::Status status = (stub.get()->*method)(&context, request, response);
    if (!status.ok()) Fail(status);
  }

  const std::string address;
  const ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::TdStore::Stub> stub;
};

}  // namespace tdstore

#endif  // TDSTORE_CLIENT_SRC_CLIENT_IMPL_H_
