#include "client/cli/commands.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "client/cli/dict_leaves.h"
#include "client/cli/index_arg.h"
#include "client/cli/npy_file.h"
#include "client/cli/progress.h"
#include "client/cli/table.h"
#include "common/dtype.h"
#include "common/leaf_kind.h"
#include "common/shape.h"

namespace tdstore::cli {
namespace {

using core::LeafMeta;

// What a leaf holds, as its type and shape columns say it. A tensor: its
// dtype and shape. A value leaf (common/leaf_kind.h) is stored as uint8
// slots, shape batch + [slot]; it is shown as what it holds per batch cell:
// "text [1000] (slots of 64 B)", "ragged float32 [1000] (...)", or for one
// value standing for every cell, "json [1000] (one value)".
std::pair<std::string, std::string> TypeAndShape(const LeafMeta& leaf) {
  if (leaf.kind == LeafKind::kTensor) {
    return {std::string(DTypeName(leaf.dtype)), ShapeToString(leaf.shape)};
  }
  std::string type(LeafKindName(leaf.kind));
  if (leaf.kind == LeafKind::kRagged) type += " " + leaf.value;  // the cells' dtype
  const std::vector<int64_t> cells(leaf.shape.begin(), leaf.shape.end() - 1);
  const int64_t slot = leaf.shape.back();
  return {type, ShapeToString(cells) + (IsOneValue(leaf.kind, leaf.shape)
                                            ? " (one value)"
                                            : " (slots of " + std::to_string(slot) + " B)")};
}

// One row per leaf: path, type, shape, bytes, in aligned columns.
void PrintLeafTable(const std::vector<LeafMeta>& leaves, const std::string& indent,
                    std::ostream& out) {
  std::vector<std::vector<std::string>> rows;
  for (const LeafMeta& leaf : leaves) {
    auto [type, shape] = TypeAndShape(leaf);
    rows.push_back({leaf.path.str(), type, shape, std::to_string(leaf.byte_size)});
  }
  PrintTable(rows, indent, out);
}

bool IsStrictPrefix(const Key& prefix, const Key& path) {
  const auto& a = prefix.parts();
  const auto& b = path.parts();
  return a.size() < b.size() && std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace

void RunCreate(core::Client& client, const CommandLine& line, std::ostream& /*out*/) {
  std::optional<std::vector<int64_t>> batch_size = BatchSizeOption(line);
  if (!batch_size) throw UsageError("create needs --batch-size DIMS (--batch-size= for none)");
  client.create(line.operands[0], *batch_size, /*schema=*/{}, CreateOptionsOf(line));
}

void RunList(core::Client& client, const CommandLine& line, std::ostream& out) {
  if (line.operands.empty()) {
    for (const std::string& name : client.list()) out << name << '\n';
    return;
  }
  PrintLeafTable(SortedLeaves(client.open(line.operands[0]).describe()), "", out);
}

void RunInfo(core::Client& client, const CommandLine& line, std::ostream& out) {
  const core::Dict dict = client.open(line.operands[0]);
  const core::DictInfo info = dict.describe();
  const std::vector<LeafMeta> leaves = SortedLeaves(info);
  out << "name:            " << info.name << '\n'
      << "id:              " << info.id << '\n'
      << "batch size:      " << ShapeToString(info.batch_size) << '\n'
      << "rows per block:  " << info.rows_per_block << '\n'
      << "part bytes:      " << info.part_bytes << '\n'
      << "layout:          " << (info.layout == Layout::kRecord ? "record" : "leaves") << '\n'
      << "version:         " << info.version << '\n'
      << "locked:          " << (info.locked ? "yes" : "no") << '\n'
      << "attributes:      " << info.attrs.size() << " (tdstore attr " << info.name << ")\n"
      << "leaves:          " << leaves.size() << " (" << TotalBytes(leaves) << " bytes)\n";
  PrintLeafTable(leaves, "  ", out);
  out << "handle:          " << dict.handle() << '\n';
}

void RunPut(core::Client& client, const CommandLine& line, std::ostream& /*out*/) {
  const Key path = ParseLeafPath(line.operands[1]);
  // The index and the file are checked before the daemon is asked anything.
  const std::optional<core::Index> index = IndexOption(line);
  const MappedNpy file(line.operands[2]);
  const core::Dict dict = client.open(line.operands[0]);
  const int64_t bytes = file.tensor().byte_size;
  Progress progress(bytes, bytes >= kLargeFileBytes && ProgressWanted(Quiet(line)));
  core::WriteOptions options;
  // With an index, td[index] = file: its shape must equal or broadcast to
  // the selection.
  if (index) options.index = &*index;
  options.progress = progress.Tracker();
  // The mapped file's bytes go out in place.
  dict.write({LeafOf(path, file.tensor())}, options);
  progress.Add(bytes);
  progress.Finish();
}

void RunAppend(core::Client& client, const CommandLine& line, std::ostream& out) {
  const Key path = ParseLeafPath(line.operands[1]);
  const std::optional<std::string> cursor = line.option("cursor");
  if (!cursor) throw UsageError("append needs --cursor COUNTER (the ring's cursor counter)");
  const MappedNpy file(line.operands[2]);
  if (file.tensor().shape.empty()) {
    throw CliError("'" + line.operands[2] + "' holds one value, not rows: append takes an "
                   "array whose first dim is its rows");
  }
  const core::Dict dict = client.open(line.operands[0]);
  const core::RingAppended got =
      dict.append_ring({LeafOf(path, file.tensor())},
                       {*cursor, file.tensor().shape[0], line.option("count").value_or("")});
  out << "start " << got.start << " count " << got.count_value << '\n';
}

void RunGet(core::Client& client, const CommandLine& line, std::ostream& /*out*/) {
  const Key path = ParseLeafPath(line.operands[1]);
  std::optional<std::string> output = line.option("output");
  if (!output) throw UsageError("get needs -o FILE.npy (-o - for stdout)");
  const std::optional<core::Index> index = IndexOption(line);
  const core::Dict dict = client.open(line.operands[0]);
  // A nested dict is refused before anything is downloaded.
  int64_t bytes = 0;
  for (const LeafMeta& leaf : dict.describe().leaves) {
    if (leaf.path == path && leaf.kind != LeafKind::kTensor) {
      // Its slots are no array of the values; .npy has no type for them.
      throw CliError("leaf '" + path.str() + "' of dict '" + dict.name() + "' holds " +
                     TypeAndShape(leaf).first +
                     " values, not a tensor: a .npy file cannot hold them (read them from "
                     "Python or C++)");
    }
    if (leaf.path == path) bytes = leaf.byte_size;
    if (IsStrictPrefix(path, leaf.path)) {
      throw CliError("'" + path.str() + "' in dict '" + dict.name() +
                     "' is a nested dict, not a leaf: one .npy file holds one leaf "
                     "(see 'tdstore ls " + dict.name() + "')");
    }
  }
  // A bar only for the whole leaf: how many bytes an index selects is
  // known only once they arrive.
  Progress progress(bytes,
                    !index && bytes >= kLargeFileBytes && ProgressWanted(Quiet(line)));
  core::ReadOptions options;
  options.exact_leaf = &path;
  if (index) options.index = &*index;
  options.progress = progress.Tracker();
  // The leaf arrives straight in the output file (a dtype .npy cannot hold,
  // bfloat16, is refused as its header arrives, before any data).
  NpyFileSink sink(*output);
  dict.read({path}, sink, options);
  sink.Finish();
  progress.Add(bytes);
  progress.Finish();
}

void RunRemove(core::Client& client, const CommandLine& line, std::ostream& /*out*/) {
  if (line.operands.size() == 1) {
    client.drop(line.operands[0]);
    return;
  }
  const Key path = ParseLeafPath(line.operands[1]);
  client.open(line.operands[0]).erase(path);
}

void RunServer(core::Client& client, const CommandLine&, std::ostream& out) {
  const core::ServerInfo info = client.server_info();
  out << "version        " << info.version << "\n"
      << "backend        " << info.backend << "\n"
      << "redis masters  " << info.redis_masters << "\n"
      << "redis ok       " << (info.redis_ok ? "yes" : "no") << "\n";
}

}  // namespace tdstore::cli
