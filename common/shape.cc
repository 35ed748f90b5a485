#include "common/shape.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace tdstore {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Parses a non-empty run of ASCII digits into a non-negative int64. Stricter
// than absl::SimpleAtoi on purpose (no sign, no whitespace): shapes are read
// back from Redis, where anything unexpected means someone else wrote it.
bool ParseDim(std::string_view text, int64_t* out) {
  if (text.empty()) return false;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const int digit = c - '0';
    if (value > (kInt64Max - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out = value;
  return true;
}

}  // namespace

std::string ShapeToString(absl::Span<const int64_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    absl::StrAppend(&out, shape[i]);
  }
  out += "]";
  return out;
}

absl::Status ValidateShape(absl::Span<const int64_t> shape, std::string_view what) {
  const std::string name(what);
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    return absl::InvalidArgumentError(absl::StrCat(name, " has ", shape.size(),
                                                   " dimensions; at most ", kMaxRank,
                                                   " are allowed"));
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, " ", ShapeToString(shape),
                                                     " has a negative size in dimension ",
                                                     i));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ByteSize(absl::Span<const int64_t> shape, int64_t elem_size) {
  if (elem_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative element size ", elem_size));
  }
  for (int64_t dim : shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeToString(shape), " has a negative dimension"));
    }
    // Any zero dim makes the tensor empty, even if the other dims multiplied
    // out would overflow: torch accepts such tensors too.
    if (dim == 0) return 0;
  }
  int64_t bytes = elem_size;
  for (int64_t dim : shape) {
    if (bytes != 0 && dim > kInt64Max / bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape ", ShapeToString(shape), " with ", elem_size,
          "-byte elements is too large: its size overflows 64 bits"));
    }
    bytes *= dim;
  }
  return bytes;
}

bool HasPrefix(absl::Span<const int64_t> shape, absl::Span<const int64_t> prefix) {
  return prefix.size() <= shape.size() && shape.subspan(0, prefix.size()) == prefix;
}

std::string ShapeToCsv(absl::Span<const int64_t> shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ',';
    absl::StrAppend(&out, shape[i]);
  }
  return out;
}

absl::StatusOr<Shape> ShapeFromCsv(std::string_view csv) {
  Shape shape;
  if (csv.empty()) return shape;  // the 0-d shape
  // Split by hand: absl::StrSplit takes absl::string_view, which is not
  // std::string_view in this Abseil build.
  size_t start = 0;
  while (true) {
    const size_t comma = csv.find(',', start);
    const std::string_view item =
        csv.substr(start, comma == std::string_view::npos ? std::string_view::npos
                                                          : comma - start);
    int64_t dim = 0;
    if (!ParseDim(item, &dim)) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed shape \"", std::string(csv),
                       "\": expected comma-separated non-negative integers"));
    }
    shape.push_back(dim);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (absl::Status s = ValidateShape(shape, "shape"); !s.ok()) return s;
  return shape;
}

}  // namespace tdstore
