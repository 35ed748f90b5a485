// The tdstore command line, split into command, operands and options.
//
// Options may come anywhere after the program name, as "--name value",
// "--name=value" or, for -o, "-o value"; flags (--quiet, -q) take no value;
// "--" ends them. A negative number ("-5") is an operand, not an option. Which options a
// command accepts is checked by the command table in main.cc.
#ifndef TDSTORE_CLIENT_CLI_ARGS_H_
#define TDSTORE_CLIENT_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tdstore/core.h"

namespace tdstore::cli {

// A malformed command line: main prints it and exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Any other failure the CLI itself detects (files, .npy): exit status 1.
class CliError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CommandLine {
  bool help = false;
  bool version = false;  // --version
  std::string command;
  std::vector<std::string> operands;
  // Canonical long name ("addr", "batch-size", "output", ...) -> value.
  std::map<std::string, std::string> options;

  std::optional<std::string> option(const std::string& name) const;
};

// Throws UsageError for an unknown option, a missing value or a repeat.
CommandLine ParseCommandLine(int argc, char** argv);

// "a/b/c" -> Key({"a", "b", "c"}); UsageError for an empty component.
Key ParseLeafPath(const std::string& text);

// A non-negative integer option value; UsageError naming `what` otherwise.
int64_t ParseCount(const std::string& text, const std::string& what);

// --batch-size DIMS ("100,4"; "" for no batch dims) if given; UsageError if
// malformed.
std::optional<std::vector<int64_t>> BatchSizeOption(const CommandLine& line);

// --rows-per-block N and --part-bytes N; 0 (the server's default) for each
// one absent. UsageError if malformed.
CreateOptions CreateOptionsOf(const CommandLine& line);

// --quiet / -q: no progress bar.
inline bool Quiet(const CommandLine& line) { return line.option("quiet").has_value(); }

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_ARGS_H_
