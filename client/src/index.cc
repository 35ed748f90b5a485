// IndexTerm and Index (client.h), and their conversion to tdstore.v1.Index.
//
// This file must not include common/index.h: both headers declare a
// tdstore::IndexTerm (common's is the planner's), and one translation unit
// cannot hold both.
#include <ATen/ATen.h>

#include <string>

#include "client/src/convert.h"

namespace tdstore {
namespace {

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
void TensorToProto(size_t item, const at::Tensor& tensor, v1::IndexItem* out) {
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
    auto* values = out->mutable_mask()->mutable_values();
    values->Reserve(static_cast<int>(mask.numel()));
    for (int64_t i = 0; i < mask.numel(); ++i) values->Add(data[i]);
    return;
  }
  if (!at::isIntegralType(type, /*includeBool=*/false)) {
    BadIndex(item, std::string("float index tensors are not allowed (got ") +
                       c10::toString(type) +
                       "); use an integer tensor of positions or a bool mask");
  }
  const at::Tensor positions = tensor.cpu().to(at::kLong).contiguous();
  const int64_t* data = positions.data_ptr<int64_t>();
  v1::IndexItem::Positions* proto = out->mutable_positions();
  proto->mutable_values()->Assign(data, data + positions.numel());
  // A 0-d tensor has the empty shape and one value.
  proto->mutable_shape()->Assign(positions.sizes().begin(), positions.sizes().end());
}

}  // namespace

IndexTerm::IndexTerm(int64_t position) : kind_(Kind::kInt), position_(position) {}

IndexTerm::IndexTerm(Slice slice) : kind_(Kind::kSlice), slice_(slice) {}

IndexTerm::IndexTerm(Ellipsis) : kind_(Kind::kEllipsis) {}

IndexTerm::IndexTerm(at::Tensor tensor) : kind_(Kind::kTensor), tensor_(std::move(tensor)) {}

IndexTerm::IndexTerm(std::vector<int64_t> positions)
    : kind_(Kind::kTensor),
      tensor_(at::tensor(at::ArrayRef<int64_t>(positions), at::TensorOptions().dtype(at::kLong))) {}

void ToProto(const Index& index, v1::Index* out) {
  out->Clear();
  const std::vector<IndexTerm>& terms = index.terms();
  for (size_t i = 0; i < terms.size(); ++i) {
    const IndexTerm& term = terms[i];
    v1::IndexItem* item = out->add_items();
    switch (term.kind()) {
      case IndexTerm::Kind::kInt:
        item->set_integer(term.position());
        break;
      case IndexTerm::Kind::kSlice: {
        const Slice& slice = term.slice();
        // Checked here too, so a bad step costs no call.
        if (slice.step <= 0) {
          BadIndex(i, "slice step must be > 0, got " + std::to_string(slice.step));
        }
        v1::Slice* proto = item->mutable_slice();
        if (slice.start) proto->set_start(*slice.start);
        if (slice.stop) proto->set_stop(*slice.stop);
        proto->set_step(slice.step);
        break;
      }
      case IndexTerm::Kind::kEllipsis:
        item->mutable_ellipsis();
        break;
      case IndexTerm::Kind::kTensor:
        TensorToProto(i, term.tensor(), item);
        break;
    }
  }
}

}  // namespace tdstore
