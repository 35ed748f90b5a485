// grpc-api-eval: does gRPC's callback server answer a small call faster than
// the synchronous server tdstored uses for its data calls (issue #13)?
//
// Two in-process servers of the tdstore.v1.TdStore service answer the same
// unary call, GetServerInfo, with nothing to do: one through the sync API
// (a thread from gRPC's sync pool runs the handler), one through the
// callback API (the handler runs on gRPC's own event engine threads and
// finishes its reactor at once). A sync client calls each in turn over
// loopback TCP; interleaved rounds, median of each. What it measures is the
// framework's floor per call, which is what the callback server could save
// tdstored's small calls.
//
// Usage: grpc-api-eval [calls_per_round] [rounds]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "tdstore/v1/tdstore.grpc.pb.h"

namespace {

using tdstore::v1::GetServerInfoRequest;
using tdstore::v1::ServerInfo;
using tdstore::v1::TdStore;

class SyncService final : public TdStore::Service {
  grpc::Status GetServerInfo(grpc::ServerContext*, const GetServerInfoRequest*,
                             ServerInfo* resp) override {
    resp->set_version("sync");
    return grpc::Status::OK;
  }
};

class CallbackService final : public TdStore::CallbackService {
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* ctx,
                                          const GetServerInfoRequest*, ServerInfo* resp) override {
    resp->set_version("callback");
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

std::unique_ptr<grpc::Server> Start(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

double MedianMicros(TdStore::Stub& stub, int calls) {
  std::vector<double> t;
  t.reserve(static_cast<size_t>(calls));
  for (int i = 0; i < calls; ++i) {
    grpc::ClientContext ctx;
    GetServerInfoRequest req;
    ServerInfo resp;
    auto a = std::chrono::steady_clock::now();
    grpc::Status s = stub.GetServerInfo(&ctx, req, &resp);
    auto b = std::chrono::steady_clock::now();
    if (!s.ok()) {
      std::fprintf(stderr, "call failed: %s\n", s.error_message().c_str());
      std::exit(1);
    }
    t.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::stoi(argv[1]) : 2000;
  const int rounds = argc > 2 ? std::stoi(argv[2]) : 5;
  SyncService sync_service;
  CallbackService callback_service;
  int sync_port = 0, callback_port = 0;
  auto sync_server = Start(&sync_service, &sync_port);
  auto callback_server = Start(&callback_service, &callback_port);
  auto stub = [](int port) {
    return TdStore::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                grpc::InsecureChannelCredentials()));
  };
  auto sync_stub = stub(sync_port), callback_stub = stub(callback_port);
  std::vector<double> sync_t, callback_t;
  MedianMicros(*sync_stub, 200);  // warm up both
  MedianMicros(*callback_stub, 200);
  for (int r = 0; r < rounds; ++r) {
    sync_t.push_back(MedianMicros(*sync_stub, calls));
    callback_t.push_back(MedianMicros(*callback_stub, calls));
  }
  std::sort(sync_t.begin(), sync_t.end());
  std::sort(callback_t.begin(), callback_t.end());
  const double s = sync_t[sync_t.size() / 2], c = callback_t[callback_t.size() / 2];
  std::printf("| unary call p50, us (%d calls x %d rounds) | sync server | callback server | sync / callback |\n|---|--:|--:|--:|\n| GetServerInfo, nothing to do | %.1f | %.1f | %.2fx |\n",
              calls, rounds, s, c, s / c);
  sync_server->Shutdown();
  callback_server->Shutdown();
  return 0;
}
