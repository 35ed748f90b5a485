// The framing of the two data streams, enforced in one place each.
//
// WriteLeaves (client -> tdstored): WriteBegin, then per leaf a LeafHeader
// and exactly its byte_size bytes of data chunks (<= 1 MiB each); or a
// SmallWrite, one message that holds all of that, its leaves' bytes inline
// or (the same-host data path) in spans of a region the client lent
// (shm_spans.h), handed on in pieces of <= 1 MiB as chunks are (a span:
// whole, see data_lent()). WriteStream
// reads it and refuses, with INVALID_ARGUMENT, a stream that breaks the
// framing: no WriteBegin first, a second WriteBegin, data before a header or
// past what the header announced, a header before the previous leaf is
// complete, an oversized chunk, a last leaf cut short, fewer or more
// leaves than WriteBegin.leaf_count announced, or a SmallWrite that is not
// the stream's only message or holds more than kMaxSmallStreamBytes.
// WriteLeavesShared is the same stream, whose data chunks may also name
// spans of a lent region (shm_data, see data_borrowed()); each such chunk
// is released to the client (a WriteProgress) before the next message is
// read, and on WriteLeaves one is refused. It also applies the
// per-call limits (leaf count, path length, bytes announced) as headers
// arrive. A call that breaks or is cancelled ends with CANCELLED, never as
// a clean end: only a clean end may commit.
//
// ReadLeaves (tdstored -> client): ReadBegin, then per leaf a LeafHeader and
// its data in chunks of <= 1 MiB, or, when the leaves add up to at most
// kMaxSmallStreamBytes, one SmallRead; or, when the client offered a span
// of its region (ReadLeavesRequest.shm_reply) and they fit in it, one
// SmallRead whose leaves' bytes were copied into that span. ReadStream writes it, as raw frames
// (tdstore/v1/data_frames.h): a data chunk goes out as a slice of the
// Redis reply it came in, never copied into a protobuf message.
// ReadLeavesShared is the same stream, except that a reply too large for
// the offered span goes through it as a ring of kReadRingSlots slots: each
// data chunk is copied into the next slot and named by a shm_data chunk,
// and a slot is filled again only once the client released the chunk it
// held (ChunkReleases).
//
// Both touch the stream's StreamGuard lease on every message, so a stream
// that moves is never idle. One thread at a time (the handler's).
#ifndef TDSTORE_SERVER_SERVICE_LEAF_STREAMS_H_
#define TDSTORE_SERVER_SERVICE_LEAF_STREAMS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/path.h"
#include "common/shape.h"
#include "grpcpp/grpcpp.h"
#include "server/service/service_limits.h"
#include "server/service/stream_guard.h"
#include "server/shm/region_table.h"
#include "server/store/store.h"
#include "tdstore/v1/data_frames.h"
#include "tdstore/v1/tdstore.grpc.pb.h"

namespace tdstore::service {

class WriteStream {
 public:
  // `regions`: the lent regions a SmallWrite's or a shm_data chunk's spans
  // name (null: none). `progress`: WriteLeavesShared's answers, where each
  // shm_data chunk is released; null on WriteLeaves, whose shm_data chunks
  // (at most kMaxLentChunks) are lent: held to the call's end.
  WriteStream(grpc::ServerContext* ctx, grpc::internal::ReaderInterface<v1::WriteChunk>* reader,
              StreamGuard::Lease& lease, const ServiceLimits& limits,
              const shm::RegionTable* regions,
              grpc::internal::WriterInterface<v1::WriteProgress>* progress = nullptr)
      : ctx_(ctx),
        reader_(reader),
        lease_(lease),
        limits_(limits),
        regions_(regions),
        progress_(progress) {}

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
  // True if data() lies in a region the client lent: valid and unchanged
  // until the call ends (a SmallWrite's span, handed on whole, or a
  // shm_data chunk on WriteLeaves; a chunk's 1 MiB bound is for what a
  // message carries).
  bool data_lent() const { return data_lent_; }
  // True if data() is a shm_data chunk: valid only until the next call of
  // Next(), which first tells the client it may reuse the chunk's span
  // (LeafWrite::AppendBorrowed). May be larger than 1 MiB.
  bool data_borrowed() const { return borrowed_.data != nullptr; }
  // The current data piece as a string of its own, moved out of the stream
  // rather than copied where it can be; data() is empty afterwards.
  std::string TakeData();
  // Leaves begun so far.
  int leaves() const { return leaves_; }

  // The most shm_data chunks one WriteLeaves call may lend (each is held
  // to the call's end).
  static constexpr int kMaxLentChunks = 64;

 private:
  absl::Status CurrentLeafComplete() const;
  absl::Status ResolveSmallSpans();
  // Next() within a SmallWrite (the stream's only message).
  absl::StatusOr<Piece> NextOfSmall();
  // The checks of each piece, wherever it came from.
  absl::StatusOr<Piece> OnHeader(const v1::LeafHeader& header);
  absl::StatusOr<Piece> OnData(std::string_view bytes, bool lent = false);
  absl::StatusOr<Piece> OnShmData(const v1::ShmSpan& span);
  absl::StatusOr<Piece> OnEnd();
  // Tells the client the borrowed chunk's span is free again, if one is out.
  absl::Status ReleaseBorrowed();

