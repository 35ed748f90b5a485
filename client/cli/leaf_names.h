// Leaf paths as the flat tensor names of file formats: .safetensors names
// join components with '.', .npz member names with '/'.
//
// A component holding the separator or a backslash writes it with a
// backslash before it, so every path has exactly one name and back:
//   ["model", "layer.0", "w"]  <->  model.layer\.0.w   (safetensors)
//   ["a\b"]                    <->  a\\b
// Names from other tools never hold backslashes in practice, so their
// dotted (or slashed) names map to nested paths as one expects.
//
// Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_CLIENT_CLI_LEAF_NAMES_H_
#define TDSTORE_CLIENT_CLI_LEAF_NAMES_H_

#include <string>
#include <string_view>

#include "tdstore/core.h"

namespace tdstore::cli {

std::string JoinLeafName(const Key& path, char separator);

// The path a name stands for. Throws CliError ("tensor name '...': ...")
// for an empty component, a backslash before anything but the separator or
// a backslash, or a path tdstore refuses (too long, too deep, NUL bytes).
Key SplitLeafName(std::string_view name, char separator);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_LEAF_NAMES_H_
