// Dict: the TensorDict-like calls on one dict, and LocalDict.
#include "client/src/client_impl.h"
#include "client/src/convert.h"
#include "client/src/handle.h"
#include "client/src/leaf_streams.h"

namespace tdstore {

const at::Tensor& LocalDict::at(const Key& path) const {
  auto it = leaves.find(path);
  if (it == leaves.end()) {
    throw Error(StatusCode::kNotFound, "no leaf '" + path.str() + "' in this local dict");
  }
  return it->second;
}

void Dict::set(const Key& path, const at::Tensor& value) {
  WriteLeaves(*impl_, name_, {{path, value}});
}

void Dict::update(const std::map<Key, at::Tensor>& values) {
  // Nothing to write is not worth a call (and has nothing to make visible).
  if (values.empty()) return;
  WriteLeaves(*impl_, name_, std::vector<std::pair<Key, at::Tensor>>(values.begin(), values.end()));
}

at::Tensor Dict::get(const Key& path) {
  LocalDict local = ReadLeaves(*impl_, name_, {path}, &path);
  auto it = local.leaves.find(path);
  if (it == local.leaves.end()) {
    // The server answers NOT_FOUND itself; this covers an empty answer.
    throw Error(StatusCode::kNotFound, "no leaf '" + path.str() + "' in dict '" + name_ + "'");
  }
  return it->second;
}

LocalDict Dict::get_many(const std::vector<Key>& paths) {
  // An empty request would mean "every leaf" on the wire; here it means none.
  if (paths.empty()) {
    LocalDict local;
    local.batch_size = batch_size();
    return local;
  }
  return ReadLeaves(*impl_, name_, paths);
}

LocalDict Dict::to_local() { return ReadLeaves(*impl_, name_, {}); }

LocalDict Dict::index(const Index& index, const std::vector<Key>& paths) {
  v1::Index proto;
  ToProto(index, &proto);
  // Unlike get_many, no paths means every leaf, as for to_local().
  return ReadLeaves(*impl_, name_, paths, nullptr, &proto);
}

void Dict::set_index(const Index& index, const std::map<Key, at::Tensor>& values,
                     SetIndexOptions options) {
  // The index is checked even when there is nothing to write.
  v1::Index proto;
  ToProto(index, &proto);
  if (values.empty()) return;
  std::vector<std::pair<Key, at::Tensor>> leaves(values.begin(), values.end());
  if (options.cast) {
    // Leaves that do not exist yet keep the value's dtype: the server
    // creates them with it.
    const DictInfo info = describe();
    for (auto& [path, value] : leaves) {
      if (!value.defined()) continue;  // WriteLeaves names it
      for (const LeafInfo& leaf : info.leaves) {
        if (leaf.path == path && value.scalar_type() != leaf.dtype) {
          value = value.to(leaf.dtype);
          break;
        }
      }
    }
  }
  WriteLeaves(*impl_, name_, leaves, &proto);
}

void Dict::set_index(const Index& index, const Key& path, const at::Tensor& value,
                     SetIndexOptions options) {
  set_index(index, std::map<Key, at::Tensor>{{path, value}}, options);
}

std::vector<Key> Dict::keys(bool include_nested, bool leaves_only) {
  v1::ListKeysRequest request;
  request.set_dict(name_);
  request.set_include_nested(include_nested);
  request.set_leaves_only(leaves_only);
  v1::ListKeysResponse response;
  impl_->Call(&v1::TdStore::Stub::ListKeys, request, &response, Retrier::kIdempotent);
  std::vector<Key> keys;
  keys.reserve(response.keys_size());
  for (const v1::Path& path : response.keys()) keys.push_back(FromProto(path));
  return keys;
}

bool Dict::contains(const Key& path) {
  v1::ExistsRequest request;
  request.set_dict(name_);
  ToProto(path, request.mutable_path());
  v1::ExistsResponse response;
  impl_->Call(&v1::TdStore::Stub::Exists, request, &response, Retrier::kIdempotent);
  return response.kind() != v1::ExistsResponse::ABSENT;
}

void Dict::erase(const Key& path) {
  v1::DeleteLeavesRequest request;
  request.set_dict(name_);
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

DictInfo Dict::describe() {
  v1::DescribeDictRequest request;
  request.set_name(name_);
  v1::DictInfo info;
  impl_->Call(&v1::TdStore::Stub::DescribeDict, request, &info, Retrier::kIdempotent);
  return FromProto(info);
}

std::vector<int64_t> Dict::batch_size() { return describe().batch_size; }

std::string Dict::handle() { return FormatHandle({impl_->address, name_, id_}); }

}  // namespace tdstore
