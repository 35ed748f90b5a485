// tdstore::Appender: at::Tensor rows over the core's append stream.
#include <string>

#include "client/torch/src/tensor_bytes.h"
#include "tdstore/client.h"

namespace tdstore {

Appender Dict::appender(const std::vector<Key>& leaves, core::AppendOptions options) {
  core::Appender core = core_.appender(leaves, options);  // checks the leaves exist
  const DictInfo info = describe();
  std::vector<LeafInfo> chosen;
  chosen.reserve(leaves.size());
  for (const Key& key : leaves) {
    for (const LeafInfo& leaf : info.leaves) {
      if (leaf.path == key) chosen.push_back(leaf);
    }
  }
  if (chosen.size() != leaves.size()) {
    throw Error(StatusCode::kNotFound, "dict '" + name() + "' changed while its appender was made");
  }
  return Appender(std::move(core), std::move(chosen));
}

void Appender::append(int64_t start_row, const std::vector<at::Tensor>& rows) {
  if (rows.size() != leaves_.size()) {
    throw Error(StatusCode::kInvalidArgument,
                "append() got " + std::to_string(rows.size()) + " tensors for " +
                    std::to_string(leaves_.size()) + " leaves");
  }
  // Every tensor is checked (and made a dense CPU copy where needed) before
  // anything is queued.
  std::vector<at::Tensor> dense;
  dense.reserve(rows.size());
  int64_t n = -1;
  for (size_t i = 0; i < rows.size(); ++i) {
    const LeafInfo& leaf = leaves_[i];
    const at::Tensor& t = rows[i];
    if (!t.defined()) {
      throw Error(StatusCode::kInvalidArgument, "rows for '" + leaf.path.str() + "' are undefined");
    }
    if (t.scalar_type() != leaf.dtype) {
      throw Error(StatusCode::kInvalidArgument,
                  "rows for '" + leaf.path.str() + "' are " +
                      std::string(c10::toString(t.scalar_type())) + ", the leaf is " +
                      std::string(c10::toString(leaf.dtype)) + " (append() does not cast)");
    }
    // [n, *element shape]: the leaf's shape after its first (batch) dim.
    const std::vector<int64_t> element(leaf.shape.begin() + 1, leaf.shape.end());
    const std::vector<int64_t> got(t.sizes().begin(), t.sizes().end());
    if (got.empty() || std::vector<int64_t>(got.begin() + 1, got.end()) != element) {
      throw Error(StatusCode::kInvalidArgument,
                  "rows for '" + leaf.path.str() + "' must be [n, element shape of the leaf]");
    }
    if (n >= 0 && got[0] != n) {
      throw Error(StatusCode::kInvalidArgument,
                  "append() tensors differ in their row count (" + std::to_string(n) + " and " +
                      std::to_string(got[0]) + ")");
    }
    n = got[0];
    dense.push_back(t.device().is_cpu() && t.is_contiguous() ? t : t.cpu().contiguous());
  }
  if (n == 0) return;
  std::vector<const void*> data;
  data.reserve(dense.size());
  for (const at::Tensor& t : dense) data.push_back(t.data_ptr());
  core_.append(start_row, n, data);
}

void Appender::flush() { core_.flush(); }

}  // namespace tdstore
