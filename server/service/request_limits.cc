#include "server/service/request_limits.h"

#include "common/str_cat.h"

namespace tdstore::service {

absl::Status CheckDictName(const ServiceLimits& limits, std::string_view name) {
  if (static_cast<int64_t>(name.size()) > limits.max_name_bytes) {
    return absl::InvalidArgumentError(StrCat("dict name of ", name.size(),
                                             " bytes is longer than the limit of ",
                                             limits.max_name_bytes, " (--max-name-bytes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckPath(const ServiceLimits& limits, const v1::Path& path) {
  int64_t bytes = 0;
  for (const std::string& component : path.components()) {
    bytes += static_cast<int64_t>(component.size()) + (bytes > 0 ? 1 : 0);
  }
  if (bytes > limits.max_path_bytes) {
    return absl::InvalidArgumentError(StrCat("a leaf path of ", bytes,
                                             " bytes is longer than the limit of ",
                                             limits.max_path_bytes, " (--max-path-bytes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckLeafCount(const ServiceLimits& limits, int64_t leaves) {
  if (leaves > limits.max_leaves_per_call) {
    return absl::ResourceExhaustedError(StrCat("a call may name at most ",
                                               limits.max_leaves_per_call, " leaves, this one ",
                                               leaves, " (--max-leaves-per-call)"));
  }
  return absl::OkStatus();
}

absl::Status CheckPaths(const ServiceLimits& limits,
                        const google::protobuf::RepeatedPtrField<v1::Path>& paths) {
  if (auto s = CheckLeafCount(limits, paths.size()); !s.ok()) return s;
  for (const v1::Path& p : paths) {
    if (auto s = CheckPath(limits, p); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckIndex(const ServiceLimits& limits, const v1::Index& index) {
  int64_t length = 0;
  for (const v1::IndexItem& item : index.items()) {
    switch (item.kind_case()) {
      case v1::IndexItem::kPositions: {
        const auto& pos = item.positions();
        // The shape must describe exactly the values sent; multiply with an
        // overflow guard so a hostile shape cannot wrap around.
        int64_t cells = 1;
        for (int64_t d : pos.shape()) {
          if (d < 0 || (d > 0 && cells > (int64_t{1} << 62) / d)) {
            return absl::InvalidArgumentError("index tensor shape is negative or too large");
          }
          cells *= d;
        }
        if (cells != pos.values_size()) {
          return absl::InvalidArgumentError(StrCat("index tensor of shape with ", cells,
                                                   " cells carries ", pos.values_size(),
                                                   " values"));
        }
        length += pos.values_size();
        break;
      }
      case v1::IndexItem::kMask:
        length += item.mask().values_size();
        break;
      default:
        length += 1;
    }
  }
  if (length > limits.max_index_length) {
    return absl::ResourceExhaustedError(StrCat("an index may carry at most ",
                                               limits.max_index_length, " positions, this one ",
                                               length, " (--max-index-length)"));
  }
  return absl::OkStatus();
}

absl::Status CheckCallBytes(const ServiceLimits& limits, int64_t bytes) {
  if (bytes > limits.max_call_bytes) {
    return absl::ResourceExhaustedError(StrCat("a call may move at most ", limits.max_call_bytes,
                                               " bytes, this one ", bytes,
                                               " (--max-call-bytes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckRequest(const ServiceLimits& limits, const v1::CreateDictRequest& req) {
  if (auto s = CheckDictName(limits, req.name()); !s.ok()) return s;
  if (auto s = CheckLeafCount(limits, req.leaves_size()); !s.ok()) return s;
  for (const v1::LeafSpec& spec : req.leaves()) {
    if (auto s = CheckPath(limits, spec.path()); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckRequest(const ServiceLimits& limits, const v1::ReadLeavesRequest& req) {
  if (auto s = CheckDictName(limits, req.dict()); !s.ok()) return s;
  if (auto s = CheckPaths(limits, req.paths()); !s.ok()) return s;
  if (req.has_index()) return CheckIndex(limits, req.index());
  return absl::OkStatus();
}

absl::Status CheckRequest(const ServiceLimits& limits, const v1::DeleteLeavesRequest& req) {
  if (auto s = CheckDictName(limits, req.dict()); !s.ok()) return s;
  return CheckPaths(limits, req.paths());
}

absl::Status CheckRequest(const ServiceLimits& limits, const v1::WriteBegin& begin) {
  if (auto s = CheckDictName(limits, begin.dict()); !s.ok()) return s;
  if (auto s = CheckLeafCount(limits, begin.leaf_count()); !s.ok()) return s;
  if (begin.has_index() && begin.has_ring()) {
    return absl::InvalidArgumentError("a write names its rows by an index or by a ring, not both");
  }
  if (begin.has_index()) return CheckIndex(limits, begin.index());
  return absl::OkStatus();
}

}  // namespace tdstore::service
