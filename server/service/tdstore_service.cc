#include "server/service/tdstore_service.h"

#include <algorithm>
#include <map>
#include <optional>
#include <thread>

#include "common/key_listing.h"
#include "common/protocol_metadata.h"
#include "common/protocol_revision.h"
#include "common/str_cat.h"
#include "server/service/proto_convert.h"
#include "server/service/read_leaves_reactor.h"
#include "server/service/request_limits.h"
#include "server/service/shm_spans.h"

namespace tdstore::service {
namespace {

// Returns `status` as a gRPC status, telling the client (trailing metadata
// `tdstore-applied: none`) that the failed call changed nothing and may be
// retried as it is. Only for failures that are known not to have applied
// anything: never for an outcome-unknown one.
grpc::Status NothingApplied(grpc::ServerContextBase* ctx, const absl::Status& status) {
  if (!status.ok() && !store::IsOutcomeUnknown(status)) {
    ctx->AddTrailingMetadata(kAppliedTrailer, kAppliedNone);
  }
  return ToGrpc(status);
}

// A call that arrived after SIGTERM: nothing done, retry elsewhere or later.
grpc::Status Draining(grpc::ServerContextBase* ctx) {
  return NothingApplied(ctx, absl::UnavailableError("tdstored is shutting down"));
}

// The paths of a request, converted (INVALID_ARGUMENT for a bad one).
absl::StatusOr<std::vector<LeafPath>> PathsFromProto(
    const google::protobuf::RepeatedPtrField<v1::Path>& protos) {
  std::vector<LeafPath> paths;
  for (const v1::Path& p : protos) {
    auto path = FromProto(p);
    if (!path.ok()) return path.status();
    paths.push_back(*std::move(path));
  }
  return paths;
}

}  // namespace

TdStoreService::CallScope::CallScope(TdStoreService* service)
    : service_(service), refused_(service->draining_.load()) {
  service_->in_flight_.fetch_add(1);
}

TdStoreService::CallScope::~CallScope() { service_->in_flight_.fetch_sub(1); }

void TdStoreService::StartDraining() { draining_.store(true); }

bool TdStoreService::WaitIdle(std::chrono::system_clock::time_point deadline) const {
  while (in_flight_.load() > 0) {
    if (std::chrono::system_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

TdStoreService::TdStoreService(store::Store* store, ServiceOptions options)
    : store_(store),
      limits_(options.limits),
      shm_regions_(options.shm_regions),
      shm_socket_(options.shm_regions != nullptr ? options.shm_socket : std::string()),
      shm_loopback_(options.shm_loopback),
      access_(std::make_shared<const AccessControl>(std::move(options.access))),
      streams_(options.limits.max_concurrent_streams, options.limits.idle_stream_timeout) {}

std::vector<std::string> TdStoreService::RawMethods() {
  return {std::string(v1::TdStore::service_full_name()) + "/ReadLeaves"};
}

void TdStoreService::ReplaceAccessControl(AccessControl access) {
  auto replacement = std::make_shared<const AccessControl>(std::move(access));
  std::lock_guard<std::mutex> lock(access_mu_);
  access_ = std::move(replacement);
}

std::shared_ptr<const AccessControl> TdStoreService::CurrentAccess() const {
  std::lock_guard<std::mutex> lock(access_mu_);
  return access_;
}

grpc::Status TdStoreService::Admit(const Grant* grant, std::string_view name,
                                   Access access) const {
  if (auto s = CheckDictName(limits_, name); !s.ok()) return ToGrpc(s);
  return AccessToGrpc(AccessControl::Authorize(grant, name, access));
}

grpc::Status TdStoreService::Serve(
    grpc::ServerContextBase* ctx, const Admission& admission,
    const std::function<grpc::Status(const Grant*, Sighting&)>& body) {
  CallScope call(this);
  if (call.refused()) return Draining(ctx);
  // `grants` keeps the Grant that Authenticate points into alive.
  const std::shared_ptr<const AccessControl> grants = CurrentAccess();
  auto grant = grants->Authenticate(*ctx);
  if (!grant.ok()) return AccessToGrpc(grant.status());
  if (!admission.dict.empty() || admission.access == Access::kWrite) {
    if (auto s = Admit(*grant, admission.dict, admission.access); !s.ok()) return s;
  }
  Sighting seen{std::string(admission.dict), std::string(admission.dict_id), std::nullopt, {}};
  grpc::Status status = body(*grant, seen);
  SendSighting(ctx, seen);
  return status;
}

void TdStoreService::SendSighting(grpc::ServerContextBase* ctx, const Sighting& seen) const {
  std::string id = seen.id;
  int64_t version = 0;
  if (seen.version) {
    version = *seen.version;
  } else {
    if (seen.dict.empty()) return;
    // Why read it now rather than take the version the call planned with:
    // that one was read before the data moved, and another client's schema
    // change (a key added, then a counter bumped) can commit in between, so
    // a reply showing the bump would carry a version without the key.
    auto now = store_->SchemaVersion({seen.dict, seen.dict_id});
    if (!now.ok()) return;
    id = std::move(now->id);
    version = now->version;
  }
  if (id.empty()) return;
  ctx->AddTrailingMetadata(kSchemaVersionTrailer, StrCat(id, ":", version));
}

grpc::ServerWriteReactor<v1::SchemaEvent>* TdStoreService::WatchSchema(
    grpc::CallbackServerContext* ctx, const v1::WatchSchemaRequest* req) {
  grpc::Status refusal = grpc::Status::OK;
  if (draining_.load()) {
    refusal = grpc::Status(grpc::StatusCode::UNAVAILABLE, "tdstored is shutting down");
  } else {
    const std::shared_ptr<const AccessControl> grants = CurrentAccess();
    auto grant = grants->Authenticate(*ctx);
    refusal = grant.ok() ? Admit(*grant, req->dict(), Access::kRead)
                         : AccessToGrpc(grant.status());
  }
  return new SchemaWatchStream(store_, *req, refusal);
}

grpc::Status TdStoreService::GetServerInfo(grpc::ServerContext* ctx,
                                           const v1::GetServerInfoRequest*,
                                           v1::ServerInfo* resp) {
  return Serve(ctx, {}, [&](const Grant*, Sighting&) {
    const store::Health health = store_->Ping();
    resp->set_version(TDSTORE_VERSION);
    resp->set_backend(health.backend);
    resp->set_redis_ok(health.redis_ok);
    resp->set_redis_masters(health.redis_masters);
    resp->set_protocol_revision(kProtocolRevision);
    for (const char* capability : kServerCapabilities) resp->add_capabilities(capability);
    if (!shm_socket_.empty()) {
      resp->add_capabilities(kSharedMemoryCapability);
      resp->add_capabilities(kSharedMemoryChunksCapability);
      resp->add_capabilities(kSharedMemoryReadChunksCapability);
      resp->add_capabilities(kSharedMemoryLentChunksCapability);
      if (shm_loopback_) resp->add_capabilities(kSharedMemoryLoopbackCapability);
      resp->set_shm_socket(shm_socket_);
    }
    return grpc::Status::OK;
  });
}

grpc::Status TdStoreService::CreateDict(grpc::ServerContext* ctx,
                                        const v1::CreateDictRequest* req, v1::DictInfo* resp) {
  return Serve(ctx, {req->name(), Access::kWrite}, [&](const Grant* grant, Sighting& seen) {
    if (auto s = CheckRequest(limits_, *req); !s.ok()) return NothingApplied(ctx, s);
    store::NewDict spec;
    spec.name = req->name();
    spec.batch_shape = ShapeFromProto(req->batch_shape());
    spec.rows_per_block = req->options().rows_per_block();
    spec.part_bytes = req->options().part_bytes();
    switch (req->options().layout()) {
      case v1::DICT_LAYOUT_LEAVES:
        break;
      case v1::DICT_LAYOUT_RECORD:
        spec.layout = store::DictLayout::kRecord;
        break;
      default:
        return NothingApplied(ctx, absl::InvalidArgumentError(
                                       StrCat("unknown dict layout ", req->options().layout())));
    }
    for (const v1::LeafSpec& leaf : req->leaves()) {
      auto path = FromProto(leaf.path());
      if (!path.ok()) return NothingApplied(ctx, path.status());
      auto dtype = FromProto(leaf.dtype());
      if (!dtype.ok()) return NothingApplied(ctx, dtype.status());
      auto kind = FromProto(leaf.kind());
      if (!kind.ok()) return NothingApplied(ctx, kind.status());
      spec.leaves.push_back(
          {*std::move(path), *dtype, ShapeFromProto(leaf.element_shape()), *kind});
    }
    if (req->has_copy_from()) {
      // Reading another dict: the caller must be allowed to.
      const v1::CopySource& source = req->copy_from();
      if (auto s = Admit(grant, source.dict(), Access::kRead); !s.ok()) return s;
      store::CopySource copy{{source.dict(), source.dict_id()}, {}};
      if (source.from().components_size() > 0) {
        if (auto s = CheckPath(limits_, source.from()); !s.ok()) return NothingApplied(ctx, s);
        auto from = FromProto(source.from());
        if (!from.ok()) return NothingApplied(ctx, from.status());
        copy.from = *std::move(from);
      }
      spec.copy_from = std::move(copy);
    }
    auto schema = store_->CreateDict(spec);
    if (!schema.ok()) return NothingApplied(ctx, schema.status());
    seen.Saw(schema->meta.id, schema->meta.version);
    ToProto(*schema, resp);
    return grpc::Status::OK;
  });
}

grpc::Status TdStoreService::DescribeDict(grpc::ServerContext* ctx,
                                          const v1::DescribeDictRequest* req, v1::DictInfo* resp) {
  return Serve(ctx, {req->name(), Access::kRead, req->dict_id()},
               [&](const Grant*, Sighting& seen) {
    auto schema = store_->Describe({req->name(), req->dict_id()});
    if (!schema.ok()) return ToGrpc(schema.status());
    seen.Saw(schema->meta.id, schema->meta.version);
    ToProto(*schema, resp);
    return grpc::Status::OK;
  });
}

grpc::Status TdStoreService::ListDicts(grpc::ServerContext* ctx, const v1::ListDictsRequest*,
                                       v1::ListDictsResponse* resp) {
  return Serve(ctx, {}, [&](const Grant* grant, Sighting&) {
    auto names = store_->ListDicts();
    if (!names.ok()) return ToGrpc(names.status());
    // A token sees only the dicts under its prefixes.
    for (const std::string& n : *names) {
      if (AccessControl::CanSee(grant, n)) resp->add_names(n);
    }
    return grpc::Status::OK;
  });
}

grpc::Status TdStoreService::DeleteDict(grpc::ServerContext* ctx,
                                        const v1::DeleteDictRequest* req,
                                        v1::DeleteDictResponse*) {
  return Serve(ctx, {req->name(), Access::kWrite}, [&](const Grant*, Sighting& seen) {
    seen.dict.clear();  // a deleted dict has no schema to report
    return ToGrpc(store_->DeleteDict({req->name(), req->dict_id()}));
  });
}

grpc::Status TdStoreService::RenameDict(grpc::ServerContext* ctx,
                                        const v1::RenameDictRequest* req, v1::DictInfo* resp) {
  return Serve(ctx, {req->name(), Access::kWrite, req->dict_id()},
               [&](const Grant* grant, Sighting& seen) {
    // Both names must be the caller's: renaming moves data between prefixes.
    if (auto s = Admit(grant, req->new_name(), Access::kWrite); !s.ok()) return s;
    auto schema = store_->RenameDict({req->name(), req->dict_id()}, req->new_name());
    if (!schema.ok()) return ToGrpc(schema.status());
    seen.Saw(schema->meta.id, schema->meta.version);
    ToProto(*schema, resp);
    return grpc::Status::OK;
  });
}

grpc::Status TdStoreService::RenameLeaves(grpc::ServerContext* ctx,
                                          const v1::RenameLeavesRequest* req,
                                          v1::RenameLeavesResponse* resp) {
  return Serve(ctx, {req->dict(), Access::kWrite, req->dict_id()}, [&](const Grant*, Sighting& seen) {
    for (const v1::Path* p : {&req->from(), &req->to()}) {
      if (auto s = CheckPath(limits_, *p); !s.ok()) return ToGrpc(s);
    }
    auto from = FromProto(req->from());
    if (!from.ok()) return ToGrpc(from.status());
    auto to = FromProto(req->to());
    if (!to.ok()) return ToGrpc(to.status());
    auto renamed = store_->RenameLeaves({req->dict(), req->dict_id()}, *from, *to, req->replace());
    if (!renamed.ok()) return ToGrpc(renamed.status());
    for (const auto& [before, after] : renamed->moved) {
      ToProto(before, resp->add_moved());
      ToProto(after, resp->add_moved());
    }
    for (const LeafPath& p : renamed->replaced) ToProto(p, resp->add_replaced());
    resp->set_version(renamed->version);
    seen.SawVersion(renamed->version);
    return grpc::Status::OK;
  });
}

grpc::Status TdStoreService::CopyLeaves(grpc::ServerContext* ctx,
                                        const v1::CopyLeavesRequest* req,
                                        v1::WriteLeavesResponse* resp) {
  return Serve(ctx, {req->dict(), Access::kRead, req->dict_id()}, [&](const Grant* grant,
                                                                        Sighting&) {
    // Reading one dict and writing the other: both must be the caller's.
    if (auto s = Admit(grant, req->to_dict(), Access::kWrite); !s.ok()) return s;
    LeafPath from, to;
    for (auto [proto, path] : {std::pair{&req->from(), &from}, std::pair{&req->to(), &to}}) {
      if (proto->components_size() == 0) continue;
      if (auto s = CheckPath(limits_, *proto); !s.ok()) return ToGrpc(s);
      auto parsed = FromProto(*proto);
      if (!parsed.ok()) return ToGrpc(parsed.status());
      *path = *std::move(parsed);
    }
    auto result = store_->CopyLeaves({req->dict(), req->dict_id()}, from,
                                     {req->to_dict(), req->to_dict_id()}, to);
    // A copy that failed left nothing visible, except a commit whose
    // outcome is unknown.
    if (!result.ok()) return NothingApplied(ctx, result.status());
    for (const store::Leaf& leaf : result->written) ToProto(leaf, resp->add_written());
    resp->set_version(result->version);
    return grpc::Status::OK;
  });
}

grpc::Status TdStoreService::FillLeaves(grpc::ServerContext* ctx,
                                        const v1::FillLeavesRequest* req,
                                        v1::FillLeavesResponse* resp) {
  return Serve(ctx, {req->dict(), Access::kWrite, req->dict_id()}, [&](const Grant*, Sighting& seen) {
    if (auto s = CheckLeafCount(limits_, req->leaves_size()); !s.ok()) return ToGrpc(s);
    std::vector<store::Fill> fills;
    for (const v1::FillLeavesRequest::Fill& f : req->leaves()) {
      if (auto s = CheckPath(limits_, f.path()); !s.ok()) return ToGrpc(s);
      auto path = FromProto(f.path());
      if (!path.ok()) return ToGrpc(path.status());
      auto dtype = FromProto(f.dtype());
      if (!dtype.ok()) return ToGrpc(dtype.status());
      fills.push_back({*std::move(path), *dtype, f.element()});
    }
    std::optional<plan::IndexSpec> index;
    if (req->has_index()) {
      if (auto s = CheckIndex(limits_, req->index()); !s.ok()) return ToGrpc(s);
      auto spec = FromProto(req->index());
      if (!spec.ok()) return ToGrpc(spec.status());
      index = *std::move(spec);
    }
    auto version = store_->FillLeaves({req->dict(), req->dict_id()}, fills,
                                      index ? &*index : nullptr);
    if (!version.ok()) return ToGrpc(version.status());
    resp->set_version(*version);
    // An indexed fill's version is the one it planned with: read after.
    if (!index) seen.SawVersion(*version);
    return grpc::Status::OK;
  });
}

grpc::Status TdStoreService::ResizeDict(grpc::ServerContext* ctx,
                                        const v1::ResizeDictRequest* req, v1::DictInfo* resp) {
  return Serve(ctx, {req->dict(), Access::kWrite, req->dict_id()}, [&](const Grant*, Sighting& seen) {
    auto schema = store_->Resize({req->dict(), req->dict_id()}, req->rows());
    if (!schema.ok()) return ToGrpc(schema.status());
    seen.Saw(schema->meta.id, schema->meta.version);
    ToProto(*schema, resp);
    return grpc::Status::OK;
  });
}

grpc::Status TdStoreService::SetLocked(grpc::ServerContext* ctx,
                                       const v1::SetLockedRequest* req, v1::DictInfo* resp) {
  return Serve(ctx, {req->dict(), Access::kWrite, req->dict_id()}, [&](const Grant*, Sighting& seen) {
    auto schema = store_->SetLocked({req->dict(), req->dict_id()}, req->locked());
    if (!schema.ok()) return ToGrpc(schema.status());
    seen.Saw(schema->meta.id, schema->meta.version);
    ToProto(*schema, resp);
    return grpc::Status::OK;
  });
}

grpc::Status TdStoreService::UpdateAttrs(grpc::ServerContext* ctx,
                                         const v1::UpdateAttrsRequest* req, v1::DictInfo* resp) {
  return Serve(ctx, {req->dict(), Access::kWrite, req->dict_id()}, [&](const Grant*, Sighting& seen) {
    store::AttrsUpdate update;
    update.set.insert(req->set().begin(), req->set().end());
    update.remove.assign(req->remove().begin(), req->remove().end());
    auto schema = store_->UpdateAttrs({req->dict(), req->dict_id()}, update);
    if (!schema.ok()) return ToGrpc(schema.status());
    seen.Saw(schema->meta.id, schema->meta.version);
    ToProto(*schema, resp);
    return grpc::Status::OK;
  });
}

grpc::Status TdStoreService::Counter(grpc::ServerContext* ctx, const v1::CounterRequest* req,
                                     v1::CounterResponse* resp) {
  const Access access = req->op_case() == v1::CounterRequest::kGet ? Access::kRead
                                                                    : Access::kWrite;
  return Serve(ctx, {req->dict(), access, req->dict_id()}, [&](const Grant*, Sighting& seen) {
    store::CounterOp op;
    op.name = req->name();
    switch (req->op_case()) {
      case v1::CounterRequest::kGet:
        op.kind = store::CounterOp::Kind::kGet;
        break;
      case v1::CounterRequest::kAdd:
        op.kind = store::CounterOp::Kind::kAdd;
        op.delta = req->add();
        break;
      case v1::CounterRequest::kCas:
        op.kind = store::CounterOp::Kind::kCas;
        op.expected = req->cas().expected();
        op.new_value = req->cas().new_value();
        break;
      default:
        return ToGrpc(absl::InvalidArgumentError("a counter request needs add, cas or get"));
    }
    auto result = store_->Counter({req->dict(), req->dict_id()}, op);
    if (!result.ok()) return ToGrpc(result.status());
    resp->set_value(result->value);
    resp->set_swapped(result->swapped);
    seen.SawAfter(result->version_after);
    return grpc::Status::OK;
  });
}

grpc::Status TdStoreService::WriteLeaves(grpc::ServerContext* ctx,
                                         grpc::ServerReader<v1::WriteChunk>* reader,
                                         v1::WriteLeavesResponse* resp) {
  return ServeWrite(ctx, reader, nullptr, resp);
}

grpc::Status TdStoreService::WriteLeavesShared(
    grpc::ServerContext* ctx, grpc::ServerReaderWriter<v1::WriteProgress, v1::WriteChunk>* stream) {
  v1::WriteProgress last;
  grpc::Status status = ServeWrite(ctx, stream, stream, last.mutable_done());
  if (!status.ok()) return status;
  // The response goes with the status, as WriteLeaves' does: a last
  // message is held until the handler returns, so this cannot fail here.
  stream->Write(last, grpc::WriteOptions().set_last_message());
  return status;
}

grpc::Status TdStoreService::ServeWrite(
    grpc::ServerContext* ctx, grpc::internal::ReaderInterface<v1::WriteChunk>* reader,
    grpc::internal::WriterInterface<v1::WriteProgress>* progress, v1::WriteLeavesResponse* resp) {
  // The dict is named by the stream's first message: admitted below.
  return Serve(ctx, {}, [&](const Grant* grant, Sighting& seen) {
    auto lease = streams_.Enter(ctx);
    if (!lease.ok()) return NothingApplied(ctx, lease.status());
    WriteStream stream(ctx, reader, **lease, limits_, shm_regions_, progress);
    auto begin = stream.Begin();
    if (!begin.ok()) return NothingApplied(ctx, begin.status());
    if (auto s = Admit(grant, begin->dict(), Access::kWrite); !s.ok()) return s;
    seen.dict = begin->dict();
    seen.dict_id = begin->dict_id();
    if (auto s = CheckRequest(limits_, *begin); !s.ok()) return NothingApplied(ctx, s);
    if (begin->has_index() || begin->has_ring()) {
      // Nothing is written before the store call that ends it, which
      // either writes or reports an error that says what it did.
      bool attempted = false;
      std::optional<store::SchemaVersionSeen> after;
      absl::Status s = WriteIndexed(stream, *begin, resp, &attempted, &after);
      if (s.ok()) seen.SawAfter(after);
      return attempted ? ToGrpc(s) : NothingApplied(ctx, s);
    }
    if (begin->has_count_after()) {
      return NothingApplied(ctx, absl::InvalidArgumentError(
                                     "count_after needs an indexed write; nothing written"));
    }
    // Every failure of a whole-leaf write leaves nothing visible (the
    // transaction aborts), except a commit whose outcome is unknown.
    absl::Status written = WriteWhole(stream, *begin, resp);
    if (written.ok()) seen.SawVersion(resp->version());  // the commit's own
    return NothingApplied(ctx, written);
  });
}

absl::Status TdStoreService::WriteWhole(WriteStream& stream, const v1::WriteBegin& begin,
                                        v1::WriteLeavesResponse* resp) {
  auto write = store_->BeginWrite({begin.dict(), begin.dict_id()});
  if (!write.ok()) return write.status();
  store::LeafWrite& w = **write;
  if (begin.refuse_if_locked()) w.RefuseIfLocked();
  if (begin.leaf_count() > 0) w.ExpectLeaves(begin.leaf_count());
  // Any early return destroys the write, which aborts it: nothing becomes
  // visible and the blocks written so far are deleted.
  for (;;) {
    auto piece = stream.Next();
    if (!piece.ok()) return piece.status();
    absl::Status status;
    switch (*piece) {
      case WriteStream::Piece::kHeader: {
        const WriteStream::Header& h = stream.header();
        status = w.BeginLeaf(h.path, LeafRecord{h.dtype, h.shape, 0, h.kind, h.value}, h.byte_size);
        break;
      }
      case WriteStream::Piece::kData:
        status = stream.data_lent()       ? w.AppendLent(stream.data())
                 : stream.data_borrowed() ? w.AppendBorrowed(stream.data())
                                          : w.Append(stream.TakeData());
        break;
      case WriteStream::Piece::kEnd: {
        auto result = w.Commit();
        if (!result.ok()) return result.status();
        for (const store::Leaf& leaf : result->written) ToProto(leaf, resp->add_written());
        resp->set_version(result->version);
        return absl::OkStatus();
      }
    }
    if (!status.ok()) return status;
  }
}

absl::Status TdStoreService::WriteIndexed(
    WriteStream& stream, const v1::WriteBegin& begin, v1::WriteLeavesResponse* resp,
    bool* attempted, std::optional<store::SchemaVersionSeen>* version_after) {
  if (begin.has_count_after() && (!begin.has_index() || begin.count_after().counter().empty())) {
    return absl::InvalidArgumentError(
        "count_after needs an index (not a ring, not whole leaves) and a counter name; "
        "nothing written");
  }
  std::optional<plan::IndexSpec> index;
  store::RingAppend ring;
  if (begin.has_index()) {
    auto spec = FromProto(begin.index());
    if (!spec.ok()) return spec.status();
    index = *std::move(spec);
  } else {
    ring = {begin.ring().cursor(), begin.ring().rows(), begin.ring().count()};
  }
  // Every value is received and checked before anything is written: the
  // store leases each value's memory as it is announced (store.h,
  // IndexedWrite) and writes them all at Commit.
  std::unique_ptr<store::IndexedWrite> write =
      store_->BeginIndexedWrite({begin.dict(), begin.dict_id()}, std::move(index), std::move(ring));
  for (;;) {
    auto piece = stream.Next();
    if (!piece.ok()) return piece.status();
    if (*piece == WriteStream::Piece::kEnd) break;
    if (*piece == WriteStream::Piece::kData) {
      if (auto s = write->Append(stream.data()); !s.ok()) return s;
      continue;
    }
    const WriteStream::Header& h = stream.header();
    if (auto s = write->BeginValue({h.path, h.dtype, h.shape, h.kind, h.value, h.byte_size});
        !s.ok()) {
      return s;
    }
  }
  *attempted = true;
  auto written = write->Commit();
  if (!written.ok()) return written.status();
  *version_after = written->version_after;
  for (const store::Leaf& leaf : written->written) ToProto(leaf, resp->add_written());
  resp->set_version(written->version);
  if (begin.has_ring()) {
    resp->set_ring_start(written->ring_start);
    resp->set_count_value(written->count_value);
  }
  if (begin.has_count_after()) {
    // After the rows, never before: the counter only counts rows written.
    store::CounterOp op;
    op.kind = store::CounterOp::Kind::kAdd;
    op.name = begin.count_after().counter();
    op.delta = begin.count_after().add();
    auto counted = store_->Counter({begin.dict(), begin.dict_id()}, op);
    if (!counted.ok()) {
      return absl::Status(counted.status().code(),
                          StrCat("the rows were written but not counted in '", op.name,
                                 "': ", counted.status().message()));
    }
    resp->set_count_value(counted->value);
    resp->set_counted(true);
  }
  return absl::OkStatus();
}

// Sends a whole-leaf read as the store delivers it. Begin checks the
// per-call limits before any data moves.
class TdStoreService::ReadSink final : public store::LeafSink {
 public:
  ReadSink(ReadStream& stream, const ServiceLimits& limits) : stream_(stream), limits_(limits) {}

  absl::Status Begin(const store::DictSchema& schema,
                     const std::vector<const store::Leaf*>& leaves) override {
    if (auto s = CheckLeafCount(limits_, static_cast<int64_t>(leaves.size())); !s.ok()) return s;
    int64_t total = 0;
    for (const store::Leaf* leaf : leaves) total += store::RecordBytes(leaf->record);
    if (auto s = CheckCallBytes(limits_, total); !s.ok()) return s;
    return stream_.Begin(schema.meta.batch_shape, leaves.size(), total);
  }
  absl::Status BeginLeaf(const store::Leaf& leaf) override {
    return stream_.Header(leaf.path, leaf.record, leaf.record.shape);
  }
  absl::Status Data(store::SharedBytes bytes) override { return stream_.Data(std::move(bytes)); }

 private:
  ReadStream& stream_;
  const ServiceLimits& limits_;
};

namespace {

// Whether a ReadLeaves request is served on the thread that received it
// (read_leaves_reactor.h, "gathered"): an indexed read by positions alone,
// at most kGatheredPositions of them, such as a replay buffer's sample. Its
// rows are gathered in memory before anything is sent in any case; the
// bound keeps a gRPC callback thread from being held by a large gather
// (a slice or a mask may select every row), which runs on the read pool.
bool ServedWhereReceived(const v1::ReadLeavesRequest& req) {
  constexpr int64_t kGatheredPositions = 4096;
  if (!req.has_index()) return false;
  int64_t positions = 0;
  for (const v1::IndexItem& item : req.index().items()) {
    switch (item.kind_case()) {
      case v1::IndexItem::kInteger:
        positions += 1;
        break;
      case v1::IndexItem::kPositions:
        positions += item.positions().values_size();
        break;
      default:
        return false;
    }
  }
  return positions <= kGatheredPositions;
}

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* TdStoreService::ReadLeaves(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request) {
  auto req = std::make_shared<v1::ReadLeavesRequest>();
  grpc::ByteBuffer bytes(*request);  // Deserialize consumes its buffer
  const bool parsed =
      grpc::SerializationTraits<v1::ReadLeavesRequest>::Deserialize(&bytes, req.get()).ok();
  // Counted in flight until the call is done, answer sent, so that
  // draining (WaitIdle) waits for its frames too.
  in_flight_.fetch_add(1);
  return ReadLeavesReactor::Start(
      [this, ctx, req, parsed](FrameWriter& out, std::unique_ptr<StreamGuard::Lease>* lease) {
        if (!parsed) {
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "ReadLeaves: the request does not parse");
        }
        return ServeReadLeaves(ctx, *req, out, lease);
      },
      parsed && ServedWhereReceived(*req), &read_pool_, [this] { in_flight_.fetch_sub(1); });
}

namespace {

// ReadLeavesShared's side of the sync stream: messages out, releases in.
class SharedReadStream final : public FrameWriter, public ChunkReleases {
 public:
  SharedReadStream(grpc::ServerReaderWriter<v1::ReadChunk, v1::ReadSharedRequest>* stream,
                   StreamGuard::Lease& lease)
      : stream_(stream), lease_(lease) {}

  bool WriteMessage(const v1::ReadChunk& message, grpc::WriteOptions options) override {
    return stream_->Write(message, options);
  }
  // Not sent on this call (ReadStream's ring leaves no data frame), but
  // any frame is a ReadChunk, so one would still go out whole.
  bool Write(const grpc::ByteBuffer& frame, grpc::WriteOptions options) override {
    grpc::ByteBuffer bytes(frame);
    v1::ReadChunk message;
    return grpc::SerializationTraits<v1::ReadChunk>::Deserialize(&bytes, &message).ok() &&
           stream_->Write(message, options);
  }

  // Releases come one message each, in order (the client sends release k
  // only after chunk k arrived, so none can pass what was sent).
  absl::Status Await(int64_t n) override {
    while (released_ < n) {
      v1::ReadSharedRequest message;
      if (!stream_->Read(&message)) return absl::CancelledError("client went away");
      lease_.Touch();
      if (message.kind_case() != v1::ReadSharedRequest::kChunksReleased ||
          message.chunks_released() != released_ + 1) {
        return absl::InvalidArgumentError(
            StrCat("ReadLeavesShared: expected the release of shm_data chunk ", released_ + 1,
                   " (", n, " awaited)"));
      }
      released_ = message.chunks_released();
    }
    return absl::OkStatus();
  }

 private:
  grpc::ServerReaderWriter<v1::ReadChunk, v1::ReadSharedRequest>* const stream_;
  StreamGuard::Lease& lease_;
  int64_t released_ = 0;
};

}  // namespace

grpc::Status TdStoreService::ReadLeavesShared(
    grpc::ServerContext* ctx, grpc::ServerReaderWriter<v1::ReadChunk, v1::ReadSharedRequest>* stream) {
  // The dict is named by the stream's first message, read under the
  // stream's lease (its idle timeout, the stream limit), as WriteLeaves'.
  return Serve(ctx, {}, [&](const Grant* grant, Sighting& seen) {
    auto lease = streams_.Enter(ctx);
    if (!lease.ok()) return ToGrpc(lease.status());
    v1::ReadSharedRequest first;
    if (!stream->Read(&first)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "ReadLeavesShared: no request");
    }
    (*lease)->Touch();
    if (first.kind_case() != v1::ReadSharedRequest::kRequest) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "ReadLeavesShared: the first message must be the request");
    }
    const v1::ReadLeavesRequest& request = first.request();
    if (!request.has_shm_reply()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "ReadLeavesShared: the request offers no reply span (shm_reply)");
    }
    if (auto s = Admit(grant, request.dict(), Access::kRead); !s.ok()) return s;
    seen.dict = request.dict();
    seen.dict_id = request.dict_id();
    if (auto s = CheckRequest(limits_, request); !s.ok()) return ToGrpc(s);
    SharedReadStream shared(stream, **lease);
    return ReadAdmitted(ctx, request, shared, **lease, &shared, seen);
  });
}

