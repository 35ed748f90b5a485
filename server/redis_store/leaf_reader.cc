#include "server/redis_store/leaf_reader.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/str_cat.h"
#include "server/redis_store/redis_errors.h"
#include "server/redis_store/schema_cache.h"

namespace tdstore::store {

namespace {

// One GETRANGE of a read: a window of leaf number `leaf`. For a leaf in a
// record, a window of the record's stored rows (segment.leaf_offset is then
// an offset into them), which the leaf's bytes are cut from.
struct Window {
  size_t leaf = 0;
  Segment segment;
};

// The leaf's bytes among `stored`, which are the record's bytes from
// `from` on: of each stored row, [field_offset, field_offset + row_bytes).
std::string CutFromRecord(std::string_view stored, int64_t from, const BlockLayout& layout) {
  const int64_t stride = layout.stride();
  const int64_t end = from + static_cast<int64_t>(stored.size());
  std::string out;
  out.reserve(static_cast<size_t>(stored.size() / stride + 2) *
              static_cast<size_t>(layout.row_bytes()));
  for (int64_t row = from / stride; row * stride < end; ++row) {
    const int64_t lo = std::max(from, row * stride + layout.field_offset());
    const int64_t hi = std::min(end, row * stride + layout.field_offset() + layout.row_bytes());
    if (lo < hi) out.append(stored.substr(static_cast<size_t>(lo - from), static_cast<size_t>(hi - lo)));
  }
  return out;
}

}  // namespace

absl::Status ReadLeaves(const DictStore& store, const DictSchema& schema,
                        const std::vector<const Leaf*>& leaves, bool probe, LeafSink& sink) {
  // The windows of every leaf, in order. A 4 GiB leaf has 4096: small.
  std::vector<Window> windows;
  std::vector<BlockLayout> layouts;
  int64_t total = 0;
  for (size_t i = 0; i < leaves.size(); ++i) {
    auto layout = schema.Layout(leaves[i]->record);
    if (!layout.ok()) return layout.status();
    // A leaf in a record is read as whole stored rows, the record's, and
    // cut out here: a GETRANGE per row of the leaf alone would cost a
    // call per row.
    const BlockLayout stored = layout->StoredRows();
    total += stored.total_bytes();
    stored.ForEachSegment(0, stored.total_bytes(), store.options().window_bytes,
                          [&](const Segment& s) { windows.push_back({i, s}); });
    layouts.push_back(*std::move(layout));
  }

  const int depth = store.options().pipeline_depth;
  std::unique_ptr<redis::Pipeline> pipe;
  MemoryBudget::Lease lease = store.budget().Empty();
  if (probe || !windows.empty()) {
    // Replies of `depth` windows in flight plus the one handed to the sink.
    auto leased = store.budget().Acquire(
        std::min<int64_t>(total, (depth + 1) * store.options().window_bytes),
        "a whole-leaf read's window pipeline");
    if (!leased.ok()) return leased.status();
    lease = *std::move(leased);
    auto made = store.redis().NewPipeline(depth + kProbeCommands);
    if (!made.ok()) return made.status();
    pipe = *std::move(made);
  }

  const std::string& id = schema.meta.id;
  size_t sent = 0;
  // Keeps the pipeline full: `depth` windows in flight hide the round trip
  // while bounding memory to depth x window bytes.
  auto fill = [&]() -> absl::Status {
    while (sent < windows.size() && pipe->outstanding() < depth) {
      const Window& w = windows[sent++];
      const int64_t gen = leaves[w.leaf]->record.generation;
      const std::string key = store.keys().BlockPart(id, w.segment.block, gen, w.segment.part);
      const std::string start = StrCat(w.segment.offset_in_part);
      const std::string end = StrCat(w.segment.offset_in_part + w.segment.length - 1);
      if (auto s = pipe->Send(key, {"GETRANGE", key, start, end}); !s.ok()) return s;
    }
    return absl::OkStatus();
  };

  if (probe) {
    if (auto s = SendProbe(*pipe, store.keys(), schema, schema.meta.name); !s.ok()) return s;
    if (auto s = fill(); !s.ok()) return s;
    if (auto s = ReceiveProbe(*pipe, schema, schema.meta.name); !s.ok()) return s;
  }
  if (auto s = sink.Begin(schema, leaves); !s.ok()) return s;

  size_t announced = 0;  // leaves whose BeginLeaf the sink has had
  auto announce_through = [&](size_t leaf) -> absl::Status {
    while (announced <= leaf && announced < leaves.size()) {
      if (auto s = sink.BeginLeaf(*leaves[announced++]); !s.ok()) return s;
    }
    return absl::OkStatus();
  };
  for (size_t received = 0; received < windows.size(); ++received) {
    if (auto s = fill(); !s.ok()) return s;
    auto reply = pipe->Receive();
    if (!reply.ok()) return reply.status();
    if (auto s = ReplyStatus(*reply, "read block"); !s.ok()) return s;
    const Window& w = windows[received];
    if (static_cast<int64_t>(reply->str().size()) != w.segment.length) {
      return absl::AbortedError(StrCat("leaf '", PathToDisplay(leaves[w.leaf]->path),
                                       "' was replaced or deleted during the read; retry"));
    }
    if (auto s = announce_through(w.leaf); !s.ok()) return s;
    if (layouts[w.leaf].in_record()) {
      SharedBytes cut =
          ShareString(CutFromRecord(reply->str(), w.segment.leaf_offset, layouts[w.leaf]));
      if (auto s = sink.Data(std::move(cut)); !s.ok()) return s;
      continue;
    }
    auto owned = std::make_shared<const redis::Reply>(*std::move(reply));
    if (auto s = sink.Data({owned->str(), owned}); !s.ok()) return s;
  }
  return announce_through(leaves.size());
}

absl::Status ReadLeaf(const DictStore& store, const DictSchema& schema, const Leaf& leaf,
                      const ByteSink& sink) {
  class Bytes final : public LeafSink {
   public:
    explicit Bytes(const ByteSink& sink) : sink_(sink) {}
    absl::Status Begin(const DictSchema&, const std::vector<const Leaf*>&) override {
      return absl::OkStatus();
    }
    absl::Status BeginLeaf(const Leaf&) override { return absl::OkStatus(); }
    absl::Status Data(SharedBytes bytes) override { return sink_(bytes.bytes); }

   private:
    const ByteSink& sink_;
  } bytes(sink);
  return ReadLeaves(store, schema, {&leaf}, /*probe=*/false, bytes);
}

}  // namespace tdstore::store
