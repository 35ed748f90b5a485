#include "client/cli/commands.h"

#include <algorithm>
#include <string>
#include <vector>

#include "client/cli/index_arg.h"
#include "client/cli/npy_file.h"
#include "client/cli/progress.h"
#include "client/cli/table.h"
#include "client/src/scalar_type.h"
#include "common/dtype.h"
#include "common/shape.h"

namespace tdstore::cli {
namespace {

std::string DTypeText(at::ScalarType type) {
  std::optional<DType> dtype = DTypeFromScalarType(type);
  return dtype ? std::string(DTypeName(*dtype)) : std::string(c10::toString(type));
}

// Leaves sorted by path, so listings are stable whatever order the server
// keeps them in.
std::vector<LeafInfo> SortedLeaves(const DictInfo& info) {
  std::vector<LeafInfo> leaves = info.leaves;
  std::sort(leaves.begin(), leaves.end(),
            [](const LeafInfo& a, const LeafInfo& b) { return a.path < b.path; });
  return leaves;
}

// One row per leaf: path, dtype, shape, bytes, in aligned columns.
void PrintLeafTable(const std::vector<LeafInfo>& leaves, const std::string& indent,
                    std::ostream& out) {
  std::vector<std::vector<std::string>> rows;
  for (const LeafInfo& leaf : leaves) {
    rows.push_back({leaf.path.str(), DTypeText(leaf.dtype), ShapeToString(leaf.shape),
                    std::to_string(leaf.byte_size)});
  }
  PrintTable(rows, indent, out);
}

bool IsStrictPrefix(const Key& prefix, const Key& path) {
  const auto& a = prefix.parts();
  const auto& b = path.parts();
  return a.size() < b.size() && std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace

void RunCreate(Client& client, const CommandLine& line, std::ostream& /*out*/) {
  std::optional<std::vector<int64_t>> batch_size = BatchSizeOption(line);
  if (!batch_size) throw UsageError("create needs --batch-size DIMS (--batch-size= for none)");
  client.create(line.operands[0], *batch_size, CreateOptionsOf(line));
}

void RunList(Client& client, const CommandLine& line, std::ostream& out) {
  if (line.operands.empty()) {
    for (const std::string& name : client.list()) out << name << '\n';
    return;
  }
  PrintLeafTable(SortedLeaves(client.open(line.operands[0]).describe()), "", out);
}

void RunInfo(Client& client, const CommandLine& line, std::ostream& out) {
  Dict dict = client.open(line.operands[0]);
  const DictInfo info = dict.describe();
  int64_t total = 0;
  for (const LeafInfo& leaf : info.leaves) total += leaf.byte_size;
  out << "name:            " << info.name << '\n'
      << "id:              " << info.id << '\n'
      << "batch size:      " << ShapeToString(info.batch_size) << '\n'
      << "rows per block:  " << info.rows_per_block << '\n'
      << "part bytes:      " << info.part_bytes << '\n'
      << "version:         " << info.version << '\n'
      << "leaves:          " << info.leaves.size() << " (" << total << " bytes)\n";
  PrintLeafTable(SortedLeaves(info), "  ", out);
  out << "handle:          " << dict.handle() << '\n';
}

void RunPut(Client& client, const CommandLine& line, std::ostream& /*out*/) {
  const Key path = ParseLeafPath(line.operands[1]);
  // The index and the file are checked before the daemon is asked anything.
  const std::optional<Index> index = IndexOption(line);
  const MappedNpy file(line.operands[2]);
  Dict dict = client.open(line.operands[0]);
  const int64_t bytes = static_cast<int64_t>(file.tensor().nbytes());
  Progress progress(bytes, bytes >= kLargeFileBytes && ProgressWanted(Quiet(line)));
  if (index) {
    // td[index] = file: its shape must equal or broadcast to the selection.
    dict.set_index(*index, path, file.tensor());
  } else {
    dict.set(path, file.tensor());
  }
  progress.Add(bytes);
  progress.Finish();
}

void RunGet(Client& client, const CommandLine& line, std::ostream& /*out*/) {
  const Key path = ParseLeafPath(line.operands[1]);
  std::optional<std::string> output = line.option("output");
  if (!output) throw UsageError("get needs -o FILE.npy (-o - for stdout)");
  const std::optional<Index> index = IndexOption(line);
  Dict dict = client.open(line.operands[0]);
  // Refuse before downloading what could not be written anyway.
  int64_t bytes = 0;
  for (const LeafInfo& leaf : dict.describe().leaves) {
    if (leaf.path == path) bytes = leaf.byte_size;
    if (leaf.path == path && leaf.dtype == at::ScalarType::BFloat16) {
      throw CliError("leaf '" + path.str() +
                     "' is bfloat16, which .npy cannot hold (NumPy has no bfloat16 dtype)");
    }
    if (IsStrictPrefix(path, leaf.path)) {
      throw CliError("'" + path.str() + "' in dict '" + dict.name() +
                     "' is a nested dict, not a leaf: one .npy file holds one leaf "
                     "(see 'tdstore ls " + dict.name() + "')");
    }
  }
  if (!index) {
    // A bar only for the whole leaf: how many bytes an index selects is
    // known only once they arrive.
    Progress progress(bytes, bytes >= kLargeFileBytes && ProgressWanted(Quiet(line)));
    const at::Tensor leaf = dict.get(path);
    progress.Add(bytes);
    WriteNpy(*output, leaf);
    progress.Finish();
    return;
  }
  const LocalDict selected = dict.index(*index, {path});
  WriteNpy(*output, selected.at(path));
}

void RunRemove(Client& client, const CommandLine& line, std::ostream& /*out*/) {
  if (line.operands.size() == 1) {
    client.drop(line.operands[0]);
    return;
  }
  const Key path = ParseLeafPath(line.operands[1]);
  client.open(line.operands[0]).erase(path);
}

void RunServer(Client& client, const CommandLine&, std::ostream& out) {
  const Client::ServerInfo info = client.server_info();
  out << "version        " << info.version << "\n"
      << "backend        " << info.backend << "\n"
      << "redis masters  " << info.redis_masters << "\n"
      << "redis ok       " << (info.redis_ok ? "yes" : "no") << "\n";
}

}  // namespace tdstore::cli
