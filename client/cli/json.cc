#include "client/cli/json.h"

#include <charconv>
#include <cstdio>
#include <unordered_set>

#include "client/cli/args.h"

namespace tdstore::cli {
namespace {

constexpr int kMaxDepth = 64;

// A recursive-descent parser over `text_`; pos_ is the next unread byte.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  JsonValue ParseDocument() {
    SkipSpace();
    JsonValue value = ParseValue(0);
    SkipSpace();
    if (pos_ != text_.size()) Fail("unexpected text after the value");
    return value;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw CliError("invalid JSON at byte " + std::to_string(pos_) + ": " + what);
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }

  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) {
      ++pos_;
    }
  }

  void Expect(char c) {
    if (Peek() != c || AtEnd()) Fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  JsonValue ParseValue(int depth) {
    if (depth > kMaxDepth) Fail("nested deeper than 64 levels");
    if (AtEnd()) Fail("unexpected end of text");
    switch (Peek()) {
      case '{':
        return ParseObject(depth);
      case '[':
        return ParseArray(depth);
      case '"': {
        JsonValue value;
        value.type = JsonValue::Type::kString;
        value.text = ParseString();
        return value;
      }
      case 't':
        return ParseLiteral("true", JsonValue::Type::kBool, true);
      case 'f':
        return ParseLiteral("false", JsonValue::Type::kBool, false);
      case 'n':
        return ParseLiteral("null", JsonValue::Type::kNull, false);
      default:
        return ParseNumber();
    }
  }

  JsonValue ParseLiteral(std::string_view word, JsonValue::Type type, bool boolean) {
    if (text_.substr(pos_, word.size()) != word) Fail("unexpected character");
    pos_ += word.size();
    JsonValue value;
    value.type = type;
    value.boolean = boolean;
    return value;
  }

  JsonValue ParseObject(int depth) {
    JsonValue value;
    value.type = JsonValue::Type::kObject;
    Expect('{');
    SkipSpace();
    if (Peek() == '}') {
      ++pos_;
      return value;
    }
    std::unordered_set<std::string> keys;
    while (true) {
      SkipSpace();
      if (Peek() != '"') Fail("expected a string key");
      const size_t key_at = pos_;
      std::string key = ParseString();
      if (!keys.insert(key).second) {
        pos_ = key_at;
        Fail("duplicate key \"" + key + "\"");
      }
      SkipSpace();
      Expect(':');
      SkipSpace();
      JsonValue member = ParseValue(depth + 1);
      value.members.emplace_back(std::move(key), std::move(member));
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      Expect('}');
      return value;
    }
  }

  JsonValue ParseArray(int depth) {
    JsonValue value;
    value.type = JsonValue::Type::kArray;
    Expect('[');
    SkipSpace();
    if (Peek() == ']') {
      ++pos_;
      return value;
    }
    while (true) {
      SkipSpace();
      value.items.push_back(ParseValue(depth + 1));
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      Expect(']');
      return value;
    }
  }

  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
  JsonValue ParseNumber() {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (Peek() >= '0' && Peek() <= '9' && !AtEnd()) ++pos_;
      if (pos_ == from) Fail("expected a digit");
    };
    if (Peek() == '-') ++pos_;
    if (Peek() == '0' && !AtEnd()) {
      ++pos_;
      if (Peek() >= '0' && Peek() <= '9' && !AtEnd()) Fail("leading zero in a number");
    } else if (Peek() >= '1' && Peek() <= '9' && !AtEnd()) {
      digits();
    } else {
      Fail("unexpected character");
    }
    if (Peek() == '.' && !AtEnd()) {
      ++pos_;
      digits();
    }
    if ((Peek() == 'e' || Peek() == 'E') && !AtEnd()) {
      ++pos_;
      if (Peek() == '+' || Peek() == '-') ++pos_;
      digits();
    }
    JsonValue value;
    value.type = JsonValue::Type::kNumber;
    value.text = std::string(text_.substr(start, pos_ - start));
    return value;
  }

  unsigned ParseHex4() {
    if (text_.size() - pos_ < 4) Fail("truncated \\u escape");
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      code <<= 4;
      if (c >= '0' && c <= '9') {
        code |= static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        code |= static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        code |= static_cast<unsigned>(c - 'A' + 10);
      } else {
        --pos_;
        Fail("bad hex digit in a \\u escape");
      }
    }
    return code;
  }

  static void AppendUtf8(unsigned code, std::string* out) {
    if (code < 0x80) {
      *out += static_cast<char>(code);
    } else if (code < 0x800) {
      *out += static_cast<char>(0xC0 | (code >> 6));
      *out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      *out += static_cast<char>(0xE0 | (code >> 12));
      *out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (code >> 18));
      *out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  // One UTF-8 encoded character of 2..4 bytes starting at pos_, copied to
  // `out`; overlong forms, surrogates and values past U+10FFFF are invalid.
  void CopyUtf8Sequence(std::string* out) {
    const auto lead = static_cast<unsigned char>(text_[pos_]);
    int length = 0;
    unsigned code = 0;
    if ((lead & 0xE0) == 0xC0) {
      length = 2;
      code = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      code = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      code = lead & 0x07;
    } else {
      Fail("invalid UTF-8 in a string");
    }
    if (text_.size() - pos_ < static_cast<size_t>(length)) Fail("invalid UTF-8 in a string");
    for (int i = 1; i < length; ++i) {
      const auto c = static_cast<unsigned char>(text_[pos_ + i]);
      if ((c & 0xC0) != 0x80) Fail("invalid UTF-8 in a string");
      code = (code << 6) | (c & 0x3F);
    }
    static constexpr unsigned kMinCode[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kMinCode[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      Fail("invalid UTF-8 in a string");
    }
    out->append(text_.substr(pos_, length));
    pos_ += length;
  }

  std::string ParseString() {
    Expect('"');
    std::string out;
    while (true) {
      if (AtEnd()) Fail("unterminated string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) Fail("control character in a string");
      if (static_cast<unsigned char>(c) >= 0x80) {
        CopyUtf8Sequence(&out);
        continue;
      }
      ++pos_;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (AtEnd()) Fail("unterminated string");
      const char escape = text_[pos_++];
      switch (escape) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned code = ParseHex4();
          if (code >= 0xDC00 && code <= 0xDFFF) Fail("lone low surrogate in a \\u escape");
          if (code >= 0xD800 && code <= 0xDBFF) {
            if (text_.substr(pos_, 2) != "\\u") Fail("lone high surrogate in a \\u escape");
            pos_ += 2;
            const unsigned low = ParseHex4();
            if (low < 0xDC00 || low > 0xDFFF) Fail("bad low surrogate in a \\u escape");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          AppendUtf8(code, &out);
          break;
        }
        default:
          --pos_;
          Fail(std::string("bad escape '\\") + escape + "'");
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::optional<int64_t> JsonValue::AsCount() const {
  if (type != Type::kNumber || text.empty()) return std::nullopt;
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < 0) return std::nullopt;
  return value;
}

const JsonValue* JsonValue::Find(std::string_view key) const {
  for (const auto& [name, value] : members) {
    if (name == key) return &value;
  }
  return nullptr;
}

const char* JsonTypeName(JsonValue::Type type) {
  switch (type) {
    case JsonValue::Type::kNull: return "null";
    case JsonValue::Type::kBool: return "boolean";
    case JsonValue::Type::kNumber: return "number";
    case JsonValue::Type::kString: return "string";
    case JsonValue::Type::kArray: return "array";
    case JsonValue::Type::kObject: return "object";
  }
  return "?";
}

JsonValue ParseJson(std::string_view text) { return Parser(text).ParseDocument(); }

bool IsValidUtf8(std::string_view text) {
  // A string literal of `text` parses only if `text` is valid UTF-8 (quotes,
  // backslashes and control characters escaped first).
  try {
    ParseJson(JsonQuote(text));
    return true;
  } catch (const CliError&) {
    return false;
  }
}

std::string JsonQuote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
      out += escape;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace tdstore::cli
