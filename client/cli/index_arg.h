// The --index TEXT and --index-file FILE.npy options of get and put, as the
// core's Index.
#ifndef TDSTORE_CLIENT_CLI_INDEX_ARG_H_
#define TDSTORE_CLIENT_CLI_INDEX_ARG_H_

#include <optional>
#include <string>

#include "client/cli/args.h"
#include "tdstore/core.h"

namespace tdstore::cli {

// "3", "-1", "3:10:2", "::3", "[1,5,9]", "...", "2,1:5", "[[0,1],[2,3]]",
// "[True,False]" -> Index, parsed by index_text.h's ParseIndexText.
// UsageError saying what is wrong and where.
core::Index ParseIndexArg(const std::string& text);

// The index a .npy file holds: integer positions of any shape, or a 1-D bool
// mask. CliError for an unreadable file or another dtype.
core::Index ReadIndexFile(const std::string& path);

// The index given by --index or --index-file, if any; UsageError for both.
std::optional<core::Index> IndexOption(const CommandLine& line);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_INDEX_ARG_H_
