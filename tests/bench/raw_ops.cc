#include "tests/bench/raw_ops.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "common/dtype.h"
#include "common/shape.h"

namespace tdstore::bench {
namespace {

// GETRANGEs of one block, (key number, start, end inclusive) triples.
constexpr char kReadScript[] = R"lua(
local out = {}
for i = 1, #ARGV, 3 do
  out[#out + 1] = redis.call('GETRANGE', KEYS[tonumber(ARGV[i])], ARGV[i + 1], ARGV[i + 2])
end
return table.concat(out)
)lua";

// SETRANGEs of one block, (key number, offset, bytes) triples.
constexpr char kWriteScript[] = R"lua(
for i = 1, #ARGV, 3 do
  redis.call('SETRANGE', KEYS[tonumber(ARGV[i])], ARGV[i + 1], ARGV[i + 2])
end
return 1
)lua";

std::string_view Text(const redisReply* r) {
  return r->str != nullptr ? std::string_view(r->str, r->len) : std::string_view();
}

absl::Status ErrorReply(const redisReply* r, std::string_view what) {
  if (r->type == REDIS_REPLY_ERROR) {
    return absl::InternalError(std::string(what) + ": " + std::string(Text(r)));
  }
  return absl::OkStatus();
}

// The runs of every leaf that fall into each block touched, and the part
// keys they use (numbered from 1, as a script's KEYS).
struct BlockPlan {
  struct Run {
    size_t leaf = 0;
    int key = 0;
    int64_t offset = 0;
    int64_t length = 0;
    int64_t result_offset = 0;
  };
  std::vector<std::string> keys;
  std::vector<std::pair<size_t, int64_t>> key_ids;  // (leaf, part) of each key
  std::vector<Run> runs;
  int64_t bytes = 0;
};

absl::StatusOr<std::vector<BlockPlan>> PlanBlocks(const RawDict& dict,
                                                  const plan::IndexSpec& index,
                                                  const std::vector<const RawLeaf*>& leaves) {
  auto resolved = plan::ResolveIndex(index, dict.batch_shape);
  if (!resolved.ok()) return resolved.status();
  int64_t block_count = 0;
  for (const RawLeaf* leaf : leaves) block_count = std::max(block_count, leaf->layout.block_count());
  std::vector<int> block_at(static_cast<size_t>(block_count), -1);
  std::vector<BlockPlan> blocks;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const RawLeaf& leaf = *leaves[i];
    for (const plan::PartRun& r :
         plan::SplitRuns(plan::PlanRuns(*resolved, leaf.cell_bytes), leaf.layout)) {
      int& at = block_at[static_cast<size_t>(r.block)];
      if (at < 0) {
        at = static_cast<int>(blocks.size());
        blocks.emplace_back();
      }
      BlockPlan& b = blocks[static_cast<size_t>(at)];
      int key = 0;
      for (size_t k = 0; k < b.key_ids.size(); ++k) {
        if (b.key_ids[k] == std::make_pair(i, r.part)) key = static_cast<int>(k) + 1;
      }
      if (key == 0) {
        b.key_ids.emplace_back(i, r.part);
        b.keys.push_back(dict.PartKey(leaf, r.block, r.part));
        key = static_cast<int>(b.keys.size());
      }
      b.runs.push_back({i, key, r.offset_in_part, r.length, r.result_offset});
      b.bytes += r.length;
    }
  }
  return blocks;
}

}  // namespace

