#include "client/core/src/retry.h"

#include <algorithm>
#include <thread>

#include "common/protocol_metadata.h"

namespace tdstore {

Retrier::Retrier(const ClientOptions& options) {
  const auto start = std::chrono::system_clock::now();
  deadline_ = start + options.timeout;
  retry_until_ = std::min(deadline_, start + options.retry_for);
}

bool NothingApplied(const grpc::ClientContext& attempt) {
  const auto& trailers = attempt.GetServerTrailingMetadata();
  auto it = trailers.find(kAppliedTrailer);
  return it != trailers.end() && it->second == kAppliedNone;
}

bool Retrier::Again(const grpc::Status& status, Safety safety,
                    const grpc::ClientContext& attempt) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
  if (safety == kOnlyIfNothingApplied && !NothingApplied(attempt)) return false;
  return Backoff();
}

bool Retrier::Backoff() {
  if (std::chrono::system_clock::now() + backoff_ >= retry_until_) return false;
  std::this_thread::sleep_for(backoff_);
  backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(1000));
  return true;
}

}  // namespace tdstore