  grpc::ServerContext* const ctx_;
  grpc::internal::ReaderInterface<v1::WriteChunk>* const reader_;
  StreamGuard::Lease& lease_;
  const ServiceLimits& limits_;
  const shm::RegionTable* const regions_;
  grpc::internal::WriterInterface<v1::WriteProgress>* const progress_;
  // The shm_data chunk data() is, until released; and how many were.
  shm::Span borrowed_;
  int64_t released_ = 0;
  int32_t announced_leaves_ = 0;  // WriteBegin.leaf_count (0: not stated)
  v1::WriteChunk chunk_;
  std::string_view data_;  // the current data piece, inside chunk_ or a span
  bool data_lent_ = false;  // data_ is in a span
  // A SmallWrite being walked: the next leaf in it, and the bytes of the one
  // before still to hand on (inline in chunk_, or in span_).
  bool small_ = false;
  int small_next_ = 0;
  std::string_view small_pending_;
  bool small_pending_lent_ = false;
  // The SmallWrite's leaves' spans, resolved by Begin (empty for a leaf
  // inline): they keep lent regions mapped while their bytes are used.
  std::vector<shm::Span> small_spans_;
  // WriteLeaves' shm_data chunks, lent: kept mapped to the call's end.
  std::vector<shm::Span> lent_spans_;
  Header header_;
  int leaves_ = 0;
  int64_t leaf_received_ = 0;  // bytes of the current leaf so far
  int64_t declared_bytes_ = 0;  // summed over the headers
};

// Where ReadStream's frames go: ReadLeaves' responses, raw (ReadStream
// builds each frame itself), in order. Write returns false once the client
// is gone; `options` marks the stream's last message.
class FrameWriter {
 public:
  virtual ~FrameWriter() = default;
  virtual bool Write(const grpc::ByteBuffer& frame, grpc::WriteOptions options) = 0;
  // A frame that is a message: serialized here, unless the writer's stream
  // takes messages as they are.
  virtual bool WriteMessage(const v1::ReadChunk& message, grpc::WriteOptions options) {
    return Write(wire::MessageFrame(message), options);
  }
};

// ReadLeavesShared's releases: the client's messages after its request,
// each counting the shm_data chunks it has copied out so far.
class ChunkReleases {
 public:
  virtual ~ChunkReleases() = default;
  // Returns once the client has released its first `n` chunks (reading
  // its messages as they come): CANCELLED if the client went away first,
  // INVALID_ARGUMENT for a message that is not the next release in order.
  virtual absl::Status Await(int64_t n) = 0;
};

class ReadStream {
 public:
  // Slots of a ReadLeavesShared ring: four keep tdstored filling one while
  // the client copies out another; at most 4 MiB each keep the pages the
  // ring touches (either side's RSS) at 16 MiB whatever the read. (The
  // client offers a span larger than kMaxSmallStreamBytes, so a slot holds
  // at least 16 KiB.)
  static constexpr int64_t kReadRingSlots = 4;
  static constexpr int64_t kMaxReadSlotBytes = int64_t{4} << 20;

  // `small_read`: the client accepts FRAME_SMALL_READ. `reply_span`: the
  // resolved ReadLeavesRequest.shm_reply, `reply` as the client named it
  // (null: none offered). `releases`: ReadLeavesShared's (null on
  // ReadLeaves, which sends no shm_data chunk).
  ReadStream(grpc::ServerContextBase* ctx, FrameWriter* writer, StreamGuard::Lease& lease,
             bool small_read, shm::Span reply_span = {}, const v1::ShmSpan* reply = nullptr,
             ChunkReleases* releases = nullptr)
      : ctx_(ctx),
        writer_(writer),
        lease_(lease),
        small_read_(small_read || reply != nullptr),
        reply_span_(std::move(reply_span)),
        reply_(reply),
        releases_(releases) {}

  // Each returns CANCELLED "client went away" when the client is gone.
  // Write() blocks while the client does not read (flow control); the
  // stream guard cancels the call if that lasts too long.
  // `total_bytes`: what the leaves announced after it add up to. A read of
  // at most kMaxSmallStreamBytes (and kMaxSmallReadLeaves leaves), to a
  // client that accepts it, or one that fits the client's reply span, is
  // gathered into one SmallRead that End() sends; the others go out
  // message by message, their data through the ring where there is one.
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
  // Data() through the ring: `bytes` into the next slots, once each is free.
  absl::Status DataThroughRing(std::string_view bytes);

  grpc::ServerContextBase* const ctx_;
  FrameWriter* const writer_;
  StreamGuard::Lease& lease_;
  v1::ReadChunk out_;
  const bool small_read_;  // the client accepts a SmallRead
  bool small_ = false;  // out_ gathers a SmallRead
  const shm::Span reply_span_;
  const v1::ShmSpan* const reply_;
  bool in_shm_ = false;  // the SmallRead's bytes go into reply_span_
  size_t shm_used_ = 0;  // bytes of reply_span_ filled so far
  ChunkReleases* const releases_;
  // The ring cut from reply_span_ (Begin decides): its slot size (0: no
  // ring), and the shm_data chunks sent so far; chunk k fills slot
  // k % kReadRingSlots.
  int64_t slot_bytes_ = 0;
  int64_t chunks_sent_ = 0;
};

}  // namespace tdstore::service

#endif  // TDSTORE_SERVER_SERVICE_LEAF_STREAMS_H_
