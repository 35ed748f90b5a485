// The tdstore subcommands for a dict's state beside its leaves: the lock,
// the attributes and the counters (tdstore/core.h, Dict::set_locked and
// after). main.cc has checked the operand count and options.
#ifndef TDSTORE_CLIENT_CLI_STATE_COMMANDS_H_
#define TDSTORE_CLIENT_CLI_STATE_COMMANDS_H_

#include <ostream>

#include "client/cli/args.h"
#include "tdstore/core.h"

namespace tdstore::cli {

// lock NAME | unlock NAME: prints "locked" / "unlocked".
void RunLock(core::Client& client, const CommandLine& line, std::ostream& out);
void RunUnlock(core::Client& client, const CommandLine& line, std::ostream& out);
// attr NAME                    every attribute, "name<TAB>value" per line, sorted
// attr NAME get KEY            its value (CliError if absent)
// attr NAME set KEY VALUE      sets it
// attr NAME rm KEY             removes it (no error if absent)
void RunAttr(core::Client& client, const CommandLine& line, std::ostream& out);
// counter NAME CNAME                      its value (0 if never set)
// counter NAME CNAME add [DELTA]          adds DELTA (default 1), prints the new value
// counter NAME CNAME cas EXPECTED NEW     prints "swapped NEW" or "unchanged VALUE"
void RunCounter(core::Client& client, const CommandLine& line, std::ostream& out);

// resize NAME ROWS: sets batch dim 0 to ROWS (Dict::resize); prints the
// batch size afterwards, like "batch size [20000, 4]".
void RunResize(core::Client& client, const CommandLine& line, std::ostream& out);

// mv NAME FROM TO [--replace]: moves a leaf or subtree on the server (no
// data moved); without --replace an existing TO is refused.
void RunMove(core::Client& client, const CommandLine& line, std::ostream& out);
// fill NAME PATH VALUE [--index IDX | --index-file IDX.npy]: every element
// of the leaf (or every leaf under a sub-dict PATH), or its rows at IDX,
// set to VALUE on the server. VALUE is a number (cast to each leaf's
// dtype as torch's fill_ casts), true or false.
void RunFill(core::Client& client, const CommandLine& line, std::ostream& out);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_STATE_COMMANDS_H_
