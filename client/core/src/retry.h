// When the client library repeats a failed call (ClientOptions::retry_for).
//
//   Retrier retry(impl.options);
//   for (;;) {
//     grpc::ClientContext ctx;  impl.Prepare(&ctx, retry.deadline());
//     grpc::Status s = ...one attempt...;
//     if (s.ok() || !retry.Again(s, Retrier::kIdempotent, ctx)) break;
//   }
//
// One Retrier per call; not thread-safe (a call runs on one thread).
#ifndef TDSTORE_CLIENT_CORE_SRC_RETRY_H_
#define TDSTORE_CLIENT_CORE_SRC_RETRY_H_

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include <chrono>

#include "tdstore/core.h"

namespace tdstore {

class Retrier {
 public:
  enum Safety {
    // Repeating the call leaves the same state whatever the failed attempt
    // did: reads, and writes of given values.
    kIdempotent,
    // Repeat only if the server's trailing metadata says the failed attempt
    // changed nothing (`tdstore-applied: none`).
    kOnlyIfNothingApplied,
  };

  explicit Retrier(const ClientOptions& options);

  // The call's deadline: its start + options.timeout, for every attempt.
  std::chrono::system_clock::time_point deadline() const { return deadline_; }
  // The end of the retry window: start + options.retry_for, never past the
  // deadline.
  std::chrono::system_clock::time_point retry_until() const { return retry_until_; }

  // After a failed attempt: true if it should be tried again — the status is
  // UNAVAILABLE, `safety` allows it, and the retry window has time left for
  // the backoff, which this call then sleeps. False otherwise.
  bool Again(const grpc::Status& status, Safety safety, const grpc::ClientContext& attempt);

  // Sleeps the next backoff and returns true if the retry window has time
  // left for it; false (without sleeping) otherwise. For failures other
  // than UNAVAILABLE that the caller knows are worth another attempt.
  bool Backoff();

 private:
  std::chrono::system_clock::time_point deadline_;
  std::chrono::system_clock::time_point retry_until_;
  std::chrono::milliseconds backoff_{50};
};

// Whether the server said the failed call changed nothing.
bool NothingApplied(const grpc::ClientContext& attempt);

}  // namespace tdstore

#endif  // TDSTORE_CLIENT_CORE_SRC_RETRY_H_
