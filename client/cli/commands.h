// The tdstore subcommands. main.cc has already checked the operand count and
// which options were given; each command prints its result to `out`.
#ifndef TDSTORE_CLIENT_CLI_COMMANDS_H_
#define TDSTORE_CLIENT_CLI_COMMANDS_H_

#include <ostream>

#include "client/cli/args.h"
#include "tdstore/core.h"

namespace tdstore::cli {

// create NAME --batch-size DIMS [--rows-per-block N] [--part-bytes N]
void RunCreate(core::Client& client, const CommandLine& line, std::ostream& out);
// ls | ls NAME
void RunList(core::Client& client, const CommandLine& line, std::ostream& out);
// info NAME
void RunInfo(core::Client& client, const CommandLine& line, std::ostream& out);
// put NAME PATH FILE.npy [--index TEXT | --index-file IDX.npy]
void RunPut(core::Client& client, const CommandLine& line, std::ostream& out);
// append NAME PATH FILE.npy --cursor COUNTER [--count COUNTER]: a ring
// append (core::Dict::append_ring) of the file's rows; prints
// "start S count C".
void RunAppend(core::Client& client, const CommandLine& line, std::ostream& out);
// get NAME PATH -o FILE.npy [--index TEXT | --index-file IDX.npy]
void RunGet(core::Client& client, const CommandLine& line, std::ostream& out);
// rm NAME [PATH]
void RunRemove(core::Client& client, const CommandLine& line, std::ostream& out);

// server: the daemon's version and Redis back end.
void RunServer(core::Client& client, const CommandLine& line, std::ostream& out);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_COMMANDS_H_
