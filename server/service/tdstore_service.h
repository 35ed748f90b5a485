// The gRPC front end: tdstore.v1.TdStore handlers on top of the store layer.
//
// Each handler validates its request (names, paths, dtypes, shapes, chunk
// sizes), calls the store, and maps absl::Status to the gRPC status of the
// same code; docs/protocol.md lists which code means what. A rejected request
// writes nothing.
//
// Streams: WriteLeaves consumes WriteBegin, then LeafHeader + data chunks per
// leaf, and commits when the client half-closes; a cancelled or broken
// stream aborts (nothing visible, blocks deleted). ReadLeaves sends
// ReadBegin, then LeafHeader + data chunks (<= 1 MiB) per leaf.
//
// Before touching the store every handler (1) authenticates the caller and
// checks its right on the dict (access_control.h), (2) checks the request
// against ServiceLimits (request_limits.h); streams also take a slot of the
// StreamGuard (at most max_concurrent_streams; idle ones are cancelled).
//
// Retry contract with clients (docs/protocol.md, "Retries"): a failed call
// whose trailing metadata carries `tdstore-applied: none` changed nothing
// and may be retried as it is, whatever the RPC.
//
// Thread-safe: gRPC runs handlers on its thread pool concurrently.
#ifndef TDSTORE_SERVER_SERVICE_TDSTORE_SERVICE_H_
#define TDSTORE_SERVER_SERVICE_TDSTORE_SERVICE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/service/access_control.h"
#include "server/service/leaf_streams.h"
#include "server/service/schema_watch_stream.h"
#include "server/service/service_limits.h"
#include "server/service/stream_guard.h"
#include "server/service/work_pool.h"
#include "server/shm/region_table.h"
#include "server/store/store.h"
#include "tdstore/v1/tdstore.grpc.pb.h"

namespace tdstore::service {

struct ServiceOptions {
  ServiceLimits limits;
  // Default: no tokens, every caller may do everything.
  AccessControl access;
  // The same-host data path (shm/): the regions clients lent, and the
  // socket ServerInfo names for lending one. Null/empty: none offered.
  const shm::RegionTable* shm_regions = nullptr;
  std::string shm_socket;
  // Clients reaching tdstored over loopback TCP may lend too (ServerInfo
  // reports capability shared_memory_loopback).
  bool shm_loopback = true;
};

// WatchSchema (schema_watch_stream.h) and ReadLeaves (read_leaves_reactor.h)
// are served by the callback API, every other RPC by the sync one.
class TdStoreService final
    : public v1::TdStore::WithCallbackMethod_WatchSchema<
          v1::TdStore::WithRawCallbackMethod_ReadLeaves<v1::TdStore::Service>> {
 public:
  // `store` must outlive the service: its one door to storage.
  explicit TdStoreService(store::Store* store, ServiceOptions options = {});

  // The methods registered raw ("tdstore.v1.TdStore/ReadLeaves"): their
  // requests reach interceptors as grpc::ByteBuffers, not protobufs.
  static std::vector<std::string> RawMethods();

  // Swaps in new token grants (tdstored reloads --tokens-file on SIGHUP).
  // Calls admitted before keep the grants they were admitted with; every
  // later call sees the new ones. Thread-safe.
  void ReplaceAccessControl(AccessControl access);

  // Shutting down without waiting on idle clients: after StartDraining()
  // every new call is refused with UNAVAILABLE "tdstored is shutting down"
  // (and `tdstore-applied: none`, so clients retry it elsewhere or later);
  // WaitIdle() returns true once no call is in flight, false if `deadline`
  // passes first. Then grpc::Server::Shutdown(now) cancels nothing and does
  // not wait for idle connections — which an idle gRPC C++ client notices
  // only every 5 s (its backup poller). Thread-safe.
  void StartDraining();
  bool WaitIdle(std::chrono::system_clock::time_point deadline) const;

  grpc::Status GetServerInfo(grpc::ServerContext* ctx, const v1::GetServerInfoRequest* req,
                             v1::ServerInfo* resp) override;

  grpc::Status CreateDict(grpc::ServerContext* ctx, const v1::CreateDictRequest* req,
                          v1::DictInfo* resp) override;
  grpc::Status DescribeDict(grpc::ServerContext* ctx, const v1::DescribeDictRequest* req,
                            v1::DictInfo* resp) override;
  grpc::Status ListDicts(grpc::ServerContext* ctx, const v1::ListDictsRequest* req,
                         v1::ListDictsResponse* resp) override;
  grpc::Status DeleteDict(grpc::ServerContext* ctx, const v1::DeleteDictRequest* req,
                          v1::DeleteDictResponse* resp) override;
  grpc::Status RenameDict(grpc::ServerContext* ctx, const v1::RenameDictRequest* req,
                          v1::DictInfo* resp) override;

  grpc::Status WriteLeaves(grpc::ServerContext* ctx, grpc::ServerReader<v1::WriteChunk>* reader,
                           v1::WriteLeavesResponse* resp) override;
  // WriteLeaves whose shm_data chunks are released as they are used.
  grpc::Status WriteLeavesShared(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::WriteProgress, v1::WriteChunk>* stream) override;
  // ReadLeaves, registered in place of the generated handler (the
  // constructor says why): the request, then raw ReadChunk frames.
  // ReadLeaves on the callback API (read_leaves_reactor.h), raw frames in
  // and out (leaf_streams.h): leaves' bytes go out as slices of the Redis
  // replies they came in, never copied into ReadChunk messages; clients see
  // the same call.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* ReadLeaves(grpc::CallbackServerContext* ctx,
                                                         const grpc::ByteBuffer* request) override;
  // ReadLeaves whose reply, too large for the client's reply span, streams
  // through a ring cut from it (leaf_streams.h). On the sync API: a bulk
  // read's one thread hand-off costs it nothing. Every frame it sends is a
  // small message (the bytes cross through the span), so it needs no raw
  // frames.
  grpc::Status ReadLeavesShared(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::ReadChunk, v1::ReadSharedRequest>* stream) override;
  grpc::Status DeleteLeaves(grpc::ServerContext* ctx, const v1::DeleteLeavesRequest* req,
                            v1::DeleteLeavesResponse* resp) override;
  grpc::Status ListKeys(grpc::ServerContext* ctx, const v1::ListKeysRequest* req,
                        v1::ListKeysResponse* resp) override;
  grpc::Status Exists(grpc::ServerContext* ctx, const v1::ExistsRequest* req,
                      v1::ExistsResponse* resp) override;