const RawLeaf* RawDict::leaf(const std::string& name) const {
  for (const RawLeaf& l : leaves) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

std::string RawDict::PartKey(const RawLeaf& leaf, int64_t block, int64_t part,
                             int64_t generation) const {
  return keys.BlockPart(id, block, generation < 0 ? leaf.record.generation : generation, part);
}

absl::StatusOr<RawDict> LoadRawDict(RawRedis& redis, const std::string& ns,
                                    const std::string& name) {
  RawDict dict;
  dict.keys = KeySchema(ns);
  dict.name = name;
  auto id = redis.KeyCommand(dict.keys.Catalog(), {"HGET", dict.keys.Catalog(), name});
  if (!id.ok()) return id.status();
  if ((*id)->type != REDIS_REPLY_STRING) {
    return absl::NotFoundError("dict '" + name + "' is not in " + dict.keys.Catalog());
  }
  dict.id = std::string(Text(id->get()));

  const std::string meta_key = dict.keys.Meta(dict.id);
  auto meta = redis.KeyCommand(meta_key, {"HGETALL", meta_key});
  if (!meta.ok()) return meta.status();
  int64_t rows_per_block = 0, part_bytes = 0;
  for (size_t i = 0; i + 1 < (*meta)->elements; i += 2) {
    const std::string_view field = Text((*meta)->element[i]);
    const std::string value(Text((*meta)->element[i + 1]));
    if (field == "batch_shape") {
      auto shape = ShapeFromCsv(value);
      if (!shape.ok()) return shape.status();
      dict.batch_shape = *shape;
    } else if (field == "rows_per_block") {
      rows_per_block = std::atoll(value.c_str());
    } else if (field == "part_bytes") {
      part_bytes = std::atoll(value.c_str());
    }
  }
  if (rows_per_block <= 0 || part_bytes <= 0) {
    return absl::DataLossError("meta of dict '" + name + "' lacks its block layout");
  }

  const std::string leaves_key = dict.keys.Leaves(dict.id);
  auto leaves = redis.KeyCommand(leaves_key, {"HGETALL", leaves_key});
  if (!leaves.ok()) return leaves.status();
  for (size_t i = 0; i + 1 < (*leaves)->elements; i += 2) {
    auto record = DecodeLeafRecord(Text((*leaves)->element[i + 1]));
    if (!record.ok()) return record.status();
    const int64_t elem = DTypeSize(record->dtype);
    auto layout = BlockLayout::Make(dict.batch_shape, record->shape, elem,
                                    dict.batch_shape.empty() ? part_bytes : rows_per_block,
                                    part_bytes);
    if (!layout.ok()) return layout.status();
    int64_t cell = elem;
    for (size_t d = dict.batch_shape.size(); d < record->shape.size(); ++d) cell *= record->shape[d];
    dict.leaves.push_back(
        RawLeaf{std::string(Text((*leaves)->element[i])), *record, *layout, cell});
  }
  return dict;
}

absl::StatusOr<std::unique_ptr<RawOps>> RawOps::Make(RawRedis& redis) {
  std::unique_ptr<RawOps> ops(new RawOps(redis));
  auto read = redis.LoadScript(kReadScript);
  if (!read.ok()) return read.status();
  auto write = redis.LoadScript(kWriteScript);
  if (!write.ok()) return write.status();
  ops->read_sha_ = *read;
  ops->write_sha_ = *write;
  for (auto [file, sha] : {std::pair<const char*, std::string*>{"write_runs.lua",
                                                                &ops->td_write_sha_}}) {
    std::ifstream in(std::string(TDSTORE_SOURCE_DIR) + "/server/lua/" + file);
    std::stringstream body;
    body << in.rdbuf();
    if (!in) return absl::NotFoundError(std::string("cannot read server/lua/") + file);
    auto loaded = redis.LoadScript(body.str());
    if (!loaded.ok()) return loaded.status();
    *sha = *loaded;
  }
  return ops;
}

absl::Status RawOps::GetLeaves(const RawDict& dict, const std::vector<const RawLeaf*>& leaves,
                               const std::vector<char*>& out) {
  struct Window {
    size_t leaf;
    Segment segment;
  };
  std::vector<Window> windows;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const BlockLayout& layout = leaves[i]->layout;
    if (layout.total_bytes() == 0) continue;
    layout.ForEachSegment(0, layout.total_bytes(), kWindowBytes,
                          [&](const Segment& s) { windows.push_back({i, s}); });
  }
  RawPipeline pipe(redis_);
  Argv argv;
  size_t sent = 0;
  for (size_t received = 0; received < windows.size(); ++received) {
    while (sent < windows.size() && pipe.outstanding() < kDepth) {
      const Window& w = windows[sent++];
      const std::string key = dict.PartKey(*leaves[w.leaf], w.segment.block, w.segment.part);
      const std::string start = std::to_string(w.segment.offset_in_part);
      const std::string end = std::to_string(w.segment.offset_in_part + w.segment.length - 1);
      argv.Clear();
      argv.Add("GETRANGE").Add(key).Add(start).Add(end);
      if (auto s = pipe.Send(key, argv); !s.ok()) return s;
    }
    auto reply = pipe.Receive();
    if (!reply.ok()) return reply.status();
    const Window& w = windows[received];
    if (auto s = ErrorReply(reply->get(), "GETRANGE"); !s.ok()) return s;
    if (static_cast<int64_t>((*reply)->len) != w.segment.length) {
      return absl::DataLossError("GETRANGE came back short: the raw layout is wrong");
    }
    std::memcpy(out[w.leaf] + w.segment.leaf_offset, (*reply)->str, (*reply)->len);
  }
  return absl::OkStatus();
}

