#include "client/cli/state_commands.h"

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "client/cli/index_arg.h"
#include "client/cli/scalar_bytes.h"
#include "common/path.h"

namespace tdstore::cli {
namespace {

int64_t ParseInteger(const std::string& text, const std::string& what) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    throw UsageError("bad " + what + " '" + text + "': expected a 64-bit integer");
  }
  return value;
}

void Need(const CommandLine& line, size_t operands, const std::string& usage) {
  if (line.operands.size() != operands) throw UsageError("usage: tdstore " + usage);
}

}  // namespace

void RunLock(core::Client& client, const CommandLine& line, std::ostream& out) {
  client.open(line.operands[0]).set_locked(true);
  out << "locked\n";
}

void RunUnlock(core::Client& client, const CommandLine& line, std::ostream& out) {
  client.open(line.operands[0]).set_locked(false);
  out << "unlocked\n";
}

void RunResize(core::Client& client, const CommandLine& line, std::ostream& out) {
  const int64_t rows = ParseInteger(line.operands[1], "row count");
  if (rows < 0) throw UsageError("resize: ROWS must be >= 0, got " + line.operands[1]);
  const core::DictInfo info = client.open(line.operands[0]).resize(rows);
  out << "batch size [";
  for (size_t i = 0; i < info.batch_size.size(); ++i) {
    out << (i == 0 ? "" : ", ") << info.batch_size[i];
  }
  out << "]\n";
}

void RunAttr(core::Client& client, const CommandLine& line, std::ostream& out) {
  const core::Dict dict = client.open(line.operands[0]);
  if (line.operands.size() == 1) {
    for (const auto& [name, value] : dict.describe().attrs) out << name << '\t' << value << '\n';
    return;
  }
  const std::string& verb = line.operands[1];
  if (verb == "get") {
    Need(line, 3, "attr NAME get KEY");
    const auto attrs = dict.describe().attrs;
    auto it = attrs.find(line.operands[2]);
    if (it == attrs.end()) {
      throw CliError("dict '" + dict.name() + "' has no attribute '" + line.operands[2] + "'");
    }
    out << it->second << '\n';
  } else if (verb == "set") {
    Need(line, 4, "attr NAME set KEY VALUE");
    dict.update_attrs({{line.operands[2], line.operands[3]}});
  } else if (verb == "rm") {
    Need(line, 3, "attr NAME rm KEY");
    dict.update_attrs({}, {line.operands[2]});
  } else {
    throw UsageError("attr: unknown action '" + verb + "' (get, set or rm)");
  }
}

void RunCounter(core::Client& client, const CommandLine& line, std::ostream& out) {
  if (line.operands.size() < 2) throw UsageError("usage: tdstore counter NAME CNAME [add|cas ...]");
  const std::string& name = line.operands[1];
  // The numbers are checked before the daemon is asked anything.
  if (line.operands.size() == 2) {
    out << client.open(line.operands[0]).counter_get(name) << '\n';
    return;
  }
  const std::string& verb = line.operands[2];
  if (verb == "add") {
    if (line.operands.size() > 4) throw UsageError("usage: tdstore counter NAME CNAME add [DELTA]");
    const int64_t delta = line.operands.size() == 4 ? ParseInteger(line.operands[3], "delta") : 1;
    out << client.open(line.operands[0]).counter_add(name, delta) << '\n';
  } else if (verb == "cas") {
    Need(line, 5, "counter NAME CNAME cas EXPECTED NEW");
    const int64_t expected = ParseInteger(line.operands[3], "expected value");
    const int64_t new_value = ParseInteger(line.operands[4], "new value");
    int64_t now = 0;
    const bool swapped = client.open(line.operands[0]).counter_cas(name, expected, new_value, &now);
    out << (swapped ? "swapped " : "unchanged ") << now << '\n';
  } else {
    throw UsageError("counter: unknown action '" + verb + "' (add or cas)");
  }
}

void RunMove(core::Client& client, const CommandLine& line, std::ostream& /*out*/) {
  const Key from = ParseLeafPath(line.operands[1]);
  const Key to = ParseLeafPath(line.operands[2]);
  client.open(line.operands[0]).rename(from, to, line.option("replace").has_value());
}

void RunFill(core::Client& client, const CommandLine& line, std::ostream& /*out*/) {
  const Key path = ParseLeafPath(line.operands[1]);
  const std::optional<core::Index> index = IndexOption(line);
  const core::Dict dict = client.open(line.operands[0]);
  std::vector<core::LeafFill> fills;
  for (const core::LeafMeta& leaf : dict.describe().leaves) {
    if (!IsPathPrefix(path.parts(), leaf.path.parts())) continue;
    fills.push_back({leaf.path, leaf.dtype, ScalarBytes(line.operands[2], leaf.dtype)});
  }
  if (fills.empty()) {
    throw CliError("dict '" + dict.name() + "' has no leaf or sub-dict '" + path.str() + "'");
  }
  dict.fill(fills, index ? &*index : nullptr);
}

}  // namespace tdstore::cli
