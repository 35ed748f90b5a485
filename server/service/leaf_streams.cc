#include "server/service/leaf_streams.h"

#include <algorithm>

#include "common/protocol_limits.h"
#include "common/str_cat.h"
#include "server/service/proto_convert.h"
#include "server/service/request_limits.h"
#include "tdstore/v1/data_frames.h"

namespace tdstore::service {

absl::StatusOr<v1::WriteBegin> WriteStream::Begin() {
  if (!reader_->Read(&chunk_)) return absl::InvalidArgumentError("empty write stream");
  lease_.Touch();
  if (chunk_.kind_case() != v1::WriteChunk::kBegin) {
    return absl::InvalidArgumentError("a write stream must start with WriteBegin");
  }
  announced_leaves_ = chunk_.begin().leaf_count();
  return chunk_.begin();
}

absl::Status WriteStream::CurrentLeafComplete() const {
  if (leaves_ == 0 || leaf_received_ == header_.byte_size) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat("leaf '", PathToDisplay(header_.path),
                                           "': header announced ", header_.byte_size,
                                           " bytes but ", leaf_received_, " arrived"));
}

absl::StatusOr<WriteStream::Piece> WriteStream::Next() {
  if (!reader_->Read(&chunk_)) {
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
  lease_.Touch();
  switch (chunk_.kind_case()) {
    case v1::WriteChunk::kHeader: {
      if (auto s = CurrentLeafComplete(); !s.ok()) return s;
      const v1::LeafHeader& h = chunk_.header();
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
      header_ = {*std::move(path), *dtype, ShapeFromProto(h.shape()), h.byte_size()};
      ++leaves_;
      leaf_received_ = 0;
      return Piece::kHeader;
    }
    case v1::WriteChunk::kData: {
      if (leaves_ == 0) return absl::InvalidArgumentError("data arrived before any leaf header");
      const int64_t size = static_cast<int64_t>(chunk_.data().size());
      if (size > kMaxChunkBytes) {
        return absl::InvalidArgumentError(
            StrCat("data chunk of ", size, " bytes exceeds the 1 MiB chunk limit"));
      }
      if (leaf_received_ + size > header_.byte_size) {
        return absl::InvalidArgumentError(StrCat("leaf '", PathToDisplay(header_.path),
                                                 "': more data than the ", header_.byte_size,
                                                 " bytes its header announced"));
      }
      leaf_received_ += size;
      return Piece::kData;
    }
    default:
      return absl::InvalidArgumentError("WriteBegin may appear only once, first");
  }
}

absl::Status ReadStream::Send(const grpc::ByteBuffer& frame) {
  if (ctx_->IsCancelled() || !writer_->Write(frame)) {
    return absl::CancelledError("client went away");
  }
  lease_.Touch();
  return absl::OkStatus();
}

absl::Status ReadStream::SendMessage() { return Send(wire::MessageFrame(out_)); }

absl::Status ReadStream::Begin(const Shape& batch_shape, size_t leaf_count) {
  out_.Clear();
  v1::ReadBegin* begin = out_.mutable_begin();
  for (int64_t d : batch_shape) begin->add_batch_shape(d);
  begin->set_leaf_count(static_cast<int32_t>(leaf_count));
  return SendMessage();
}

absl::Status ReadStream::Header(const LeafPath& path, DType dtype, const Shape& shape) {
  out_.Clear();
  v1::LeafHeader* h = out_.mutable_header();
  ToProto(path, h->mutable_path());
  h->set_dtype(static_cast<v1::DType>(dtype));
  for (int64_t d : shape) h->add_shape(d);
  auto bytes = ByteSize(shape, DTypeSize(dtype));
  h->set_byte_size(bytes.ok() ? *bytes : 0);
  return SendMessage();
}

absl::Status ReadStream::Data(store::SharedBytes bytes) {
  const std::string_view all = bytes.bytes;
  for (size_t at = 0; at < all.size(); at += kMaxChunkBytes) {
    std::string_view chunk = all.substr(at, kMaxChunkBytes);
    if (auto s = Send(wire::DataFrame(chunk, bytes.owner)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace tdstore::service
