// at::Tensor <-> the core's (dtype, shape, bytes): the whole of what the
// libtorch client adds to the torch-free core.
#ifndef TDSTORE_CLIENT_TORCH_SRC_TENSOR_BYTES_H_
#define TDSTORE_CLIENT_TORCH_SRC_TENSOR_BYTES_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tdstore/client.h"
#include "tdstore/core.h"

namespace tdstore {

// The tensors to send and the core's view of their bytes. The tensors hold
// dense C-order CPU copies where the inputs were not, so `data` stays valid
// while this lives. INVALID_ARGUMENT naming the leaf for an undefined or
// non-dense tensor or a dtype tdstore cannot store.
struct TensorsToSend {
  explicit TensorsToSend(const std::vector<std::pair<Key, at::Tensor>>& leaves);
  std::vector<at::Tensor> tensors;
  std::vector<core::LeafData> data;
};

// A ReadSink that allocates each leaf as an at::Tensor of its final shape
// and dtype, once, and collects them into a LocalDict.
// Tensors into result().leaves; a value leaf's slots into a buffer of its
// own, decoded into result().values by result().
class LocalDictSink : public core::ReadSink {
 public:
  void Begin(const std::vector<int64_t>& batch_shape, int64_t leaf_count) override;
  void* Leaf(const core::LeafMeta& leaf) override;
  // After the read: the dict, value leaves decoded (DATA_LOSS for bad slots).
  LocalDict& result();

 private:
  LocalDict result_;
  std::vector<std::pair<core::LeafMeta, std::string>> raw_values_;
};

// The torch dtype of a wire dtype; UNIMPLEMENTED naming `path` if torch 1.13
// has none for it.
at::ScalarType ScalarTypeOf(DType dtype, const Key& path);
// INVALID_ARGUMENT naming `path` for a torch dtype tdstore cannot store.
DType DTypeOf(at::ScalarType type, const Key& path);

// A torch-typed Index as the core's (tensor terms become positions or masks).
// INVALID_ARGUMENT for a float or undefined index tensor or a mask that is
// not 1-D.
core::Index ToCoreIndex(const Index& index);

LeafInfo ToLeafInfo(const core::LeafMeta& leaf);

}  // namespace tdstore

#endif  // TDSTORE_CLIENT_TORCH_SRC_TENSOR_BYTES_H_
