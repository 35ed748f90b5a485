#include "client/core/src/leaf_stream_calls.h"

#include <grpcpp/support/sync_stream.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include "client/core/src/convert.h"
#include "client/core/src/prefault.h"
#include "client/core/src/schema_floors.h"
#include "common/shm_protocol.h"
#include "tdstore/v1/data_frames.h"

// The wire carries little-endian bytes and this client sends and receives
// tensor memory as it is: it only builds where that memory is little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "tdstore's client sends tensor memory as is: little-endian hosts only");

namespace tdstore::core {
namespace {

[[noreturn]] void DataLoss(const std::string& message) {
  throw Error(StatusCode::kDataLoss, "malformed read stream from tdstored: " + message);
}

// A ReadChunk of no kind this client knows: a frame a newer server sent
// though this client never accepted it, or a broken stream. Never taken as
// an empty frame, which would end the read with nothing and no error.
[[noreturn]] void UnknownFrame(const v1::ReadChunk& chunk) {
  const google::protobuf::UnknownFieldSet& unknown =
      chunk.GetReflection()->GetUnknownFields(chunk);
  if (unknown.field_count() == 0) DataLoss("a ReadChunk with no frame kind set");
  DataLoss("a ReadChunk whose frame kind (field " + std::to_string(unknown.field(0).number()) +
           ") this client does not know");
}

// ---- The same-host data path ------------------------------------------------

// Whether tdstored answered that it does not hold the call's region (it
// restarted, or the lending connection broke): nothing was applied, and
// the call is made again with a new region or over the socket.
bool ShmRegionUnknown(const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find(kShmMetadataKey);
  return it != trailers.end() && it->second == kShmUnknownRegion;
}

// Whether a call that ended with `status` may still have a handler in
// tdstored using its span: it ended without tdstored's answer (a deadline,
// a cancel, a broken connection), so the span must never be reused.
bool HandlerMayStillRun(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::DATA_LOSS:
      return true;
    default:
      return false;
  }
}

// After a call that used `arena`: whether to make it again without it.
// Retires the arena when tdstored no longer holds it or may still use the
// call's span (shm_arena.h).
bool AfterShmCall(const Client::Impl& impl, const ShmArena* arena, const grpc::Status& status,
                  const grpc::ClientContext& context) {
  if (arena == nullptr || status.ok()) return false;
  if (ShmRegionUnknown(context)) {
    // Still lent (its connection open), yet unknown to the tdstored that
    // answered: the socket ServerInfo named belongs to another tdstored
    // (a misconfigured --shm-socket). Lending again would only repeat this.
    impl.RetireSharedMemory(arena, /*back_off=*/arena->alive());
    return true;
  }
  if (HandlerMayStillRun(status)) impl.RetireSharedMemory(arena);
  return false;
}

// Where each leaf's bytes go in a write's span: one after another, each on
// a cache line.
std::vector<int64_t> ShmLayout(const std::vector<LeafData>& leaves, int64_t* total) {
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (const LeafData& leaf : leaves) {
    offsets.push_back(at);
    at += (leaf.byte_size + 63) & ~int64_t{63};
  }
  *total = at;
  return offsets;
}

// ---- WriteLeaves ------------------------------------------------------------

// Rejects what cannot go on the wire before any stream is opened, so a bad
// leaf anywhere in an update costs no bytes sent.
v1::DType CheckWritable(const LeafData& leaf) {
  const v1::DType dtype = ToProtoDType(leaf.dtype, leaf.path);
  const int64_t expected = ByteSize(leaf.path, leaf.dtype, leaf.shape);
  if (leaf.byte_size != expected) {
    throw Error(StatusCode::kInvalidArgument,
                "leaf '" + leaf.path.str() + "' has " + std::to_string(leaf.byte_size) +
                    " bytes but its shape and dtype make " + std::to_string(expected));
  }
  if (leaf.data == nullptr && leaf.byte_size > 0) {
    throw Error(StatusCode::kInvalidArgument, "leaf '" + leaf.path.str() + "' has no data");
  }
  return dtype;
}

// The header that announces `leaf` (of wire dtype `dtype`) in a write.
void FillHeader(const LeafData& leaf, v1::DType dtype, v1::LeafHeader* header) {
  header->Clear();
  ToProto(leaf.path, header->mutable_path());
  header->set_dtype(dtype);
  header->mutable_shape()->Assign(leaf.shape.begin(), leaf.shape.end());
  header->set_byte_size(leaf.byte_size);
  header->set_kind(static_cast<v1::LeafKind>(leaf.kind));
  header->set_value(leaf.value);
}

// A WriteLeaves or WriteLeavesShared call that is cancelled if it is left
// before Finish (an exception while preparing a tensor), so the server
// commits nothing.
struct WriteStream {
  grpc::ClientContext context;
  v1::WriteLeavesResponse response;
  // Raw frames: a leaf's bytes go from the caller's memory to the socket
  // without a copy into a WriteChunk (tdstore/v1/data_frames.h).
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer;
  // Or WriteLeavesShared, whose answers release shm_data chunks.
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, v1::WriteProgress>> shared;
  bool finished = false;

