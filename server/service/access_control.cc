#include "server/service/access_control.h"

#include "common/str_cat.h"

namespace tdstore::service {
namespace {

constexpr size_t kMinTokenBytes = 16;

// Compares without an early exit, so the time taken does not tell an
// attacker how many leading characters of a guess were right.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// Splits at any of `separators`, dropping empty pieces.
std::vector<std::string_view> Split(std::string_view s, std::string_view separators) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find_first_of(separators, start);
    if (end == std::string_view::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool Matches(const Grant& grant, std::string_view name) {
  for (const std::string& prefix : grant.prefixes) {
    if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<AccessControl> AccessControl::Parse(std::string_view text) {
  AccessControl out;
  int number = 0;
  size_t at = 0;
  while (at < text.size()) {
    size_t eol = text.find('\n', at);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = Trim(text.substr(at, eol - at));
    at = eol + 1;
    ++number;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string_view> fields = Split(line, " \t");
    if (fields.size() != 3) {
      return absl::InvalidArgumentError(
          StrCat("tokens file line ", number, ": expected 'TOKEN ro|rw PREFIX[,PREFIX...]'"));
    }
    Grant grant;
    grant.token = std::string(fields[0]);
    if (grant.token.size() < kMinTokenBytes) {
      return absl::InvalidArgumentError(StrCat("tokens file line ", number,
                                               ": a token needs at least ", kMinTokenBytes,
                                               " characters"));
    }
    if (fields[1] != "ro" && fields[1] != "rw") {
      return absl::InvalidArgumentError(
          StrCat("tokens file line ", number, ": rights must be 'ro' or 'rw'"));
    }
    grant.can_write = fields[1] == "rw";
    for (std::string_view prefix : Split(fields[2], ",")) {
      grant.prefixes.emplace_back(prefix == "*" ? std::string_view() : prefix);
    }
    if (grant.prefixes.empty()) {
      return absl::InvalidArgumentError(
          StrCat("tokens file line ", number, ": no dict-name prefix"));
    }
    for (const Grant& other : out.grants_) {
      if (other.token == grant.token) {
        return absl::InvalidArgumentError(
            StrCat("tokens file line ", number, ": this token is listed twice"));
      }
    }
    out.grants_.push_back(std::move(grant));
  }
  // No grant would mean no check at all (enabled() is false): a tokens file
  // emptied by mistake must not open the door to everyone.
  if (out.grants_.empty()) {
    return absl::InvalidArgumentError(
        "tokens file holds no token: every caller would be allowed everything");
  }
  return out;
}

absl::StatusOr<const Grant*> AccessControl::Authenticate(const grpc::ServerContextBase& ctx) const {
  if (grants_.empty()) return nullptr;
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "this tdstored requires a token: send 'authorization: Bearer <token>'");
  }
  std::string_view value(it->second.data(), it->second.size());
  constexpr std::string_view kBearer = "Bearer ";
  if (value.substr(0, kBearer.size()) != kBearer) {
    return absl::UnauthenticatedError("the authorization header must be 'Bearer <token>'");
  }
  std::string_view token = value.substr(kBearer.size());
  const Grant* found = nullptr;
  // Look at every grant whatever matches, for the same constant-time reason.
  for (const Grant& grant : grants_) {
    if (ConstantTimeEquals(grant.token, token)) found = &grant;
  }
  if (found == nullptr) return absl::UnauthenticatedError("unknown token");
  return found;
}

absl::Status AccessControl::Authorize(const Grant* grant, std::string_view name, Access access) {
  if (grant == nullptr) return absl::OkStatus();
  if (!Matches(*grant, name)) {
    return absl::PermissionDeniedError(
        StrCat("this token may not access dict '", name, "' (outside its prefixes)"));
  }
  if (access == Access::kWrite && !grant->can_write) {
    return absl::PermissionDeniedError(
        StrCat("this token is read-only: it may not change dict '", name, "'"));
  }
  return absl::OkStatus();
}

bool AccessControl::CanSee(const Grant* grant, std::string_view name) {
  return grant == nullptr || Matches(*grant, name);
}

}  // namespace tdstore::service
