// Dict (libtorch): the TensorDict-like calls on one dict, over core::Dict,
// and LocalDict.
#include <ATen/ATen.h>

#include <algorithm>

#include <cstring>

#include "client/torch/src/scalar_type.h"
#include "client/torch/src/tensor_bytes.h"
#include "common/path.h"
#include "common/ragged_cells.h"
#include "tdstore/client.h"

namespace tdstore {
namespace {

// Reads `paths` (with the core's options) into a LocalDict.
LocalDict ReadLocal(const core::Dict& dict, const std::vector<Key>& paths,
                    const core::ReadOptions& options = {}) {
  LocalDictSink sink;
  dict.read(paths, sink, options);
  return std::move(sink.result());
}

}  // namespace

const at::Tensor& LocalDict::at(const Key& path) const {
  auto it = leaves.find(path);
  if (it == leaves.end()) {
    throw Error(StatusCode::kNotFound, "no leaf '" + path.str() + "' in this local dict");
  }
  return it->second;
}

void Dict::set(const Key& path, const at::Tensor& value) {
  TensorsToSend send({{path, value}});
  core_.write(send.data);
}

void Dict::update(const std::map<Key, at::Tensor>& values) {
  TensorsToSend send(std::vector<std::pair<Key, at::Tensor>>(values.begin(), values.end()));
  core_.write(send.data);
}

at::Tensor Dict::get(const Key& path) {
  core::ReadOptions options;
  options.exact_leaf = &path;
  LocalDict local = ReadLocal(core_, {path}, options);
  if (local.values.count(path) != 0) {
    throw Error(StatusCode::kInvalidArgument, "leaf '" + path.str() + "' of dict '" + name() +
                                                  "' holds non-tensor values: read it with "
                                                  "get_values");
  }
  auto it = local.leaves.find(path);
  if (it == local.leaves.end()) {
    // The server answers NOT_FOUND itself; this covers an empty answer.
    throw Error(StatusCode::kNotFound, "no leaf '" + path.str() + "' in dict '" + name() + "'");
  }
  return it->second;
}

core::Values Dict::get_values(const Key& path, const Index* index) {
  core::ReadOptions options;
  options.exact_leaf = &path;
  core::Index terms;
  if (index != nullptr) {
    terms = ToCoreIndex(*index);
    options.index = &terms;
  }
  LocalDict local = ReadLocal(core_, {path}, options);
  auto it = local.values.find(path);
  if (it == local.values.end()) {
    throw Error(StatusCode::kInvalidArgument, "leaf '" + path.str() + "' of dict '" + name() +
                                                  "' holds a tensor: read it with get");
  }
  return std::move(it->second);
}

std::vector<at::Tensor> Dict::get_ragged(const Key& path, const Index* index) {
  core::Values values = get_values(path, index);
  if (values.kind != LeafKind::kRagged) {
    throw Error(StatusCode::kInvalidArgument, "leaf '" + path.str() + "' of dict '" + name() +
                                                  "' is not ragged: read it with get_values");
  }
  return RaggedTensors(values);
}

LocalDict Dict::get_many(const std::vector<Key>& paths) {
  // An empty request would mean "every leaf" on the wire; here it means none.
  if (paths.empty()) {
    LocalDict local;
    local.batch_size = batch_size();
    return local;
  }
  return ReadLocal(core_, paths);
}

LocalDict Dict::to_local() { return ReadLocal(core_, {}); }

std::future<LocalDict> Dict::index_async(Index index, std::vector<Key> paths) const {
  // Converted here, on the caller's thread: the read owns its positions
  // (a caller may reuse its index tensor at once), and a bad index throws
  // now rather than from get().
  core::Index terms = ToCoreIndex(index);
  return core::ReadAhead([dict = core_, terms = std::move(terms), paths = std::move(paths)] {
    core::ReadOptions options;
    options.index = &terms;
    return ReadLocal(dict, paths, options);
  });
}

LocalDict Dict::index(const Index& index, const std::vector<Key>& paths) {
  const core::Index terms = ToCoreIndex(index);
  core::ReadOptions options;
  options.index = &terms;
  // Unlike get_many, no paths means every leaf, as for to_local().
  return ReadLocal(core_, paths, options);
}

void Dict::set_index(const Index& index, const std::map<Key, at::Tensor>& values,
                     SetIndexOptions options) {
  // The index is checked even when there is nothing to write (core::write).
  const core::Index terms = ToCoreIndex(index);
  std::vector<std::pair<Key, at::Tensor>> leaves(values.begin(), values.end());
  if (options.cast && !leaves.empty()) {
    // Leaves that do not exist yet keep the value's dtype: the server
    // creates them with it.
    const core::DictInfo info = core_.describe();
    for (auto& [path, value] : leaves) {
      if (!value.defined()) continue;  // TensorsToSend names it
      for (const core::LeafMeta& leaf : info.leaves) {
        if (leaf.path == path) {
          const at::ScalarType type = ScalarTypeOf(leaf.dtype, leaf.path);
          if (value.scalar_type() != type) value = value.to(type);
          break;
        }
      }
    }
  }
  TensorsToSend send(leaves);
  core::WriteOptions write;
  write.index = &terms;
  core_.write(send.data, write);
}

void Dict::set_index(const Index& index, const Key& path, const at::Tensor& value,
                     SetIndexOptions options) {
  set_index(index, std::map<Key, at::Tensor>{{path, value}}, options);
}

core::RingAppended Dict::append_ring(const std::map<Key, at::Tensor>& rows,
                                     const std::string& cursor, const std::string& count) {
  int64_t n = -1;
  for (const auto& [path, value] : rows) {
    const int64_t rows_here = value.defined() && value.dim() > 0 ? value.size(0) : -1;
    if (rows_here < 1 || (n != -1 && rows_here != n)) {
      throw Error(StatusCode::kInvalidArgument,
                  "append_ring: leaf '" + path.str() + "' must hold rows (a leading dim of " +
                      (n == -1 ? std::string("at least 1") : std::to_string(n)) + ")");
    }
    n = rows_here;
  }
  if (n == -1) throw Error(StatusCode::kInvalidArgument, "append_ring needs a leaf");
  TensorsToSend send(std::vector<std::pair<Key, at::Tensor>>(rows.begin(), rows.end()));
  return core_.append_ring(send.data, {cursor, n, count});
}

std::vector<Key> Dict::keys(bool include_nested, bool leaves_only) {
  return core_.keys(include_nested, leaves_only);
}

bool Dict::contains(const Key& path) { return core_.contains(path); }

void Dict::erase(const Key& path) { core_.erase(path); }

void Dict::fill(const std::vector<Key>& paths, const at::Scalar& value, const Index* index) {
  std::vector<core::LeafFill> fills;
  for (const core::LeafMeta& leaf : core_.describe().leaves) {
    const bool named = paths.empty() || std::any_of(paths.begin(), paths.end(), [&](const Key& p) {
                         return IsPathPrefix(p.parts(), leaf.path.parts());
                       });
    if (!named) continue;
    const std::optional<at::ScalarType> type = ScalarTypeFromDType(leaf.dtype);
    if (!type) throw Error(StatusCode::kInvalidArgument, "leaf '" + leaf.path.str() + "': unknown dtype");
    // One element of the leaf's dtype, cast as fill_ casts.
    const at::Tensor element = at::empty({1}, at::TensorOptions().dtype(*type)).fill_(value);
    fills.push_back({leaf.path, leaf.dtype,
                     std::string(static_cast<const char*>(element.data_ptr()),
                                 static_cast<size_t>(element.element_size()))});
  }
  if (fills.empty()) {
    throw Error(StatusCode::kNotFound, "no leaf of dict '" + name() + "' lies under the given paths");
  }
  if (index == nullptr) {
    core_.fill(fills);
    return;
  }
  const core::Index wire = ToCoreIndex(*index);
  core_.fill(fills, &wire);
}

DictInfo Dict::describe() {
  const core::DictInfo info = core_.describe();
  DictInfo out;
  out.name = info.name;
  out.id = info.id;
  out.batch_size = info.batch_size;
  out.leaves.reserve(info.leaves.size());
  for (const core::LeafMeta& leaf : info.leaves) out.leaves.push_back(ToLeafInfo(leaf));
  out.rows_per_block = info.rows_per_block;
  out.part_bytes = info.part_bytes;
  out.layout = info.layout;
  out.version = info.version;
  out.locked = info.locked;
  out.attrs = info.attrs;
  return out;
}

std::vector<int64_t> Dict::batch_size() { return core_.describe().batch_size; }

std::string Dict::handle() { return core_.handle(); }

std::vector<at::Tensor> RaggedTensors(const core::Values& values) {
  if (values.kind != LeafKind::kRagged) {
    throw Error(StatusCode::kInvalidArgument, "values of a " +
                                                  std::string(LeafKindName(values.kind)) +
                                                  " leaf are not ragged cells");
  }
  absl::StatusOr<DType> dtype = RaggedDType(values.cell_dtype);
  const std::optional<at::ScalarType> type =
      dtype.ok() ? ScalarTypeFromDType(*dtype) : std::nullopt;
  if (!type) {
    throw Error(StatusCode::kDataLoss,
                "a ragged leaf names cell dtype '" + values.cell_dtype + "', which this client "
                "cannot hold");
  }
  std::vector<at::Tensor> out;
  out.reserve(values.values.size());
  for (const std::string& value : values.values) {
    absl::StatusOr<RaggedCell> cell = DecodeRaggedCell(*dtype, value);
    if (!cell.ok()) throw Error(StatusCode::kDataLoss, std::string(cell.status().message()));
    at::Tensor t = at::empty(cell->shape, at::TensorOptions().dtype(*type));
    if (!cell->data.empty()) std::memcpy(t.data_ptr(), cell->data.data(), cell->data.size());
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace tdstore