  grpc::Status RenameLeaves(grpc::ServerContext* ctx, const v1::RenameLeavesRequest* req,
                            v1::RenameLeavesResponse* resp) override;
  grpc::Status CopyLeaves(grpc::ServerContext* ctx, const v1::CopyLeavesRequest* req,
                          v1::WriteLeavesResponse* resp) override;
  grpc::Status FillLeaves(grpc::ServerContext* ctx, const v1::FillLeavesRequest* req,
                          v1::FillLeavesResponse* resp) override;

  // Batch dim 0 (store/store.h, Store::Resize).
  grpc::Status ResizeDict(grpc::ServerContext* ctx, const v1::ResizeDictRequest* req,
                          v1::DictInfo* resp) override;
  // The dict's lock, attributes and counters (store/store.h).
  grpc::Status SetLocked(grpc::ServerContext* ctx, const v1::SetLockedRequest* req,
                         v1::DictInfo* resp) override;
  grpc::Status UpdateAttrs(grpc::ServerContext* ctx, const v1::UpdateAttrsRequest* req,
                           v1::DictInfo* resp) override;
  grpc::Status Counter(grpc::ServerContext* ctx, const v1::CounterRequest* req,
                       v1::CounterResponse* resp) override;

  // AppendBegin, then RowBatches applied in order, each answered by an
  // AppendAck (the proto's "Streaming appends"). A failed batch is acked
  // with its error and the stream goes on; only a malformed stream ends it.
  grpc::Status AppendRows(grpc::ServerContext* ctx,
                          grpc::ServerReaderWriter<v1::AppendAck, v1::AppendRequest>* stream) override;

  // The schema now and after each change (the proto's "Schema watch"). Not
  // counted as a call in flight: a watch lives as long as its client keeps
  // the dict. Refused while draining; the store's watch ends open ones.
  grpc::ServerWriteReactor<v1::SchemaEvent>* WatchSchema(
      grpc::CallbackServerContext* ctx, const v1::WatchSchemaRequest* req) override;

 private:
  // Both write calls: `progress` is WriteLeavesShared's (null: WriteLeaves).
  grpc::Status ServeWrite(grpc::ServerContext* ctx,
                          grpc::internal::ReaderInterface<v1::WriteChunk>* reader,
                          grpc::internal::WriterInterface<v1::WriteProgress>* progress,
                          v1::WriteLeavesResponse* resp);
  // The forms of WriteLeaves after its WriteBegin: whole leaves, or
  // td[index] = values (or a ring append: rows reserved from a counter).
  absl::Status WriteWhole(WriteStream& stream, const v1::WriteBegin& begin,
                          v1::WriteLeavesResponse* resp);
  // `*attempted` is set once the store is asked to write: a failure after
  // it may have written some blocks, one before it wrote nothing.
  // `*version_after` gets the store's version read after the call, if it
  // read one (store_values.h, VersionAfter), for the call's Sighting.
  absl::Status WriteIndexed(WriteStream& stream, const v1::WriteBegin& begin,
                            v1::WriteLeavesResponse* resp, bool* attempted,
                            std::optional<store::SchemaVersionSeen>* version_after);
  // ReadLeaves' body, on whichever thread the reactor runs it: frames to
  // `out`; the call's stream lease into `*lease`, for the reactor to keep.
  grpc::Status ServeReadLeaves(grpc::ServerContextBase* ctx, const v1::ReadLeavesRequest& request,
                               FrameWriter& out, std::unique_ptr<StreamGuard::Lease>* lease);
  struct Sighting;
  // Both read calls, once admitted and holding their stream lease: the
  // read itself. `releases`: ReadLeavesShared's (null on ReadLeaves).
  grpc::Status ReadAdmitted(grpc::ServerContextBase* ctx, const v1::ReadLeavesRequest& request,
                            FrameWriter& out, StreamGuard::Lease& lease,
                            ChunkReleases* releases, Sighting& seen);
  // The forms of ReadLeaves.
  absl::Status ReadWhole(const v1::ReadLeavesRequest& req, const std::vector<LeafPath>& paths,
                         ReadStream& stream);
  absl::Status ReadIndexed(const v1::ReadLeavesRequest& req, const std::vector<LeafPath>& paths,
                           ReadStream& stream,
                           std::optional<store::SchemaVersionSeen>* version_after);

