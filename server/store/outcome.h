// Failures whose effect is unknown: the one store status the service must
// tell apart (it never marks them `tdstore-applied: none`). No Redis types,
// so the service can include it.
#ifndef TDSTORE_SERVER_STORE_OUTCOME_H_
#define TDSTORE_SERVER_STORE_OUTCOME_H_

#include <string_view>

#include "absl/status/status.h"

namespace tdstore::store {

// An UNAVAILABLE status for an operation that may or may not have taken
// effect (its reply was lost). The service tells clients which failures are
// of this kind, so they never retry a change that might have been applied
// as if it had not.
absl::Status OutcomeUnknown(std::string_view message);
bool IsOutcomeUnknown(const absl::Status& status);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_STORE_OUTCOME_H_
