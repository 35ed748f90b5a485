// core::Dict: the calls on one dict.
#include <algorithm>
#include <cstring>

#include "client/core/src/client_impl.h"
#include "client/core/src/convert.h"
#include "client/core/src/handle.h"
#include "client/core/src/leaf_stream_calls.h"
#include "client/core/src/rows_behind.h"
#include "common/key_listing.h"

namespace tdstore::core {

Client Dict::client() const { return Client(impl_); }

namespace {

// The codes of a refusal that changed nothing (docs/protocol.md); any
// other failure may have changed the schema.
bool ChangedNothing(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kResourceExhausted:
      return true;
    default:
      return false;
  }
}

// A call that changes the schema: one that fails in a way that may have
// changed it anyway leaves the watched copy untrusted until the watch
// reports a newer version (SchemaCopies::Unsure).
template <typename Request, typename Response>
void CallChangingSchema(Client::Impl& impl, const std::string& name, const std::string& id,
                        grpc::Status (v1::TdStore::Stub::*method)(grpc::ClientContext*,
                                                                   const Request&, Response*),
                        const Request& request, Response* response, Retrier::Safety safety) {
  try {
    impl.Call(method, request, response, safety);
  } catch (const Error& e) {
    if (impl.schemas != nullptr && !ChangedNothing(e.code())) impl.schemas->Unsure(name, id);
    throw;
  }
}

std::vector<LeafPath> LeafPathsOf(const DictInfo& info) {
  std::vector<LeafPath> paths;
  paths.reserve(info.leaves.size());
  for (const LeafMeta& leaf : info.leaves) paths.push_back(leaf.path.parts());
  return paths;
}

}  // namespace

std::shared_ptr<const DictInfo> Dict::TrustedSchema() const {
  if (impl_->schemas == nullptr) return nullptr;
  return impl_->schemas->Trusted(name_, id_);
}

namespace {

// A write, with the watched schema copy told what it did: the leaves it
// touched as they are now (an indexed write's version moved only if it
// created some), or, if it failed in a way that may have changed them,
// that the copy can no longer be trusted.
v1::WriteLeavesResponse WriteAndRecord(const Client::Impl& impl, const std::string& name,
                                       const std::string& id,
                                       const std::vector<LeafData>& leaves,
                                       const WriteOptions& options, const RingAppend* ring,
                                       const CountAfter* count = nullptr) {
  SchemaCopies* copies = impl.schemas.get();
  v1::WriteLeavesResponse response;
  try {
    response = WriteLeaves(impl, name, id, leaves, options, ring, count);
  } catch (const Error& e) {
    if (copies != nullptr && !ChangedNothing(e.code())) copies->Unsure(name, id);
    throw;
  }
  if (copies == nullptr || leaves.empty()) return response;
  std::vector<LeafMeta> written;
  written.reserve(response.written_size());
  for (const v1::LeafInfo& leaf : response.written()) written.push_back(FromProto(leaf));
  copies->Wrote(name, id, response.version(), written);
  return response;
}

}  // namespace

void Dict::write(const std::vector<LeafData>& leaves, const WriteOptions& options) const {
  impl_->writes_behind.Settle();
  WriteAndRecord(*impl_, name_, id_, leaves, options, nullptr);
}

RingAppended Dict::append_ring(const std::vector<LeafData>& leaves, const RingAppend& ring) const {
  impl_->writes_behind.Settle();
  if (leaves.empty()) throw Error(StatusCode::kInvalidArgument, "a ring append needs a leaf");
  v1::WriteLeavesResponse response = WriteAndRecord(*impl_, name_, id_, leaves, {}, &ring);
  return {response.ring_start(), response.count_value()};
}