  // For `shared`, every answer must have been read first.
  grpc::Status Finish() {
    finished = true;
    return writer ? writer->Finish() : shared->Finish();
  }
  ~WriteStream() {
    if (finished) return;
    if (writer) {
      context.TryCancel();
      writer->Finish();
    } else if (shared) {
      context.TryCancel();
      v1::WriteProgress ignored;
      while (shared->Read(&ignored)) {
      }
      shared->Finish();
    }
  }
};

// A write too large for one span of the region streams through a ring of
// kRingSlots spans instead (WriteLeavesShared): each shm_data chunk fills
// one, which is reused once tdstored released the chunk before it. Four
// keep the client copying while tdstored sends; 4 MiB each keep the pages
// touched (the client's and tdstored's RSS) at 16 MiB whatever the write.
constexpr int64_t kRingSlots = 4;
constexpr int64_t kRingSlotBytes = int64_t{4} << 20;
constexpr int64_t kMinRingSlotBytes = int64_t{256} << 10;

// A ring for a write that did not fit one span: up to kRingSlots slots of
// kRingSlotBytes, from the longest free run but at most half the region
// (reads and smaller writes keep the rest). Empty when too little is free.
ShmArena::Span TakeRing(ShmArena& arena) {
  const size_t most = std::min<size_t>(arena.size() / 2, kRingSlots * kRingSlotBytes);
  ShmArena::Span ring = arena.TakeUpTo(most);
  if (ring && ring.size() / kRingSlots < kMinRingSlotBytes) return ShmArena::Span();
  return ring;
}

// How many pieces a leaf of `bytes` copied into one span goes in, when
// tdstored takes lent shm_data chunks: each of at least kLentPieceBytes,
// at most kMaxLentPieces. Why pieces: tdstored sends each on to Redis
// while the client copies the next, where one piece would leave the copy
// and the send one after the other. Measured on 2 cores (a probe of a
// copy overlapped with a loopback send of 2.5 MiB): 4 pieces took 0.56 ms,
// 1 took 0.86, 16 took 0.57-0.91 (each piece is a message and a wake-up).
constexpr int64_t kLentPieceBytes = int64_t{512} << 10;
constexpr int64_t kMaxLentPieces = 4;
int64_t LentPieces(int64_t bytes) {
  return std::min(kMaxLentPieces, bytes / kLentPieceBytes);
}

// Why cork: a client-streaming or bidi call built by gRPC's sync API sends
// its headers at once, in a write of their own, and waits for it. That
// write wakes tdstored's poller for a call it cannot act on until the first
// message comes, and each wake-up costs tens of microseconds of both
// processes on a small VM. Corked, the headers go out with the first
// message, in one write. Every call corked here writes its first message
// before it reads: a read first would wait for an answer to a call tdstored
// has not yet seen.
void CorkHeaders(grpc::ClientContext& context) { context.set_initial_metadata_corked(true); }

// ---- ReadLeaves -------------------------------------------------------------

// A ReadLeaves or ReadLeavesShared call that is cancelled and drained if
// it is left early (a malformed stream, a nested path in get()).
struct ReadStream {
  grpc::ClientContext context;
  // Raw frames: a data chunk's bytes are copied once, from gRPC's slices
  // straight into the sink's memory, instead of into a ReadChunk first
  // (tdstore/v1/data_frames.h).
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader;
  // Or ReadLeavesShared, to which each shm_data chunk is released.
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> shared;
  bool finished = false;

