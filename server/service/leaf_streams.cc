#include "server/service/leaf_streams.h"

#include <algorithm>
#include <cstring>

#include "common/protocol_limits.h"
#include "common/protocol_revision.h"
#include "common/str_cat.h"
#include "server/service/proto_convert.h"
#include "server/service/request_limits.h"
#include "server/service/shm_spans.h"
#include "tdstore/v1/data_frames.h"

namespace tdstore::service {
namespace {

// A WriteChunk with no frame kind this server knows (a newer client's, or
// a broken one): refused, naming what came, never taken as an empty frame
// (docs/protocol.md, "Compatibility").
absl::Status UnknownFrame(const v1::WriteChunk& chunk) {
  const google::protobuf::UnknownFieldSet& unknown =
      chunk.GetReflection()->GetUnknownFields(chunk);
  if (unknown.field_count() == 0) {
    return absl::InvalidArgumentError("a WriteChunk with no frame kind set");
  }
  return absl::InvalidArgumentError(
      StrCat("a WriteChunk whose frame kind (field ", unknown.field(0).number(),
             ") this tdstored does not know (protocol revision ", kProtocolRevision,
             "); nothing was written"));
}

}  // namespace

absl::StatusOr<v1::WriteBegin> WriteStream::Begin() {
  if (!reader_->Read(&chunk_)) return absl::InvalidArgumentError("empty write stream");
  lease_.Touch();
  switch (chunk_.kind_case()) {
    case v1::WriteChunk::kBegin:
      announced_leaves_ = chunk_.begin().leaf_count();
      return chunk_.begin();
    case v1::WriteChunk::kSmall: {
      int64_t bytes = 0;
      for (const v1::WholeLeaf& leaf : chunk_.small().leaves()) {
        bytes += static_cast<int64_t>(leaf.data().size());
      }
      if (bytes > kMaxSmallStreamBytes) {
        return absl::InvalidArgumentError(StrCat("a SmallWrite of ", bytes,
                                                 " bytes exceeds the ", kMaxSmallStreamBytes,
                                                 " a stream in one message may carry"));
      }
      if (auto s = ResolveSmallSpans(); !s.ok()) return s;
      small_ = true;
      announced_leaves_ = chunk_.small().begin().leaf_count();
      return chunk_.small().begin();
    }
    case v1::WriteChunk::KIND_NOT_SET:
      return UnknownFrame(chunk_);
    default:
      return absl::InvalidArgumentError("a write stream must start with WriteBegin");
  }
}

// Every span of a SmallWrite is resolved before the write begins, so that
// one naming a region tdstored does not hold, or bytes outside it, costs
// the store nothing. A leaf's bytes are inline or in a span, never both,
// and a span holds exactly the bytes its header announces.
absl::Status WriteStream::ResolveSmallSpans() {
  for (const v1::WholeLeaf& leaf : chunk_.small().leaves()) {
    small_spans_.emplace_back();
    if (!leaf.has_shm()) continue;
    if (!leaf.data().empty()) {
      return absl::InvalidArgumentError(
          "a SmallWrite leaf has bytes both inline and in shared memory; nothing written");
    }
    if (leaf.shm().length() != leaf.header().byte_size()) {
      return absl::InvalidArgumentError(
          StrCat("a SmallWrite leaf's shared-memory span holds ", leaf.shm().length(),
                 " bytes but its header announces ", leaf.header().byte_size(),
                 "; nothing written"));
    }
    auto span = ResolveShmSpan(ctx_, regions_, leaf.shm());
    if (!span.ok()) return span.status();
    small_spans_.back() = *std::move(span);
  }
  return absl::OkStatus();
}

absl::Status WriteStream::CurrentLeafComplete() const {
  if (leaves_ == 0 || leaf_received_ == header_.byte_size) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat("leaf '", PathToDisplay(header_.path),
                                           "': header announced ", header_.byte_size,
                                           " bytes but ", leaf_received_, " arrived"));
}

