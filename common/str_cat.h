// StrCat that also takes std::string_view.
//
// Debian's Abseil 20220623 is built with its own absl::string_view, distinct
// from std::string_view, so absl::StrCat rejects std::string_view arguments.
// tdstore::StrCat converts them and forwards everything else unchanged.
#ifndef TDSTORE_COMMON_STR_CAT_H_
#define TDSTORE_COMMON_STR_CAT_H_

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tdstore {
namespace str_cat_internal {

inline absl::string_view Convert(std::string_view s) { return absl::string_view(s.data(), s.size()); }
template <typename T>
const T& Convert(const T& v) {
  return v;
}

}  // namespace str_cat_internal

template <typename... Args>
std::string StrCat(const Args&... args) {
  return absl::StrCat(str_cat_internal::Convert(args)...);
}

}  // namespace tdstore

#endif  // TDSTORE_COMMON_STR_CAT_H_