int64_t Dict::write_counted(const std::vector<LeafData>& leaves, const WriteOptions& options,
                            const std::string& counter, int64_t add) const {
  impl_->writes_behind.Settle();
  if (options.index == nullptr || leaves.empty()) {
    throw Error(StatusCode::kInvalidArgument,
                "write_counted needs an index and at least one leaf");
  }
  const CountAfter count{counter, add};
  v1::WriteLeavesResponse response = WriteAndRecord(*impl_, name_, id_, leaves, options, nullptr,
                                                    &count);
  // A tdstored before revision 4 ignored count_after: count now.
  return response.counted() ? response.count_value() : counter_add(counter, add);
}

namespace {

// Whether an indexed write of `leaves` at `index` into the dict `schema`
// describes is one tdstored would take as it is (so it may go behind: a
// refusal would come too late to be the caller's): one position, or one
// 1-D list of them, within batch dim 0, and each leaf an existing tensor
// leaf of its dtype, shaped exactly as the rows selected: [positions] (or
// nothing for one position) + the leaf's shape after dim 0.
bool CheckedAgainst(const DictInfo& schema, const std::vector<LeafData>& leaves,
                    const Index& index) {
  if (leaves.empty() || index.size() != 1 || schema.batch_size.empty()) return false;
  const IndexTerm& term = index[0];
  const bool one = term.kind() == IndexTerm::Kind::kInt;
  if (!one && (term.kind() != IndexTerm::Kind::kPositions || term.shape().size() != 1)) {
    return false;
  }
  const int64_t rows = schema.batch_size[0];
  const std::vector<int64_t> positions =
      one ? std::vector<int64_t>{term.position()} : term.values();
  for (int64_t p : positions) {
    if (p < 0 || p >= rows) return false;
  }
  const int64_t selected = static_cast<int64_t>(positions.size());
  if (selected == 0) return false;  // tdstored's to judge, at once
  for (size_t i = 0; i < leaves.size(); ++i) {
    const LeafData& leaf = leaves[i];
    for (size_t j = 0; j < i; ++j) {
      if (leaves[j].path == leaf.path) return false;
    }
    auto meta = std::find_if(schema.leaves.begin(), schema.leaves.end(),
                             [&](const LeafMeta& m) { return m.path == leaf.path; });
    if (meta == schema.leaves.end() || meta->kind != LeafKind::kTensor ||
        leaf.kind != LeafKind::kTensor || meta->dtype != leaf.dtype || meta->shape.empty()) {
      return false;
    }
    std::vector<int64_t> want = meta->shape;
    if (one) {
      want.erase(want.begin());
    } else {
      want[0] = selected;
    }
    if (leaf.shape != want) return false;
    int64_t elements = 1;
    for (int64_t d : want) elements *= d;
    const int64_t bytes = elements * DTypeSize(leaf.dtype);
    if (leaf.byte_size != bytes || (bytes > 0 && leaf.data == nullptr)) return false;
  }
  return true;
}

}  // namespace

std::optional<int64_t> Dict::write_counted_behind(const std::vector<LeafData>& leaves,
                                                  const Index& index, const std::string& counter,
                                                  int64_t add) const {
  WriteOptions options;
  options.index = &index;
  std::shared_ptr<const DictInfo> schema = TrustedSchema();
  if (schema == nullptr || !CheckedAgainst(*schema, leaves, index)) {
    return write_counted(leaves, options, counter, add);
  }
  // Why a Dict that does not own the client's state: the writer thread is
  // the state's, and a write holding it could be its last owner, whose
  // destructor would then join the thread it runs on. The state outlives
  // every queued write instead (its destructor sends them first).
  Dict view(std::shared_ptr<Client::Impl>(std::shared_ptr<Client::Impl>(), impl_.get()), name_,
            id_);
  // It owns a copy of everything: the caller may change its tensors as
  // soon as this returns.
  auto write = std::make_unique<RowsBehind>(std::move(view), leaves, index, counter, add);
  const int64_t total = write->bytes();
  if (!impl_->writes_behind.Enqueue(std::move(write), total)) {
    return write_counted(leaves, options, counter, add);
  }
  return std::nullopt;
}

