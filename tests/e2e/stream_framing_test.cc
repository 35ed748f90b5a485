// The data streams' framing (docs/protocol.md, *Stream framing*) through a
// real tdstored: a small call in one message (SmallWrite / SmallRead), the
// raw data frames, and the refusals of a malformed stream, each of which
// leaves the dict as it was.
#include <ATen/ATen.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/protocol_limits.h"
#include "tdstore/client.h"
#include "tdstore/v1/tdstore.grpc.pb.h"
#include "tests/e2e/e2e_env.h"

namespace tdstore::testing {
namespace {

std::unique_ptr<v1::TdStore::Stub> Stub() {
  return v1::TdStore::NewStub(
      grpc::CreateChannel(DaemonAddress(), grpc::InsecureChannelCredentials()));
}

v1::LeafHeader Header(const std::string& name, int64_t floats) {
  v1::LeafHeader h;
  h.mutable_path()->add_components(name);
  h.set_dtype(v1::FLOAT32);
  h.add_shape(4);
  h.add_shape(floats / 4);
  h.set_byte_size(floats * 4);
  return h;
}

// Writes `chunks` as one WriteLeaves stream; the daemon's status.
grpc::Status WriteRaw(const std::vector<v1::WriteChunk>& chunks) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  v1::WriteLeavesResponse response;
  auto writer = stub->WriteLeaves(&ctx, &response);
  for (const v1::WriteChunk& c : chunks) {
    if (!writer->Write(c)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

// Every message of a ReadLeaves of `leaf`, as the wire carries them, to a
// client that accepts a SmallRead.
std::vector<v1::ReadChunk> ReadRaw(const std::string& dict, const std::string& leaf) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  v1::ReadLeavesRequest request;
  request.set_dict(dict);
  request.add_paths()->add_components(leaf);
  request.add_accepts(v1::FRAME_SMALL_READ);
  auto reader = stub->ReadLeaves(&ctx, request);
  std::vector<v1::ReadChunk> out;
  v1::ReadChunk chunk;
  while (reader->Read(&chunk)) out.push_back(chunk);
  EXPECT_TRUE(reader->Finish().ok());
  return out;
}

v1::WriteChunk SmallWrite(const std::string& dict, int leaf_count,
                          const std::vector<std::pair<v1::LeafHeader, std::string>>& leaves) {
  v1::WriteChunk chunk;
  v1::SmallWrite* small = chunk.mutable_small();
  small->mutable_begin()->set_dict(dict);
  small->mutable_begin()->set_leaf_count(leaf_count);
  for (const auto& [header, data] : leaves) {
    v1::WholeLeaf* leaf = small->add_leaves();
    *leaf->mutable_header() = header;
    leaf->set_data(data);
  }
  return chunk;
}

std::string Floats(int64_t n, uint32_t seed) {
  std::string bytes(static_cast<size_t>(n * 4), '\0');
  std::mt19937 rng(seed);
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

std::string Bytes(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

class E2eFraming : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = UniqueDictName();
    td_ = client_.create(name_, {4});
  }
  // The dict's leaves and version, to prove a refusal changed nothing.
  std::pair<size_t, int64_t> State() {
    DictInfo info = client_.open(name_).describe();
    return {info.leaves.size(), info.version};
  }

  Client client_{DaemonAddress()};
  std::string name_;
  std::optional<Dict> td_;
};

TEST_F(E2eFraming, SmallWriteAndSmallReadAreOneMessageEach) {
  const std::string a = Floats(8, 1), b = Floats(4000, 2);
  ASSERT_TRUE(WriteRaw({SmallWrite(name_, 2, {{Header("a", 8), a}, {Header("b", 4000), b}})}).ok());
  EXPECT_EQ(Bytes(td_->get("a")), a);
  EXPECT_EQ(Bytes(td_->get("b")), b);

  std::vector<v1::ReadChunk> small = ReadRaw(name_, "b");
  ASSERT_EQ(small.size(), 1u);
  ASSERT_EQ(small[0].kind_case(), v1::ReadChunk::kSmall);
  EXPECT_EQ(small[0].small().begin().leaf_count(), 1);
  ASSERT_EQ(small[0].small().leaves_size(), 1);
  EXPECT_EQ(small[0].small().leaves(0).header().byte_size(), 16000);
  EXPECT_EQ(small[0].small().leaves(0).data(), b);

  // Past the small limit: begin, header, then data frames that any
  // protobuf reader parses, carrying the leaf's bytes in order.
  const int64_t floats = kMaxSmallStreamBytes / 4 + 4;
  td_->set("big", at::rand({4, floats / 4}));
  std::vector<v1::ReadChunk> big = ReadRaw(name_, "big");
  ASSERT_GE(big.size(), 3u);
  EXPECT_EQ(big[0].kind_case(), v1::ReadChunk::kBegin);
  EXPECT_EQ(big[1].kind_case(), v1::ReadChunk::kHeader);
  std::string joined;
  for (size_t i = 2; i < big.size(); ++i) {
    ASSERT_EQ(big[i].kind_case(), v1::ReadChunk::kData);
    joined += big[i].data();
  }
  EXPECT_EQ(joined, Bytes(td_->get("big")));
}

TEST_F(E2eFraming, RandomSizesAroundTheSmallLimitRoundTrip) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 30; ++trial) {
    // Whole leaves and indexed rows of sizes on both sides of 64 KiB.
    const int64_t cols = std::uniform_int_distribution<int64_t>(1, 2 * kMaxSmallStreamBytes / 16)(rng);
    const std::string key = "k" + std::to_string(trial % 3);
    at::Tensor value = at::rand({4, cols});
    td_->set(key, value);
    ASSERT_TRUE(at::equal(td_->get(key), value)) << cols;
    const int64_t row = std::uniform_int_distribution<int64_t>(0, 3)(rng);
    at::Tensor row_value = at::rand({cols});
    td_->set_index(Index(row), key, row_value);
    value[row] = row_value;
    LocalDict rows = td_->index(Index(Slice(row, 4)), {key});
    ASSERT_TRUE(at::equal(rows.at(key), value.slice(0, row))) << cols;
    ASSERT_TRUE(at::equal(td_->get(key), value)) << cols;
  }
}

TEST_F(E2eFraming, SmallWriteMustBeTheOnlyMessage) {
  td_->set("kept", at::ones({4, 2}));
  const auto before = State();
  v1::WriteChunk more;
  more.set_data(std::string(8, 'x'));
  grpc::Status s = WriteRaw({SmallWrite(name_, 1, {{Header("a", 8), Floats(8, 3)}}), more});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("only message"), std::string::npos) << s.error_message();
  EXPECT_EQ(State(), before);
  EXPECT_FALSE(td_->contains("a"));
}

