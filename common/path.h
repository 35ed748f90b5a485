// Leaf paths and names: validation, a reversible text encoding, and the
// prefix relations that nested keys need.
//
// A path is a list of components (["next", "obs"]). Redis stores a path as one
// string, the *encoded path*: components joined by '/', where '%' and '/'
// inside a component are written "%25" and "%2F". The encoding is injective,
// readable in redis-cli, and, for valid paths, keeps prefix relations simple: path A is a strict
// prefix of path B iff Encode(B) starts with Encode(A) + "/".
//
// Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_COMMON_PATH_H_
#define TDSTORE_COMMON_PATH_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tdstore {

using LeafPath = std::vector<std::string>;

inline constexpr size_t kMaxComponentBytes = 256;
inline constexpr size_t kMaxPathComponents = 32;
inline constexpr size_t kMaxDictNameBytes = 128;

// OK for 1..kMaxPathComponents components of 1..kMaxComponentBytes bytes with
// no NUL byte; INVALID_ARGUMENT saying which component is wrong otherwise.
absl::Status ValidatePath(const LeafPath& path);

// OK for 1..kMaxDictNameBytes bytes from [A-Za-z0-9._-/:] not starting with
// '/'; INVALID_ARGUMENT otherwise. The narrow alphabet keeps names safe in
// handles, shells and URLs.
absl::Status ValidateDictName(std::string_view name);

std::string EncodePath(const LeafPath& path);
// INVALID_ARGUMENT for a string EncodePath cannot have produced.
absl::StatusOr<LeafPath> DecodePath(std::string_view encoded);

// For display only (CLI, error messages): "next/obs". Not reversible.
std::string PathToDisplay(const LeafPath& path);
// The same in single quotes, as error messages name a leaf: "'next/obs'".
std::string QuotedPath(const LeafPath& path);

// True if `prefix` equals `path` or is a component-wise prefix of it.
bool IsPathPrefix(const LeafPath& prefix, const LeafPath& path);

}  // namespace tdstore

#endif  // TDSTORE_COMMON_PATH_H_