  class ReadSink;  // a whole-leaf read's store::LeafSink

  // What a handler is admitted for: the dict it names (empty: none, the
  // handler checks names itself) and what it does to it.
  struct Admission {
    std::string_view dict;
    Access access = Access::kRead;
    std::string_view dict_id = {};  // the id the request names, if any
  };
  // What a call on a dict saw of its schema, for the client's copy
  // (docs/protocol.md, "Causal schema reads"): the dict's schema version,
  // read at or after the moment the call took effect, so that no version
  // the call could have observed the effects of is newer. Serve sends it as
  // trailing metadata `tdstore-schema-version: <id>:<version>`, whether the
  // call succeeded or failed.
  struct Sighting {
    // The dict the call acts on: the Admission's, or set by a handler that
    // learns it from its stream's first message.
    std::string dict;
    std::string dict_id;
    // Set by a handler whose store call returned a version read in the
    // same atomic step as its effect (a commit, a lock, a schema read);
    // otherwise Serve reads the version after the handler returns.
    std::optional<int64_t> version;
    std::string id;  // the dict id `version` belongs to
    void Saw(std::string_view dict_id_seen, int64_t version_seen) {
      id = std::string(dict_id_seen);
      version = version_seen;
    }
    // Saw, for the id the request named; without one, Serve reads it.
    void SawVersion(int64_t version_seen) {
      if (!dict_id.empty()) Saw(dict_id, version_seen);
    }
    // Saw, if the store read the version after the call (VersionAfter).
    void SawAfter(const std::optional<store::SchemaVersionSeen>& after) {
      if (after) Saw(after->id, after->version);
    }
  };
  // The prologue every handler shares, then `body`, then the epilogue:
  // counts the call in flight (refusing it with UNAVAILABLE while
  // draining), authenticates the caller (UNAUTHENTICATED) and, for a named
  // dict, checks the name and the caller's right (PERMISSION_DENIED).
  // `body` gets the caller's grant and the call's Sighting, which Serve
  // then sends to the client.
  grpc::Status Serve(grpc::ServerContextBase* ctx, const Admission& admission,
                     const std::function<grpc::Status(const Grant* grant, Sighting& seen)>& body);
  // Sends what `seen` says (reading the version now if the handler did not
  // set it) as trailing metadata. Never fails the call: a dict that is gone
  // or a Redis that does not answer sends nothing.
  void SendSighting(grpc::ServerContextBase* ctx, const Sighting& seen) const;
  // Name and right checks of Serve, for names a handler learns later.
  grpc::Status Admit(const Grant* grant, std::string_view name, Access access) const;

  store::Store* const store_;
  // Counts a handler in flight for its lifetime; refused() once draining.
  class CallScope {
   public:
    explicit CallScope(TdStoreService* service);
    ~CallScope();
    bool refused() const { return refused_; }

   private:
    TdStoreService* const service_;
    const bool refused_;
  };

  // The grants in force, replaced whole by ReplaceAccessControl.
  std::shared_ptr<const AccessControl> CurrentAccess() const;

  const ServiceLimits limits_;
  const shm::RegionTable* const shm_regions_;
  const std::string shm_socket_;
  const bool shm_loopback_;
  mutable std::mutex access_mu_;
  std::shared_ptr<const AccessControl> access_;  // guarded by access_mu_
  StreamGuard streams_;
  std::atomic<int> in_flight_{0};
  std::atomic<bool> draining_{false};
  // Threads for the ReadLeaves calls not served where they were received
  // (read_leaves_reactor.h). Last: its destructor joins them first.
  WorkPool read_pool_;
};

}  // namespace tdstore::service

#endif  // TDSTORE_SERVER_SERVICE_TDSTORE_SERVICE_H_
