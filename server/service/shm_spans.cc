#include "server/service/shm_spans.h"

#include "common/shm_protocol.h"

namespace tdstore::service {

absl::StatusOr<shm::Span> ResolveShmSpan(grpc::ServerContextBase* ctx,
                                         const shm::RegionTable* regions,
                                         const v1::ShmSpan& span) {
  absl::StatusOr<shm::Span> found =
      regions == nullptr
          ? absl::FailedPreconditionError(
                "this tdstored offers no shared-memory data path; nothing applied")
          : regions->Find(span.region(), span.offset(), span.length());
  if (!found.ok() && absl::IsFailedPrecondition(found.status())) {
    ctx->AddTrailingMetadata(kShmMetadataKey, kShmUnknownRegion);
  }
  return found;
}

}  // namespace tdstore::service