grpc::Status TdStoreService::ServeReadLeaves(grpc::ServerContextBase* ctx,
                                             const v1::ReadLeavesRequest& request,
                                             FrameWriter& writer,
                                             std::unique_ptr<StreamGuard::Lease>* kept) {
  return Serve(ctx, {request.dict(), Access::kRead, request.dict_id()},
               [&](const Grant*, Sighting& seen) {
                 if (auto s = CheckRequest(limits_, request); !s.ok()) return ToGrpc(s);
                 auto lease = streams_.Enter(ctx);
                 if (!lease.ok()) return ToGrpc(lease.status());
                 *kept = *std::move(lease);  // the reactor keeps it until the call is done
                 return ReadAdmitted(ctx, request, writer, **kept, nullptr, seen);
               });
}

grpc::Status TdStoreService::ReadAdmitted(grpc::ServerContextBase* ctx,
                                          const v1::ReadLeavesRequest& request,
                                          FrameWriter& writer, StreamGuard::Lease& lease,
                                          ChunkReleases* releases, Sighting& seen) {
  const v1::ReadLeavesRequest* req = &request;
  auto paths = PathsFromProto(req->paths());
  if (!paths.ok()) return ToGrpc(paths.status());
  // A SmallRead only for a client that said it reads one: to any other
  // it would look like an empty stream (docs/protocol.md, "Compatibility").
  const bool small_read = std::find(req->accepts().begin(), req->accepts().end(),
                                    v1::FRAME_SMALL_READ) != req->accepts().end();
  // A reply span that names no region tdstored holds fails the call (the
  // client lends a new one or reads over the socket): nothing was read.
  shm::Span reply_span;
  if (req->has_shm_reply()) {
    auto span = ResolveShmSpan(ctx, shm_regions_, req->shm_reply());
    if (!span.ok()) return ToGrpc(span.status());
    reply_span = *std::move(span);
  }
  ReadStream stream(ctx, &writer, lease, small_read, std::move(reply_span),
                    req->has_shm_reply() ? &req->shm_reply() : nullptr, releases);
  if (!req->has_index()) return ToGrpc(ReadWhole(*req, *paths, stream));
  std::optional<store::SchemaVersionSeen> after;
  absl::Status read = ReadIndexed(*req, *paths, stream, &after);
  if (read.ok()) seen.SawAfter(after);
  return ToGrpc(read);
}

