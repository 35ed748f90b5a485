// tdstore/v1/data_frames.h: the raw frames are the protobuf encoding of the
// same messages, both ways, for random sizes and random slice boundaries.
#include "tdstore/v1/data_frames.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tdstore/v1/tdstore.pb.h"

namespace tdstore::wire {
namespace {

std::string Flatten(const grpc::ByteBuffer& frame) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(frame.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// `bytes` cut into slices at random places (as gRPC's transport may).
std::vector<grpc::Slice> RandomSlices(const std::string& bytes, std::mt19937& rng) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  while (at < bytes.size()) {
    size_t n = std::uniform_int_distribution<size_t>(1, 1 + bytes.size() / 3)(rng);
    n = std::min(n, bytes.size() - at);
    slices.emplace_back(bytes.data() + at, n);
    at += n;
  }
  return slices;
}

std::string Joined(const std::vector<std::string_view>& pieces) {
  std::string out;
  for (std::string_view p : pieces) out.append(p);
  return out;
}

std::string RandomBytes(size_t n, std::mt19937& rng) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(DataFrames, DataFrameParsesAsReadAndWriteChunk) {
  std::mt19937 rng(7);
  const std::vector<size_t> sizes = {0, 1, 127, 128, 16383, 16384, 1 << 20};
  for (int trial = 0; trial < 40; ++trial) {
    const size_t n = trial < static_cast<int>(sizes.size())
                         ? sizes[trial]
                         : std::uniform_int_distribution<size_t>(0, 300000)(rng);
    const std::string bytes = RandomBytes(n, rng);
    const std::string wire = Flatten(DataFrame(bytes, nullptr));
    v1::ReadChunk read;
    ASSERT_TRUE(read.ParseFromString(wire)) << n;
    EXPECT_EQ(read.kind_case(), v1::ReadChunk::kData) << n;
    EXPECT_EQ(read.data(), bytes) << n;
    v1::WriteChunk write;
    ASSERT_TRUE(write.ParseFromString(wire)) << n;
    EXPECT_EQ(write.data(), bytes) << n;
    // And exactly what protobuf itself writes.
    EXPECT_EQ(wire, read.SerializeAsString()) << n;
  }
}

TEST(DataFrames, DataPiecesReadsProtobufDataAcrossAnySlices) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = std::uniform_int_distribution<size_t>(0, 70000)(rng);
    v1::ReadChunk chunk;
    chunk.set_data(RandomBytes(n, rng));
    const std::string wire = chunk.SerializeAsString();
    const std::vector<grpc::Slice> slices = RandomSlices(wire, rng);  // the pieces point here
    auto pieces = DataPieces(slices);
    ASSERT_TRUE(pieces.has_value()) << n;
    EXPECT_EQ(Joined(*pieces), chunk.data()) << n;
  }
}

TEST(DataFrames, DataPiecesLeavesEverythingElseToProtobuf) {
  std::mt19937 rng(3);
  v1::ReadChunk header;
  header.mutable_header()->set_byte_size(12);
  header.mutable_header()->mutable_path()->add_components("obs");
  v1::ReadChunk begin;
  begin.mutable_begin()->set_leaf_count(3);
  v1::ReadChunk data;
  data.set_data("abc");
  for (const std::string& wire :
       {header.SerializeAsString(), begin.SerializeAsString(),
        // data followed by another field: not a plain data frame
        data.SerializeAsString() + begin.SerializeAsString(),
        // truncated: the length says more than there is
        data.SerializeAsString().substr(0, 3), std::string()}) {
    EXPECT_FALSE(DataPieces(RandomSlices(wire, rng)).has_value());
  }
}

TEST(DataFrames, DataFrameHoldsItsOwnerUntilGrpcIsDone) {
  auto owner = std::make_shared<std::string>(100000, 'x');
  {
    grpc::ByteBuffer frame = DataFrame(*owner, owner);
    grpc::ByteBuffer copy = frame;  // as gRPC's send path does
    EXPECT_GT(owner.use_count(), 1);
    EXPECT_EQ(Flatten(copy).size(), owner->size() + 4);  // key + 3-byte length
  }
  EXPECT_EQ(owner.use_count(), 1);
}

}  // namespace
}  // namespace tdstore::wire
