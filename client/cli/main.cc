// tdstore: the command-line tool for tdstored (admin and data in/out).
//
// Every failure prints one line to stderr, "tdstore: <what went wrong>", and
// exits 1; a malformed command line exits 2.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/connection_options.h"
#include "client/cli/data_commands.h"
#include "client/cli/state_commands.h"
#include "tdstore/core.h"

namespace tdstore::cli {
namespace {

constexpr char kUsage[] = R"(usage: tdstore [--addr ADDR] COMMAND [ARGS...]

Commands:
  create NAME --batch-size DIMS [--rows-per-block N] [--part-bytes N] [--layout record]
                              create a dict; DIMS like 100,4 (--batch-size= for none);
                              record: each row's leaves together (written by rows:
                              put --index, append)
  ls                          list dict names
  ls NAME                     list the leaves of a dict: path, dtype, shape, bytes
  info NAME                   batch size, block layout, version, leaves, handle
  put NAME PATH FILE.npy      store a .npy file as leaf PATH (written a/b/c)
  put NAME PATH FILE.npy --index IDX | --index-file IDX.npy
                              write rows only: PATH[IDX] = the file (broadcast as
                              torch does; a missing leaf is created zero-filled)
  append NAME PATH FILE.npy --cursor CNAME [--count CNAME]
                              a ring append: the file's rows go to the rows the
                              dict's counter CNAME reserves (mod batch dim 0),
                              then counter --count grows by as many; prints
                              "start S count C". Collectors on any machine share
                              one ring this way
  get NAME PATH -o FILE.npy   write leaf PATH to a .npy file (-o - for stdout)
  get NAME PATH -o FILE.npy --index IDX | --index-file IDX.npy
                              write PATH[IDX] only, reading just those rows
  rm NAME [PATH]              delete the dict, or one leaf or nested dict of it
  server                      the daemon's version and Redis back end (node count)
  import NAME FILE [--batch-size DIMS] [--rows-per-block N] [--part-bytes N]
                              create dict NAME from a .safetensors or .npz file;
                              the batch size is --batch-size, else the one the
                              file records, else the leading dims all tensors share
  export NAME FILE            write every leaf to FILE.safetensors or FILE.npz
  cp SRC DST                  copy a dict: batch size, block layout, every leaf,
                              inside tdstored (no data through the CLI)
  stats [NAME]                the server and every dict's leaves and bytes; or
                              one dict's leaves, bytes, blocks and Redis values
  lock NAME | unlock NAME     lock the dict for everyone: no leaf may be added,
                              replaced by another dtype or shape, or deleted;
                              writes into existing leaves go on
  attr NAME                   the dict's attributes, NAME<TAB>VALUE per line
  attr NAME get KEY | set KEY VALUE | rm KEY
                              read, set or remove one attribute
  resize NAME ROWS            set batch dim 0 to ROWS on the server: rows below
                              both sizes keep their bytes, new rows read zeros
  mv NAME FROM TO [--replace] move a leaf or subtree in one step, no data moved;
                              --replace overwrites what is at TO
  fill NAME PATH VALUE [--index IDX | --index-file IDX.npy]
                              set every element of PATH (a leaf, or every leaf of a
                              sub-dict), or its rows at IDX, to VALUE on the server
  counter NAME CNAME          a counter of the dict (0 if never set)
  counter NAME CNAME add [DELTA] | cas EXPECTED NEW
                              add atomically (prints the new value), or
                              compare-and-set (prints "swapped N" / "unchanged N")

Indices (over the batch dims, as Python writes them; quote them for the shell):
  3   -1   3:10:2   ::3   :   ...   [1,5,9]   [[0,1],[2,3]]   [True,False,True]
  and tuples of these over several batch dims: 2,1:5   ...,0   [0,2],:
  IDX.npy holds integer positions (any shape) or a 1-D bool mask.

File tensor names are leaf paths with '.' (.safetensors) or '/' (.npz) between
components: model.layer0.w <-> model/layer0/w; .npz member next/obs.npy <-> next/obs.
Inside a component, write the separator as \. (or \/) and a backslash as \\.

Options:
  --addr ADDR   tdstored address, host:port or unix:///path
                (default: $TDSTORE_ADDR, else 127.0.0.1:50051)
  --token-file FILE      bearer token for a tdstored with --tokens-file
                         (default: $TDSTORE_TOKEN_FILE; or the token itself
                         in $TDSTORE_TOKEN)
  --tls                  connect with TLS, trusting the system's CAs
  --tls-ca FILE          connect with TLS, trusting this PEM CA ($TDSTORE_TLS_CA)
  --tls-cert FILE, --tls-key FILE
                         client certificate for mutual TLS
                         ($TDSTORE_TLS_CERT, $TDSTORE_TLS_KEY)
  --tls-server-name NAME the name tdstored's certificate carries, if not
                         the address' host ($TDSTORE_TLS_SERVER_NAME)
  --retry-for SECONDS    how long a call that finds tdstored unavailable is
                         retried before the command fails ($TDSTORE_RETRY_FOR,
                         default 10)
  -q, --quiet   no progress bar (import, export, cp, and put/get of files of
                64 MiB or more draw one on stderr when it is a terminal)
  -h, --help    show this help
  --version     print the version

Exit status: 0 on success, 1 on error, 2 on a malformed command line.
)";