namespace {

// The bytes a whole-leaf read of `paths` (each a leaf or a prefix; none:
// every leaf) brings, as the trusted schema copy `info` has the leaves.
int64_t WholeReadBytes(const DictInfo& info, const std::vector<Key>& paths) {
  int64_t total = 0;
  for (const LeafMeta& leaf : info.leaves) {
    const std::vector<std::string>& at = leaf.path.parts();
    const bool named = paths.empty() || std::any_of(paths.begin(), paths.end(), [&](const Key& p) {
                         return p.parts().size() <= at.size() &&
                                std::equal(p.parts().begin(), p.parts().end(), at.begin());
                       });
    if (named) total += leaf.byte_size;
  }
  return total;
}

// The dim-0 rows an index of one term selects out of `rows`, as torch
// counts them (a slice clamped to the dim, positions however many, a mask
// its true entries); -1 for any other index, whose count is not worth
// working out here. Bounds are tdstored's to check: an estimate only.
int64_t RowsSelected(const Index& index, int64_t rows) {
  if (index.size() != 1) return -1;
  const IndexTerm& term = index[0];
  switch (term.kind()) {
    case IndexTerm::Kind::kInt:
      return 1;
    case IndexTerm::Kind::kPositions:
      return static_cast<int64_t>(term.values().size());
    case IndexTerm::Kind::kMask:
      return std::count(term.mask().begin(), term.mask().end(), true);
    case IndexTerm::Kind::kSlice: {
      const Slice& slice = term.slice();
      if (slice.step <= 0) return -1;
      auto clamp = [&](std::optional<int64_t> at, int64_t otherwise) {
        if (!at) return otherwise;
        const int64_t from_end = *at < 0 ? *at + rows : *at;
        return std::clamp<int64_t>(from_end, 0, rows);
      };
      const int64_t start = clamp(slice.start, 0), stop = clamp(slice.stop, rows);
      return stop <= start ? 0 : (stop - start + slice.step - 1) / slice.step;
    }
    case IndexTerm::Kind::kEllipsis:
      return rows;
  }
  return -1;
}

// What a read of `paths` at `index` (null: whole) brings, from the trusted
// schema copy; -1 when that is not known.
int64_t ExpectedReadBytes(const DictInfo& info, const std::vector<Key>& paths,
                          const Index* index) {
  const int64_t whole = WholeReadBytes(info, paths);
  if (index == nullptr) return whole;
  if (info.batch_size.empty() || info.batch_size[0] <= 0) return -1;
  const int64_t rows = RowsSelected(*index, info.batch_size[0]);
  // Every leaf's bytes are its dim-0 rows' (its shape starts with the
  // batch dims).
  return rows < 0 ? -1 : whole / info.batch_size[0] * rows;
}

}  // namespace

void Dict::read(const std::vector<Key>& paths, ReadSink& sink, const ReadOptions& options) const {
  impl_->writes_behind.Settle();
  // How large the reply will be, where the schema copy says it for free:
  // it decides whether the bytes may stream through a ring (ReadLeaves).
  int64_t expected = -1;
  if (std::shared_ptr<const DictInfo> info = TrustedSchema()) {
    expected = ExpectedReadBytes(*info, paths, options.index);
  }
  ReadLeaves(*impl_, name_, id_, paths, sink, options, expected);
}


std::vector<Key> Dict::keys(bool include_nested, bool leaves_only) const {
  return keys_under(Key(std::vector<std::string>{}), include_nested, leaves_only);
}

