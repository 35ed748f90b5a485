#include "client/cli/data_commands.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "client/cli/dict_leaves.h"
#include "client/cli/host_tensor.h"
#include "client/cli/progress.h"
#include "client/cli/table.h"
#include "client/cli/tensor_file.h"
#include "common/block_layout.h"
#include "common/dtype.h"
#include "common/leaf_kind.h"
#include "common/shape.h"

namespace tdstore::cli {
namespace {

// Leaves smaller than this travel several to a call (one write or read),
// up to this many bytes together; a bigger leaf travels alone. It bounds the
// memory a transfer holds besides the one biggest leaf.
constexpr int64_t kGroupBytes = 64 << 20;
constexpr size_t kGroupLeaves = 256;

// Consecutive indices of `bytes` in groups of at most kGroupBytes (or one
// leaf, if bigger) and kGroupLeaves.
std::vector<std::vector<size_t>> GroupLeaves(const std::vector<int64_t>& bytes) {
  std::vector<std::vector<size_t>> groups;
  int64_t group_bytes = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (groups.empty() || group_bytes + bytes[i] > kGroupBytes ||
        groups.back().size() >= kGroupLeaves) {
      groups.emplace_back();
      group_bytes = 0;
    }
    groups.back().push_back(i);
    group_bytes += bytes[i];
  }
  return groups;
}

using core::LeafMeta;

std::string BytesText(int64_t bytes) {
  return bytes < 1024 ? std::to_string(bytes)
                      : std::to_string(bytes) + " (" + FormatBytes(bytes) + ")";
}

// Reads `paths` (leaves, never prefixes of one another) into tensors of
// their own, each allocated once.
std::map<Key, HostTensor> ReadLeaves(const core::Dict& dict, const std::vector<Key>& paths,
                                     core::Progress progress) {
  HostTensorSink sink;
  core::ReadOptions options;
  options.progress = std::move(progress);
  dict.read(paths, sink, options);
  return std::move(sink.leaves());
}

// The longest run of leading dims every shape shares: the batch size of a
// file that does not record one.
Shape CommonLeadingDims(const std::vector<TensorEntry>& entries) {
  if (entries.empty()) return {};
  Shape common = entries.front().shape;
  for (const TensorEntry& entry : entries) {
    size_t n = 0;
    while (n < common.size() && n < entry.shape.size() && common[n] == entry.shape[n]) ++n;
    common.resize(n);
  }
  return common;
}

// What the store would refuse, refused before the dict is created: a shape
// not starting with the batch size, or a path that is both a leaf and the
// parent of another leaf.
void CheckImportable(const std::string& file, const std::vector<TensorEntry>& entries,
                     const Shape& batch_size) {
  for (const TensorEntry& entry : entries) {
    if (!HasPrefix(entry.shape, batch_size)) {
      throw CliError(file + ": tensor '" + entry.name + "' of shape " +
                     ShapeToString(entry.shape) + " does not start with the batch size " +
                     ShapeToString(batch_size) + " (see --batch-size)");
    }
  }
  std::vector<const TensorEntry*> sorted;
  for (const TensorEntry& entry : entries) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorEntry* a, const TensorEntry* b) { return a->path < b->path; });
  // In sorted order a path's descendants come right after it.
  for (size_t i = 1; i < sorted.size(); ++i) {
    const auto& parent = sorted[i - 1]->path.parts();
    const auto& child = sorted[i]->path.parts();
    if (parent.size() <= child.size() && std::equal(parent.begin(), parent.end(), child.begin())) {
      throw CliError(file + ": tensors '" + sorted[i - 1]->name + "' and '" + sorted[i]->name +
                     "' cannot both be leaves: the first would also be a nested dict");
    }
  }
}

// Deletes a dict this command created, unless told it is complete: a
// failure midway leaves nothing behind.
class HalfMadeDict {
 public:
  HalfMadeDict(const core::Client& client, std::string name) : client_(client), name_(std::move(name)) {}
  ~HalfMadeDict() {
    if (complete_) return;
    try {
      client_.drop(name_);
    } catch (const std::exception&) {
      // The original error matters more; the dict stays for `tdstore rm`.
    }
  }
  void Complete() { complete_ = true; }

 private:
  const core::Client& client_;
  std::string name_;
  bool complete_ = false;
};

}  // namespace

