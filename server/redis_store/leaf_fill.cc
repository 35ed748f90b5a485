#include "server/redis_store/leaf_fill.h"

#include <algorithm>
#include <optional>
#include <set>

#include "common/str_cat.h"
#include "server/redis_store/indexed_access.h"
#include "server/redis_store/leaf_writer.h"
#include "server/store/store_checks.h"

namespace tdstore::store {

namespace {

bool AllZero(const std::string& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](char c) { return c == 0; });
}

}  // namespace

absl::StatusOr<int64_t> FillLeaves(DictStore& dicts, const DictRef& ref,
                                   const std::vector<Fill>& fills,
                                   const plan::IndexSpec* index) {
  auto schema = dicts.Load(ref);
  if (!schema.ok()) return schema.status();
  if (auto s = CheckFills(*schema, fills); !s.ok()) return s;

  if (index != nullptr) {
    std::vector<IndexedWriteValue> values;
    for (const Fill& fill : fills) values.push_back({fill.path, fill.dtype, {}, fill.element});
    auto written = WriteIndexedLeaves(&dicts, {ref.name, schema->meta.id}, *index, values);
    if (!written.ok()) return written.status();
    return schema->meta.version;
  }

  // Whole leaves: one transaction rewrites each as a new generation, in
  // place (same dtype and shape, so a locked dict allows it).
  const int64_t window = dicts.options().window_bytes;
  std::string pattern;  // window bytes of the current element, repeated
  std::optional<MemoryBudget::Lease> pattern_lease;
  std::unique_ptr<WriteTxn> txn = WriteTxn::Begin(&dicts, *schema);
  for (const Fill& fill : fills) {
    const Leaf& leaf = *schema->Find(fill.path);
    const int64_t bytes = RecordBytes(leaf.record);
    if (auto s = txn->BeginLeaf(leaf.path, leaf.record.dtype, leaf.record.shape, bytes); !s.ok()) {
      return s;
    }
    if (AllZero(fill.element)) {
      if (auto s = txn->ZeroFill(); !s.ok()) return s;
      continue;
    }
    if (!pattern_lease) {
      auto lease = dicts.budget().Acquire(window, "a fill's value pattern");
      if (!lease.ok()) return lease.status();
      pattern_lease = *std::move(lease);
    }
    // A whole number of elements per append, so that each starts on one.
    const int64_t elem = static_cast<int64_t>(fill.element.size());
    const int64_t span = std::max(elem, window - window % elem);
    pattern.clear();
    pattern.reserve(static_cast<size_t>(span));
    while (static_cast<int64_t>(pattern.size()) < span) pattern += fill.element;
    for (int64_t done = 0; done < bytes;) {
      const int64_t n = std::min(span, bytes - done);
      if (auto s = txn->Append(std::string_view(pattern).substr(0, static_cast<size_t>(n)));
          !s.ok()) {
        return s;
      }
      done += n;
    }
  }
  auto result = txn->Commit();
  if (!result.ok()) return result.status();
  return result->version;
}

}  // namespace tdstore::store
