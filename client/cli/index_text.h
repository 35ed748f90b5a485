// The CLI's index text (--index), Python-like, parsed into the planner's
// IndexSpec (common/index.h), which index_arg.h turns into the core's Index.
//
// Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_CLIENT_CLI_INDEX_TEXT_H_
#define TDSTORE_CLIENT_CLI_INDEX_TEXT_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "common/index.h"

namespace tdstore::cli {

// Parses index text over batch dims:
//   "3"  "-1"  "3:10:2"  ":"  "::3"  "[1,5,9]"  "..."  "2,1:5"  "[[0,1],[2,3]]"
// A top-level ',' separates tuple items; "[...]" is a positions list (nested
// lists give its shape); "True"/"False" lists are masks. INVALID_ARGUMENT with
// the position of the problem. Bounds, steps and mask lengths are left to
// plan::ResolveIndex (a step of 0 parses).
absl::StatusOr<plan::IndexSpec> ParseIndexText(std::string_view text);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_INDEX_TEXT_H_