void RunImport(core::Client& client, const CommandLine& line, std::ostream& /*out*/) {
  const std::string& name = line.operands[0];
  const std::string& file = line.operands[1];
  const std::optional<Shape> batch_option = BatchSizeOption(line);
  const CreateOptions options = CreateOptionsOf(line);

  // The whole layout is checked before the store is touched.
  std::unique_ptr<TensorFileReader> reader = OpenTensorFile(file);
  const std::vector<TensorEntry>& entries = reader->entries();
  const Shape batch_size = batch_option          ? *batch_option
                           : reader->batch_size() ? *reader->batch_size()
                                                  : CommonLeadingDims(entries);
  CheckImportable(file, entries, batch_size);
  std::vector<int64_t> bytes;
  int64_t total = 0;
  for (const TensorEntry& entry : entries) {
    bytes.push_back(entry.data_bytes);
    total += entry.data_bytes;
  }

  // Leaves are written after an empty create, not created zero-filled by a
  // schema: zero-filling would first allocate every leaf's size in Redis.
  const core::Dict dict = client.create(name, batch_size, /*schema=*/{}, options);
  HalfMadeDict cleanup(client, name);
  Progress progress(total, ProgressWanted(Quiet(line)));
  for (const std::vector<size_t>& group : GroupLeaves(bytes)) {
    // Views of the mapped file where it holds the bytes plainly, sent in
    // place; inflated copies of compressed .npz members.
    std::vector<HostTensor> tensors;
    std::vector<core::LeafData> leaves;
    int64_t group_bytes = 0;
    for (size_t i : group) {
      tensors.push_back(reader->Load(i));
      leaves.push_back(LeafOf(entries[i].path, tensors.back()));
      group_bytes += bytes[i];
    }
    core::WriteOptions write;
    write.progress = progress.Tracker();
    dict.write(leaves, write);
    for (size_t i : group) reader->Release(i);
    progress.Add(group_bytes);
  }
  cleanup.Complete();
  progress.Finish();
}

void RunExport(core::Client& client, const CommandLine& line, std::ostream& /*out*/) {
  const std::string& file = line.operands[1];
  TensorFileFormat(file);  // a bad file name fails before the daemon is asked
  const core::Dict dict = client.open(line.operands[0]);
  const core::DictInfo info = dict.describe();
  const std::vector<LeafMeta> leaves = SortedLeaves(info);

  std::vector<TensorEntry> entries;
  std::vector<int64_t> bytes;
  for (const LeafMeta& leaf : leaves) {
    // Its uint8 slots would come back from an import as a tensor: refused
    // rather than lose what the leaf holds (tdstore cp keeps it).
    if (leaf.kind != LeafKind::kTensor) {
      throw CliError("leaf '" + leaf.path.str() + "' of dict '" + info.name + "' holds " +
                     std::string(LeafKindName(leaf.kind)) +
                     " values, not a tensor: .safetensors and .npz files hold tensors only "
                     "(copy the dict with 'tdstore cp' instead)");
    }
    TensorEntry entry;
    entry.path = leaf.path;
    entry.dtype = leaf.dtype;
    entry.shape = leaf.shape;
    entry.data_bytes = leaf.byte_size;
    entries.push_back(std::move(entry));
    bytes.push_back(leaf.byte_size);
  }
  std::unique_ptr<TensorFileWriter> writer = CreateTensorFile(file, entries, info.batch_size);
  Progress progress(TotalBytes(leaves), ProgressWanted(Quiet(line)));
  for (const std::vector<size_t>& group : GroupLeaves(bytes)) {
    std::vector<Key> paths;
    for (size_t i : group) paths.push_back(leaves[i].path);
    std::map<Key, HostTensor> got = ReadLeaves(dict, paths, progress.Tracker());
    for (size_t i : group) {
      auto it = got.find(leaves[i].path);
      if (it == got.end()) {
        throw CliError("leaf '" + leaves[i].path.str() +
                       "' was deleted while it was being exported; try again");
      }
      writer->Add(it->second);
      got.erase(it);  // free each leaf once written
      progress.Add(bytes[i]);
    }
  }
  writer->Finish();
  progress.Finish();
}

void RunCopy(core::Client& client, const CommandLine& line, std::ostream& /*out*/) {
  // One call: tdstored builds the copy before it gives it its name, so DST
  // appears with every leaf, and a copy cut short leaves no dict.
  client.open(line.operands[0]).clone(line.operands[1]);
}

