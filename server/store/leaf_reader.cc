#include "server/store/leaf_reader.h"

#include <algorithm>

#include <vector>

#include "common/str_cat.h"
#include "server/store/redis_errors.h"

namespace tdstore::store {

absl::Status ReadLeaf(const DictStore& store, const DictSchema& schema, const Leaf& leaf,
                      const ByteSink& sink) {
  auto layout = schema.Layout(leaf.record);
  if (!layout.ok()) return layout.status();
  if (layout->total_bytes() == 0) return absl::OkStatus();

  // The windows, in leaf order. A 4 GiB leaf has 4096 of them: small.
  std::vector<Segment> windows;
  layout->ForEachSegment(0, layout->total_bytes(), store.options().window_bytes,
                         [&](const Segment& s) { windows.push_back(s); });

  const int depth = store.options().pipeline_depth;
  // Replies of `depth` windows in flight plus the one handed to the sink.
  auto lease = store.budget().Acquire(
      std::min<int64_t>(layout->total_bytes(), (depth + 1) * store.options().window_bytes),
      "a whole-leaf read's window pipeline");
  if (!lease.ok()) return lease.status();
  auto pipe = store.redis().NewPipeline(depth);
  if (!pipe.ok()) return pipe.status();

  const std::string& id = schema.meta.id;
  const int64_t gen = leaf.record.generation;
  size_t sent = 0;
  for (size_t received = 0; received < windows.size(); ++received) {
    // Keep the pipeline full: `depth` windows in flight hide the round trip
    // while bounding memory to depth x window bytes.
    while (sent < windows.size() && (*pipe)->outstanding() < depth) {
      const Segment& w = windows[sent++];
      const std::string key = store.keys().BlockPart(id, w.block, gen, w.part);
      const std::string start = StrCat(w.offset_in_part);
      const std::string end = StrCat(w.offset_in_part + w.length - 1);
      if (auto s = (*pipe)->Send(key, {"GETRANGE", key, start, end}); !s.ok()) return s;
    }
    auto reply = (*pipe)->Receive();
    if (!reply.ok()) return reply.status();
    if (auto s = ReplyStatus(*reply, "read block"); !s.ok()) return s;
    if (static_cast<int64_t>(reply->str().size()) != windows[received].length) {
      return absl::AbortedError(StrCat("leaf '", PathToDisplay(leaf.path),
                                             "' was replaced or deleted during the read; retry"));
    }
    if (auto s = sink(reply->str()); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace tdstore::store
