// The framing of the two data streams, enforced in one place each.
//
// WriteLeaves (client -> tdstored): WriteBegin, then per leaf a LeafHeader
// and exactly its byte_size bytes of data chunks (<= 1 MiB each); or a
// SmallWrite, one message that holds all of that. WriteStream
// reads it and refuses, with INVALID_ARGUMENT, a stream that breaks the
// framing: no WriteBegin first, a second WriteBegin, data before a header or
// past what the header announced, a header before the previous leaf is
// complete, an oversized chunk, a last leaf cut short, fewer or more
// leaves than WriteBegin.leaf_count announced, or a SmallWrite that is not
// the stream's only message or holds more than kMaxSmallStreamBytes. It also applies the
// per-call limits (leaf count, path length, bytes announced) as headers
// arrive. A call that breaks or is cancelled ends with CANCELLED, never as
// a clean end: only a clean end may commit.
//
// ReadLeaves (tdstored -> client): ReadBegin, then per leaf a LeafHeader and
// its data in chunks of <= 1 MiB, or, when the leaves add up to at most
// kMaxSmallStreamBytes, one SmallRead. ReadStream writes it, as raw frames
// (tdstore/v1/data_frames.h): a data chunk goes out as a slice of the
// Redis reply it came in, never copied into a protobuf message.
//
// Both touch the stream's StreamGuard lease on every message, so a stream
// that moves is never idle. One thread at a time (the handler's).
#ifndef TDSTORE_SERVER_SERVICE_LEAF_STREAMS_H_
#define TDSTORE_SERVER_SERVICE_LEAF_STREAMS_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/path.h"
#include "common/shape.h"
#include "grpcpp/grpcpp.h"
#include "server/service/service_limits.h"
#include "server/service/stream_guard.h"
#include "server/store/store.h"
#include "tdstore/v1/tdstore.grpc.pb.h"

namespace tdstore::service {

class WriteStream {
 public:
  WriteStream(grpc::ServerContext* ctx, grpc::ServerReader<v1::WriteChunk>* reader,
              StreamGuard::Lease& lease, const ServiceLimits& limits)
      : ctx_(ctx), reader_(reader), lease_(lease), limits_(limits) {}

  // The stream's first message. INVALID_ARGUMENT if it is not a WriteBegin.
  absl::StatusOr<v1::WriteBegin> Begin();

  // A leaf as its header announced it.
  struct Header {
    LeafPath path;
    DType dtype = DType::kUnspecified;
    Shape shape;
    int64_t byte_size = 0;
    LeafKind kind = LeafKind::kTensor;
    std::string value;  // a one-value leaf's value, or a ragged leaf's cell dtype
  };
  enum class Piece { kHeader, kData, kEnd };
  // The next piece: a new leaf's header (header() is it), a data chunk of
  // the current leaf (data() is it, valid until the next call), or the
  // clean end of the stream, all leaves complete.
  absl::StatusOr<Piece> Next();
  const Header& header() const { return header_; }
  std::string_view data() const { return data_; }
  // The current data piece as a string of its own, moved out of the stream
  // rather than copied where it can be; data() is empty afterwards.
  std::string TakeData();
  // Leaves begun so far.
  int leaves() const { return leaves_; }

 private:
  absl::Status CurrentLeafComplete() const;
  // Next() within a SmallWrite (the stream's only message).
  absl::StatusOr<Piece> NextOfSmall();
  // The checks of each piece, wherever it came from.
  absl::StatusOr<Piece> OnHeader(const v1::LeafHeader& header);
  absl::StatusOr<Piece> OnData(std::string_view bytes);
  absl::StatusOr<Piece> OnEnd();

  grpc::ServerContext* const ctx_;
  grpc::ServerReader<v1::WriteChunk>* const reader_;
  StreamGuard::Lease& lease_;
  const ServiceLimits& limits_;
  int32_t announced_leaves_ = 0;  // WriteBegin.leaf_count (0: not stated)
  v1::WriteChunk chunk_;
  std::string_view data_;  // the current data piece, inside chunk_
  // A SmallWrite being walked: the next leaf in it, and whether the data of
  // the one before is still to come.
  bool small_ = false;
  int small_next_ = 0;
  bool small_data_due_ = false;
  Header header_;
  int leaves_ = 0;
  int64_t leaf_received_ = 0;  // bytes of the current leaf so far
  int64_t declared_bytes_ = 0;  // summed over the headers
};

// ReadLeaves is served as a split stream (one request, then any number of
// responses) of raw frames, so that ReadStream builds each frame itself.
using ReadLeavesStreamer = grpc::ServerSplitStreamer<v1::ReadLeavesRequest, grpc::ByteBuffer>;

class ReadStream {
 public:
  // `small_read`: the client accepts FRAME_SMALL_READ.
  ReadStream(grpc::ServerContext* ctx, ReadLeavesStreamer* writer, StreamGuard::Lease& lease,
             bool small_read)
      : ctx_(ctx), writer_(writer), lease_(lease), small_read_(small_read) {}

  // Each returns CANCELLED "client went away" when the client is gone.
  // Write() blocks while the client does not read (flow control); the
  // stream guard cancels the call if that lasts too long.
  // `total_bytes`: what the leaves announced after it add up to. A read of
  // at most kMaxSmallStreamBytes (and kMaxSmallReadLeaves leaves), to a
  // client that accepts it, is gathered into one SmallRead that End()
  // sends; the others go out message by message.
  absl::Status Begin(const Shape& batch_shape, size_t leaf_count, int64_t total_bytes);
  // The header of a leaf of `record`'s dtype, kind and value, at `shape`
  // (the record's own, or an indexed read's).
  absl::Status Header(const LeafPath& path, const LeafRecord& record, const Shape& shape);
  // Any number of bytes of the current leaf, sent in chunks of <= 1 MiB
  // that share `bytes.owner` until gRPC has sent them.
  absl::Status Data(store::SharedBytes bytes);
  // After the last leaf's data.
  absl::Status End();

 private:
  absl::Status Send(const grpc::ByteBuffer& frame);
  absl::Status SendMessage();  // out_

  grpc::ServerContext* const ctx_;
  ReadLeavesStreamer* const writer_;
  StreamGuard::Lease& lease_;
  v1::ReadChunk out_;
  const bool small_read_;  // the client accepts a SmallRead
  bool small_ = false;  // out_ gathers a SmallRead
};

}  // namespace tdstore::service

#endif  // TDSTORE_SERVER_SERVICE_LEAF_STREAMS_H_
