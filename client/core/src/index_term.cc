// core::IndexTerm factories and ByteSize (core.h).
#include <string>

#include "tdstore/core.h"

namespace tdstore::core {

IndexTerm IndexTerm::Int(int64_t position) {
  IndexTerm term(Kind::kInt);
  term.position_ = position;
  return term;
}

IndexTerm IndexTerm::Of(Slice slice) {
  IndexTerm term(Kind::kSlice);
  term.slice_ = slice;
  return term;
}

IndexTerm IndexTerm::Of(Ellipsis) { return IndexTerm(Kind::kEllipsis); }

IndexTerm IndexTerm::Positions(std::vector<int64_t> values, std::vector<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(count, dim, &count)) {
      throw Error(StatusCode::kInvalidArgument, "index positions have an invalid shape");
    }
  }
  if (count != static_cast<int64_t>(values.size())) {
    throw Error(StatusCode::kInvalidArgument,
                "index positions: " + std::to_string(values.size()) +
                    " values for a shape of " + std::to_string(count) + " elements");
  }
  IndexTerm term(Kind::kPositions);
  term.values_ = std::move(values);
  term.shape_ = std::move(shape);
  return term;
}

IndexTerm IndexTerm::Mask(std::vector<bool> mask) {
  IndexTerm term(Kind::kMask);
  term.mask_ = std::move(mask);
  return term;
}

int64_t ByteSize(const Key& path, DType dtype, const std::vector<int64_t>& shape) {
  int64_t bytes = DTypeSize(dtype);
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(bytes, dim, &bytes)) {
      throw Error(StatusCode::kInvalidArgument,
                  "leaf '" + path.str() + "' has an invalid shape (negative or too large)");
    }
  }
  return bytes;
}

}  // namespace tdstore::core
