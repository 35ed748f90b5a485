#include "server/service/tdstore_service.h"

#include <map>

#include "common/str_cat.h"
#include "server/service/proto_convert.h"
#include "server/store/leaf_reader.h"
#include "server/store/leaf_writer.h"

namespace tdstore::service {

grpc::Status TdStoreService::CreateDict(grpc::ServerContext*, const v1::CreateDictRequest* req,
                                        v1::DictInfo* resp) {
  auto schema = store_->CreateDict(req->name(), ShapeFromProto(req->batch_shape()),
                                   req->options().rows_per_block(), req->options().part_bytes());
  if (!schema.ok()) return ToGrpc(schema.status());
  ToProto(*schema, resp);
  return grpc::Status::OK;
}

grpc::Status TdStoreService::DescribeDict(grpc::ServerContext*,
                                          const v1::DescribeDictRequest* req, v1::DictInfo* resp) {
  auto schema = store_->LoadDict(req->name());
  if (!schema.ok()) return ToGrpc(schema.status());
  ToProto(*schema, resp);
  return grpc::Status::OK;
}

grpc::Status TdStoreService::ListDicts(grpc::ServerContext*, const v1::ListDictsRequest*,
                                       v1::ListDictsResponse* resp) {
  auto names = store_->ListDicts();
  if (!names.ok()) return ToGrpc(names.status());
  for (const std::string& n : *names) resp->add_names(n);
  return grpc::Status::OK;
}

grpc::Status TdStoreService::DeleteDict(grpc::ServerContext*, const v1::DeleteDictRequest* req,
                                        v1::DeleteDictResponse*) {
  return ToGrpc(store_->DeleteDict(req->name()));
}

grpc::Status TdStoreService::RenameDict(grpc::ServerContext*, const v1::RenameDictRequest* req,
                                        v1::DictInfo* resp) {
  auto schema = store_->RenameDict(req->name(), req->new_name());
  if (!schema.ok()) return ToGrpc(schema.status());
  ToProto(*schema, resp);
  return grpc::Status::OK;
}

grpc::Status TdStoreService::WriteLeaves(grpc::ServerContext* ctx,
                                         grpc::ServerReader<v1::WriteChunk>* reader,
                                         v1::WriteLeavesResponse* resp) {
  v1::WriteChunk chunk;
  if (!reader->Read(&chunk)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "empty write stream");
  }
  if (chunk.kind_case() != v1::WriteChunk::kBegin) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a write stream must start with WriteBegin");
  }
  auto txn = store::WriteTxn::Begin(store_, chunk.begin().dict());
  if (!txn.ok()) return ToGrpc(txn.status());

  // Any early return destroys the transaction, which aborts it: nothing
  // becomes visible and the blocks written so far are deleted.
  while (reader->Read(&chunk)) {
    absl::Status status;
    switch (chunk.kind_case()) {
      case v1::WriteChunk::kHeader: {
        const v1::LeafHeader& h = chunk.header();
        auto path = FromProto(h.path());
        if (!path.ok()) return ToGrpc(path.status());
        auto dtype = FromProto(h.dtype());
        if (!dtype.ok()) {
          return ToGrpc(absl::InvalidArgumentError(
              StrCat("leaf '", PathToDisplay(*path), "': ", dtype.status().message())));
        }
        status = (*txn)->BeginLeaf(*path, *dtype, ShapeFromProto(h.shape()), h.byte_size());
        break;
      }
      case v1::WriteChunk::kData:
        if (static_cast<int64_t>(chunk.data().size()) > kMaxChunkBytes) {
          return ToGrpc(absl::InvalidArgumentError(StrCat(
              "data chunk of ", chunk.data().size(), " bytes exceeds the 1 MiB chunk limit")));
        }
        status = (*txn)->Append(chunk.data());
        break;
      default:
        return ToGrpc(absl::InvalidArgumentError("WriteBegin may appear only once, first"));
    }
    if (!status.ok()) return ToGrpc(status);
  }
  // Read() returns false both when the client half-closes (commit) and when
  // the call breaks (abort): only the former may commit.
  if (ctx->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "write stream cancelled; nothing written");
  }
  auto result = (*txn)->Commit();
  if (!result.ok()) return ToGrpc(result.status());
  for (const store::Leaf& leaf : result->written) ToProto(leaf, resp->add_written());
  resp->set_version(result->version);
  return grpc::Status::OK;
}

grpc::Status TdStoreService::ReadLeaves(grpc::ServerContext* ctx,
                                        const v1::ReadLeavesRequest* req,
                                        grpc::ServerWriter<v1::ReadChunk>* writer) {
  auto schema = store_->LoadDict(req->dict());
  if (!schema.ok()) return ToGrpc(schema.status());

  // Resolve every requested path (leaf or prefix) before sending anything.
  std::map<std::string, const store::Leaf*> selected;  // encoded path order
  if (req->paths().empty()) {
    for (const auto& [encoded, leaf] : schema->leaves) selected.emplace(encoded, &leaf);
  }
  for (const v1::Path& p : req->paths()) {
    auto path = FromProto(p);
    if (!path.ok()) return ToGrpc(path.status());
    std::vector<const store::Leaf*> under = schema->Under(*path);
    if (under.empty()) {
      return ToGrpc(absl::NotFoundError(StrCat("dict '", req->dict(), "' has no leaf '",
                                               PathToDisplay(*path), "'")));
    }
    for (const store::Leaf* leaf : under) selected.emplace(EncodePath(leaf->path), leaf);
  }

  v1::ReadChunk out;
  v1::ReadBegin* begin = out.mutable_begin();
  for (int64_t d : schema->meta.batch_shape) begin->add_batch_shape(d);
  begin->set_leaf_count(static_cast<int32_t>(selected.size()));
  if (!writer->Write(out)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");

  for (const auto& [_, leaf] : selected) {
    out.Clear();
    v1::LeafHeader* h = out.mutable_header();
    ToProto(leaf->path, h->mutable_path());
    h->set_dtype(static_cast<v1::DType>(leaf->record.dtype));
    for (int64_t d : leaf->record.shape) h->add_shape(d);
    auto bytes = ByteSize(leaf->record.shape, DTypeSize(leaf->record.dtype));
    h->set_byte_size(bytes.ok() ? *bytes : 0);
    if (!writer->Write(out)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");

    absl::Status status = store::ReadLeaf(*store_, *schema, *leaf, [&](std::string_view bytes) {
      if (ctx->IsCancelled()) return absl::CancelledError("client went away");
      out.Clear();
      out.set_data(bytes.data(), bytes.size());
      if (!writer->Write(out)) return absl::CancelledError("client went away");
      return absl::OkStatus();
    });
    if (!status.ok()) return ToGrpc(status);
  }
  return grpc::Status::OK;
}

grpc::Status TdStoreService::DeleteLeaves(grpc::ServerContext*,
                                          const v1::DeleteLeavesRequest* req,
                                          v1::DeleteLeavesResponse* resp) {
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

grpc::Status TdStoreService::ListKeys(grpc::ServerContext*, const v1::ListKeysRequest* req,
                                      v1::ListKeysResponse* resp) {
  auto schema = store_->LoadDict(req->dict());
  if (!schema.ok()) return ToGrpc(schema.status());
  for (const LeafPath& p : schema->Keys(req->include_nested(), req->leaves_only())) {
    ToProto(p, resp->add_keys());
  }
  return grpc::Status::OK;
}

grpc::Status TdStoreService::Exists(grpc::ServerContext*, const v1::ExistsRequest* req,
                                    v1::ExistsResponse* resp) {
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
