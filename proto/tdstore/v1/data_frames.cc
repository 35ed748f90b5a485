#include "tdstore/v1/data_frames.h"

#include <string>

#include "tdstore/v1/tdstore.pb.h"

namespace tdstore::wire {

namespace {

// The key protobuf writes before ReadChunk.data: field number and wire type
// 2 (length-delimited). Derived from the generated code, so it follows the
// .proto if the field is ever renumbered.
constexpr uint8_t kDataKey = (v1::ReadChunk::kDataFieldNumber << 3) | 2;
static_assert(v1::ReadChunk::kDataFieldNumber < 16, "the data key must fit one byte");
static_assert(static_cast<int>(v1::WriteChunk::kDataFieldNumber) ==
                  static_cast<int>(v1::ReadChunk::kDataFieldNumber),
              "one data frame serves both streams");

void ReleaseOwner(void* holder) { delete static_cast<std::shared_ptr<const void>*>(holder); }

}  // namespace

grpc::ByteBuffer DataFrame(std::string_view bytes, std::shared_ptr<const void> owner) {
  // Key and base-128 length: at most 11 bytes.
  uint8_t head[16];
  size_t n = 0;
  head[n++] = kDataKey;
  for (uint64_t len = bytes.size();; len >>= 7) {
    if (len < 0x80) {
      head[n++] = static_cast<uint8_t>(len);
      break;
    }
    head[n++] = static_cast<uint8_t>(len & 0x7f) | 0x80;
  }
  grpc::Slice slices[2] = {grpc::Slice(head, n), grpc::Slice()};
  size_t count = 1;
  if (!bytes.empty()) {
    // gRPC never writes through a slice it sends; the cast is for its C API.
    slices[1] = grpc::Slice(const_cast<char*>(bytes.data()), bytes.size(), &ReleaseOwner,
                            new std::shared_ptr<const void>(std::move(owner)));
    count = 2;
  }
  return grpc::ByteBuffer(slices, count);
}

grpc::ByteBuffer MessageFrame(const google::protobuf::MessageLite& message) {
  std::string bytes = message.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::optional<std::vector<std::string_view>> DataPieces(const std::vector<grpc::Slice>& slices) {
  size_t total = 0;
  for (const grpc::Slice& s : slices) total += s.size();
  // Walks the frame's first bytes, which may (rarely) span slices.
  size_t slice = 0, at = 0;
  auto next_byte = [&]() -> std::optional<uint8_t> {
    while (slice < slices.size() && at == slices[slice].size()) ++slice, at = 0;
    if (slice == slices.size()) return std::nullopt;
    return slices[slice].begin()[at++];
  };
  auto key = next_byte();
  if (!key || *key != kDataKey) return std::nullopt;
  uint64_t len = 0;
  size_t head = 1;
  for (int shift = 0;; shift += 7) {
    auto b = next_byte();
    if (!b || shift > 63) return std::nullopt;
    ++head;
    len |= static_cast<uint64_t>(*b & 0x7f) << shift;
    if ((*b & 0x80) == 0) break;
  }
  // Anything after the data (another field) is left to the protobuf parser.
  if (len != total - head) return std::nullopt;
  std::vector<std::string_view> pieces;
  for (; slice < slices.size(); ++slice, at = 0) {
    const grpc::Slice& s = slices[slice];
    if (at < s.size()) {
      pieces.emplace_back(reinterpret_cast<const char*>(s.begin()) + at, s.size() - at);
    }
  }
  return pieces;
}

}  // namespace tdstore::wire
