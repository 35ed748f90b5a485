#include "common/leaf_kind.h"

namespace tdstore {
namespace {

struct KindInfo {
  LeafKind kind;
  std::string_view name;
};

// The names are stored in Redis records: they must never change.
constexpr KindInfo kKinds[] = {
    {LeafKind::kTensor, "tensor"},
    {LeafKind::kText, "text"},
    {LeafKind::kJson, "json"},
    {LeafKind::kBytes, "bytes"},
    {LeafKind::kRagged, "ragged"},
};

}  // namespace

bool IsKnownLeafKind(int number) {
  for (const KindInfo& info : kKinds) {
    if (static_cast<int>(info.kind) == number) return true;
  }
  return false;
}

std::string_view LeafKindName(LeafKind kind) {
  for (const KindInfo& info : kKinds) {
    if (info.kind == kind) return info.name;
  }
  return "unknown";
}

std::optional<LeafKind> LeafKindFromName(std::string_view name) {
  for (const KindInfo& info : kKinds) {
    if (info.name == name) return info.kind;
  }
  return std::nullopt;
}

bool IsOneValue(LeafKind kind, const std::vector<int64_t>& shape) {
  return kind != LeafKind::kTensor && !shape.empty() && shape.back() == 0;
}

bool KeepsValue(LeafKind kind, const std::vector<int64_t>& shape) {
  return kind == LeafKind::kRagged || IsOneValue(kind, shape);
}

}  // namespace tdstore
