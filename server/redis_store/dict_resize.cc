#include "server/redis_store/dict_resize.h"

#include <chrono>
#include <map>
#include <set>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/block_layout.h"
#include "common/shape.h"
#include "common/str_cat.h"
#include "server/log.h"
#include "server/redis_store/dict_state.h"
#include "server/redis_store/lua_scripts.h"
#include "server/store/outcome.h"
#include "server/redis_store/redis_errors.h"
#include "server/redis_store/schema_cache.h"

namespace tdstore::store {

namespace {

// Plans made against a schema that changed before the commit are redone
// this many times in all.
constexpr int kAttempts = 3;
// How long a resize waits for another one holding the dict.
constexpr std::chrono::seconds kBusyWait{10};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Names this call's lease; unique enough that two callers never share one.
std::string NewLeaseToken() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  return StrCat(absl::Hex(random(), absl::kZeroPad16), absl::Hex(random(), absl::kZeroPad16));
}

absl::Status BusyError(std::string_view dict) {
  return absl::AbortedError(StrCat("dict '", dict, "' is being resized by another call; retry"));
}
bool IsBusy(const absl::Status& status) {
  return absl::IsAborted(status) && !IsStale(status) &&
         status.message().find("being resized") != std::string_view::npos;
}

// Every leaf's block layout at the old and the new size.
struct LeafLayouts {
  BlockLayout before;
  BlockLayout after;
  int64_t generation;
};

absl::StatusOr<std::vector<LeafLayouts>> PlanLayouts(const DictSchema& schema, int64_t rows) {
  const DictMeta& meta = schema.meta;
  Shape batch = meta.batch_shape;
  batch[0] = rows;
  if (auto s = ValidateShape(batch, "batch shape"); !s.ok()) return s;
  std::vector<LeafLayouts> out;
  std::set<int64_t> records;  // a record's leaves share one generation: once
  for (const auto& [_, leaf] : schema.leaves) {
    const LeafRecord& record = leaf.record;
    if (record.InSharedRecord() && !records.insert(record.generation).second) continue;
    Shape shape = record.shape;
    shape[0] = rows;
    const int64_t elem = DTypeSize(record.dtype);
    auto before = schema.Layout(record);
    if (!before.ok()) return before.status();
    auto after = BlockLayout::Make(batch, shape, elem, meta.rows_per_block, meta.part_bytes,
                                   record.in_record.stride, record.in_record.offset);
    if (!after.ok()) {
      return absl::InvalidArgumentError(StrCat("leaf '", PathToDisplay(leaf.path), "' at ",
                                               rows, " rows: ", after.status().message()));
    }
    // What the generation stores: for a record, its whole rows.
    out.push_back({before->StoredRows(), after->StoredRows(), record.generation});
  }
  return out;
}

// What size_parts.lua does to one part key.
struct PartSize {
  std::string key;
  int64_t keep = 0;
  int64_t length = 0;
};
// By block: one script call per block slot.
using BlockSizes = std::map<int64_t, std::vector<PartSize>>;

int64_t PartSizeOr0(const BlockLayout& layout, int64_t block, int64_t part) {
  if (block >= layout.block_count() || part >= layout.part_count(block)) return 0;
  return layout.part_size(block, part);
}

// The parts a resize from `from` to `to` rows changes. Rows keep their
// offsets, so only the block holding the smaller end and the blocks past
// it differ. `keep` is what both sizes share; with `undo`, the parts go
// back to the `from` size (a grow undone: its extensions cut, its new parts
// deleted).
BlockSizes SizesFor(const DictStore& dicts, const DictMeta& meta,
                    const std::vector<LeafLayouts>& leaves, bool undo) {
  BlockSizes sizes;
  for (const LeafLayouts& leaf : leaves) {
    const BlockLayout& small =
        leaf.before.rows() < leaf.after.rows() ? leaf.before : leaf.after;
    const BlockLayout& large = &small == &leaf.before ? leaf.after : leaf.before;
    const int64_t first = small.rows() / meta.rows_per_block;
    for (int64_t b = first; b < large.block_count(); ++b) {
      for (int64_t p = 0; p < large.part_count(b); ++p) {
        const int64_t keep = PartSizeOr0(small, b, p);
        const int64_t before = PartSizeOr0(leaf.before, b, p);
        const int64_t after = PartSizeOr0(leaf.after, b, p);
        if (before == after) continue;
        const int64_t length = undo ? before : after;
        sizes[b].push_back({dicts.keys().BlockPart(meta.id, b, leaf.generation, p), keep, length});
      }
    }
  }
  return sizes;
}

// Runs size_parts.lua on every block of `sizes`, one call per block. Stops
// (stale) past `deadline`, the end of the time the lease guarantees.
absl::Status ApplySizes(DictStore& dicts, const BlockSizes& sizes,
                        std::chrono::steady_clock::time_point deadline =
                            std::chrono::steady_clock::time_point::max()) {
  for (const auto& [block, parts] : sizes) {
    if (std::chrono::steady_clock::now() > deadline) {
      return StaleError("the resize's lease (sizing took longer than half the pending timeout)");
    }
    std::vector<std::string> numbers;
    numbers.reserve(2 * parts.size());
    std::vector<std::string_view> keys, args;
    for (const PartSize& part : parts) {
      keys.push_back(part.key);
      numbers.push_back(StrCat(part.keep));
      numbers.push_back(StrCat(part.length));
    }
    for (const std::string& n : numbers) args.push_back(n);
    auto reply = dicts.redis().Eval(GetScripts().size_parts, keys, args);
    if (!reply.ok()) return reply.status();
    if (auto s = ReplyStatus(*reply, "size block parts"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// One step of resize_dict.lua for this plan.
class ResizeSteps {
 public:
  ResizeSteps(DictStore& dicts, const DictSchema& schema, int64_t rows, const std::string& token)
      : dicts_(dicts), schema_(schema), rows_(rows), token_(token) {}

  // Takes the lease. A failure releases whatever a lost reply may have
  // taken.
  absl::Status Prepare() {
    absl::Status status = Run("prepare").status();
    if (!status.ok()) Release();
    sizing_deadline_ = std::chrono::steady_clock::now() + dicts_.options().pending_timeout / 2;
    return status;
  }
  // Sizing must end well inside the lease: a resize that took over an
  // expired lease sizes the same parts.
  std::chrono::steady_clock::time_point sizing_deadline() const { return sizing_deadline_; }
  // Whether a commit found the lease taken over: the parts are the other
  // resize's now, and must not be sized back.
  bool lease_lost() const { return lease_lost_; }
  // The new version; an unknown outcome if the reply was lost.
  absl::StatusOr<int64_t> Commit() { return Run("commit"); }
  // Best effort: an unreleased lease expires after the pending timeout.
  void Release() {
    if (auto s = Run("release").status(); !s.ok()) {
      LogWarning(StrCat("could not release the resize lease of dict '", schema_.meta.name,
                        "' (it expires on its own): ", s.ToString()));
    }
  }

 private:
  absl::StatusOr<int64_t> Run(std::string_view mode) {
    const DictMeta& meta = schema_.meta;
    const KeySchema& keys = dicts_.keys();
    const int64_t now = NowMs();
    const std::string version = StrCat(meta.version), old_rows = StrCat(meta.batch_shape[0]),
                      new_rows = StrCat(rows_), channel = keys.SchemaChannel(),
                      now_ms = StrCat(now),
                      expires = StrCat(now + dicts_.options().pending_timeout.count());
    const std::string meta_key = keys.Meta(meta.id), leaves_key = keys.Leaves(meta.id);
    const std::vector<std::string_view> k{meta_key, leaves_key};
    const std::vector<std::string_view> a{mode,    meta.name, version, old_rows, new_rows,
                                          channel, meta.id,   token_,  now_ms,   expires};
    const bool commit = mode == "commit";
    auto reply = commit ? dicts_.redis().EvalDurable(GetScripts().resize_dict, k, a,
                                                     dicts_.options().write_replicas,
                                                     dicts_.options().write_replicas_timeout)
                        : dicts_.redis().Eval(GetScripts().resize_dict, k, a);
    if (!reply.ok()) {
      if (!commit) return reply.status();
      return OutcomeUnknown(StrCat("resizing dict '", meta.name,
                                   "': outcome unknown (retrying is safe): ",
                                   reply.status().message()));
    }
    const std::string_view tag = ErrorTag(*reply);
    if (tag == "TDNODICT") return dicts_.NotFound({meta.name, meta.id});
    if (tag == "TDLOCKED") return LockedError(meta.name, "resize it");
    if (tag == "TDBUSY") return BusyError(meta.name);
    if (tag == "TDLEASE") {
      lease_lost_ = true;
      return StaleError(StrCat("dict '", meta.name, "' (its resize lease expired)"));
    }
    if (tag == "TDSTALE") return StaleError(StrCat("dict '", meta.name, "' (during a resize)"));
    if (auto s = ReplyStatus(*reply, StrCat("resize dict (", mode, ")")); !s.ok()) return s;
    return reply->integer();
  }

  DictStore& dicts_;
  const DictSchema& schema_;
  const int64_t rows_;
  const std::string& token_;
  std::chrono::steady_clock::time_point sizing_deadline_{};
  bool lease_lost_ = false;
};

int64_t BytesAt(const std::vector<LeafLayouts>& leaves, bool after) {
  int64_t total = 0;
  for (const LeafLayouts& l : leaves) total += after ? l.after.total_bytes() : l.before.total_bytes();
  return total;
}

absl::Status Grow(DictStore& dicts, const DictSchema& schema, int64_t rows,
                  const std::vector<LeafLayouts>& leaves, ResizeSteps& steps) {
  const int64_t added = BytesAt(leaves, true) - BytesAt(leaves, false);
  // The quotas first: a grow they refuse changes nothing at all.
  if (auto s = dicts.CheckDictQuota(schema.meta, schema.StoredBytes() + added); !s.ok()) return s;
  if (auto s = dicts.ReserveBytes(
          added, StrCat("growing dict '", schema.meta.name, "' to ", rows, " rows"));
      !s.ok()) {
    return s;
  }
  if (auto s = steps.Prepare(); !s.ok()) {
    dicts.ReleaseBytes(added);
    return s;
  }
  absl::Status status = ApplySizes(dicts, SizesFor(dicts, schema.meta, leaves, /*undo=*/false),
                                   steps.sizing_deadline());
  if (status.ok()) {
    auto version = steps.Commit();
    if (IsOutcomeUnknown(version.status())) {
      // The records may name the new size: the sized parts must stay.
      steps.Release();
      return version.status();
    }
    status = version.status();
  }
  if (!status.ok()) {
    // Best effort: parts left longer than their records are cut by the
    // next resize, and new blocks are deleted with their generation
    // (rows_high covers them). Not when another resize took the lease
    // over: the parts are its own now.
    if (!steps.lease_lost()) {
      (void)ApplySizes(dicts, SizesFor(dicts, schema.meta, leaves, /*undo=*/true));
    }
    dicts.ReleaseBytes(added);
  }
  steps.Release();
  return status;
}

absl::Status Shrink(DictStore& dicts, const DictSchema& schema,
                    const std::vector<LeafLayouts>& leaves, ResizeSteps& steps) {
  const int64_t removed = BytesAt(leaves, false) - BytesAt(leaves, true);
  if (auto s = steps.Prepare(); !s.ok()) return s;
  auto version = steps.Commit();
  if (!version.ok()) {
    steps.Release();
    return version.status();
  }
  // Committed: from here the call succeeds. Rows past the end are
  // unreachable; trimming frees their memory, and cuts the parts so that a
  // write planned against the old size finds them short (TDSTALE) instead
  // of landing in bytes a later grow would expose.
  if (auto s = ApplySizes(dicts, SizesFor(dicts, schema.meta, leaves, /*undo=*/false),
                          steps.sizing_deadline());
      !s.ok()) {
    LogWarning(StrCat("dict '", schema.meta.name, "' shrank, but trimming its blocks failed ",
                      "(they are deleted with their leaves): ", s.ToString()));
  }
  dicts.ReleaseBytes(removed);
  steps.Release();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DictSchema> ResizeDict(DictStore& dicts, const DictRef& ref, int64_t rows) {
  if (rows < 0) {
    return absl::InvalidArgumentError(StrCat("cannot resize to ", rows, " rows"));
  }
  const std::string token = NewLeaseToken();
  const auto busy_until = std::chrono::steady_clock::now() + kBusyWait;
  auto backoff = std::chrono::milliseconds(5);
  absl::Status last;
  for (int attempt = 0; attempt < kAttempts;) {
    auto schema = dicts.Load(ref);
    if (!schema.ok()) return schema.status();
    const DictMeta& meta = schema->meta;
    if (meta.batch_shape.empty()) {
      return absl::InvalidArgumentError(
          StrCat("dict '", meta.name, "' has no batch dims: there is no dim 0 to resize"));
    }
    if (meta.locked) return LockedError(meta.name, "resize it");
    if (rows == meta.batch_shape[0]) return schema;
    auto leaves = PlanLayouts(*schema, rows);
    if (!leaves.ok()) return leaves.status();

    ResizeSteps steps(dicts, *schema, rows, token);
    absl::Status status = rows > meta.batch_shape[0] ? Grow(dicts, *schema, rows, *leaves, steps)
                                                     : Shrink(dicts, *schema, *leaves, steps);
    if (status.ok()) return dicts.Load({ref.name, meta.id});
    if (IsBusy(status) && std::chrono::steady_clock::now() < busy_until) {
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
      continue;
    }
    if (!IsStale(status)) return status;
    last = status;
    ++attempt;
  }
  return absl::AbortedError(StrCat("dict '", ref.name, "' kept changing during the resize (",
                                   last.message(), ")"));
}

}  // namespace tdstore::store