absl::StatusOr<WriteStream::Piece> WriteStream::Next() {
  if (small_) return NextOfSmall();
  if (auto s = ReleaseBorrowed(); !s.ok()) return s;
  if (!reader_->Read(&chunk_)) return OnEnd();
  lease_.Touch();
  switch (chunk_.kind_case()) {
    case v1::WriteChunk::kHeader:
      return OnHeader(chunk_.header());
    case v1::WriteChunk::kData:
      return OnData(chunk_.data());
    case v1::WriteChunk::kShmData:
      return OnShmData(chunk_.shm_data());
    case v1::WriteChunk::kSmall:
      return absl::InvalidArgumentError("a SmallWrite must be the stream's only message");
    case v1::WriteChunk::KIND_NOT_SET:
      return UnknownFrame(chunk_);
    case v1::WriteChunk::kBegin:
      break;
  }
  return absl::InvalidArgumentError("WriteBegin may appear only once, first");
}

// A SmallWrite stands for the messages it holds: each leaf's header, then
// its data in pieces of <= kMaxChunkBytes unless it has none, then the
// stream's end, which must follow. A leaf's bytes are inline or in a span
// of a lent region, never both.
absl::StatusOr<WriteStream::Piece> WriteStream::NextOfSmall() {
  const auto& leaves = chunk_.small().leaves();
  if (!small_pending_.empty()) {
    // A span goes on whole: its bytes stay where they are until the call
    // ends, and the store sends them from there (LeafWrite::AppendLent).
    std::string_view piece =
        small_pending_lent_ ? small_pending_ : small_pending_.substr(0, kMaxChunkBytes);
    small_pending_.remove_prefix(piece.size());
    return OnData(piece, small_pending_lent_);
  }
  if (small_next_ < leaves.size()) {
    const int i = small_next_++;
    const shm::Span& span = small_spans_[i];
    small_pending_lent_ = leaves[i].has_shm();
    small_pending_ = small_pending_lent_ ? std::string_view(span.data, span.size)
                                         : std::string_view(leaves[i].data());
    return OnHeader(leaves[i].header());
  }
  v1::WriteChunk more;
  if (reader_->Read(&more)) {
    return absl::InvalidArgumentError("a SmallWrite must be the stream's only message");
  }
  return OnEnd();
}

// A shm_data chunk: its span is resolved (an unknown region fails the
// call as a SmallWrite's does, with nothing written) and held, so the
// region stays mapped: on WriteLeavesShared until ReleaseBorrowed, on
// WriteLeaves (lent) to the call's end.
absl::StatusOr<WriteStream::Piece> WriteStream::OnShmData(const v1::ShmSpan& span) {
  if (span.length() <= 0) {
    return absl::InvalidArgumentError("a shm_data chunk of no bytes; nothing written");
  }
  const bool lent = progress_ == nullptr;
  if (lent && static_cast<int>(lent_spans_.size()) >= kMaxLentChunks) {
    return absl::InvalidArgumentError(StrCat("more than ", kMaxLentChunks,
                                             " shm_data chunks on one WriteLeaves call; "
                                             "nothing written"));
  }
  auto resolved = ResolveShmSpan(ctx_, regions_, span);
  if (!resolved.ok()) return resolved.status();
  auto piece = OnData(std::string_view(resolved->data, resolved->size), /*lent=*/true);
  if (!piece.ok()) return piece.status();
  if (lent) {
    lent_spans_.push_back(*std::move(resolved));
  } else {
    data_lent_ = false;  // not held to the call's end: borrowed until the next Next()
    borrowed_ = *std::move(resolved);
  }
  return piece;
}

// Why before the next Read rather than after the store's call returns:
// Next() being called is the caller's word that it is done with data()
// (WriteWhole hands a borrowed piece to LeafWrite::AppendBorrowed, which
// keeps nothing of it; TakeData copies), and this is the one place every
// caller passes through. The span is dropped before the client hears, so
// nothing here reads it once the client may write it again.
absl::Status WriteStream::ReleaseBorrowed() {
  if (borrowed_.data == nullptr) return absl::OkStatus();
  borrowed_ = {};
  data_ = {};
  v1::WriteProgress progress;
  progress.set_chunks_released(++released_);
  if (ctx_->IsCancelled() || !progress_->Write(progress)) {
    return absl::CancelledError("write stream cancelled; nothing written");
  }
  return absl::OkStatus();
}

absl::StatusOr<WriteStream::Piece> WriteStream::OnEnd() {
  // Read() returns false both when the client half-closes (the end) and
  // when the call breaks: only the former is a clean end.
  if (ctx_->IsCancelled()) {
    return absl::CancelledError(lease_.timed_out()
                                    ? "write stream idle too long (--idle-stream-timeout-ms); "
                                      "nothing written"
                                    : "write stream cancelled; nothing written");
  }
  if (auto s = CurrentLeafComplete(); !s.ok()) return s;
  if (announced_leaves_ > 0 && leaves_ != announced_leaves_) {
    return absl::InvalidArgumentError(StrCat("the stream announced ", announced_leaves_,
                                             " leaves but carried ", leaves_,
                                             "; nothing written"));
  }
  return Piece::kEnd;
}

