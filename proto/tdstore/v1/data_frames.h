// ReadChunk messages as raw gRPC frames, so that a leaf's bytes cross
// tdstored and the client without protobuf copies.
//
// Why: with generated stubs, every data chunk is copied into a protobuf
// string (set_data) and again into gRPC's slices (serialization) by its
// sender, and again out of the slices (parsing) by its receiver. A frame
// built here is byte-for-byte the protobuf encoding of the same ReadChunk,
// so any protobuf reader parses it; only the copies go:
//
//   DataFrame:     [key of ReadChunk.data][varint length] + the bytes, the
//                  latter a slice that points at the caller's buffer;
//   DataPieces:    the reverse, views into the received slices.
//
// Thread-safe (pure functions); the frames themselves are not shared.
#ifndef TDSTORE_PROTO_TDSTORE_V1_DATA_FRAMES_H_
#define TDSTORE_PROTO_TDSTORE_V1_DATA_FRAMES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace tdstore::wire {

// The ReadChunk {data: bytes}, which is also the WriteChunk {data: bytes},
// without copying `bytes`: the frame keeps `owner` (whatever keeps `bytes`
// alive; null if the caller guarantees that itself) until gRPC has sent
// them, which may be a little after the Write that took the frame returns.
grpc::ByteBuffer DataFrame(std::string_view bytes, std::shared_ptr<const void> owner);

// Any message, serialized the usual way (one copy; for small messages).
grpc::ByteBuffer MessageFrame(const google::protobuf::MessageLite& message);

// If the frame in `slices` (grpc::ByteBuffer::Dump) is a ReadChunk holding
// only data, returns views of that data in order, pointing into `slices`
// (valid while they live). Otherwise (a header, ReadBegin, or any encoding
// this does not recognise) nullopt: parse the frame as a protobuf instead.
std::optional<std::vector<std::string_view>> DataPieces(const std::vector<grpc::Slice>& slices);

}  // namespace tdstore::wire

#endif  // TDSTORE_PROTO_TDSTORE_V1_DATA_FRAMES_H_
