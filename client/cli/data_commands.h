// The tdstore subcommands that move whole dicts: in from and out to
// .safetensors / .npz files, from dict to dict, and the numbers about them.
// main.cc has already checked the operand count and which options were
// given. Failures throw (CliError, UsageError, tdstore::Error) for main.cc
// to print.
//
// Data moves one leaf at a time (small leaves a few together, up to 64 MiB),
// so neither a file nor a dict has to fit in RAM.
#ifndef TDSTORE_CLIENT_CLI_DATA_COMMANDS_H_
#define TDSTORE_CLIENT_CLI_DATA_COMMANDS_H_

#include <ostream>

#include "client/cli/args.h"
#include "tdstore/core.h"

namespace tdstore::cli {

// import NAME FILE [--batch-size DIMS] [--rows-per-block N] [--part-bytes N]
// Checks the whole file's layout first, then creates dict NAME
// (ALREADY_EXISTS if taken) and writes every tensor as a leaf. If writing
// fails midway the new dict is deleted again.
void RunImport(core::Client& client, const CommandLine& line, std::ostream& out);

// export NAME FILE: every leaf of NAME into FILE (.safetensors or .npz),
// which appears only once complete.
void RunExport(core::Client& client, const CommandLine& line, std::ostream& out);

// cp SRC DST: a new dict DST with SRC's batch size, block layout and every
// leaf. ALREADY_EXISTS if DST exists; a DST left half-made by a failure is
// deleted.
void RunCopy(core::Client& client, const CommandLine& line, std::ostream& out);

// stats: the server and a line per dict. stats NAME: one dict in detail,
// with the blocks and Redis values its layout implies.
void RunStats(core::Client& client, const CommandLine& line, std::ostream& out);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_DATA_COMMANDS_H_
