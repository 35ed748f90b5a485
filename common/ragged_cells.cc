#include "common/ragged_cells.h"

#include <cstring>

#include "common/shape.h"
#include "common/str_cat.h"

namespace tdstore {
namespace {

void StoreInt64(int64_t v, char* out) {
  const uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((u >> (8 * i)) & 0xff);
}

int64_t LoadInt64(const char* in) {
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return static_cast<int64_t>(u);
}

}  // namespace

absl::StatusOr<DType> RaggedDType(std::string_view record_value) {
  std::optional<DType> dtype = DTypeFromName(record_value);
  if (!dtype) {
    return absl::InvalidArgumentError(
        StrCat("a ragged leaf names its cells' dtype in its value (one of ", KnownDTypeNames(),
               "); got \"", record_value, "\""));
  }
  return *dtype;
}

absl::StatusOr<std::string> EncodeRaggedCell(DType dtype, const std::vector<int64_t>& shape,
                                             std::string_view data) {
  if (shape.size() > static_cast<size_t>(kMaxRaggedDims)) {
    return absl::InvalidArgumentError(StrCat("a ragged cell has at most ", kMaxRaggedDims,
                                             " dims; got ", shape.size()));
  }
  if (absl::Status s = ValidateShape(shape, "ragged cell shape"); !s.ok()) return s;
  absl::StatusOr<int64_t> bytes = ByteSize(shape, DTypeSize(dtype));
  if (!bytes.ok()) return bytes.status();
  if (*bytes != static_cast<int64_t>(data.size())) {
    return absl::InvalidArgumentError(StrCat("a ragged cell of shape ", ShapeToString(shape),
                                             " and dtype ", DTypeName(dtype), " has ", *bytes,
                                             " bytes, not ", data.size()));
  }
  std::string out(static_cast<size_t>(kRaggedCellPrefixBytes) + 8 * shape.size() + data.size(),
                  '\0');
  out[0] = static_cast<char>(shape.size());
  char* dims = out.data() + kRaggedCellPrefixBytes;
  for (size_t i = 0; i < shape.size(); ++i) StoreInt64(shape[i], dims + 8 * i);
  if (!data.empty()) std::memcpy(dims + 8 * shape.size(), data.data(), data.size());
  return out;
}

absl::StatusOr<RaggedCell> DecodeRaggedCell(DType dtype, std::string_view value) {
  if (value.empty()) return RaggedCell{{0}, {}};
  auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(
        StrCat("a ragged cell of ", value.size(), " bytes is not one tdstore wrote: ", why));
  };
  if (static_cast<int64_t>(value.size()) < kRaggedCellPrefixBytes) return corrupt("no prefix");
  const int ndim = static_cast<unsigned char>(value[0]);
  if (ndim > kMaxRaggedDims) return corrupt(StrCat(ndim, " dims"));
  for (int64_t i = 1; i < kRaggedCellPrefixBytes; ++i) {
    if (value[static_cast<size_t>(i)] != 0) return corrupt("reserved bytes are not zero");
  }
  const size_t dims_end = static_cast<size_t>(kRaggedCellPrefixBytes) + 8 * ndim;
  if (value.size() < dims_end) return corrupt("its dims are cut short");
  RaggedCell cell;
  cell.shape.resize(static_cast<size_t>(ndim));
  for (int i = 0; i < ndim; ++i) {
    cell.shape[static_cast<size_t>(i)] = LoadInt64(value.data() + kRaggedCellPrefixBytes + 8 * i);
    if (cell.shape[static_cast<size_t>(i)] < 0) return corrupt("a negative dim");
  }
  absl::StatusOr<int64_t> bytes = ByteSize(cell.shape, DTypeSize(dtype));
  if (!bytes.ok() || *bytes != static_cast<int64_t>(value.size() - dims_end)) {
    return corrupt(StrCat("shape ", ShapeToString(cell.shape), " of ", DTypeName(dtype),
                          " does not match its ", value.size() - dims_end, " data bytes"));
  }
  cell.data = value.substr(dims_end);
  return cell;
}

}  // namespace tdstore
