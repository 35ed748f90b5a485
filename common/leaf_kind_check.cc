#include "common/leaf_kind_check.h"

#include "common/ragged_cells.h"
#include "common/str_cat.h"

namespace tdstore {

absl::Status CheckLeafKind(LeafKind kind, DType dtype, const Shape& shape, size_t batch_dims,
                           std::string_view one_value) {
  if (!IsKnownLeafKind(static_cast<int>(kind))) {
    return absl::InvalidArgumentError(StrCat("unknown leaf kind ", static_cast<int>(kind)));
  }
  if (kind == LeafKind::kTensor) {
    if (!one_value.empty()) {
      return absl::InvalidArgumentError("a tensor leaf carries no value of its own");
    }
    return absl::OkStatus();
  }
  const std::string_view name = LeafKindName(kind);
  if (dtype != DType::kUInt8) {
    return absl::InvalidArgumentError(
        StrCat("a ", name, " leaf is stored as uint8 slots, not ", DTypeName(dtype)));
  }
  const bool one_dim = shape.size() == batch_dims + 1;
  const int64_t slot = one_dim ? shape.back() : -1;
  if (kind == LeafKind::kRagged) {
    // A tensor per batch cell: no one-value form, and the record names the
    // cells' dtype (common/ragged_cells.h).
    if (batch_dims == 0 || slot < kValueLengthBytes) {
      return absl::InvalidArgumentError(StrCat(
          "a ragged leaf has at least one batch dim and one slot dim of at least ",
          kValueLengthBytes, " bytes; got shape ", ShapeToString(shape), " with ", batch_dims,
          " batch dims"));
    }
    if (absl::StatusOr<DType> cells = RaggedDType(one_value); !cells.ok()) return cells.status();
    return absl::OkStatus();
  }
  if (slot != 0 && slot < kValueLengthBytes) {
    return absl::InvalidArgumentError(StrCat(
        "a ", name, " leaf has the batch shape and one slot dim, 0 (one value) or at least ",
        kValueLengthBytes, " bytes (a value per row); got shape ", ShapeToString(shape)));
  }
  if (slot > 0 && !one_value.empty()) {
    return absl::InvalidArgumentError(
        StrCat("a ", name, " leaf with a value per row carries no value of its own"));
  }
  if (static_cast<int64_t>(one_value.size()) > kMaxOneValueBytes) {
    return absl::InvalidArgumentError(StrCat("a ", name, " value of ", one_value.size(),
                                                   " bytes is over the limit of ",
                                                   kMaxOneValueBytes, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace tdstore