absl::StatusOr<WriteStream::Piece> WriteStream::OnHeader(const v1::LeafHeader& h) {
  if (auto s = CurrentLeafComplete(); !s.ok()) return s;
  if (auto s = CheckLeafCount(limits_, leaves_ + 1); !s.ok()) return s;
  if (auto s = CheckPath(limits_, h.path()); !s.ok()) return s;
  if (h.byte_size() < 0) return absl::InvalidArgumentError("negative byte count");
  declared_bytes_ += h.byte_size();
  if (auto s = CheckCallBytes(limits_, declared_bytes_); !s.ok()) return s;
  auto path = FromProto(h.path());
  if (!path.ok()) return path.status();
  auto dtype = FromProto(h.dtype());
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(
        StrCat("leaf '", PathToDisplay(*path), "': ", dtype.status().message()));
  }
  auto kind = FromProto(h.kind());
  if (!kind.ok()) {
    return absl::InvalidArgumentError(
        StrCat("leaf '", PathToDisplay(*path), "': ", kind.status().message()));
  }
  header_ = {*std::move(path), *dtype, ShapeFromProto(h.shape()), h.byte_size(), *kind,
             h.value()};
  ++leaves_;
  leaf_received_ = 0;
  return Piece::kHeader;
}

absl::StatusOr<WriteStream::Piece> WriteStream::OnData(std::string_view bytes, bool lent) {
  if (leaves_ == 0) return absl::InvalidArgumentError("data arrived before any leaf header");
  const int64_t size = static_cast<int64_t>(bytes.size());
  if (size > kMaxChunkBytes && !lent) {
    return absl::InvalidArgumentError(
        StrCat("data chunk of ", size, " bytes exceeds the 1 MiB chunk limit"));
  }
  if (leaf_received_ + size > header_.byte_size) {
    return absl::InvalidArgumentError(StrCat("leaf '", PathToDisplay(header_.path),
                                             "': more data than the ", header_.byte_size,
                                             " bytes its header announced"));
  }
  leaf_received_ += size;
  data_ = bytes;
  data_lent_ = lent;
  return Piece::kData;
}

std::string WriteStream::TakeData() {
  std::string taken;
  // Outside a SmallWrite the piece is the whole data field of chunk_ (the
  // next Read() overwrites it anyway); inside one it is copied.
  if (!small_ && chunk_.kind_case() == v1::WriteChunk::kData) {
    taken = std::move(*chunk_.mutable_data());
  } else {
    taken.assign(data_);
  }
  data_ = {};
  data_lent_ = false;
  return taken;
}

absl::Status ReadStream::Send(const grpc::ByteBuffer& frame) {
  if (ctx_->IsCancelled() || !writer_->Write(frame, grpc::WriteOptions())) {
    return absl::CancelledError("client went away");
  }
  lease_.Touch();
  return absl::OkStatus();
}

absl::Status ReadStream::SendMessage() {
  if (ctx_->IsCancelled() || !writer_->WriteMessage(out_, grpc::WriteOptions())) {
    return absl::CancelledError("client went away");
  }
  lease_.Touch();
  return absl::OkStatus();
}

absl::Status ReadStream::Begin(const Shape& batch_shape, size_t leaf_count,
                               int64_t total_bytes) {
  out_.Clear();
  in_shm_ = reply_ != nullptr && total_bytes <= static_cast<int64_t>(reply_span_.size) &&
            static_cast<int64_t>(leaf_count) <= kMaxSmallReadLeaves;
  small_ = in_shm_ || (small_read_ && total_bytes <= kMaxSmallStreamBytes &&
                       static_cast<int64_t>(leaf_count) <= kMaxSmallReadLeaves);
  // A reply that does not fit the span, on ReadLeavesShared: a ring of it.
  slot_bytes_ = 0;
  if (releases_ != nullptr && reply_ != nullptr && !small_) {
    slot_bytes_ =
        std::min(static_cast<int64_t>(reply_span_.size) / kReadRingSlots, kMaxReadSlotBytes) &
        ~int64_t{63};
    if (slot_bytes_ <= 0) return absl::InvalidArgumentError("the reply span is too small");
  }
  v1::ReadBegin* begin = small_ ? out_.mutable_small()->mutable_begin() : out_.mutable_begin();
  for (int64_t d : batch_shape) begin->add_batch_shape(d);
  begin->set_leaf_count(static_cast<int32_t>(leaf_count));
  return small_ ? absl::OkStatus() : SendMessage();
}