  bool Read(grpc::ByteBuffer* frame) { return reader ? reader->Read(frame) : shared->Read(frame); }
  grpc::Status Finish() {
    finished = true;
    if (reader) return reader->Finish();
    shared->WritesDone();
    return shared->Finish();
  }
  ~ReadStream() {
    if (finished || (!reader && !shared)) return;
    context.TryCancel();
    grpc::ByteBuffer ignored;
    while (Read(&ignored)) {
    }
    if (reader) {
      reader->Finish();
    } else {
      shared->Finish();
    }
  }
};

// A request message must fit the protocol's 4 MiB; only an index (many
// positions) can make it that big.
void CheckRequestSize(const google::protobuf::Message& message) {
  const size_t bytes = message.ByteSizeLong();
  if (bytes > static_cast<size_t>(kMaxRequestBytes)) {
    throw Error(StatusCode::kInvalidArgument,
                "the index is too large for one request (" + std::to_string(bytes) +
                    " bytes encoded, the protocol allows 4 MiB): split it into several calls");
  }
}

[[noreturn]] void NestedDict(const std::string& dict, const Key& path) {
  throw Error(StatusCode::kInvalidArgument,
              "'" + path.str() + "' in dict '" + dict +
                  "' is a nested dict, not a leaf: use get_many to read the leaves under it");
}

// The leaf a header announces, checked: its byte count must be what its
// shape and dtype make.
LeafMeta HeaderMeta(const v1::LeafHeader& header) {
  LeafMeta leaf = FromProto(header);
  int64_t bytes = 0;
  try {
    bytes = ByteSize(leaf.path, leaf.dtype, leaf.shape);
  } catch (const Error&) {
    DataLoss("leaf '" + leaf.path.str() + "' has an invalid shape");
  }
  if (bytes != leaf.byte_size) {
    DataLoss("leaf '" + leaf.path.str() + "' announces " + std::to_string(leaf.byte_size) +
             " bytes but its shape and dtype make " + std::to_string(bytes));
  }
  return leaf;
}

// Seen leaves of one read attempt, by path: a stream that sends a leaf twice
// does not add up. Small (a read's leaves), so a vector is enough.
bool SeenBefore(std::vector<Key>& seen, const Key& path) {
  if (std::find(seen.begin(), seen.end(), path) != seen.end()) return true;
  seen.push_back(path);
  return false;
}

// One attempt at a read. Returns the server's final status, having fed the
// sink when it is OK; throws for a stream that does not add up.
// `reply`: the span offered in request.shm_reply, if any. `through_ring`:
// as ReadLeavesShared, whose shm_data chunks are copied out of the reply
// span and released one by one, in order, each right after its copy.
grpc::Status ReadOnce(const Client::Impl& impl, const v1::ReadLeavesRequest& request,
                      const ReadOptions& options, ReadStream& stream, ReadSink& sink,
                      const ShmArena::Span& reply, bool through_ring) {
  if (through_ring) {
    // Corked: the call's headers go with its first message (CorkHeaders).
    CorkHeaders(stream.context);
    stream.shared.reset(
        grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
            impl.channel.get(), *impl.read_leaves_shared_raw, &stream.context));
    v1::ReadSharedRequest first;
    *first.mutable_request() = request;
    // A refused write means the call already ended: Read and Finish say how.
    stream.shared->Write(wire::MessageFrame(first));
  } else {
    stream.reader.reset(grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
        impl.channel.get(), *impl.read_leaves_raw, &stream.context, request));
  }
  const Key* exact_leaf = options.exact_leaf;

  // The next frame: its data pieces if it is a data chunk, else parsed.
  grpc::ByteBuffer frame;
  std::vector<grpc::Slice> slices;
  std::optional<std::vector<std::string_view>> pieces;
  v1::ReadChunk chunk;
  auto next = [&]() -> bool {
    if (!stream.Read(&frame)) return false;
    chunk.Clear();
    slices.clear();
    if (!frame.Dump(&slices).ok()) DataLoss("a frame that cannot be read");
    pieces = wire::DataPieces(slices);
    if (pieces) return true;
    if (!grpc::SerializationTraits<v1::ReadChunk>::Deserialize(&frame, &chunk).ok()) {
      DataLoss("a frame that does not parse as a ReadChunk");
    }
    return true;
  };

  // No message at all: the request failed (unknown dict or path, ...).
  if (!next()) return stream.Finish();
  // A small read is one SmallRead: the begin and every leaf, whole.
  const bool small = !pieces && chunk.kind_case() == v1::ReadChunk::kSmall;
  if (!pieces && chunk.kind_case() == v1::ReadChunk::KIND_NOT_SET) UnknownFrame(chunk);
  if (pieces || (chunk.kind_case() != v1::ReadChunk::kBegin && !small)) {
    DataLoss("it does not start with ReadBegin");
  }
  const v1::ReadBegin& begin = small ? chunk.small().begin() : chunk.begin();
  const int64_t leaf_count = begin.leaf_count();
  if (exact_leaf != nullptr && leaf_count > 1) NestedDict(request.dict(), *exact_leaf);
  sink.Begin(FromProto(begin.batch_shape()), leaf_count);

  // The leaf being received: its path, bytes expected and bytes so far.
  std::vector<Key> seen;
  Key path{std::vector<std::string>{}};
  char* data = nullptr;
  int64_t expected = -1;
  int64_t received = 0;
  int64_t moved = 0;  // all leaves, for progress
  int64_t released = 0;  // shm_data chunks copied out
  auto check_complete = [&] {
    if (expected >= 0 && received != expected) {
      DataLoss("leaf '" + path.str() + "' ended after " + std::to_string(received) + " of " +
               std::to_string(expected) + " bytes");
    }
  };

  // A new leaf: its memory from the sink.
  auto on_header = [&](const v1::LeafHeader& header) {
    check_complete();
    LeafMeta leaf = HeaderMeta(header);
    path = leaf.path;
    if (exact_leaf != nullptr && !(path == *exact_leaf)) NestedDict(request.dict(), *exact_leaf);
    if (SeenBefore(seen, path)) DataLoss("leaf '" + path.str() + "' sent twice");
    data = static_cast<char*>(sink.Leaf(leaf));
    if (data == nullptr && leaf.byte_size > 0) {
      throw Error(StatusCode::kInternal, "the read's sink gave no memory for leaf '" +
                                             path.str() + "'");
    }
    expected = leaf.byte_size;
    received = 0;
  };
  // Bytes of the current leaf, into place.
  auto on_data = [&](std::string_view bytes) {
    if (expected < 0) DataLoss("data before any leaf header");
    if (static_cast<int64_t>(bytes.size()) > expected - received) {
      DataLoss("leaf '" + path.str() + "' has more than the " + std::to_string(expected) +
               " bytes its header announced");
    }
    PrefaultForWrite(data + received, bytes.size());  // prefault.h says why
    std::memcpy(data + received, bytes.data(), bytes.size());
    received += static_cast<int64_t>(bytes.size());
    moved += static_cast<int64_t>(bytes.size());
  };

  // A leaf's bytes in the reply span: checked to lie inside it (the
  // header's byte count is checked by on_data).
  auto shm_bytes = [&](const v1::ShmSpan& span) -> std::string_view {
    if (!reply || span.region() != reply.arena().token() || span.offset() < reply.offset() ||
        span.length() < 0 || span.offset() - reply.offset() > reply.size() ||
        span.length() > reply.size() - (span.offset() - reply.offset())) {
      DataLoss("leaf '" + path.str() + "' names shared memory outside the span offered");
    }
    return std::string_view(reply.data() + (span.offset() - reply.offset()),
                            static_cast<size_t>(span.length()));
  };
  if (small) {
    for (const v1::WholeLeaf& leaf : chunk.small().leaves()) {
      on_header(leaf.header());
      on_data(leaf.has_shm() ? shm_bytes(leaf.shm()) : std::string_view(leaf.data()));
    }
    if (options.progress) options.progress(moved, -1);
    if (next()) DataLoss("a message after a SmallRead");
  }
  while (!small && next()) {
    if (pieces) {
      for (std::string_view bytes : *pieces) on_data(bytes);
      if (options.progress) options.progress(moved, -1);
      continue;
    }
    switch (chunk.kind_case()) {
      case v1::ReadChunk::kHeader:
        on_header(chunk.header());
        break;
      case v1::ReadChunk::kData:
        on_data(chunk.data());
        if (options.progress) options.progress(moved, -1);
        break;
      case v1::ReadChunk::kShmData: {
        if (!stream.shared) DataLoss("a shm_data chunk on ReadLeaves");
        on_data(shm_bytes(chunk.shm_data()));
        // Copied out: tdstored may fill its slot again, at once (before
        // the progress callback, which may be slow). A refused write means
        // the call ended; the status says how.
        v1::ReadSharedRequest release;
        release.set_chunks_released(++released);
        stream.shared->Write(wire::MessageFrame(release));
        if (options.progress) options.progress(moved, -1);
        break;
      }
      case v1::ReadChunk::kBegin:
      case v1::ReadChunk::kSmall:
        DataLoss("a second ReadBegin");
      case v1::ReadChunk::KIND_NOT_SET:
        UnknownFrame(chunk);
    }
  }
  grpc::Status status = stream.Finish();
  if (!status.ok()) return status;
  check_complete();
  if (static_cast<int64_t>(seen.size()) != leaf_count) {
    DataLoss(std::to_string(seen.size()) + " leaves received, " + std::to_string(leaf_count) +
             " announced");
  }
  return status;
}