absl::Status TdStoreService::ReadWhole(const v1::ReadLeavesRequest& req,
                                       const std::vector<LeafPath>& paths, ReadStream& stream) {
  ReadSink sink(stream, limits_);
  if (auto s = store_->Read({req.dict(), req.dict_id()}, paths, sink); !s.ok()) return s;
  return stream.End();
}

absl::Status TdStoreService::ReadIndexed(const v1::ReadLeavesRequest& req,
                                         const std::vector<LeafPath>& paths,
                                         ReadStream& stream,
                                         std::optional<store::SchemaVersionSeen>* version_after) {
  auto index = FromProto(req.index());
  if (!index.ok()) return index.status();
  // The whole selection is gathered first (bounded by max_indexed_bytes):
  // rows come from blocks in block order but go out in index order.
  auto result = store_->ReadIndexed({req.dict(), req.dict_id()}, *index, paths);
  if (!result.ok()) return result.status();
  *version_after = result->version_after;
  int64_t total_bytes = 0;
  for (const auto& leaf : result->leaves) total_bytes += static_cast<int64_t>(leaf.bytes.size());
  if (auto s = CheckLeafCount(limits_, static_cast<int64_t>(result->leaves.size())); !s.ok()) {
    return s;
  }
  if (auto s = CheckCallBytes(limits_, total_bytes); !s.ok()) return s;
  if (auto s = stream.Begin(result->result_shape, result->leaves.size(), total_bytes); !s.ok()) {
    return s;
  }
  for (store::IndexedReadResult::LeafData& leaf : result->leaves) {
    if (auto s = stream.Header(leaf.leaf.path, leaf.leaf.record, leaf.shape); !s.ok()) {
      return s;
    }
    if (auto s = stream.Data(store::ShareString(std::move(leaf.bytes))); !s.ok()) return s;
  }
  return stream.End();
}