using RunFn = void (*)(core::Client&, const CommandLine&, std::ostream&);

struct CommandSpec {
  const char* name;
  size_t min_operands;
  size_t max_operands;
  std::vector<std::string> options;  // besides the connection options and --quiet
  RunFn run;
};

const std::vector<CommandSpec>& Commands() {
  static const auto* commands = new std::vector<CommandSpec>{
      {"create", 1, 1, {"batch-size", "rows-per-block", "part-bytes", "layout"}, RunCreate},
      {"ls", 0, 1, {}, RunList},
      {"info", 1, 1, {}, RunInfo},
      {"put", 3, 3, {"index", "index-file"}, RunPut},
      {"append", 3, 3, {"cursor", "count"}, RunAppend},
      {"get", 2, 2, {"output", "index", "index-file"}, RunGet},
      {"rm", 1, 2, {}, RunRemove},
      {"server", 0, 0, {}, RunServer},
      {"import", 2, 2, {"batch-size", "rows-per-block", "part-bytes"}, RunImport},
      {"export", 2, 2, {}, RunExport},
      {"cp", 2, 2, {}, RunCopy},
      {"stats", 0, 1, {}, RunStats},
      {"lock", 1, 1, {}, RunLock},
      {"unlock", 1, 1, {}, RunUnlock},
      {"attr", 1, 4, {}, RunAttr},
      {"counter", 2, 5, {}, RunCounter},
      {"mv", 3, 3, {"replace"}, RunMove},
      {"resize", 2, 2, {}, RunResize},
      {"fill", 3, 3, {"index", "index-file"}, RunFill},
  };
  return *commands;
}

const CommandSpec& FindCommand(const CommandLine& line) {
  if (line.command.empty()) throw UsageError("missing command");
  auto it = std::find_if(Commands().begin(), Commands().end(),
                         [&](const CommandSpec& c) { return line.command == c.name; });
  if (it == Commands().end()) throw UsageError("unknown command '" + line.command + "'");
  const size_t n = line.operands.size();
  if (n < it->min_operands) throw UsageError("too few arguments for '" + line.command + "'");
  if (n > it->max_operands) throw UsageError("too many arguments for '" + line.command + "'");
  for (const auto& [option, value] : line.options) {
    const auto& global = ConnectionOptionNames();
    const bool allowed =
        option == "quiet" || std::find(global.begin(), global.end(), option) != global.end() ||
        std::find(it->options.begin(), it->options.end(), option) != it->options.end();
    if (!allowed) throw UsageError("'" + line.command + "' takes no option --" + option);
  }
  return *it;
}

// Server messages may hold newlines; the contract is one line per error.
std::string OneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

int Fail(const std::string& message, int status) {
  std::cerr << "tdstore: " << OneLine(message) << std::endl;
  return status;
}

int Main(int argc, char** argv) {
  try {
    const CommandLine line = ParseCommandLine(argc, argv);
    if (line.help) {
      std::cout << kUsage;
      return 0;
    }
    if (line.version) {
      std::cout << "tdstore " << TDSTORE_VERSION << "\n";
      return 0;
    }
    const CommandSpec& command = FindCommand(line);
    core::Client client(AddressOf(line), ClientOptionsOf(line));
    command.run(client, line, std::cout);
    std::cout.flush();
    if (!std::cout) return Fail("cannot write to stdout", 1);
    return 0;
  } catch (const UsageError& e) {
    return Fail(std::string(e.what()) + " (see 'tdstore --help')", 2);
  } catch (const tdstore::Error& e) {
    return Fail(e.what(), 1);
  } catch (const CliError& e) {
    return Fail(e.what(), 1);
  } catch (const std::exception& e) {
    return Fail(e.what(), 1);
  }
}

}  // namespace
}  // namespace tdstore::cli

int main(int argc, char** argv) {
  // As in tdstored (server/main.cc): Debian's abseil keeps a deadlock-
  // detection lock graph on every Mutex gRPC locks; a release CLI needs none.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return tdstore::cli::Main(argc, argv);
}