// One attempt at a write; returns the server's final status. With a
// `span` (of the leaves' ShmLayout size), the leaves' bytes are copied into
// it and the write is one SmallWrite that names them; or, for one large
// leaf and a tdstored that takes lent shm_data chunks (`lent_chunks`),
// copied and sent piece by piece (LentPieces).
grpc::Status WriteOnce(const Client::Impl& impl, const v1::WriteChunk& begin,
                       const std::vector<LeafData>& leaves, const std::vector<v1::DType>& dtypes,
                       const Progress& progress, WriteStream& stream,
                       const ShmArena::Span& span, bool lent_chunks) {
  const int64_t chunk_bytes = impl.options.chunk_bytes;
  CorkHeaders(stream.context);
  stream.writer.reset(grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
      impl.channel.get(), *impl.write_leaves_raw, &stream.context, &stream.response));
  // A failed Write means the server ended the call (unknown dict, bad
  // header, ...): its status says why.
  auto send = [&](const v1::WriteChunk& chunk) -> bool {
    return stream.writer->Write(wire::MessageFrame(chunk));
  };
  auto ended_early = [&] {
    grpc::Status status = stream.Finish();
    if (status.ok()) {
      status = grpc::Status(grpc::StatusCode::UNKNOWN, "tdstored closed the write stream early");
    }
    return status;
  };

  int64_t total = 0;
  for (const LeafData& leaf : leaves) total += leaf.byte_size;
  int64_t moved = 0;

  auto fill_header = [&](size_t i, v1::LeafHeader* header) {
    FillHeader(leaves[i], dtypes[i], header);
  };

  const int64_t pieces =
      span && lent_chunks && leaves.size() == 1 ? LentPieces(leaves[0].byte_size) : 1;
  if (pieces > 1) {
    // WriteBegin, the header, then the leaf's bytes copied into the span a
    // piece at a time, each sent once copied: tdstored passes each on to
    // Redis while the next is copied (leaf_writer.h, "Sent ahead"). The
    // span stays tdstored's until the call ends.
    const LeafData& leaf = leaves[0];
    v1::WriteChunk chunk;
    fill_header(0, chunk.mutable_header());
    const auto hint = grpc::WriteOptions().set_buffer_hint();
    if (!stream.writer->Write(wire::MessageFrame(begin), hint) ||
        !stream.writer->Write(wire::MessageFrame(chunk), hint)) {
      return ended_early();
    }
    const int64_t step = (leaf.byte_size + pieces - 1) / pieces;
    const char* data = static_cast<const char*>(leaf.data);
    for (int64_t offset = 0; offset < leaf.byte_size; offset += step) {
      const int64_t n = std::min(step, leaf.byte_size - offset);
      std::memcpy(span.data() + offset, data + offset, static_cast<size_t>(n));
      v1::ShmSpan* shm = chunk.mutable_shm_data();
      shm->set_region(span.arena().token());
      shm->set_offset(span.offset() + offset);
      shm->set_length(n);
      grpc::WriteOptions options;
      if (offset + n == leaf.byte_size) options.set_last_message();
      if (!stream.writer->Write(wire::MessageFrame(chunk), options)) return ended_early();
      moved += n;
      if (progress) progress(moved, total);
    }
    return stream.Finish();
  }

  if (span) {
    int64_t laid_out = 0;
    const std::vector<int64_t> offsets = ShmLayout(leaves, &laid_out);
    v1::WriteChunk small;
    *small.mutable_small()->mutable_begin() = begin.begin();
    for (size_t i = 0; i < leaves.size(); ++i) {
      v1::WholeLeaf* whole = small.mutable_small()->add_leaves();
      fill_header(i, whole->mutable_header());
      if (leaves[i].byte_size == 0) continue;
      std::memcpy(span.data() + offsets[i], leaves[i].data,
                  static_cast<size_t>(leaves[i].byte_size));
      v1::ShmSpan* shm = whole->mutable_shm();
      shm->set_region(span.arena().token());
      shm->set_offset(span.offset() + offsets[i]);
      shm->set_length(leaves[i].byte_size);
    }
    if (!stream.writer->Write(wire::MessageFrame(small), grpc::WriteOptions().set_last_message())) {
      return ended_early();
    }
    if (progress) progress(total, total);
    return stream.Finish();
  }

  if (total <= kMaxSmallStreamBytes) {
    // A small write is one SmallWrite, sent with the half-close: one
    // message instead of one per header and chunk. (Unless a huge index
    // and many headers would make that one message too big.)
    v1::WriteChunk small;
    *small.mutable_small()->mutable_begin() = begin.begin();
    for (size_t i = 0; i < leaves.size(); ++i) {
      v1::WholeLeaf* whole = small.mutable_small()->add_leaves();
      fill_header(i, whole->mutable_header());
      whole->set_data(static_cast<const char*>(leaves[i].data),
                      static_cast<size_t>(leaves[i].byte_size));
    }
    if (small.ByteSizeLong() <= static_cast<size_t>(kMaxMessageBytes)) {
      if (!stream.writer->Write(wire::MessageFrame(small),
                                grpc::WriteOptions().set_last_message())) {
        return ended_early();
      }
      if (progress) progress(total, total);
      return stream.Finish();
    }
  }

  if (!send(begin)) return ended_early();
  v1::WriteChunk chunk;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const LeafData& leaf = leaves[i];
    fill_header(i, chunk.mutable_header());
    if (!send(chunk)) return ended_early();

    // Chunks are slices of the caller's memory, not copied: it stays valid
    // until WriteLeaves returns, after the call (and gRPC's use of them)
    // has ended.
    const char* data = static_cast<const char*>(leaf.data);
    for (int64_t offset = 0; offset < leaf.byte_size; offset += chunk_bytes) {
      const int64_t n = std::min(chunk_bytes, leaf.byte_size - offset);
      std::string_view bytes(data + offset, static_cast<size_t>(n));
      if (!stream.writer->Write(wire::DataFrame(bytes, nullptr))) return ended_early();
      moved += n;
      if (progress) progress(moved, total);
    }
  }
  stream.writer->WritesDone();
  return stream.Finish();
}