grpc::Status TdStoreService::DeleteLeaves(grpc::ServerContext* ctx,
                                          const v1::DeleteLeavesRequest* req,
                                          v1::DeleteLeavesResponse* resp) {
  return Serve(ctx, {req->dict(), Access::kWrite, req->dict_id()}, [&](const Grant*, Sighting& seen) {
    if (auto s = CheckRequest(limits_, *req); !s.ok()) return NothingApplied(ctx, s);
    auto paths = PathsFromProto(req->paths());
    if (!paths.ok()) return ToGrpc(paths.status());
    auto removed = store_->DeleteLeaves({req->dict(), req->dict_id()}, *paths);
    if (!removed.ok()) return ToGrpc(removed.status());
    for (const LeafPath& p : removed->paths) ToProto(p, resp->add_deleted());
    resp->set_version(removed->version);
    seen.SawVersion(removed->version);
    return grpc::Status::OK;
  });
}

grpc::Status TdStoreService::ListKeys(grpc::ServerContext* ctx, const v1::ListKeysRequest* req,
                                      v1::ListKeysResponse* resp) {
  return Serve(ctx, {req->dict(), Access::kRead, req->dict_id()}, [&](const Grant*, Sighting& seen) {
    LeafPath prefix;
    if (req->has_prefix() && req->prefix().components_size() > 0) {
      if (auto s = CheckPath(limits_, req->prefix()); !s.ok()) return ToGrpc(s);
      auto path = FromProto(req->prefix());
      if (!path.ok()) return ToGrpc(path.status());
      prefix = *std::move(path);
    }
    auto schema = store_->Describe({req->dict(), req->dict_id()});
    if (!schema.ok()) return ToGrpc(schema.status());
    seen.Saw(schema->meta.id, schema->meta.version);
    if (!prefix.empty()) {
      switch (schema->Classify(prefix)) {
        case store::DictSchema::PathKind::kLeaf:
          return ToGrpc(absl::InvalidArgumentError(
              StrCat("'", PathToDisplay(prefix), "' is a leaf, not a sub-dict")));
        case store::DictSchema::PathKind::kAbsent:
          return ToGrpc(absl::NotFoundError(StrCat("dict '", req->dict(), "' has no sub-dict '",
                                                   PathToDisplay(prefix), "'")));
        case store::DictSchema::PathKind::kNode:
          break;
      }
    }
    for (const LeafPath& p :
         ListKeysUnder(schema->LeafPaths(), prefix, req->include_nested(), req->leaves_only())) {
      ToProto(p, resp->add_keys());
    }
    return grpc::Status::OK;
  });
}