std::vector<Key> Dict::keys_under(const Key& prefix, bool include_nested,
                                  bool leaves_only) const {
  if (std::shared_ptr<const DictInfo> info = TrustedSchema()) {
    const std::vector<LeafPath> leaves = LeafPathsOf(*info);
    // The root always lists; a prefix must be a sub-dict, else tdstored
    // says which error, with its message.
    if (prefix.parts().empty() || ClassifyPath(leaves, prefix.parts()) == PathKind::kNode) {
      std::vector<Key> keys;
      for (LeafPath& p : ListKeysUnder(leaves, prefix.parts(), include_nested, leaves_only)) {
        keys.emplace_back(std::move(p));
      }
      return keys;
    }
  }
  v1::ListKeysRequest request;
  request.set_dict(name_);
  request.set_dict_id(id_);
  request.set_include_nested(include_nested);
  request.set_leaves_only(leaves_only);
  if (!prefix.parts().empty()) ToProto(prefix, request.mutable_prefix());
  v1::ListKeysResponse response;
  impl_->Call(&v1::TdStore::Stub::ListKeys, request, &response, Retrier::kIdempotent);
  std::vector<Key> keys;
  keys.reserve(response.keys_size());
  for (const v1::Path& path : response.keys()) keys.push_back(FromProto(path));
  return keys;
}

void Dict::rename(const Key& from, const Key& to, bool replace) const {
  impl_->writes_behind.Settle();
  v1::RenameLeavesRequest request;
  request.set_dict(name_);
  request.set_dict_id(id_);
  ToProto(from, request.mutable_from());
  ToProto(to, request.mutable_to());
  request.set_replace(replace);
  v1::RenameLeavesResponse response;
  CallChangingSchema(*impl_, name_, id_, &v1::TdStore::Stub::RenameLeaves, request, &response,
                     Retrier::kOnlyIfNothingApplied);
  if (impl_->schemas != nullptr) {
    std::vector<std::pair<Key, Key>> moved;
    for (int i = 0; i + 1 < response.moved_size(); i += 2) {
      moved.emplace_back(FromProto(response.moved(i)), FromProto(response.moved(i + 1)));
    }
    std::vector<Key> replaced;
    for (const v1::Path& p : response.replaced()) replaced.push_back(FromProto(p));
    impl_->schemas->RenamedLeaves(name_, id_, response.version(), moved, replaced);
  }
}

void Dict::fill(const std::vector<LeafFill>& leaves, const Index* index) const {
  impl_->writes_behind.Settle();
  v1::FillLeavesRequest request;
  request.set_dict(name_);
  request.set_dict_id(id_);
  for (const LeafFill& leaf : leaves) {
    v1::FillLeavesRequest::Fill* f = request.add_leaves();
    ToProto(leaf.path, f->mutable_path());
    f->set_dtype(ToProtoDType(leaf.dtype, leaf.path));
    f->set_element(leaf.element);
  }
  if (index != nullptr) ToProto(*index, request.mutable_index());
  v1::FillLeavesResponse response;
  // The same fill again gives the same result: a lost reply may be retried.
  CallChangingSchema(*impl_, name_, id_, &v1::TdStore::Stub::FillLeaves, request, &response,
                     Retrier::kIdempotent);
  // Whole leaves get new generations of the same dtypes and shapes: the
  // version moves, the schema a copy holds does not.
  if (impl_->schemas != nullptr && index == nullptr) {
    impl_->schemas->Wrote(name_, id_, response.version(), {});
  }
}

void Dict::copy(const Key& from, const Dict& target, const Key& to) const {
  impl_->writes_behind.Settle();
  // The target may be another client's dict, with writes of its own queued.
  if (target.impl_ != impl_) target.impl_->writes_behind.Settle();
  v1::CopyLeavesRequest request;
  request.set_dict(name_);
  request.set_dict_id(id_);
  ToProto(from, request.mutable_from());
  request.set_to_dict(target.name_);
  request.set_to_dict_id(target.id_);
  ToProto(to, request.mutable_to());
  v1::WriteLeavesResponse response;
  CallChangingSchema(*target.impl_, target.name_, target.id_, &v1::TdStore::Stub::CopyLeaves,
                     request, &response, Retrier::kOnlyIfNothingApplied);
  if (target.impl_->schemas != nullptr) {
    std::vector<LeafMeta> written;
    for (const v1::LeafInfo& leaf : response.written()) written.push_back(FromProto(leaf));
    target.impl_->schemas->Wrote(target.name_, target.id_, response.version(), written);
  }
}