// One attempt at a write through `ring` (TakeRing): WriteBegin, then per
// leaf its header and its bytes as shm_data chunks of at most a slot each,
// each chunk copied into the next slot once tdstored released the chunk
// that slot held before (WriteLeavesShared's answers come in order, one per
// chunk). Returns the server's final status.
grpc::Status WriteShared(const Client::Impl& impl, const v1::WriteChunk& begin,
                         const std::vector<LeafData>& leaves, const std::vector<v1::DType>& dtypes,
                         const Progress& progress, WriteStream& stream,
                         const ShmArena::Span& ring) {
  CorkHeaders(stream.context);
  stream.shared.reset(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, v1::WriteProgress>::Create(
          impl.channel.get(), *impl.write_leaves_shared_raw, &stream.context));
  v1::WriteProgress answer;
  bool answered = false;
  // After the last chunk, or when tdstored ended the call early (a Write or
  // a Read failed): every answer left is read, then the status.
  auto finish = [&] {
    while (stream.shared->Read(&answer)) {
      if (answer.has_done()) {
        stream.response = std::move(*answer.mutable_done());
        answered = true;
      }
    }
    grpc::Status status = stream.Finish();
    if (status.ok() && !answered) {
      status = grpc::Status(grpc::StatusCode::DATA_LOSS,
                            "tdstored ended a shared-memory write without its response");
    }
    return status;
  };
  const int64_t slot_bytes = (ring.size() / kRingSlots) & ~int64_t{63};
  int64_t sent = 0;      // shm_data chunks sent
  int64_t released = 0;  // and released by tdstored
  int64_t total = 0;
  for (const LeafData& leaf : leaves) total += leaf.byte_size;
  int64_t moved = 0;

  if (!stream.shared->Write(wire::MessageFrame(begin))) return finish();
  v1::WriteChunk chunk;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const LeafData& leaf = leaves[i];
    FillHeader(leaf, dtypes[i], chunk.mutable_header());
    if (!stream.shared->Write(wire::MessageFrame(chunk))) return finish();
    const char* data = static_cast<const char*>(leaf.data);
    for (int64_t offset = 0; offset < leaf.byte_size; offset += slot_bytes) {
      // The slot is free once its last chunk is released. Why wait here
      // rather than copy ahead: tdstored may still be sending that chunk's
      // bytes to Redis straight from the slot.
      while (sent - released >= kRingSlots) {
        if (!stream.shared->Read(&answer)) return finish();
        if (answer.has_done() || answer.chunks_released() != released + 1) {
          return grpc::Status(grpc::StatusCode::DATA_LOSS,
                              "tdstored released shared-memory chunk " +
                                  std::to_string(answer.chunks_released()) + " after " +
                                  std::to_string(released) + " of " + std::to_string(sent));
        }
        released = answer.chunks_released();
      }
      const int64_t n = std::min(slot_bytes, leaf.byte_size - offset);
      const int64_t at = (sent % kRingSlots) * slot_bytes;
      std::memcpy(ring.data() + at, data + offset, static_cast<size_t>(n));
      v1::ShmSpan* span = chunk.mutable_shm_data();
      span->set_region(ring.arena().token());
      span->set_offset(ring.offset() + at);
      span->set_length(n);
      if (!stream.shared->Write(wire::MessageFrame(chunk))) return finish();
      ++sent;
      moved += n;
      if (progress) progress(moved, total);
    }
  }
  stream.shared->WritesDone();
  return finish();
}

}  // namespace

