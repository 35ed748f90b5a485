#include <string>

#include "common/value_rows.h"
#include "tdstore/core.h"

namespace tdstore::core {

Values DecodeValues(const LeafMeta& meta, const void* data) {
  if (meta.kind == LeafKind::kTensor || meta.shape.empty()) {
    throw Error(StatusCode::kInvalidArgument,
                "leaf '" + meta.path.str() + "' holds a tensor, not values");
  }
  Values out;
  out.kind = meta.kind;
  out.cells.assign(meta.shape.begin(), meta.shape.end() - 1);
  const int64_t slot = meta.shape.back();
  if (slot == 0) {
    out.one = true;
    out.values.push_back(meta.value);
    return out;
  }
  int64_t cells = 1;
  for (int64_t d : out.cells) cells *= d;
  auto decoded = DecodeValueRows(static_cast<const char*>(data), cells, slot);
  if (!decoded.ok()) {
    throw Error(StatusCode::kDataLoss,
                "leaf '" + meta.path.str() + "': " + std::string(decoded.status().message()));
  }
  out.values.assign(decoded->begin(), decoded->end());
  if (meta.kind == LeafKind::kRagged) out.cell_dtype = meta.value;
  return out;
}

}  // namespace tdstore::core
