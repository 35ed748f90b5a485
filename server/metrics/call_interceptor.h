// A gRPC server interceptor that watches every call tdstored serves: it
// times it, adds up the message bytes each way, takes the status code it
// ends with, and then
//   - hands that CallRecord to a CallObserver (the Prometheus metrics), and
//   - at debug log level, writes one log line per call:
//       call tdstore.v1.TdStore/CreateDict peer=ipv4:127.0.0.1:39502 code=OK
//            ms=1.234 bytes_in=25 bytes_out=61
//     (plus error="..." with the status message when the code is not OK).
// It never reads metadata: the `authorization` header carries a bearer
// token, and nothing of it may reach a log or a metric.
//
// The service handlers stay unaware of all this.
//
//   std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> v;
//   v.push_back(std::make_unique<CallInterceptorFactory>(
//       metrics, std::vector<std::string>{"tdstore.v1.TdStore"}));
//   builder.experimental().SetInterceptorCreators(std::move(v));   // the builder owns it
//
// Bytes are the serialized protobuf message sizes (gRPC's 5-byte message
// framing and HTTP/2 headers excluded), counted only for the services named
// at construction: their messages are known to be protobuf messages. Other
// services (gRPC health checking, which uses raw byte buffers, and server
// reflection) get calls, codes and latency but 0 bytes.
//
// Threads: gRPC creates one interceptor per call and runs it on the call's
// threads; the observer is called from many threads at once.
#ifndef TDSTORE_SERVER_METRICS_CALL_INTERCEPTOR_H_
#define TDSTORE_SERVER_METRICS_CALL_INTERCEPTOR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grpcpp/support/server_interceptor.h"
#include "grpcpp/support/status.h"

namespace tdstore::metrics {

// One finished call.
struct CallRecord {
  std::string_view method;  // "tdstore.v1.TdStore/CreateDict" (no leading '/')
  grpc::StatusCode code = grpc::StatusCode::OK;
  double seconds = 0;          // from the call's arrival to its status
  int64_t bytes_received = 0;  // request messages, serialized
  int64_t bytes_sent = 0;      // response messages, serialized
};

class CallObserver {
 public:
  virtual ~CallObserver() = default;
  // Once per call, when its status is about to be sent. Thread-safe.
  virtual void OnCallDone(const CallRecord& call) = 0;
};

// "OK", "NOT_FOUND", ... as in gRPC's documentation; "UNKNOWN_CODE" for a
// value outside the enum.
const char* StatusCodeName(grpc::StatusCode code);

class CallInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // observer: may be null (log lines only); not owned, must outlive the
  // server. byte_counted_services: full service names ("pkg.Service") whose
  // message bytes are counted. raw_methods: methods of those ("pkg.Service/
  // Method") registered raw, whose requests reach the server as
  // grpc::ByteBuffers, not as protobuf messages.
  CallInterceptorFactory(CallObserver* observer, std::vector<std::string> byte_counted_services,
                         std::vector<std::string> raw_methods = {});

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  CallObserver* const observer_;
  const std::vector<std::string> byte_counted_services_;
  const std::vector<std::string> raw_methods_;
};

}  // namespace tdstore::metrics

#endif  // TDSTORE_SERVER_METRICS_CALL_INTERCEPTOR_H_