v1::WriteLeavesResponse WriteLeaves(const Client::Impl& impl, const std::string& dict,
                                    const std::string& dict_id,
                                    const std::vector<LeafData>& leaves,
                                    const WriteOptions& options, const RingAppend* ring,
                                    const CountAfter* count) {
  std::vector<v1::DType> dtypes;
  dtypes.reserve(leaves.size());
  for (const LeafData& leaf : leaves) dtypes.push_back(CheckWritable(leaf));

  v1::WriteChunk begin;
  begin.mutable_begin()->set_dict(dict);
  begin.mutable_begin()->set_dict_id(dict_id);
  begin.mutable_begin()->set_leaf_count(static_cast<int32_t>(leaves.size()));
  if (options.index != nullptr) ToProto(*options.index, begin.mutable_begin()->mutable_index());
  if (ring != nullptr) {
    if (options.index != nullptr) {
      throw Error(StatusCode::kInvalidArgument,
                  "a write names its rows by an index or by a ring, not both");
    }
    v1::RingAppend* r = begin.mutable_begin()->mutable_ring();
    r->set_cursor(ring->cursor);
    r->set_rows(ring->rows);
    r->set_count(ring->count);
  }
  begin.mutable_begin()->set_refuse_if_locked(options.refuse_if_locked);
  if (count != nullptr) {
    v1::CounterAdd* add = begin.mutable_begin()->mutable_count_after();
    add->set_counter(count->counter);
    add->set_add(count->add);
  }
  CheckRequestSize(begin);
  // Nothing to write is not worth a call (and has nothing to make visible);
  // the index above is still checked.
  if (leaves.empty()) return {};

  // Writing the same values again leaves the same state, so a write that
  // failed UNAVAILABLE (whatever it did) is simply sent again. A ring
  // append is not (it reserves rows each time), nor a counted write (it
  // adds to its counter each time).
  const Retrier::Safety safety = ring != nullptr || count != nullptr
                                     ? Retrier::kOnlyIfNothingApplied
                                     : Retrier::kIdempotent;
  // Bytes past one small message go through shared memory when the client
  // lent tdstored a region with room for them (shm_arena.h).
  int64_t laid_out = 0;
  int64_t total = 0;
  for (const LeafData& leaf : leaves) total += leaf.byte_size;
  ShmLayout(leaves, &laid_out);
  bool shm_ok = total > kMaxSmallStreamBytes;

  Retrier retry(impl.options);
  for (;;) {
    if (safety == Retrier::kOnlyIfNothingApplied) impl.AwaitConnected(retry);
    Client::Impl::ShmRings rings;
    std::shared_ptr<ShmArena> arena = shm_ok ? impl.SharedMemory(&rings) : nullptr;
    ShmArena::Span span = arena ? arena->Take(static_cast<size_t>(laid_out)) : ShmArena::Span();
    // Too large for one span (or the region is busy): a ring of spans.
    ShmArena::Span ring = arena && !span && rings.write ? TakeRing(*arena) : ShmArena::Span();
    if (!span && !ring) arena = nullptr;
    WriteStream stream;
    impl.Prepare(&stream.context, retry.deadline());
    grpc::Status status =
        ring ? WriteShared(impl, begin, leaves, dtypes, options.progress, stream, ring)
             : WriteOnce(impl, begin, leaves, dtypes, options.progress, stream, span,
                         rings.lent_chunks);
    if (stream.finished) RaiseSchemaFloor(impl.address, stream.context);
    if (status.ok()) return std::move(stream.response);
    if (ring && status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      // tdstored was replaced since the region was lent, by one without
      // WriteLeavesShared: the method never ran, so nothing applied. Once
      // more over the socket; the next lend asks what the new one takes.
      impl.RetireSharedMemory(arena.get());
      shm_ok = false;
      continue;
    }
    if (AfterShmCall(impl, arena.get(), status, stream.context)) {
      shm_ok = false;  // nothing applied: once more, over the socket
      continue;
    }
    if (!retry.Again(status, safety, stream.context)) impl.Fail(status);
  }
}

