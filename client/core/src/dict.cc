// core::Dict: the calls on one dict.
#include "client/core/src/client_impl.h"
#include "client/core/src/convert.h"
#include "client/core/src/handle.h"
#include "client/core/src/leaf_streams.h"

namespace tdstore::core {

Client Dict::client() const { return Client(impl_); }

void Dict::write(const std::vector<LeafData>& leaves, const WriteOptions& options) const {
  WriteLeaves(*impl_, name_, id_, leaves, options);
}

void Dict::read(const std::vector<Key>& paths, ReadSink& sink, const ReadOptions& options) const {
  ReadLeaves(*impl_, name_, id_, paths, sink, options);
}

std::vector<Key> Dict::keys(bool include_nested, bool leaves_only) const {
  v1::ListKeysRequest request;
  request.set_dict(name_);
  request.set_dict_id(id_);
  request.set_include_nested(include_nested);
  request.set_leaves_only(leaves_only);
  v1::ListKeysResponse response;
  impl_->Call(&v1::TdStore::Stub::ListKeys, request, &response, Retrier::kIdempotent);
  std::vector<Key> keys;
  keys.reserve(response.keys_size());
  for (const v1::Path& path : response.keys()) keys.push_back(FromProto(path));
  return keys;
}

bool Dict::contains(const Key& path) const {
  v1::ExistsRequest request;
  request.set_dict(name_);
  request.set_dict_id(id_);
  ToProto(path, request.mutable_path());
  v1::ExistsResponse response;
  impl_->Call(&v1::TdStore::Stub::Exists, request, &response, Retrier::kIdempotent);
  return response.kind() != v1::ExistsResponse::ABSENT;
}

void Dict::erase(const Key& path) const {
  v1::DeleteLeavesRequest request;
  request.set_dict(name_);
  request.set_dict_id(id_);
  ToProto(path, request.add_paths());
  v1::DeleteLeavesResponse response;
  impl_->Call(&v1::TdStore::Stub::DeleteLeaves, request, &response,
              Retrier::kOnlyIfNothingApplied);
  // A server that treats an absent path as nothing to do still gets the
  // documented NOT_FOUND.
  if (response.deleted_size() == 0) {
    throw Error(StatusCode::kNotFound, "no leaf or nested dict '" + path.str() + "' in dict '" +
                                           name_ + "'");
  }
}

DictInfo Dict::describe() const {
  v1::DescribeDictRequest request;
  request.set_name(name_);
  request.set_dict_id(id_);
  v1::DictInfo info;
  impl_->Call(&v1::TdStore::Stub::DescribeDict, request, &info, Retrier::kIdempotent);
  return FromProto(info);
}

void Dict::drop() const {
  v1::DeleteDictRequest request;
  request.set_name(name_);
  request.set_dict_id(id_);
  v1::DeleteDictResponse response;
  impl_->Call(&v1::TdStore::Stub::DeleteDict, request, &response, Retrier::kOnlyIfNothingApplied);
}

std::string Dict::handle() const { return FormatHandle({impl_->address, name_, id_}); }

}  // namespace tdstore::core