absl::Status RawOps::PutLeaf(const RawDict& dict, const RawLeaf& leaf, int64_t generation,
                             const char* data, bool presize) {
  // Windows, each preceded (when presizing) by a 1-byte SETRANGE at the end
  // of its part if it is the part's first window (`length` < 0 marks those).
  std::vector<Segment> windows;
  if (leaf.layout.total_bytes() > 0) {
    leaf.layout.ForEachSegment(0, leaf.layout.total_bytes(), kWindowBytes, [&](const Segment& s) {
      if (presize && s.offset_in_part == 0) {
        Segment last = s;
        last.offset_in_part = leaf.layout.part_size(s.block, s.part) - 1;
        last.length = -1;
        windows.push_back(last);
      }
      windows.push_back(s);
    });
  }
  RawPipeline pipe(redis_);
  Argv argv;
  size_t sent = 0;
  static const char kZero = 0;
  for (size_t received = 0; received < windows.size(); ++received) {
    while (sent < windows.size() && pipe.outstanding() < kDepth) {
      const Segment& w = windows[sent++];
      const std::string key = dict.PartKey(leaf, w.block, w.part, generation);
      const std::string offset = std::to_string(w.offset_in_part);
      argv.Clear();
      argv.Add("SETRANGE").Add(key).Add(offset).Add(
          w.length < 0 ? std::string_view(&kZero, 1)
                       : std::string_view(data + w.leaf_offset, static_cast<size_t>(w.length)));
      if (auto s = pipe.Send(key, argv); !s.ok()) return s;
    }
    auto reply = pipe.Receive();
    if (!reply.ok()) return reply.status();
    if (auto s = ErrorReply(reply->get(), "SETRANGE"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status RawOps::DeleteGeneration(const RawDict& dict, const RawLeaf& leaf,
                                      int64_t generation) {
  RawPipeline pipe(redis_);
  Argv argv;
  for (int64_t b = 0; b < leaf.layout.block_count(); ++b) {
    for (int64_t p = 0; p < leaf.layout.part_count(b); ++p) {
      const std::string key = dict.PartKey(leaf, b, p, generation);
      argv.Clear();
      argv.Add("DEL").Add(key);
      if (auto s = pipe.Send(key, argv); !s.ok()) return s;
    }
  }
  while (pipe.outstanding() > 0) {
    auto reply = pipe.Receive();
    if (!reply.ok()) return reply.status();
  }
  return absl::OkStatus();
}

absl::Status RawOps::SchemaReads(const RawDict& dict) {
  const std::string catalog = dict.keys.Catalog();
  auto id = redis_.KeyCommand(catalog, {"HGET", catalog, dict.name});
  if (!id.ok()) return id.status();
  const std::string meta = dict.keys.Meta(dict.id);
  const std::string leaves = dict.keys.Leaves(dict.id);
  RawPipeline pipe(redis_);
  Argv argv;
  argv.Add("HGETALL").Add(meta);
  if (auto s = pipe.Send(meta, argv); !s.ok()) return s;
  argv.Clear();
  argv.Add("HGETALL").Add(leaves);
  if (auto s = pipe.Send(leaves, argv); !s.ok()) return s;
  for (int i = 0; i < 2; ++i) {
    auto reply = pipe.Receive();
    if (!reply.ok()) return reply.status();
  }
  return absl::OkStatus();
}

namespace {

// Sends commands 0..n-1 (built by `send(i)`) with at most `depth` in flight
// (0: all at once) and hands each reply to `on_reply(i, reply)` in order.
absl::Status RunWindowed(RawPipeline& pipe, size_t n, int depth,
                         const std::function<absl::Status(size_t)>& send,
                         const std::function<absl::Status(size_t, const redisReply*)>& on_reply) {
  size_t sent = 0;
  for (size_t received = 0; received < n; ++received) {
    while (sent < n && (depth <= 0 || pipe.outstanding() < depth)) {
      if (auto s = send(sent++); !s.ok()) return s;
    }
    auto reply = pipe.Receive();
    if (!reply.ok()) return reply.status();
    if (auto s = on_reply(received, reply->get()); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RawOps::ReadIndexed(const RawDict& dict, const plan::IndexSpec& index,
                                 const std::vector<const RawLeaf*>& leaves,
                                 const std::vector<char*>& out) {
  if (variant.schema_reads) {
    if (auto s = SchemaReads(dict); !s.ok()) return s;
  }
  auto blocks = PlanBlocks(dict, index, leaves);
  if (!blocks.ok()) return blocks.status();
  RawPipeline pipe(redis_);
  Argv argv;
  std::vector<std::string> storage;
  auto send = [&](size_t i) {
    const BlockPlan& b = (*blocks)[i];
    argv.Clear();
    storage.clear();
    if (b.runs.size() == 1) {
      const BlockPlan::Run& r = b.runs[0];
      storage.push_back(std::to_string(r.offset));
      storage.push_back(std::to_string(r.offset + r.length - 1));
      argv.Add("GETRANGE").Add(b.keys[0]).Add(storage[0]).Add(storage[1]);
    } else {
      // Views into `storage`: reserve so it never reallocates.
      storage.reserve(1 + 3 * b.runs.size());
      storage.push_back(std::to_string(b.keys.size()));
      // tdstored reads with GETRANGEs in MULTI/EXEC now; the baseline
      // keeps its one script per block for both variants.
      argv.Add("EVALSHA").Add(read_sha_).Add(storage.back());
      for (const std::string& k : b.keys) argv.Add(k);
      for (const BlockPlan::Run& r : b.runs) {
        argv.Add(storage.emplace_back(std::to_string(r.key)));
        argv.Add(storage.emplace_back(std::to_string(r.offset)));
        argv.Add(storage.emplace_back(std::to_string(r.offset + r.length - 1)));
      }
    }
    return pipe.Send(b.keys[0], argv);
  };
  auto on_reply = [&](size_t i, const redisReply* reply) {
    const BlockPlan& b = (*blocks)[i];
    if (auto s = ErrorReply(reply, "indexed read"); !s.ok()) return s;
    if (static_cast<int64_t>(reply->len) != b.bytes) {
      return absl::DataLossError("indexed read came back short: the raw layout is wrong");
    }
    const char* from = reply->str;
    for (const BlockPlan::Run& r : b.runs) {
      std::memcpy(out[r.leaf] + r.result_offset, from, static_cast<size_t>(r.length));
      from += r.length;
    }
    return absl::OkStatus();
  };
  return RunWindowed(pipe, blocks->size(), variant.depth, send, on_reply);
}

absl::Status RawOps::WriteIndexed(const RawDict& dict, const plan::IndexSpec& index,
                                  const std::vector<const RawLeaf*>& leaves,
                                  const std::vector<const char*>& values) {
  if (variant.schema_reads) {
    if (auto s = SchemaReads(dict); !s.ok()) return s;
  }
  auto blocks = PlanBlocks(dict, index, leaves);
  if (!blocks.ok()) return blocks.status();
  RawPipeline pipe(redis_);
  Argv argv;
  std::vector<std::string> storage;
  const bool td = variant.tdstore_scripts;
  auto send = [&](size_t i) {
    const BlockPlan& b = (*blocks)[i];
    argv.Clear();
    storage.clear();
    auto bytes = [&](const BlockPlan::Run& r) {
      return std::string_view(values[r.leaf] + r.result_offset, static_cast<size_t>(r.length));
    };
    if (td || b.runs.size() > 1) {
      // tdstored's write_runs.lua, or the ideal's own script (the same
      // arguments): (key number, offset, the run's bytes) per run.
      storage.reserve(2 + 2 * b.runs.size());
      storage.push_back(std::to_string(b.keys.size()));
      argv.Add("EVALSHA").Add(td ? td_write_sha_ : write_sha_).Add(storage.back());
      for (const std::string& k : b.keys) argv.Add(k);
      // write_runs.lua's count of fixed-stride groups first: none here (the
      // replay scenarios' rows are random, as tdstored's single runs).
      if (td) argv.Add(storage.emplace_back("0"));
      for (const BlockPlan::Run& r : b.runs) {
        argv.Add(storage.emplace_back(std::to_string(r.key)));
        argv.Add(storage.emplace_back(std::to_string(r.offset)));
        argv.Add(bytes(r));
      }
    } else {
      const BlockPlan::Run& r = b.runs[0];
      storage.push_back(std::to_string(r.offset));
      argv.Add("SETRANGE").Add(b.keys[0]).Add(storage[0]).Add(bytes(r));
    }
    return pipe.Send(b.keys[0], argv);
  };
  auto on_reply = [&](size_t, const redisReply* reply) { return ErrorReply(reply, "indexed write"); };
  return RunWindowed(pipe, blocks->size(), variant.depth, send, on_reply);
}

absl::StatusOr<int64_t> RawOps::CountKeys(const RawDict& dict) {
  const std::string key = dict.keys.Leaves(dict.id);
  auto reply = redis_.KeyCommand(key, {"HKEYS", key});
  if (!reply.ok()) return reply.status();
  if (auto s = ErrorReply(reply->get(), "HKEYS"); !s.ok()) return s;
  return static_cast<int64_t>((*reply)->elements);
}

}  // namespace tdstore::bench