void RunStats(core::Client& client, const CommandLine& line, std::ostream& out) {
  if (line.operands.empty()) {
    const core::ServerInfo server = client.server_info();
    std::vector<std::vector<std::string>> rows = {{"DICT", "LEAVES", "BYTES"}};
    int64_t dicts = 0, leaves = 0, bytes = 0;
    for (const std::string& name : client.list()) {
      core::DictInfo info;
      try {
        info = client.open(name).describe();
      } catch (const Error& e) {
        if (e.code() == StatusCode::kNotFound) continue;  // deleted since list()
        throw;
      }
      const int64_t dict_bytes = TotalBytes(info.leaves);
      rows.push_back({name, std::to_string(info.leaves.size()), std::to_string(dict_bytes)});
      ++dicts;
      leaves += static_cast<int64_t>(info.leaves.size());
      bytes += dict_bytes;
    }
    out << "version        " << server.version << "\n"
        << "backend        " << server.backend << "\n"
        << "redis masters  " << server.redis_masters << "\n"
        << "redis ok       " << (server.redis_ok ? "yes" : "no") << "\n"
        << "dicts          " << dicts << "\n"
        << "leaves         " << leaves << "\n"
        << "bytes          " << BytesText(bytes) << "\n";
    if (dicts > 0) {
      out << "\n";
      PrintTable(rows, "", out);
    }
    return;
  }

  const core::DictInfo info = client.open(line.operands[0]).describe();
  const std::vector<LeafMeta> leaves = SortedLeaves(info);
  // Block b of every leaf lives together, so the dict spans as many blocks
  // as its longest leaf; each block part is one Redis value.
  int64_t blocks = 0, values = 0;
  std::vector<std::vector<std::string>> rows = {{"PATH", "DTYPE", "SHAPE", "BYTES", "BLOCKS",
                                                 "VALUES"}};
  // A record dict's leaves with rows share the record's Redis values: they
  // are counted once, as one leaf of the record's bytes per row (a leaf
  // deleted from the record leaves its bytes there, uncounted).
  const bool record = info.layout == Layout::kRecord && !info.batch_size.empty();
  int64_t record_row_bytes = 0;
  for (const LeafMeta& leaf : leaves) {
    if (record && info.batch_size[0] > 0) record_row_bytes += leaf.byte_size / info.batch_size[0];
  }
  if (record && record_row_bytes > 0) {
    absl::StatusOr<BlockLayout> layout =
        BlockLayout::Make({info.batch_size[0]}, {info.batch_size[0], record_row_bytes}, 1,
                          info.rows_per_block, info.part_bytes);
    if (layout.ok()) {
      for (int64_t b = 0; b < layout->block_count(); ++b) values += layout->part_count(b);
      blocks = layout->block_count();
    }
  }
  for (const LeafMeta& leaf : leaves) {
    absl::StatusOr<BlockLayout> layout =
        BlockLayout::Make(info.batch_size, leaf.shape, DTypeSize(leaf.dtype), info.rows_per_block,
                          info.part_bytes);
    if (!layout.ok()) {
      throw CliError("leaf '" + leaf.path.str() + "': " + std::string(layout.status().message()));
    }
    int64_t leaf_values = 0;
    for (int64_t b = 0; b < layout->block_count(); ++b) leaf_values += layout->part_count(b);
    const bool in_record = record && leaf.byte_size > 0;
    if (!in_record) {
      blocks = std::max(blocks, layout->block_count());
      values += leaf_values;
    }
    rows.push_back({leaf.path.str(), std::string(DTypeName(leaf.dtype)), ShapeToString(leaf.shape),
                    std::to_string(leaf.byte_size), std::to_string(layout->block_count()),
                    in_record ? "record" : std::to_string(leaf_values)});
  }
  out << "name            " << info.name << "\n"
      << "batch size      " << ShapeToString(info.batch_size) << "\n"
      << "version         " << info.version << "\n"
      << "rows per block  " << info.rows_per_block << "\n"
      << "part bytes      " << info.part_bytes << "\n"
      << "layout          " << (record ? "record" : "leaves") << "\n"
      << "leaves          " << leaves.size() << "\n"
      << "bytes           " << BytesText(TotalBytes(leaves)) << "\n"
      << "blocks          " << blocks << "\n"
      << "redis values    " << values << "\n";
  if (!leaves.empty()) {
    out << "\n";
    PrintTable(rows, "", out);
  }
}

}  // namespace tdstore::cli