Dict Dict::clone(const std::string& name, const Key& from, const CreateOptions& options) const {
  impl_->writes_behind.Settle();
  v1::CreateDictRequest request;
  request.set_name(name);
  request.mutable_options()->set_rows_per_block(options.rows_per_block);
  request.mutable_options()->set_part_bytes(options.part_bytes);
  request.mutable_options()->set_layout(
      options.layout == Layout::kRecord ? v1::DICT_LAYOUT_RECORD : v1::DICT_LAYOUT_LEAVES);
  v1::CopySource* source = request.mutable_copy_from();
  source->set_dict(name_);
  source->set_dict_id(id_);
  if (!from.parts().empty()) ToProto(from, source->mutable_from());
  v1::DictInfo info;
  impl_->Call(&v1::TdStore::Stub::CreateDict, request, &info, Retrier::kOnlyIfNothingApplied);
  return Dict(impl_, info.name(), info.id());
}

bool Dict::contains(const Key& path) const {
  if (std::shared_ptr<const DictInfo> info = TrustedSchema()) {
    if (!path.parts().empty()) {  // an empty path is tdstored's to refuse
      return ClassifyPath(LeafPathsOf(*info), path.parts()) != PathKind::kAbsent;
    }
  }
  v1::ExistsRequest request;
  request.set_dict(name_);
  request.set_dict_id(id_);
  ToProto(path, request.mutable_path());
  v1::ExistsResponse response;
  impl_->Call(&v1::TdStore::Stub::Exists, request, &response, Retrier::kIdempotent);
  return response.kind() != v1::ExistsResponse::ABSENT;
}

void Dict::erase(const Key& path) const {
  impl_->writes_behind.Settle();
  v1::DeleteLeavesRequest request;
  request.set_dict(name_);
  request.set_dict_id(id_);
  ToProto(path, request.add_paths());
  v1::DeleteLeavesResponse response;
  CallChangingSchema(*impl_, name_, id_, &v1::TdStore::Stub::DeleteLeaves, request, &response,
                     Retrier::kOnlyIfNothingApplied);
  if (impl_->schemas != nullptr) {
    std::vector<Key> removed;
    for (const v1::Path& p : response.deleted()) removed.push_back(FromProto(p));
    impl_->schemas->Removed(name_, id_, response.version(), removed);
  }
  // A server that treats an absent path as nothing to do still gets the
  // documented NOT_FOUND.
  if (response.deleted_size() == 0) {
    throw Error(StatusCode::kNotFound, "no leaf or nested dict '" + path.str() + "' in dict '" +
                                           name_ + "'");
  }
}

DictInfo Dict::describe() const {
  if (std::shared_ptr<const DictInfo> info = TrustedSchema()) return *info;
  v1::DescribeDictRequest request;
  request.set_name(name_);
  request.set_dict_id(id_);
  v1::DictInfo info;
  impl_->Call(&v1::TdStore::Stub::DescribeDict, request, &info, Retrier::kIdempotent);
  DictInfo out = FromProto(info);
  // A schema read now: the copy catches up without waiting for its watch.
  if (impl_->schemas != nullptr) impl_->schemas->Known(name_, id_, out);
  return out;
}

std::vector<int64_t> Dict::batch_size() const {
  if (std::shared_ptr<const DictInfo> info = TrustedSchema()) return info->batch_size;
  return describe().batch_size;
}

void Dict::drop() const {
  impl_->writes_behind.Settle();
  v1::DeleteDictRequest request;
  request.set_name(name_);
  request.set_dict_id(id_);
  v1::DeleteDictResponse response;
  if (impl_->schemas != nullptr) impl_->schemas->NameEnded(name_);
  impl_->Call(&v1::TdStore::Stub::DeleteDict, request, &response, Retrier::kOnlyIfNothingApplied);
}

std::string Dict::handle() const { return FormatHandle({impl_->address, name_, id_}); }

}  // namespace tdstore::core
