// ParseIndexText: a small recursive-descent parser over
//   index := item (',' item)* [',']
//   item  := '...' | int | [int] ':' [int] [':' [int]] | list
//   list  := '[' [elem (',' elem)* [',']] ']'   elem := int | True | False | list
#include "client/cli/index_text.h"

#include <cctype>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "common/str_cat.h"

namespace tdstore::cli {
namespace {

using plan::IndexSpec;
using plan::IndexTerm;

class IndexTextParser {
 public:
  explicit IndexTextParser(std::string_view text) : text_(text) {}

  absl::StatusOr<IndexSpec> Parse() {
    IndexSpec spec;
    SkipSpace();
    if (AtEnd()) return Error("the index is empty");
    while (true) {
      absl::StatusOr<IndexTerm> item = ParseItem();
      if (!item.ok()) return item.status();
      spec.push_back(*std::move(item));
      SkipSpace();
      if (AtEnd()) return spec;
      if (!Consume(',')) return Error("expected ',' between index items");
      SkipSpace();
      if (AtEnd()) return spec;  // "3," is a one-item tuple, as in Python
    }
  }

 private:
  // What a nested list's leaves are so far.
  enum class Leaves { kUnknown, kInts, kBools };

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        StrCat("cannot parse index \"", text_, "\" at column ", pos_ + 1, ": ", what));
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (!AtEnd() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool StartsInt() const {
    const char c = Peek();
    return c == '-' || c == '+' || std::isdigit(static_cast<unsigned char>(c));
  }

  absl::StatusOr<IndexTerm> ParseItem() {
    if (text_.substr(pos_, 3) == "...") {
      pos_ += 3;
      return IndexTerm::Ellipsis();
    }
    if (Peek() == '[') return ParseList();
    if (std::isalpha(static_cast<unsigned char>(Peek()))) {
      return Error("expected an int, a slice, a list or '...'");
    }

    std::optional<int64_t> first;
    if (StartsInt()) {
      absl::StatusOr<int64_t> v = ParseInt();
      if (!v.ok()) return v.status();
      first = *v;
    }
    SkipSpace();
    if (!Consume(':')) {
      if (!first) return Error("expected an int, a slice, a list or '...'");
      return IndexTerm::Int(*first);
    }
    absl::StatusOr<std::optional<int64_t>> stop = ParseOptionalInt();
    if (!stop.ok()) return stop.status();
    SkipSpace();
    std::optional<int64_t> step;
    if (Consume(':')) {
      absl::StatusOr<std::optional<int64_t>> s = ParseOptionalInt();
      if (!s.ok()) return s.status();
      step = *s;
    }
    // A step of 0 or less parses; ResolveIndex rejects it with the others.
    return IndexTerm::Slice(first, *stop, step.value_or(1));
  }

  absl::StatusOr<std::optional<int64_t>> ParseOptionalInt() {
    SkipSpace();
    if (!StartsInt()) return std::optional<int64_t>();
    absl::StatusOr<int64_t> v = ParseInt();
    if (!v.ok()) return v.status();
    return std::optional<int64_t>(*v);
  }

  // [+-]digits, and nothing word-like glued on (so "1.5" or "2e3" fail here
  // rather than as a confusing "expected ','").
  absl::StatusOr<int64_t> ParseInt() {
    const size_t begin = pos_;
    if (Peek() == '-' || Peek() == '+') ++pos_;
    const size_t digits = pos_;
    while (std::isdigit(static_cast<unsigned char>(Peek()))) ++pos_;
    if (pos_ == digits) return Error("expected digits");
    const char next = Peek();
    if (next == '.' || std::isalnum(static_cast<unsigned char>(next)) || next == '_') {
      return Error("indices must be integers");
    }
    int64_t value;
    if (!absl::SimpleAtoi(absl::string_view(text_.data() + begin, pos_ - begin), &value)) {
      pos_ = begin;
      return Error("integer out of the int64 range");
    }
    return value;
  }

  absl::StatusOr<IndexTerm> ParseList() {
    std::vector<int64_t> ints;
    std::vector<bool> bools;
    Leaves leaves = Leaves::kUnknown;
    absl::StatusOr<Shape> shape = ParseNested(0, ints, bools, leaves);
    if (!shape.ok()) return shape.status();
    if (leaves != Leaves::kBools) return IndexTerm::Positions(std::move(ints), *shape);
    if (shape->size() != 1) return Error("a mask ([True, False, ...]) must be 1-D");
    return IndexTerm::Mask(std::move(bools));
  }

  // Parses one '[' ... ']' level, appending leaves in C-order; returns the
  // shape of this level. Sub-lists must all have the same shape.
  absl::StatusOr<Shape> ParseNested(int depth, std::vector<int64_t>& ints, std::vector<bool>& bools,
                                    Leaves& leaves) {
    if (depth >= kMaxRank) return Error("lists nested too deeply");
    Consume('[');
    std::optional<Shape> child_shape;  // nullopt until the first element
    bool child_is_list = false;
    int64_t count = 0;
    SkipSpace();
    while (!Consume(']')) {
      if (AtEnd()) return Error("missing ']'");
      const size_t element_pos = pos_;
      Shape shape;  // of this element; {} for a scalar
      const bool is_list = Peek() == '[';
      if (is_list) {
        absl::StatusOr<Shape> s = ParseNested(depth + 1, ints, bools, leaves);
        if (!s.ok()) return s.status();
        shape = *std::move(s);
      } else if (absl::Status s = ParseLeaf(ints, bools, leaves); !s.ok()) {
        return s;
      }
      if (child_shape && (is_list != child_is_list || shape != *child_shape)) {
        pos_ = element_pos;
        return Error("list elements differ in shape");
      }
      child_shape = shape;
      child_is_list = is_list;
      ++count;
      SkipSpace();
      if (Consume(',')) {
        SkipSpace();
      } else if (Peek() != ']') {
        return Error("expected ',' or ']' in a list");
      }
    }
    Shape shape{count};
    if (child_shape) shape.insert(shape.end(), child_shape->begin(), child_shape->end());
    return shape;
  }

  absl::Status ParseLeaf(std::vector<int64_t>& ints, std::vector<bool>& bools, Leaves& leaves) {
    Leaves kind;
    if (StartsInt()) {
      absl::StatusOr<int64_t> v = ParseInt();
      if (!v.ok()) return v.status();
      ints.push_back(*v);
      kind = Leaves::kInts;
    } else if (text_.substr(pos_, 4) == "True" || text_.substr(pos_, 5) == "False") {
      const bool value = Peek() == 'T';
      pos_ += value ? 4 : 5;
      if (std::isalnum(static_cast<unsigned char>(Peek())) || Peek() == '_') {
        return Error("expected True or False");
      }
      bools.push_back(value);
      kind = Leaves::kBools;
    } else {
      return Error("expected an int, True, False or a list");
    }
    if (leaves != Leaves::kUnknown && leaves != kind) {
      return Error("a list mixes ints and bools");
    }
    leaves = kind;
    return absl::OkStatus();
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<plan::IndexSpec> ParseIndexText(std::string_view text) {
  return IndexTextParser(text).Parse();
}

}  // namespace tdstore::cli
