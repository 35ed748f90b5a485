#include "client/cli/host_tensor.h"

#include <new>
#include <utility>

#include "client/cli/args.h"

namespace tdstore::cli {

HostTensor HostTensor::View(DType dtype, Shape shape, const char* data, int64_t byte_size) {
  HostTensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.data = data;
  tensor.byte_size = byte_size;
  return tensor;
}

HostTensor HostTensor::Allocate(DType dtype, Shape shape, int64_t byte_size,
                                const std::string& what) {
  HostTensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.byte_size = byte_size;
  // `new char[n]`, not make_unique: the bytes are about to be overwritten,
  // so zeroing gigabytes first would only cost time.
  tensor.owned.reset(new (std::nothrow) char[static_cast<size_t>(byte_size)]);
  if (tensor.owned == nullptr) {
    throw CliError("cannot allocate " + std::to_string(byte_size) + " bytes for " + what);
  }
  tensor.data = tensor.owned.get();
  return tensor;
}

core::LeafData LeafOf(const Key& path, const HostTensor& tensor) {
  core::LeafData leaf;
  leaf.path = path;
  leaf.dtype = tensor.dtype;
  leaf.shape = tensor.shape;
  leaf.data = tensor.data;
  leaf.byte_size = tensor.byte_size;
  return leaf;
}

void HostTensorSink::Begin(const std::vector<int64_t>& /*batch_shape*/, int64_t /*leaf_count*/) {
  leaves_.clear();
}

void* HostTensorSink::Leaf(const core::LeafMeta& leaf) {
  HostTensor& tensor = leaves_[leaf.path];
  tensor = HostTensor::Allocate(leaf.dtype, leaf.shape, leaf.byte_size,
                                "leaf '" + leaf.path.str() + "'");
  return tensor.mutable_data();
}

}  // namespace tdstore::cli
