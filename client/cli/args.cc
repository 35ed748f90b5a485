#include "client/cli/args.h"

#include <charconv>

#include "common/shape.h"

namespace tdstore::cli {
namespace {

// Options taking a value, by every spelling -> canonical name.
const std::map<std::string, std::string>& ValueOptions() {
  static const auto* options = new std::map<std::string, std::string>{
      {"--addr", "addr"},
      {"--token-file", "token-file"},
      {"--tls-ca", "tls-ca"},
      {"--tls-cert", "tls-cert"},
      {"--tls-key", "tls-key"},
      {"--tls-server-name", "tls-server-name"},
      {"--retry-for", "retry-for"},
      {"--batch-size", "batch-size"},
      {"--rows-per-block", "rows-per-block"},
      {"--part-bytes", "part-bytes"},
      {"--layout", "layout"},
      {"--output", "output"},
      {"-o", "output"},
      {"--index", "index"},
      {"--index-file", "index-file"},
      {"--cursor", "cursor"},
      {"--count", "count"},
  };
  return *options;
}

// Options taking no value, by every spelling -> canonical name.
const std::map<std::string, std::string>& FlagOptions() {
  static const auto* options = new std::map<std::string, std::string>{
      {"--quiet", "quiet"},
      {"--replace", "replace"},
      {"--tls", "tls"},
      {"-q", "quiet"},
  };
  return *options;
}

}  // namespace

std::optional<std::string> CommandLine::option(const std::string& name) const {
  auto it = options.find(name);
  if (it == options.end()) return std::nullopt;
  return it->second;
}

CommandLine ParseCommandLine(int argc, char** argv) {
  CommandLine line;
  std::vector<std::string> positional;
  bool options_ended = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    // "-" alone is an operand (stdout for -o), as is anything after "--",
    // and a negative number ("counter d n add -5").
    const bool negative_number = arg.size() >= 2 && arg[0] == '-' && arg[1] >= '0' && arg[1] <= '9';
    if (options_ended || arg.size() < 2 || arg[0] != '-' || negative_number) {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      options_ended = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      line.help = true;
      continue;
    }
    if (arg == "--version") {
      line.version = true;
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string spelling = arg.substr(0, eq);
    if (auto flag = FlagOptions().find(spelling); flag != FlagOptions().end()) {
      if (eq != std::string::npos) throw UsageError("option '" + spelling + "' takes no value");
      if (!line.options.emplace(flag->second, "").second) {
        throw UsageError("option '" + spelling + "' given twice");
      }
      continue;
    }
    auto known = ValueOptions().find(spelling);
    if (known == ValueOptions().end()) throw UsageError("unknown option '" + spelling + "'");
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      throw UsageError("option '" + spelling + "' needs a value");
    }
    if (!line.options.emplace(known->second, value).second) {
      throw UsageError("option '" + spelling + "' given twice");
    }
  }
  if (!positional.empty()) {
    line.command = positional.front();
    line.operands.assign(positional.begin() + 1, positional.end());
  }
  return line;
}

Key ParseLeafPath(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t slash = text.find('/', start);
    parts.push_back(text.substr(start, slash == std::string::npos ? slash : slash - start));
    if (parts.back().empty()) {
      throw UsageError("bad leaf path '" + text + "': empty component (write a/b/c)");
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return Key(std::move(parts));
}

int64_t ParseCount(const std::string& text, const std::string& what) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 0) {
    throw UsageError(what + " must be a non-negative integer, got '" + text + "'");
  }
  return value;
}

std::optional<std::vector<int64_t>> BatchSizeOption(const CommandLine& line) {
  std::optional<std::string> text = line.option("batch-size");
  if (!text) return std::nullopt;
  absl::StatusOr<Shape> batch_size = ShapeFromCsv(*text);
  if (!batch_size.ok()) {
    throw UsageError("bad --batch-size '" + *text + "': " +
                     std::string(batch_size.status().message()));
  }
  return *batch_size;
}

CreateOptions CreateOptionsOf(const CommandLine& line) {
  CreateOptions options;
  if (auto rows = line.option("rows-per-block")) {
    options.rows_per_block = ParseCount(*rows, "--rows-per-block");
  }
  if (auto bytes = line.option("part-bytes")) {
    options.part_bytes = ParseCount(*bytes, "--part-bytes");
  }
  if (auto layout = line.option("layout")) {
    if (*layout != "leaves" && *layout != "record") {
      throw UsageError("bad --layout '" + *layout + "': leaves or record");
    }
    options.layout = *layout == "record" ? Layout::kRecord : Layout::kLeaves;
  }
  return options;
}

}  // namespace tdstore::cli