grpc::Status TdStoreService::Exists(grpc::ServerContext* ctx, const v1::ExistsRequest* req,
                                    v1::ExistsResponse* resp) {
  return Serve(ctx, {req->dict(), Access::kRead, req->dict_id()}, [&](const Grant*, Sighting& seen) {
    if (auto s = CheckPath(limits_, req->path()); !s.ok()) return ToGrpc(s);
    auto path = FromProto(req->path());
    if (!path.ok()) return ToGrpc(path.status());
    auto schema = store_->Describe({req->dict(), req->dict_id()});
    if (!schema.ok()) return ToGrpc(schema.status());
    seen.Saw(schema->meta.id, schema->meta.version);
    switch (schema->Classify(*path)) {
      case store::DictSchema::PathKind::kLeaf:
        resp->set_kind(v1::ExistsResponse::LEAF);
        break;
      case store::DictSchema::PathKind::kNode:
        resp->set_kind(v1::ExistsResponse::NODE);
        break;
      case store::DictSchema::PathKind::kAbsent:
        resp->set_kind(v1::ExistsResponse::ABSENT);
        break;
    }
    return grpc::Status::OK;
  });
}

grpc::Status TdStoreService::AppendRows(
    grpc::ServerContext* ctx, grpc::ServerReaderWriter<v1::AppendAck, v1::AppendRequest>* stream) {
  // The dict is named by the stream's first message: admitted below.
  return Serve(ctx, {}, [&](const Grant* grant, Sighting& seen) {
    auto lease = streams_.Enter(ctx);
    if (!lease.ok()) return NothingApplied(ctx, lease.status());
    v1::AppendRequest request;
    if (!stream->Read(&request) || request.kind_case() != v1::AppendRequest::kBegin) {
      return NothingApplied(
          ctx, absl::InvalidArgumentError("an append stream must start with AppendBegin"));
    }
    (*lease)->Touch();
    const v1::AppendBegin begin = request.begin();
    if (auto s = Admit(grant, begin.dict(), Access::kWrite); !s.ok()) return s;
    seen.dict = begin.dict();
    seen.dict_id = begin.dict_id();
    if (auto s = CheckPaths(limits_, begin.leaves()); !s.ok()) return NothingApplied(ctx, s);
    auto paths = PathsFromProto(begin.leaves());
    if (!paths.ok()) return NothingApplied(ctx, paths.status());
    auto append = store_->OpenAppend({begin.dict(), begin.dict_id()}, *paths);
    if (!append.ok()) return NothingApplied(ctx, append.status());

    v1::AppendAck ack;
    while (stream->Read(&request)) {
      (*lease)->Touch();
      if (request.kind_case() != v1::AppendRequest::kBatch) {
        return ToGrpc(absl::InvalidArgumentError("AppendBegin may appear only once, first"));
      }
      v1::RowBatch& batch = *request.mutable_batch();
      std::vector<std::string> leaf_rows;
      leaf_rows.reserve(static_cast<size_t>(batch.leaf_rows_size()));
      // No copy: the request is done with its rows.
      for (std::string& rows : *batch.mutable_leaf_rows()) leaf_rows.push_back(std::move(rows));
      const absl::Status status =
          (*append)->Append(batch.start_row(), batch.rows(), std::move(leaf_rows));
      ack.set_sequence(request.batch().sequence());
      ack.set_code(static_cast<int32_t>(status.code()));
      ack.set_message(std::string(status.message()));
      if (!stream->Write(ack)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      (*lease)->Touch();
    }
    if (ctx->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "append stream cancelled");
    return grpc::Status::OK;
  });
}

}  // namespace tdstore::service
