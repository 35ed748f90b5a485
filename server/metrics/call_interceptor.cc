#include "server/metrics/call_interceptor.h"

#include <chrono>
#include <cstdio>
#include <utility>

#include "google/protobuf/message_lite.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/log.h"

namespace tdstore::metrics {
namespace {

using grpc::experimental::InterceptionHookPoints;
using Clock = std::chrono::steady_clock;

// One per call. gRPC calls Intercept at each hook point of the call, one
// batch at a time, and deletes the interceptor when the call is over.
class CallInterceptor : public grpc::experimental::Interceptor {
 public:
  CallInterceptor(grpc::experimental::ServerRpcInfo* info, CallObserver* observer, bool count_bytes,
                  bool raw)
      : info_(info),
        observer_(observer),
        count_bytes_(count_bytes),
        raw_(raw),
        start_(Clock::now()),
        method_(info->method() != nullptr ? info->method() : "") {
    if (!method_.empty() && method_.front() == '/') method_.erase(0, 1);
  }

  ~CallInterceptor() override {
    // No status was sent (the call was torn down first): it still happened.
    if (!done_) Finish(grpc::Status(grpc::StatusCode::CANCELLED, "no status sent"));
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    // The peer, for the debug line, while the call is surely alive (not in
    // the destructor, which may run as the server context is torn down).
    if (!peer_known_ && LogEnabled(LogLevel::kDebug) && info_->server_context() != nullptr) {
      peer_ = info_->server_context()->peer();
      peer_known_ = true;
    }
    if (count_bytes_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      // A service named as byte-counted has protobuf messages: the pointer
      // is the generated message, whose MessageLite base sits at offset 0;
      // or, for a method registered raw, the ByteBuffer it came in. Null
      // when the client half-closed instead of sending a message.
      if (const void* m = methods->GetRecvMessage(); m != nullptr) {
        bytes_received_ += static_cast<int64_t>(
            raw_ ? static_cast<const grpc::ByteBuffer*>(m)->Length()
                 : static_cast<const google::protobuf::MessageLite*>(m)->ByteSizeLong());
      }
    }
    if (count_bytes_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      // The serialized form: gRPC serializes each message exactly once,
      // here instead of a moment later, so asking costs no extra work.
      if (grpc::ByteBuffer* b = methods->GetSerializedSendMessage(); b != nullptr) {
        bytes_sent_ += static_cast<int64_t>(b->Length());
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      Finish(methods->GetSendStatus());
    }
    methods->Proceed();
  }

 private:
  void Finish(const grpc::Status& status) {
    done_ = true;
    CallRecord call;
    call.method = method_;
    call.code = status.error_code();
    call.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    call.bytes_received = bytes_received_;
    call.bytes_sent = bytes_sent_;
    if (observer_ != nullptr) observer_->OnCallDone(call);
    if (LogEnabled(LogLevel::kDebug)) LogDebug(Describe(call, status));
  }

  // The debug line. Method, peer, code, time, sizes, the status message:
  // nothing from the request's metadata.
  std::string Describe(const CallRecord& call, const grpc::Status& status) const {
    char ms[32];
    std::snprintf(ms, sizeof(ms), "%.3f", call.seconds * 1000);
    std::string line = "call " + method_ + " peer=" + (peer_.empty() ? "?" : peer_) +
                       " code=" + StatusCodeName(call.code) + " ms=" + ms +
                       " bytes_in=" + std::to_string(call.bytes_received) +
                       " bytes_out=" + std::to_string(call.bytes_sent);
    if (!status.ok()) line += " error=\"" + status.error_message() + "\"";
    return line;
  }

  grpc::experimental::ServerRpcInfo* const info_;
  CallObserver* const observer_;
  const bool count_bytes_;
  const bool raw_;  // requests arrive as ByteBuffers
  const Clock::time_point start_;
  std::string method_;
  std::string peer_;
  bool peer_known_ = false;
  int64_t bytes_received_ = 0;
  int64_t bytes_sent_ = 0;
  bool done_ = false;
};

// "/pkg.Service/Method" -> "pkg.Service".
std::string_view ServiceOf(std::string_view method) {
  if (!method.empty() && method.front() == '/') method.remove_prefix(1);
  const size_t slash = method.find('/');
  return slash == std::string_view::npos ? std::string_view() : method.substr(0, slash);
}

}  // namespace

const char* StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN_CODE";
  }
}

CallInterceptorFactory::CallInterceptorFactory(CallObserver* observer,
                                               std::vector<std::string> byte_counted_services,
                                               std::vector<std::string> raw_methods)
    : observer_(observer),
      byte_counted_services_(std::move(byte_counted_services)),
      raw_methods_(std::move(raw_methods)) {}

grpc::experimental::Interceptor* CallInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  const std::string_view service = ServiceOf(info->method() != nullptr ? info->method() : "");
  bool count_bytes = false;
  for (const std::string& s : byte_counted_services_) count_bytes |= (s == service);
  std::string_view method = info->method() != nullptr ? info->method() : "";
  if (!method.empty() && method.front() == '/') method.remove_prefix(1);
  bool raw = false;
  for (const std::string& m : raw_methods_) raw |= (m == method);
  return new CallInterceptor(info, observer_, count_bytes, raw);
}

}  // namespace tdstore::metrics
