// IndexTerm and Index (client.h); their conversion to the core's index is in
// tensor_bytes.cc.
#include <ATen/ATen.h>

#include "tdstore/client.h"

namespace tdstore {

IndexTerm::IndexTerm(int64_t position) : kind_(Kind::kInt), position_(position) {}

IndexTerm::IndexTerm(Slice slice) : kind_(Kind::kSlice), slice_(slice) {}

IndexTerm::IndexTerm(Ellipsis) : kind_(Kind::kEllipsis) {}

IndexTerm::IndexTerm(at::Tensor tensor) : kind_(Kind::kTensor), tensor_(std::move(tensor)) {}

IndexTerm::IndexTerm(std::vector<int64_t> positions)
    : kind_(Kind::kTensor),
      tensor_(at::tensor(at::ArrayRef<int64_t>(positions), at::TensorOptions().dtype(at::kLong))) {}

}  // namespace tdstore
