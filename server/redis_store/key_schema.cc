#include "server/redis_store/key_schema.h"

#include "absl/strings/str_cat.h"

namespace tdstore {
namespace {

// absl::string_view is not std::string_view in this Abseil build, so
// absl::StrCat cannot take std::string_view directly.
absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Escapes the characters Redis' glob matcher treats specially, so a literal
// part of a pattern matches only itself.
std::string GlobEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string KeySchema::Catalog() const { return absl::StrCat(ns_, ":catalog"); }

std::string KeySchema::SchemaChannel() const { return absl::StrCat(ns_, ":schema-changes"); }

std::string KeySchema::DictIdCounter() const { return absl::StrCat(ns_, ":next_dict_id"); }
std::string KeySchema::UsedBytes() const { return absl::StrCat(ns_, ":used_bytes"); }

// The metadata keys of a dict use the tag "{<id>}": one slot holds all of
// them, so schema scripts can touch meta, leaves and pending together.
std::string KeySchema::Meta(std::string_view dict_id) const {
  return absl::StrCat(ns_, ":{", AV(dict_id), "}:meta");
}

std::string KeySchema::Leaves(std::string_view dict_id) const {
  return absl::StrCat(ns_, ":{", AV(dict_id), "}:leaves");
}

std::string KeySchema::Pending(std::string_view dict_id) const {
  return absl::StrCat(ns_, ":{", AV(dict_id), "}:pending");
}

std::string KeySchema::AtOnceHold(std::string_view dict_id) const {
  return absl::StrCat(ns_, ":{", AV(dict_id), "}:at_once_hold");
}

std::string KeySchema::Attrs(std::string_view dict_id) const {
  return absl::StrCat(ns_, ":{", AV(dict_id), "}:attrs");
}

std::string KeySchema::Counters(std::string_view dict_id) const {
  return absl::StrCat(ns_, ":{", AV(dict_id), "}:counters");
}

// Data keys use the tag "{<id>.<b>}": block b of every leaf shares one slot,
// and different blocks land in different slots.
std::string KeySchema::BlockPart(std::string_view dict_id, int64_t block,
                                 int64_t generation, int64_t part) const {
  return absl::StrCat(ns_, ":{", AV(dict_id), ".", block, "}:g", generation, ":", part);
}

// The '.' after the id keeps dict 1's pattern from matching dict 12's keys.
std::string KeySchema::DataPattern(std::string_view dict_id) const {
  return absl::StrCat(GlobEscape(ns_), ":{", GlobEscape(dict_id), ".*}:g*");
}

}  // namespace tdstore
