#include "server/redis_store/redis_errors.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "common/str_cat.h"

namespace tdstore::store {

std::string_view ErrorTag(redis::ReplyView reply) {
  if (!reply.is_error()) return {};
  std::string_view s = reply.str();
  return s.substr(0, s.find_first_of(" \n"));
}

std::string_view ErrorDetail(redis::ReplyView reply) {
  if (!reply.is_error()) return {};
  std::string_view s = reply.str();
  size_t space = s.find(' ');
  return space == std::string_view::npos ? std::string_view() : s.substr(space + 1);
}

absl::Status ReplyStatus(redis::ReplyView reply, std::string_view what) {
  if (!reply.is_error()) return absl::OkStatus();
  std::string msg(reply.str());
  if (absl::StartsWith(msg, "OOM")) {
    return absl::ResourceExhaustedError(StrCat(what, ": Redis is out of memory: ", msg));
  }
  if (absl::StartsWith(msg, "LOADING") || absl::StartsWith(msg, "BUSY") ||
      absl::StartsWith(msg, "TRYAGAIN") || absl::StartsWith(msg, "CLUSTERDOWN") ||
      absl::StartsWith(msg, "MASTERDOWN") || absl::StartsWith(msg, "READONLY")) {
    return absl::UnavailableError(StrCat(what, ": Redis is not ready: ", msg));
  }
  return absl::InternalError(StrCat(what, ": Redis error: ", msg));
}

std::vector<std::string> StringArray(const redis::Reply& reply) {
  std::vector<std::string> out;
  out.reserve(reply.size());
  for (size_t i = 0; i < reply.size(); ++i) out.emplace_back(reply[i].str());
  return out;
}

namespace {
constexpr char kOutcomeUnknownUrl[] = "tdstore/outcome-unknown";
}  // namespace

absl::Status OutcomeUnknown(std::string_view message) {
  absl::Status status = absl::UnavailableError(std::string(message));
  status.SetPayload(kOutcomeUnknownUrl, absl::Cord("1"));
  return status;
}

bool IsOutcomeUnknown(const absl::Status& status) {
  return status.GetPayload(kOutcomeUnknownUrl).has_value();
}

}  // namespace tdstore::store