absl::Status ReadStream::Header(const LeafPath& path, const LeafRecord& record,
                               const Shape& shape) {
  if (!small_) out_.Clear();
  v1::WholeLeaf* whole = small_ ? out_.mutable_small()->add_leaves() : nullptr;
  v1::LeafHeader* h = small_ ? whole->mutable_header() : out_.mutable_header();
  ToProto(path, h->mutable_path());
  h->set_dtype(static_cast<v1::DType>(record.dtype));
  for (int64_t d : shape) h->add_shape(d);
  auto bytes = ByteSize(shape, DTypeSize(record.dtype));
  h->set_byte_size(bytes.ok() ? *bytes : 0);
  if (in_shm_) {
    // The leaf's bytes follow the previous leaf's in the client's span.
    v1::ShmSpan* span = whole->mutable_shm();
    span->set_region(reply_->region());
    span->set_offset(reply_->offset() + static_cast<int64_t>(shm_used_));
    span->set_length(h->byte_size());
  }
  h->set_kind(static_cast<v1::LeafKind>(record.kind));
  h->set_value(record.value);
  return small_ ? absl::OkStatus() : SendMessage();
}

absl::Status ReadStream::Data(store::SharedBytes bytes) {
  const std::string_view all = bytes.bytes;
  if (in_shm_) {
    if (all.size() > reply_span_.size - shm_used_) {
      return absl::InternalError("a read's bytes passed the reply span Begin sized");
    }
    std::memcpy(reply_span_.data + shm_used_, all.data(), all.size());
    shm_used_ += all.size();
    return absl::OkStatus();
  }
  if (slot_bytes_ > 0) return DataThroughRing(all);
  if (small_) {
    // Small by Begin's total: a copy is cheaper than a message.
    auto* leaves = out_.mutable_small()->mutable_leaves();
    if (leaves->empty()) return absl::InternalError("read data before any header");
    leaves->rbegin()->mutable_data()->append(all.data(), all.size());
    return absl::OkStatus();
  }
  for (size_t at = 0; at < all.size(); at += kMaxChunkBytes) {
    std::string_view chunk = all.substr(at, kMaxChunkBytes);
    if (auto s = Send(wire::DataFrame(chunk, bytes.owner)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReadStream::DataThroughRing(std::string_view bytes) {
  for (size_t at = 0; at < bytes.size(); at += static_cast<size_t>(slot_bytes_)) {
    const size_t n = std::min(bytes.size() - at, static_cast<size_t>(slot_bytes_));
    // The slot is free once the chunk it held before is released: until
    // then the client may still be copying out of it.
    if (chunks_sent_ >= kReadRingSlots) {
      if (auto s = releases_->Await(chunks_sent_ - kReadRingSlots + 1); !s.ok()) return s;
    }
    // A client that went away may have given the span back already (its
    // cancel does not wait for this handler): write nothing more into it.
    if (ctx_->IsCancelled()) return absl::CancelledError("client went away");
    const int64_t slot_at = (chunks_sent_ % kReadRingSlots) * slot_bytes_;
    std::memcpy(reply_span_.data + slot_at, bytes.data() + at, n);
    out_.Clear();
    v1::ShmSpan* span = out_.mutable_shm_data();
    span->set_region(reply_->region());
    span->set_offset(reply_->offset() + slot_at);
    span->set_length(static_cast<int64_t>(n));
    if (auto s = SendMessage(); !s.ok()) return s;
    ++chunks_sent_;
  }
  return absl::OkStatus();
}

// The one message of a small read goes as the stream's last: gRPC holds it
// and sends it with the status in one batch, one write and one wake-up of
// the client fewer than a message and then the status.
absl::Status ReadStream::End() {
  if (!small_) return absl::OkStatus();
  if (ctx_->IsCancelled() ||
      !writer_->WriteMessage(out_, grpc::WriteOptions().set_last_message())) {
    return absl::CancelledError("client went away");
  }
  lease_.Touch();
  return absl::OkStatus();
}

}  // namespace tdstore::service
