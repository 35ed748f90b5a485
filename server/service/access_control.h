// Who may call tdstored, and on which dicts: bearer tokens.
//
// A tokens file (--tokens-file) holds one grant per line:
//
//   # token                         rights  dict-name prefixes
//   3f9c2e7a61d84b0f9e5d2c71a8b4e6f0  rw      team-a/,shared/
//   0d1e2f3a4b5c6d7e8f90a1b2c3d4e5f6  ro      *
//
// Rights are "ro" (describe, list, read) or "rw" (also create, write, delete,
// rename). A prefix matches dict names starting with it; "*" matches every
// name. A call presents its token as gRPC metadata
// `authorization: Bearer <token>`.
//
// Outcomes (docs/security.md):
//   - no tokens file: every caller may do everything (a loopback listener or
//     a 0660 unix socket is then the only door);
//   - no or unknown token: UNAUTHENTICATED;
//   - known token, but the dict is outside its prefixes or the call writes
//     with a read-only token: PERMISSION_DENIED.
// Error messages never contain a token.
//
// Immutable once built; safe to use from any thread.
#ifndef TDSTORE_SERVER_SERVICE_ACCESS_CONTROL_H_
#define TDSTORE_SERVER_SERVICE_ACCESS_CONTROL_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"

namespace tdstore::service {

enum class Access { kRead, kWrite };

// What one token allows.
struct Grant {
  std::string token;
  bool can_write = false;
  std::vector<std::string> prefixes;  // "" matches every name ("*" in the file)
};

class AccessControl {
 public:
  // No tokens: every call is allowed.
  AccessControl() = default;

  // Parses a tokens file's text. INVALID_ARGUMENT naming the line (not the
  // token) for a malformed line, a token shorter than 16 characters, or a
  // token listed twice; INVALID_ARGUMENT too for a file with no token at all
  // (it would silently turn access control off).
  static absl::StatusOr<AccessControl> Parse(std::string_view text);

  bool enabled() const { return !grants_.empty(); }

  // The caller's grant from its metadata: nullptr when tokens are not
  // enabled (everything allowed). UNAUTHENTICATED for a missing, malformed
  // or unknown token.
  absl::StatusOr<const Grant*> Authenticate(const grpc::ServerContextBase& ctx) const;

  // OK if `grant` (nullptr: tokens disabled) may do `access` on dict `name`;
  // PERMISSION_DENIED otherwise.
  static absl::Status Authorize(const Grant* grant, std::string_view name, Access access);

  // Whether `grant` may see dict `name` at all (ListDicts shows only these).
  static bool CanSee(const Grant* grant, std::string_view name);

 private:
  std::vector<Grant> grants_;
};

}  // namespace tdstore::service

#endif  // TDSTORE_SERVER_SERVICE_ACCESS_CONTROL_H_
