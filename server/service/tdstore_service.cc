#include "server/service/tdstore_service.h"

#include <map>
#include <thread>

#include "common/str_cat.h"
#include "server/service/proto_convert.h"
#include "server/service/request_limits.h"
#include "server/store/redis_errors.h"
#include "server/store/indexed_access.h"
#include "server/store/leaf_reader.h"
#include "server/store/leaf_writer.h"

namespace tdstore::service {
namespace {

// Returns `status` as a gRPC status, telling the client (trailing metadata
// `tdstore-applied: none`) that the failed call changed nothing and may be
// retried as it is. Only for failures that are known not to have applied
// anything: never for an outcome-unknown one.
grpc::Status NothingApplied(grpc::ServerContext* ctx, const absl::Status& status) {
  if (!status.ok() && !store::IsOutcomeUnknown(status)) {
    ctx->AddTrailingMetadata("tdstore-applied", "none");
  }
  return ToGrpc(status);
}

// A call that arrived after SIGTERM: nothing done, retry elsewhere or later.
grpc::Status Draining(grpc::ServerContext* ctx) {
  return NothingApplied(ctx, absl::UnavailableError("tdstored is shutting down"));
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

TdStoreService::TdStoreService(store::DictStore* store, redis::RedisClient* redis,
                               ServiceOptions options)
    : store_(store),
      redis_(redis),
      limits_(options.limits),
      access_(std::make_shared<const AccessControl>(std::move(options.access))),
      streams_(options.limits.max_concurrent_streams, options.limits.idle_stream_timeout) {}

void TdStoreService::ReplaceAccessControl(AccessControl access) {
  auto replacement = std::make_shared<const AccessControl>(std::move(access));
  std::lock_guard<std::mutex> lock(access_mu_);
  access_ = std::move(replacement);
}

std::shared_ptr<const AccessControl> TdStoreService::CurrentAccess() const {
  std::lock_guard<std::mutex> lock(access_mu_);
  return access_;
}

grpc::Status TdStoreService::Admit(const grpc::ServerContext& ctx, std::string_view name,
                                   Access access) const {
  // `grants` keeps the Grant that Authenticate points into alive.
  const std::shared_ptr<const AccessControl> grants = CurrentAccess();
  auto grant = grants->Authenticate(ctx);
  if (!grant.ok()) return AccessToGrpc(grant.status());
  if (auto s = CheckDictName(limits_, name); !s.ok()) return ToGrpc(s);
  return AccessToGrpc(AccessControl::Authorize(*grant, name, access));
}

grpc::Status TdStoreService::GetServerInfo(grpc::ServerContext* ctx,
                                           const v1::GetServerInfoRequest*,
                                           v1::ServerInfo* resp) {
  CallScope call(this);
  if (call.refused()) return Draining(ctx);
  if (auto who = CurrentAccess()->Authenticate(*ctx); !who.ok()) {
    return AccessToGrpc(who.status());
  }
  resp->set_version(TDSTORE_VERSION);
  resp->set_backend(redis_->Describe());
  auto pongs = redis_->CallOnEveryMaster({"PING"});
  bool ok = pongs.ok();
  if (ok) {
    for (const redis::Reply& pong : *pongs) ok = ok && !pong.is_error();
  }
  resp->set_redis_ok(ok);
  resp->set_redis_masters(pongs.ok() ? static_cast<int32_t>(pongs->size()) : 0);
  return grpc::Status::OK;
}

grpc::Status TdStoreService::CreateDict(grpc::ServerContext* ctx,
                                        const v1::CreateDictRequest* req, v1::DictInfo* resp) {
  CallScope call(this);
  if (call.refused()) return Draining(ctx);
  if (auto s = Admit(*ctx, req->name(), Access::kWrite); !s.ok()) return s;
  if (auto s = CheckRequest(limits_, *req); !s.ok()) return ToGrpc(s);
  // Check the schema before creating anything: a rejected create writes
  // nothing.
  const Shape batch = ShapeFromProto(req->batch_shape());
  std::vector<store::ZeroLeaf> leaves;
  int64_t schema_bytes = 0;  // checked against the quotas before creating
  for (const v1::LeafSpec& spec : req->leaves()) {
    auto path = FromProto(spec.path());
    if (!path.ok()) return ToGrpc(path.status());
    auto dtype = FromProto(spec.dtype());
    if (!dtype.ok()) return ToGrpc(dtype.status());
    Shape shape = batch;
    shape.insert(shape.end(), spec.element_shape().begin(), spec.element_shape().end());
    if (auto s = ValidateShape(shape, StrCat("shape of leaf '", PathToDisplay(*path), "'"));
        !s.ok()) {
      return ToGrpc(s);
    }
    auto bytes = ByteSize(shape, DTypeSize(*dtype));
    if (!bytes.ok()) return ToGrpc(bytes.status());
    schema_bytes += *bytes;
    for (const store::ZeroLeaf& other : leaves) {
      if (IsPathPrefix(other.path, *path) || IsPathPrefix(*path, other.path)) {
        return ToGrpc(absl::InvalidArgumentError(
            StrCat("schema leaves '", PathToDisplay(other.path), "' and '", PathToDisplay(*path),
                   "' overlap")));
      }
    }
    leaves.push_back({*std::move(path), *dtype, std::move(shape)});
  }
  auto schema = store_->CreateDict(req->name(), batch, req->options().rows_per_block(),
                                   req->options().part_bytes(), schema_bytes);
  if (!schema.ok()) return NothingApplied(ctx, schema.status());
  if (!leaves.empty()) {
    if (auto s = store::CreateZeroFilledLeaves(store_, req->name(), leaves); !s.ok()) {
      // Take the half-made dict back rather than leave it without its schema.
      if (store_->DeleteDict(req->name()).ok()) return NothingApplied(ctx, s);
      return ToGrpc(s);
    }
    schema = store_->LoadDict(req->name());
    if (!schema.ok()) return ToGrpc(schema.status());
  }
  ToProto(*schema, resp);
  return grpc::Status::OK;
}

grpc::Status TdStoreService::DescribeDict(grpc::ServerContext* ctx,
                                          const v1::DescribeDictRequest* req, v1::DictInfo* resp) {
  CallScope call(this);
  if (call.refused()) return Draining(ctx);
  if (auto s = Admit(*ctx, req->name(), Access::kRead); !s.ok()) return s;
  auto schema = store_->LoadDict(req->name());
  if (!schema.ok()) return ToGrpc(schema.status());
  ToProto(*schema, resp);
  return grpc::Status::OK;
}

grpc::Status TdStoreService::ListDicts(grpc::ServerContext* ctx, const v1::ListDictsRequest*,
                                       v1::ListDictsResponse* resp) {
  CallScope call(this);
  if (call.refused()) return Draining(ctx);
  const std::shared_ptr<const AccessControl> grants = CurrentAccess();
  auto grant = grants->Authenticate(*ctx);
  if (!grant.ok()) return AccessToGrpc(grant.status());
  auto names = store_->ListDicts();
  if (!names.ok()) return ToGrpc(names.status());
  // A token sees only the dicts under its prefixes.
  for (const std::string& n : *names) {
    if (AccessControl::CanSee(*grant, n)) resp->add_names(n);
  }
  return grpc::Status::OK;
}

grpc::Status TdStoreService::DeleteDict(grpc::ServerContext* ctx,
                                        const v1::DeleteDictRequest* req,
                                        v1::DeleteDictResponse*) {
  CallScope call(this);
  if (call.refused()) return Draining(ctx);
  if (auto s = Admit(*ctx, req->name(), Access::kWrite); !s.ok()) return s;
  return ToGrpc(store_->DeleteDict(req->name()));
}

grpc::Status TdStoreService::RenameDict(grpc::ServerContext* ctx,
                                        const v1::RenameDictRequest* req, v1::DictInfo* resp) {
  CallScope call(this);
  if (call.refused()) return Draining(ctx);
  // Both names must be the caller's: renaming moves data between prefixes.
  if (auto s = Admit(*ctx, req->name(), Access::kWrite); !s.ok()) return s;
  if (auto s = Admit(*ctx, req->new_name(), Access::kWrite); !s.ok()) return s;
  auto schema = store_->RenameDict(req->name(), req->new_name());
  if (!schema.ok()) return ToGrpc(schema.status());
  ToProto(*schema, resp);
  return grpc::Status::OK;
}

grpc::Status TdStoreService::WriteLeaves(grpc::ServerContext* ctx,
                                         grpc::ServerReader<v1::WriteChunk>* reader,
                                         v1::WriteLeavesResponse* resp) {
  CallScope call(this);
  if (call.refused()) return Draining(ctx);
  auto lease = streams_.Enter(ctx);
  if (!lease.ok()) return NothingApplied(ctx, lease.status());
  v1::WriteChunk chunk;
  if (!reader->Read(&chunk)) {
    return NothingApplied(ctx, absl::InvalidArgumentError("empty write stream"));
  }
  (*lease)->Touch();
  if (chunk.kind_case() != v1::WriteChunk::kBegin) {
    return NothingApplied(ctx,
                          absl::InvalidArgumentError("a write stream must start with WriteBegin"));
  }
  const v1::WriteBegin begin = chunk.begin();
  if (auto s = Admit(*ctx, begin.dict(), Access::kWrite); !s.ok()) return s;
  if (auto s = CheckRequest(limits_, begin); !s.ok()) return NothingApplied(ctx, s);
  if (begin.has_index()) return WriteIndexed(ctx, reader, begin, resp, **lease);
  // Every failure of a whole-leaf write leaves nothing visible (the
  // transaction aborts), except a commit whose outcome is unknown.
  return NothingApplied(ctx, WriteWhole(ctx, reader, begin, resp, **lease));
}

absl::Status TdStoreService::WriteWhole(grpc::ServerContext* ctx,
                                        grpc::ServerReader<v1::WriteChunk>* reader,
                                        const v1::WriteBegin& begin,
                                        v1::WriteLeavesResponse* resp, StreamGuard::Lease& lease) {
  const int32_t announced_leaves = begin.leaf_count();
  int32_t headers = 0;
  int64_t declared_bytes = 0;
  auto txn = store::WriteTxn::Begin(store_, begin.dict());
  if (!txn.ok()) return txn.status();

  // Any early return destroys the transaction, which aborts it: nothing
  // becomes visible and the blocks written so far are deleted.
  v1::WriteChunk chunk;
  while (reader->Read(&chunk)) {
    lease.Touch();
    absl::Status status;
    switch (chunk.kind_case()) {
      case v1::WriteChunk::kHeader: {
        const v1::LeafHeader& h = chunk.header();
        if (auto s = CheckLeafCount(limits_, headers + 1); !s.ok()) return s;
        if (auto s = CheckPath(limits_, h.path()); !s.ok()) return s;
        declared_bytes += std::max<int64_t>(0, h.byte_size());
        if (auto s = CheckCallBytes(limits_, declared_bytes); !s.ok()) return s;
        auto path = FromProto(h.path());
        if (!path.ok()) return path.status();
        auto dtype = FromProto(h.dtype());
        if (!dtype.ok()) {
          return absl::InvalidArgumentError(
              StrCat("leaf '", PathToDisplay(*path), "': ", dtype.status().message()));
        }
        ++headers;
        status = (*txn)->BeginLeaf(*path, *dtype, ShapeFromProto(h.shape()), h.byte_size());
        break;
      }
      case v1::WriteChunk::kData:
        if (static_cast<int64_t>(chunk.data().size()) > kMaxChunkBytes) {
          return absl::InvalidArgumentError(StrCat(
              "data chunk of ", chunk.data().size(), " bytes exceeds the 1 MiB chunk limit"));
        }
        status = (*txn)->Append(chunk.data());
        break;
      default:
        return absl::InvalidArgumentError("WriteBegin may appear only once, first");
    }
    if (!status.ok()) return status;
  }
  // Read() returns false both when the client half-closes (commit) and when
  // the call breaks (abort): only the former may commit.
  if (ctx->IsCancelled()) {
    return absl::CancelledError(lease.timed_out()
                                    ? "write stream idle too long (--idle-stream-timeout-ms); "
                                      "nothing written"
                                    : "write stream cancelled; nothing written");
  }
  if (announced_leaves > 0 && headers != announced_leaves) {
    return absl::InvalidArgumentError(StrCat("the stream announced ", announced_leaves,
                                             " leaves but carried ", headers,
                                             "; nothing written"));
  }
  auto result = (*txn)->Commit();
  if (!result.ok()) return result.status();
  for (const store::Leaf& leaf : result->written) ToProto(leaf, resp->add_written());
  resp->set_version(result->version);
  return absl::OkStatus();
}

namespace {

// Writes one LeafHeader message.
bool SendHeader(grpc::ServerWriter<v1::ReadChunk>* writer, const LeafPath& path, DType dtype,
                const Shape& shape) {
  v1::ReadChunk out;
  v1::LeafHeader* h = out.mutable_header();
  ToProto(path, h->mutable_path());
  h->set_dtype(static_cast<v1::DType>(dtype));
  for (int64_t d : shape) h->add_shape(d);
  auto bytes = ByteSize(shape, DTypeSize(dtype));
  h->set_byte_size(bytes.ok() ? *bytes : 0);
  return writer->Write(out);
}

bool SendBegin(grpc::ServerWriter<v1::ReadChunk>* writer, const Shape& batch_shape,
               size_t leaf_count) {
  v1::ReadChunk out;
  v1::ReadBegin* begin = out.mutable_begin();
  for (int64_t d : batch_shape) begin->add_batch_shape(d);
  begin->set_leaf_count(static_cast<int32_t>(leaf_count));
  return writer->Write(out);
}

const grpc::Status kClientGone(grpc::StatusCode::CANCELLED, "client went away");

}  // namespace

grpc::Status TdStoreService::ReadLeaves(grpc::ServerContext* ctx,
                                        const v1::ReadLeavesRequest* req,
                                        grpc::ServerWriter<v1::ReadChunk>* writer) {
  CallScope call(this);
  if (call.refused()) return Draining(ctx);
  if (auto s = Admit(*ctx, req->dict(), Access::kRead); !s.ok()) return s;
  if (auto s = CheckRequest(limits_, *req); !s.ok()) return ToGrpc(s);
  auto lease = streams_.Enter(ctx);
  if (!lease.ok()) return ToGrpc(lease.status());
  std::vector<LeafPath> paths;
  for (const v1::Path& p : req->paths()) {
    auto path = FromProto(p);
    if (!path.ok()) return ToGrpc(path.status());
    paths.push_back(*std::move(path));
  }
  if (req->has_index()) return ReadIndexed(ctx, req, paths, writer, **lease);

  auto schema = store_->LoadDict(req->dict());
  if (!schema.ok()) return ToGrpc(schema.status());
  // Resolve every requested path (leaf or prefix) before sending anything.
  auto selected = schema->Select(paths);
  if (!selected.ok()) return ToGrpc(selected.status());
  if (auto s = CheckLeafCount(limits_, static_cast<int64_t>(selected->size())); !s.ok()) {
    return ToGrpc(s);
  }
  int64_t total_bytes = 0;
  for (const store::Leaf* leaf : *selected) {
    auto bytes = ByteSize(leaf->record.shape, DTypeSize(leaf->record.dtype));
    if (bytes.ok()) total_bytes += *bytes;
  }
  if (auto s = CheckCallBytes(limits_, total_bytes); !s.ok()) return ToGrpc(s);

  if (!SendBegin(writer, schema->meta.batch_shape, selected->size())) return kClientGone;
  v1::ReadChunk out;
  for (const store::Leaf* leaf : *selected) {
    if (!SendHeader(writer, leaf->path, leaf->record.dtype, leaf->record.shape)) {
      return kClientGone;
    }

    absl::Status status = store::ReadLeaf(*store_, *schema, *leaf, [&](std::string_view bytes) {
      if (ctx->IsCancelled()) return absl::CancelledError("client went away");
      out.Clear();
      out.set_data(bytes.data(), bytes.size());
      // Write() blocks while the client does not read (flow control); the
      // stream guard cancels the call if that lasts too long.
      if (!writer->Write(out)) return absl::CancelledError("client went away");
      (*lease)->Touch();
      return absl::OkStatus();
    });
    if (!status.ok()) return ToGrpc(status);
  }
  return grpc::Status::OK;
}

grpc::Status TdStoreService::ReadIndexed(grpc::ServerContext* ctx,
                                         const v1::ReadLeavesRequest* req,
                                         const std::vector<LeafPath>& paths,
                                         grpc::ServerWriter<v1::ReadChunk>* writer,
                                         StreamGuard::Lease& lease) {
  auto index = FromProto(req->index());
  if (!index.ok()) return ToGrpc(index.status());
  // The whole selection is gathered first (bounded by max_indexed_bytes):
  // rows come from blocks in block order but go out in index order.
  auto result = store::ReadIndexedLeaves(*store_, req->dict(), *index, paths);
  if (!result.ok()) return ToGrpc(result.status());
  int64_t total_bytes = 0;
  for (const auto& leaf : result->leaves) total_bytes += static_cast<int64_t>(leaf.bytes.size());
  if (auto s = CheckLeafCount(limits_, static_cast<int64_t>(result->leaves.size())); !s.ok()) {
    return ToGrpc(s);
  }
  if (auto s = CheckCallBytes(limits_, total_bytes); !s.ok()) return ToGrpc(s);
  lease.Touch();

  if (!SendBegin(writer, result->result_shape, result->leaves.size())) return kClientGone;
  v1::ReadChunk out;
  for (const store::IndexedReadResult::LeafData& leaf : result->leaves) {
    if (!SendHeader(writer, leaf.leaf.path, leaf.leaf.record.dtype, leaf.shape)) {
      return kClientGone;
    }
    for (size_t at = 0; at < leaf.bytes.size(); at += kMaxChunkBytes) {
      if (ctx->IsCancelled()) return kClientGone;
      out.Clear();
      out.set_data(leaf.bytes.data() + at,
                   std::min<size_t>(kMaxChunkBytes, leaf.bytes.size() - at));
      if (!writer->Write(out)) return kClientGone;
      lease.Touch();
    }
  }
  return grpc::Status::OK;
}

grpc::Status TdStoreService::WriteIndexed(grpc::ServerContext* ctx,
                                          grpc::ServerReader<v1::WriteChunk>* reader,
                                          const v1::WriteBegin& begin,
                                          v1::WriteLeavesResponse* resp,
                                          StreamGuard::Lease& lease) {
  // Until the store call at the end nothing is written, so every failure
  // before it tells the client so.
  auto reject = [ctx](const absl::Status& s) { return NothingApplied(ctx, s); };
  auto index = FromProto(begin.index());
  if (!index.ok()) return reject(index.status());
  // Every value is received and checked before anything is written: the
  // rows of all leaves in one block go to Redis in one script call.
  // The values are held until the write: each header's bytes (and what
  // the write will make of them, store::IndexedWriteLease) are leased from
  // the memory budget before they are received. While this call waits
  // for the budget it reads nothing, so gRPC's flow control stops the
  // client instead of letting its data pile up here. Declared before the
  // values so that it is returned after they are freed.
  store::MemoryBudget::Lease held = store_->budget().Empty();
  std::vector<store::IndexedWriteValue> values;
  std::vector<int64_t> declared;  // byte count each header announced
  int64_t received = 0;
  auto incomplete = [&]() -> absl::Status {
    if (values.empty() || static_cast<int64_t>(values.back().bytes.size()) == declared.back()) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(
        StrCat("leaf '", PathToDisplay(values.back().path), "': header announced ",
               declared.back(), " bytes but ", values.back().bytes.size(), " arrived"));
  };
  v1::WriteChunk chunk;
  while (reader->Read(&chunk)) {
    lease.Touch();
    switch (chunk.kind_case()) {
      case v1::WriteChunk::kHeader: {
        const v1::LeafHeader& h = chunk.header();
        auto path = FromProto(h.path());
        if (!path.ok()) return reject(path.status());
        auto dtype = FromProto(h.dtype());
        if (!dtype.ok()) return reject(dtype.status());
        if (auto s = incomplete(); !s.ok()) return reject(s);
        if (h.byte_size() < 0) return reject(absl::InvalidArgumentError("negative byte count"));
        if (auto s = CheckLeafCount(limits_, static_cast<int64_t>(values.size()) + 1); !s.ok()) {
          return reject(s);
        }
        if (auto s = CheckPath(limits_, h.path()); !s.ok()) return reject(s);
        // Refused before buffering: the selection limit bounds what is held.
        if (received + h.byte_size() > store_->options().max_indexed_bytes) {
          return reject(absl::ResourceExhaustedError(
              StrCat("an indexed write may carry at most ", store_->options().max_indexed_bytes,
                     " bytes (--max-indexed-bytes)")));
        }
        if (auto s = held.Grow(store::IndexedWriteLease(h.byte_size(), values.empty()),
                               "an indexed write");
            !s.ok()) {
          return reject(s);
        }
        store::IndexedWriteValue& v = values.emplace_back();
        v.bytes.reserve(static_cast<size_t>(h.byte_size()));
        v.path = *std::move(path);
        v.dtype = *dtype;
        v.shape = ShapeFromProto(h.shape());
        declared.push_back(h.byte_size());
        break;
      }
      case v1::WriteChunk::kData: {
        if (values.empty()) {
          return reject(absl::InvalidArgumentError("data arrived before any leaf header"));
        }
        const std::string& data = chunk.data();
        if (static_cast<int64_t>(data.size()) > kMaxChunkBytes) {
          return reject(absl::InvalidArgumentError("data chunk exceeds the 1 MiB chunk limit"));
        }
        store::IndexedWriteValue& v = values.back();
        if (static_cast<int64_t>(v.bytes.size() + data.size()) > declared.back()) {
          return reject(absl::InvalidArgumentError(StrCat(
              "leaf '", PathToDisplay(v.path), "': more data than the ", declared.back(),
              " bytes its header announced")));
        }
        received += static_cast<int64_t>(data.size());
        if (auto s = CheckCallBytes(limits_, received); !s.ok()) return reject(s);
        if (received > store_->options().max_indexed_bytes) {
          return reject(absl::ResourceExhaustedError(
              StrCat("an indexed write may carry at most ", store_->options().max_indexed_bytes,
                     " bytes")));
        }
        v.bytes.append(data);
        break;
      }
      default:
        return reject(absl::InvalidArgumentError("WriteBegin may appear only once, first"));
    }
  }
  if (ctx->IsCancelled()) {
    return reject(absl::CancelledError(lease.timed_out()
                                           ? "write stream idle too long "
                                             "(--idle-stream-timeout-ms); nothing written"
                                           : "write stream cancelled; nothing written"));
  }
  if (auto s = incomplete(); !s.ok()) return reject(s);
  if (begin.leaf_count() > 0 && static_cast<size_t>(begin.leaf_count()) != values.size()) {
    return reject(absl::InvalidArgumentError(
        StrCat("the stream announced ", begin.leaf_count(), " leaves but carried ", values.size(),
               "; nothing written")));
  }
  auto written = store::WriteIndexedLeaves(store_, begin.dict(), *index, values, held);
  if (!written.ok()) return ToGrpc(written.status());
  for (const store::Leaf& leaf : *written) ToProto(leaf, resp->add_written());
  return grpc::Status::OK;
}

grpc::Status TdStoreService::DeleteLeaves(grpc::ServerContext* ctx,
                                          const v1::DeleteLeavesRequest* req,
                                          v1::DeleteLeavesResponse* resp) {
  CallScope call(this);
  if (call.refused()) return Draining(ctx);
  if (auto s = Admit(*ctx, req->dict(), Access::kWrite); !s.ok()) return s;
  if (auto s = CheckRequest(limits_, *req); !s.ok()) return NothingApplied(ctx, s);
  std::vector<LeafPath> paths;
  for (const v1::Path& p : req->paths()) {
    auto path = FromProto(p);
    if (!path.ok()) return ToGrpc(path.status());
    paths.push_back(*std::move(path));
  }
  auto removed = store_->DeleteLeaves(req->dict(), paths);
  if (!removed.ok()) return ToGrpc(removed.status());
  for (const LeafPath& p : *removed) ToProto(p, resp->add_deleted());
  return grpc::Status::OK;
}

grpc::Status TdStoreService::ListKeys(grpc::ServerContext* ctx, const v1::ListKeysRequest* req,
                                      v1::ListKeysResponse* resp) {
  CallScope call(this);
  if (call.refused()) return Draining(ctx);
  if (auto s = Admit(*ctx, req->dict(), Access::kRead); !s.ok()) return s;
  auto schema = store_->LoadDict(req->dict());
  if (!schema.ok()) return ToGrpc(schema.status());
  for (const LeafPath& p : schema->Keys(req->include_nested(), req->leaves_only())) {
    ToProto(p, resp->add_keys());
  }
  return grpc::Status::OK;
}

grpc::Status TdStoreService::Exists(grpc::ServerContext* ctx, const v1::ExistsRequest* req,
                                    v1::ExistsResponse* resp) {
  CallScope call(this);
  if (call.refused()) return Draining(ctx);
  if (auto s = Admit(*ctx, req->dict(), Access::kRead); !s.ok()) return s;
  if (auto s = CheckPath(limits_, req->path()); !s.ok()) return ToGrpc(s);
  auto path = FromProto(req->path());
  if (!path.ok()) return ToGrpc(path.status());
  auto schema = store_->LoadDict(req->dict());
  if (!schema.ok()) return ToGrpc(schema.status());
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
}

}  // namespace tdstore::service
