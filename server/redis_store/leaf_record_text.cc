#include "server/redis_store/leaf_record_text.h"

#include <limits>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"

namespace tdstore {
namespace {

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Malformed(std::string_view text, std::string_view why) {
  return absl::DataLossError(
      absl::StrCat("malformed record \"", AV(text), "\": ", AV(why)));
}

std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    hex += kDigits[c >> 4];
    hex += kDigits[c & 15];
  }
  return hex;
}

std::optional<std::string> FromHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string bytes(hex.size() / 2, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    bytes[i] = static_cast<char>(hi * 16 + lo);
  }
  return bytes;
}

// A non-negative decimal integer, digits only. Records are written by us, so
// anything looser means the hash holds foreign data.
bool ParseNonNegative(std::string_view text, int64_t* out) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (text.empty()) return false;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const int digit = c - '0';
    if (value > (kMax - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out = value;
  return true;
}

// Splits "k1=v1;k2=v2" into a map. Every item needs a non-empty key and an
// '='; a key may appear once. Values may be empty (the 0-d shape is "").
absl::StatusOr<std::map<std::string_view, std::string_view>> SplitFields(
    std::string_view text) {
  std::map<std::string_view, std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t semi = text.find(';', start);
    const std::string_view item = text.substr(
        start, semi == std::string_view::npos ? std::string_view::npos : semi - start);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return Malformed(text, absl::StrCat("item \"", AV(item), "\" is not key=value"));
    }
    if (!fields.emplace(item.substr(0, eq), item.substr(eq + 1)).second) {
      return Malformed(text,
                       absl::StrCat("key \"", AV(item.substr(0, eq)), "\" appears twice"));
    }
    if (semi == std::string_view::npos) break;
    start = semi + 1;
  }
  return fields;
}

absl::StatusOr<std::string_view> Required(
    const std::map<std::string_view, std::string_view>& fields, std::string_view key,
    std::string_view text) {
  auto it = fields.find(key);
  if (it == fields.end()) return Malformed(text, absl::StrCat("missing key \"", AV(key), "\""));
  return it->second;
}

absl::StatusOr<int64_t> RequiredInt(const std::map<std::string_view, std::string_view>& fields,
                                    std::string_view key, std::string_view text) {
  absl::StatusOr<std::string_view> value = Required(fields, key, text);
  if (!value.ok()) return value.status();
  int64_t number = 0;
  if (!ParseNonNegative(*value, &number)) {
    return Malformed(text, absl::StrCat(AV(key), " is not a non-negative integer"));
  }
  return number;
}

// The leaf part shared by both records.
absl::StatusOr<LeafRecord> DecodeLeafFields(
    const std::map<std::string_view, std::string_view>& fields, std::string_view text) {
  LeafRecord record;

  absl::StatusOr<std::string_view> dtype_name = Required(fields, "dtype", text);
  if (!dtype_name.ok()) return dtype_name.status();
  std::optional<DType> dtype = DTypeFromName(*dtype_name);
  if (!dtype.has_value()) {
    return Malformed(text, absl::StrCat("unknown dtype \"", AV(*dtype_name), "\""));
  }
  record.dtype = *dtype;

  absl::StatusOr<std::string_view> shape_csv = Required(fields, "shape", text);
  if (!shape_csv.ok()) return shape_csv.status();
  absl::StatusOr<Shape> shape = ShapeFromCsv(*shape_csv);
  if (!shape.ok()) return Malformed(text, std::string(shape.status().message()));
  record.shape = *std::move(shape);

  absl::StatusOr<int64_t> generation = RequiredInt(fields, "gen", text);
  if (!generation.ok()) return generation.status();
  record.generation = *generation;

  // Optional: absent in every tensor leaf's record.
  if (auto kind = fields.find("kind"); kind != fields.end()) {
    std::optional<LeafKind> parsed = LeafKindFromName(kind->second);
    if (!parsed) return Malformed(text, absl::StrCat("unknown kind \"", AV(kind->second), "\""));
    record.kind = *parsed;
  }
  if (auto value = fields.find("value"); value != fields.end()) {
    std::optional<std::string> bytes = FromHex(value->second);
    if (!bytes) return Malformed(text, "value is not lower-case hex");
    record.value = *std::move(bytes);
  }
  if (auto rec = fields.find("rec"); rec != fields.end()) {
    const size_t slash = rec->second.find('/');
    int64_t offset = 0, stride = 0;
    if (slash == std::string_view::npos ||
        !ParseNonNegative(rec->second.substr(0, slash), &offset) ||
        !ParseNonNegative(rec->second.substr(slash + 1), &stride) || stride < 1) {
      return Malformed(text, "rec is not <offset>/<stride>");
    }
    record.in_record = {offset, stride};
  }
  return record;
}

std::string LeafFields(const LeafRecord& record) {
  std::string out = absl::StrCat("dtype=", AV(DTypeName(record.dtype)),
                                 ";shape=", ShapeToCsv(record.shape), ";gen=", record.generation);
  if (record.kind != LeafKind::kTensor) absl::StrAppend(&out, ";kind=", AV(LeafKindName(record.kind)));
  // Hex keeps ';' and '=' out of the record, whatever the value's bytes.
  if (KeepsValue(record.kind, record.shape)) absl::StrAppend(&out, ";value=", ToHex(record.value));
  if (record.InSharedRecord()) {
    absl::StrAppend(&out, ";rec=", record.in_record.offset, "/", record.in_record.stride);
  }
  return out;
}

}  // namespace

std::string EncodeLeafRecord(const LeafRecord& record) { return LeafFields(record); }

absl::StatusOr<LeafRecord> DecodeLeafRecord(std::string_view text) {
  absl::StatusOr<std::map<std::string_view, std::string_view>> fields = SplitFields(text);
  if (!fields.ok()) return fields.status();
  return DecodeLeafFields(*fields, text);
}

std::string EncodePendingRecord(const PendingRecord& record) {
  return absl::StrCat("expires_ms=", record.expires_ms, ";", LeafFields(record.leaf));
}

absl::StatusOr<PendingRecord> DecodePendingRecord(std::string_view text) {
  absl::StatusOr<std::map<std::string_view, std::string_view>> fields = SplitFields(text);
  if (!fields.ok()) return fields.status();
  PendingRecord record;
  absl::StatusOr<int64_t> expires_ms = RequiredInt(*fields, "expires_ms", text);
  if (!expires_ms.ok()) return expires_ms.status();
  record.expires_ms = *expires_ms;
  absl::StatusOr<LeafRecord> leaf = DecodeLeafFields(*fields, text);
  if (!leaf.ok()) return leaf.status();
  record.leaf = *std::move(leaf);
  return record;
}

}  // namespace tdstore