void ReadLeaves(const Client::Impl& impl, const std::string& dict, const std::string& dict_id,
                const std::vector<Key>& paths, ReadSink& sink, const ReadOptions& options,
                int64_t expected_bytes) {
  v1::ReadLeavesRequest request;
  request.set_dict(dict);
  request.set_dict_id(dict_id);
  request.add_accepts(v1::FRAME_SMALL_READ);  // ReadOnce reads one
  for (const Key& path : paths) ToProto(path, request.add_paths());
  if (options.index != nullptr) {
    ToProto(*options.index, request.mutable_index());
    CheckRequestSize(request);
  }

  bool shm_ok = true;
  Retrier retry(impl.options);
  for (int aborted = 0;;) {
    // A reply span: the longest free run of the arena, up to half of it,
    // so that concurrent reads (read-ahead) each find room. Not worth it
    // below what one small message carries.
    Client::Impl::ShmRings rings;
    std::shared_ptr<ShmArena> arena = shm_ok ? impl.SharedMemory(&rings) : nullptr;
    ShmArena::Span reply = arena ? arena->TakeUpTo(arena->size() / 2) : ShmArena::Span();
    if (reply && reply.size() <= kMaxSmallStreamBytes) reply = ShmArena::Span();
    if (!reply) arena = nullptr;
    // A reply expected not to fit the span streams through a ring cut from
    // it. Only then: ReadLeavesShared is served on the sync API, one thread
    // hand-off more than ReadLeaves for a small read (read_leaves_reactor.h).
    const bool through_ring =
        reply && rings.read && expected_bytes > static_cast<int64_t>(reply.size());
    if (reply) {
      v1::ShmSpan* span = request.mutable_shm_reply();
      span->set_region(reply.arena().token());
      span->set_offset(reply.offset());
      span->set_length(reply.size());
    } else {
      request.clear_shm_reply();
    }
    ReadStream stream;
    impl.Prepare(&stream.context, retry.deadline());
    grpc::Status status;
    try {
      status = ReadOnce(impl, request, options, stream, sink, reply, through_ring);
    } catch (...) {
      // Left mid-stream (a reply that does not add up, a nested path in
      // get(), the sink or the progress callback throwing): a ring's
      // handler may still be filling slots after the cancel, so the span
      // must never be reused, as after any call without an answer.
      if (through_ring && !stream.finished) impl.RetireSharedMemory(arena.get());
      throw;
    }
    if (stream.finished) RaiseSchemaFloor(impl.address, stream.context);
    if (status.ok()) return;
    if (through_ring && status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      // As for a write's ring (WriteLeaves): tdstored was replaced by one
      // without ReadLeavesShared. Once more over the socket.
      impl.RetireSharedMemory(arena.get());
      shm_ok = false;
      continue;
    }
    if (AfterShmCall(impl, arena.get(), status, stream.context)) {
      shm_ok = false;  // nothing was read: once more, over the socket
      continue;
    }
    // ABORTED: a leaf was replaced while it streamed; a new attempt reads the
    // new generation whole. The first few at once; then with backoff within
    // the retry window, so a many-leaf read still finishes while some of its
    // leaves are replaced several times a second.
    if (status.error_code() == grpc::StatusCode::ABORTED) {
      if (aborted++ < kReadRetries || retry.Backoff()) continue;
      impl.Fail(status);
    }
    // UNAVAILABLE: tdstored or Redis briefly unreachable; reads are safe to
    // repeat.
    if (!retry.Again(status, Retrier::kIdempotent, stream.context)) impl.Fail(status);
  }
}

}  // namespace tdstore::core
