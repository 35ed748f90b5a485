#include "client/torch/src/tensor_bytes.h"

#include <ATen/ATen.h>

#include <string>

#include "client/torch/src/scalar_type.h"

namespace tdstore {
namespace {

// The bytes to send: dense C-order CPU memory. Conjugate and negative views
// share memory with their base and only flag the difference, so they are
// materialized first or the store would receive the base's values.
at::Tensor ContiguousCpu(const Key& path, const at::Tensor& value) {
  if (!value.defined()) {
    throw Error(StatusCode::kInvalidArgument, "leaf '" + path.str() + "' is an undefined tensor");
  }
  if (value.layout() != at::kStrided) {
    throw Error(StatusCode::kInvalidArgument,
                "leaf '" + path.str() + "' is not a dense tensor; convert it with to_dense()");
  }
  at::Tensor t = value.device().is_cpu() ? value : value.cpu();
  return t.resolve_conj().resolve_neg().contiguous();
}

[[noreturn]] void BadIndex(size_t item, const std::string& message) {
  throw Error(StatusCode::kInvalidArgument,
              "index item " + std::to_string(item) + ": " + message);
}

std::string ShapeText(at::IntArrayRef sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(sizes[i]);
  }
  return out + "]";
}

// A tensor term: integer dtypes give positions (uint8 included: in tdstore
// only bool is a mask), bool gives a 1-D mask, anything else is refused.
core::IndexTerm TensorTerm(size_t item, const at::Tensor& tensor) {
  if (!tensor.defined()) BadIndex(item, "undefined index tensor");
  if (tensor.layout() != at::kStrided) {
    BadIndex(item, "index tensors must be dense; convert it with to_dense()");
  }
  const at::ScalarType type = tensor.scalar_type();
  if (type == at::kBool) {
    if (tensor.dim() != 1) {
      BadIndex(item, "a bool mask must be 1-D, got shape " + ShapeText(tensor.sizes()));
    }
    const at::Tensor mask = tensor.cpu().contiguous();
    const bool* data = mask.data_ptr<bool>();
    return core::IndexTerm::Mask(std::vector<bool>(data, data + mask.numel()));
  }
  if (!at::isIntegralType(type, /*includeBool=*/false)) {
    BadIndex(item, std::string("float index tensors are not allowed (got ") +
                       c10::toString(type) +
                       "); use an integer tensor of positions or a bool mask");
  }
  const at::Tensor positions = tensor.cpu().to(at::kLong).contiguous();
  const int64_t* data = positions.data_ptr<int64_t>();
  return core::IndexTerm::Positions(std::vector<int64_t>(data, data + positions.numel()),
                                    positions.sizes().vec());
}

}  // namespace

TensorsToSend::TensorsToSend(const std::vector<std::pair<Key, at::Tensor>>& leaves) {
  tensors.reserve(leaves.size());
  data.reserve(leaves.size());
  for (const auto& [path, value] : leaves) {
    at::Tensor bytes = ContiguousCpu(path, value);
    core::LeafData leaf;
    leaf.path = path;
    leaf.dtype = DTypeOf(bytes.scalar_type(), path);
    leaf.shape = bytes.sizes().vec();
    leaf.data = bytes.data_ptr();
    leaf.byte_size = static_cast<int64_t>(bytes.nbytes());
    data.push_back(std::move(leaf));
    tensors.push_back(std::move(bytes));
  }
}

void LocalDictSink::Begin(const std::vector<int64_t>& batch_shape, int64_t /*leaf_count*/) {
  result_ = LocalDict();
  result_.batch_size = batch_shape;
  raw_values_.clear();
}

LocalDict& LocalDictSink::result() {
  for (auto& [meta, bytes] : raw_values_) {
    result_.values[meta.path] = core::DecodeValues(meta, bytes.data());
  }
  raw_values_.clear();
  return result_;
}

void* LocalDictSink::Leaf(const core::LeafMeta& leaf) {
  if (leaf.kind != LeafKind::kTensor) {
    raw_values_.emplace_back(leaf, std::string(static_cast<size_t>(leaf.byte_size), '\0'));
    return raw_values_.back().second.data();
  }
  const at::ScalarType type = ScalarTypeOf(leaf.dtype, leaf.path);
  at::Tensor tensor;
  try {
    tensor = at::empty(leaf.shape, at::TensorOptions().dtype(type));
  } catch (const c10::Error&) {
    throw Error(StatusCode::kResourceExhausted, "cannot allocate " +
                                                    std::to_string(leaf.byte_size) +
                                                    " bytes for leaf '" + leaf.path.str() + "'");
  }
  void* data = tensor.data_ptr();
  result_.leaves[leaf.path] = std::move(tensor);
  return data;
}

at::ScalarType ScalarTypeOf(DType dtype, const Key& path) {
  std::optional<at::ScalarType> type = ScalarTypeFromDType(dtype);
  if (!type) {
    throw Error(StatusCode::kUnimplemented,
                "leaf '" + path.str() + "' has dtype " + std::string(DTypeName(dtype)) +
                    ", which this client's torch cannot hold");
  }
  return *type;
}

DType DTypeOf(at::ScalarType type, const Key& path) {
  std::optional<DType> dtype = DTypeFromScalarType(type);
  if (!dtype) {
    throw Error(StatusCode::kInvalidArgument,
                "leaf '" + path.str() + "' has dtype " + c10::toString(type) +
                    ", which tdstore cannot store (" + std::string(KnownDTypeNames()) + ")");
  }
  return *dtype;
}

core::Index ToCoreIndex(const Index& index) {
  core::Index out;
  const std::vector<IndexTerm>& terms = index.terms();
  out.reserve(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    const IndexTerm& term = terms[i];
    switch (term.kind()) {
      case IndexTerm::Kind::kInt:
        out.push_back(core::IndexTerm::Int(term.position()));
        break;
      case IndexTerm::Kind::kSlice:
        out.push_back(core::IndexTerm::Of(term.slice()));
        break;
      case IndexTerm::Kind::kEllipsis:
        out.push_back(core::IndexTerm::Of(Ellipsis{}));
        break;
      case IndexTerm::Kind::kTensor:
        out.push_back(TensorTerm(i, term.tensor()));
        break;
    }
  }
  return out;
}

LeafInfo ToLeafInfo(const core::LeafMeta& leaf) {
  LeafInfo out;
  out.path = leaf.path;
  out.dtype = ScalarTypeOf(leaf.dtype, leaf.path);
  out.shape = leaf.shape;
  out.byte_size = leaf.byte_size;
  return out;
}

}  // namespace tdstore
