// A small, strict JSON (RFC 8259) reader and a string quoter, for the
// headers of .safetensors files.
//
// Strict means: one value and nothing after it but whitespace; no comments,
// trailing commas, single quotes, leading zeros, NaN or raw control
// characters; strings must be valid UTF-8; an object may not repeat a key;
// nesting is limited to 64 levels so hostile input cannot exhaust the stack.
//
// Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_CLIENT_CLI_JSON_H_
#define TDSTORE_CLIENT_CLI_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tdstore::cli {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  // kString: the decoded text (UTF-8). kNumber: the literal as written.
  std::string text;
  std::vector<JsonValue> items;                             // kArray
  std::vector<std::pair<std::string, JsonValue>> members;  // kObject, file order

  // A kNumber written as a plain non-negative integer ("0", "42") that fits
  // int64; nullopt for anything else ("1.0", "-1", "1e3", a string).
  std::optional<int64_t> AsCount() const;
  // The member named `key` of a kObject, or nullptr.
  const JsonValue* Find(std::string_view key) const;
};

// "object", "string", ... for error messages.
const char* JsonTypeName(JsonValue::Type type);

// Parses `text`. Throws CliError("invalid JSON at byte N: ...") on any
// deviation from the grammar above.
JsonValue ParseJson(std::string_view text);

// True if `text` is valid UTF-8 (no overlong forms, surrogates or values
// past U+10FFFF), as every JSON string must be.
bool IsValidUtf8(std::string_view text);

// `text` as a JSON string literal with its quotes: '"', '\' and control
// characters escaped, everything else (UTF-8 included) as is.
std::string JsonQuote(std::string_view text);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_JSON_H_
