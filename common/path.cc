#include "common/path.h"

#include "absl/strings/str_cat.h"

namespace tdstore {
namespace {

// Messages quote user-supplied text; keep them short and printable.
std::string Quote(std::string_view text) {
  constexpr size_t kMaxShown = 64;
  std::string out = "\"";
  for (size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\\' || c == '"') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kMaxShown) out += "...";
  out += "\"";
  return out;
}

bool IsDictNameChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == '-' || c == '/' || c == ':';
}

}  // namespace

absl::Status ValidatePath(const LeafPath& path) {
  if (path.empty()) return absl::InvalidArgumentError("a leaf path needs at least one component");
  if (path.size() > kMaxPathComponents) {
    return absl::InvalidArgumentError(absl::StrCat("leaf path has ", path.size(),
                                                   " components; at most ",
                                                   kMaxPathComponents, " are allowed"));
  }
  for (size_t i = 0; i < path.size(); ++i) {
    const std::string& component = path[i];
    if (component.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("component ", i, " of leaf path ", Quote(PathToDisplay(path)),
                       " is empty"));
    }
    if (component.size() > kMaxComponentBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("component ", i, " of leaf path is ", component.size(),
                       " bytes long; at most ", kMaxComponentBytes, " are allowed"));
    }
    if (component.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "component ", i, " ", Quote(component), " of leaf path contains a NUL byte"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateDictName(std::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("dict name is empty");
  if (name.size() > kMaxDictNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("dict name is ", name.size(),
                                                   " bytes long; at most ",
                                                   kMaxDictNameBytes, " are allowed"));
  }
  if (name.front() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("dict name ", Quote(name), " must not start with '/'"));
  }
  for (char c : name) {
    if (!IsDictNameChar(c)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dict name ", Quote(name),
          " may only contain letters, digits and the characters . _ - / :"));
    }
  }
  return absl::OkStatus();
}

std::string EncodePath(const LeafPath& path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (i > 0) out += '/';
    for (char c : path[i]) {
      // Only the separator and the escape character itself are escaped, so
      // encoded paths stay readable in redis-cli.
      if (c == '%') {
        out += "%25";
      } else if (c == '/') {
        out += "%2F";
      } else {
        out += c;
      }
    }
  }
  return out;
}

absl::StatusOr<LeafPath> DecodePath(std::string_view encoded) {
  // EncodePath writes exactly "%25" and "%2F", so any other use of '%' (a
  // lower-case "%2f", "%41", a trailing '%') cannot come from it. Empty
  // components and limit violations are rejected too: only valid paths are
  // ever encoded, and a decoder that returned invalid ones would let bad
  // Redis contents leak into the daemon.
  LeafPath path(1);
  for (size_t i = 0; i < encoded.size(); ++i) {
    const char c = encoded[i];
    if (c == '/') {
      path.emplace_back();
    } else if (c == '%') {
      const std::string_view escape = encoded.substr(i, 3);
      if (escape == "%25") {
        path.back() += '%';
      } else if (escape == "%2F") {
        path.back() += '/';
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("encoded leaf path ", Quote(encoded), " has a bad escape at byte ",
                         i, " (only %25 and %2F are used)"));
      }
      i += 2;
    } else {
      path.back() += c;
    }
  }
  if (absl::Status s = ValidatePath(path); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("encoded leaf path ", Quote(encoded), " is invalid: ", s.message()));
  }
  return path;
}

std::string PathToDisplay(const LeafPath& path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (i > 0) out += '/';
    out += path[i];
  }
  return out;
}

std::string QuotedPath(const LeafPath& path) { return "'" + PathToDisplay(path) + "'"; }

bool IsPathPrefix(const LeafPath& prefix, const LeafPath& path) {
  if (prefix.size() > path.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (prefix[i] != path[i]) return false;
  }
  return true;
}

}  // namespace tdstore