TEST_F(E2eFraming, SmallWriteIsCheckedLikeTheMessagesItStandsFor) {
  td_->set("kept", at::ones({4, 2}));
  const auto before = State();
  struct Case {
    const char* what;
    v1::WriteChunk chunk;
    const char* says;
  };
  const int64_t over = kMaxSmallStreamBytes / 4 + 4;
  std::vector<Case> cases = {
      {"data short of its header", SmallWrite(name_, 1, {{Header("a", 8), Floats(4, 4)}}),
       "arrived"},
      {"more data than its header", SmallWrite(name_, 1, {{Header("a", 8), Floats(12, 4)}}),
       "more data"},
      {"fewer leaves than announced", SmallWrite(name_, 2, {{Header("a", 8), Floats(8, 4)}}),
       "announced 2 leaves"},
      {"a shape that does not fit the dict", SmallWrite(name_, 1, {{[] {
                                                                     v1::LeafHeader h = Header("a", 8);
                                                                     h.set_shape(0, 5);
                                                                     h.set_byte_size(5 * 2 * 4);
                                                                     return h;
                                                                   }(),
                                                                   Floats(10, 4)}}),
       "batch"},
      {"more than a small stream may carry",
       SmallWrite(name_, 1, {{Header("a", over), Floats(over, 5)}}), "exceeds"},
  };
  for (const Case& c : cases) {
    grpc::Status s = WriteRaw({c.chunk});
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.what;
    EXPECT_NE(s.error_message().find(c.says), std::string::npos) << c.what << ": " << s.error_message();
    EXPECT_EQ(State(), before) << c.what;
  }
  EXPECT_FALSE(td_->contains("a"));
}

// tdstored parses ReadLeaves' request itself (it is registered raw, on the
// callback API): bytes that are no ReadLeavesRequest are INVALID_ARGUMENT,
// with no frame sent, and the daemon serves the next read as before.
TEST_F(E2eFraming, AReadRequestThatDoesNotParseIsInvalidArgument) {
  td_->set("x", at::arange(8, at::kFloat).reshape({4, 2}));
  auto channel = grpc::CreateChannel(DaemonAddress(), grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  // Field 1 (dict) announced as 100 bytes long, 3 given; then a bare
  // end-group tag.
  for (const std::string& garbage : {std::string("\x0a\x64" "abc", 5), std::string("\x0c", 1)}) {
    grpc::ClientContext ctx;
    grpc::CompletionQueue cq;
    grpc::Slice slice(garbage);
    grpc::ByteBuffer request(&slice, 1);
    auto call = generic.PrepareCall(&ctx, "/tdstore.v1.TdStore/ReadLeaves", &cq);
    void* tag = nullptr;
    bool ok = false;
    call->StartCall(reinterpret_cast<void*>(1));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    call->Write(request, reinterpret_cast<void*>(2));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    call->WritesDone(reinterpret_cast<void*>(3));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    grpc::ByteBuffer response;
    call->Read(&response, reinterpret_cast<void*>(4));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_FALSE(ok) << "a frame was sent for a request that does not parse";
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(5));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  }
  EXPECT_TRUE(at::equal(client_.open(name_).get("x"), at::arange(8, at::kFloat).reshape({4, 2})));
}

TEST_F(E2eFraming, MalformedStreamsAreRefusedAndWriteNothing) {
  td_->set("kept", at::ones({4, 2}));
  const auto before = State();
  v1::WriteChunk begin;
  begin.mutable_begin()->set_dict(name_);
  v1::WriteChunk header;
  *header.mutable_header() = Header("a", 8);
  v1::WriteChunk data;
  data.set_data(Floats(8, 6));
  v1::WriteChunk small = SmallWrite(name_, 1, {{Header("a", 8), Floats(8, 6)}});
  struct Case {
    const char* what;
    std::vector<v1::WriteChunk> chunks;
    const char* says;
  };
  std::vector<Case> cases = {
      {"no WriteBegin first", {header, data}, "must start with WriteBegin"},
      {"a second WriteBegin", {begin, begin}, "only once"},
      {"data before any header", {begin, data}, "before any leaf header"},
      {"a SmallWrite after WriteBegin", {begin, small}, "only message"},
  };
  for (const Case& c : cases) {
    grpc::Status s = WriteRaw(c.chunks);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.what;
    EXPECT_NE(s.error_message().find(c.says), std::string::npos) << c.what << ": " << s.error_message();
    EXPECT_EQ(State(), before) << c.what;
  }
  EXPECT_FALSE(td_->contains("a"));
}

}  // namespace
}  // namespace tdstore::testing
