// Wire compatibility (docs/protocol.md, "Compatibility"), through a real
// tdstored on both back ends.
//
// A client written from an earlier revision of tdstore.proto names no
// optional frame kind: it is spoken here with the generated stub and only
// the fields revision 1 had (no `accepts`, no SmallWrite), and must get the
// plain stream (ReadBegin, LeafHeader, data) for every read, small and
// large, whole and indexed, with bytes equal to today's client's. Its
// other RPCs must mean what they meant. A frame kind a receiver does not
// know is an error naming it, never an empty result: tdstored refuses such
// a write, and the core fails such a read (from a test server that sends
// one) with DATA_LOSS.
#include <ATen/ATen.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/protocol_revision.h"
#include "tdstore/client.h"
#include "tdstore/core.h"
#include "tdstore/v1/tdstore.grpc.pb.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/expect_error.h"

namespace tdstore::testing {
namespace {

std::unique_ptr<v1::TdStore::Stub> Stub() {
  return v1::TdStore::NewStub(
      grpc::CreateChannel(DaemonAddress(), grpc::InsecureChannelCredentials()));
}

std::string Bytes(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

v1::Path PathOf(const std::vector<std::string>& parts) {
  v1::Path p;
  for (const std::string& part : parts) p.add_components(part);
  return p;
}

// What a revision-1 client reads: leaf path -> bytes, and the batch shape,
// after checking that every frame is one revision 1 knew.
struct OldRead {
  std::vector<int64_t> batch_shape;
  std::vector<std::pair<std::string, std::string>> leaves;  // "a/b", bytes
  grpc::Status status;
};

OldRead ReadAsRevision1(const std::string& dict, const std::vector<std::string>& path,
                        const v1::Index* index = nullptr) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  v1::ReadLeavesRequest request;  // no `accepts`: revision 1 had none
  request.set_dict(dict);
  *request.add_paths() = PathOf(path);
  if (index != nullptr) *request.mutable_index() = *index;
  auto reader = stub->ReadLeaves(&ctx, request);
  OldRead out;
  v1::ReadChunk chunk;
  bool begun = false;
  while (reader->Read(&chunk)) {
    switch (chunk.kind_case()) {
      case v1::ReadChunk::kBegin:
        EXPECT_FALSE(begun) << "a second ReadBegin";
        begun = true;
        out.batch_shape.assign(chunk.begin().batch_shape().begin(),
                               chunk.begin().batch_shape().end());
        break;
      case v1::ReadChunk::kHeader: {
        std::string name;
        for (const std::string& c : chunk.header().path().components()) {
          name += (name.empty() ? "" : "/") + c;
        }
        out.leaves.emplace_back(name, "");
        break;
      }
      case v1::ReadChunk::kData:
        EXPECT_FALSE(out.leaves.empty()) << "data before a header";
        if (!out.leaves.empty()) out.leaves.back().second += chunk.data();
        break;
      default:
        ADD_FAILURE() << "a frame revision 1 does not know: kind " << chunk.kind_case();
    }
  }
  out.status = reader->Finish();
  EXPECT_TRUE(begun || !out.status.ok()) << "an OK read with no ReadBegin";
  return out;
}

// A whole-leaf write as revision 1 sends it: WriteBegin, then a header and
// its data chunks of at most 1 MiB.
grpc::Status WriteAsRevision1(const std::string& dict, const std::vector<std::string>& path,
                              const at::Tensor& value, v1::WriteLeavesResponse* response) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  auto writer = stub->WriteLeaves(&ctx, response);
  v1::WriteChunk begin;
  begin.mutable_begin()->set_dict(dict);
  begin.mutable_begin()->set_leaf_count(1);
  writer->Write(begin);
  const std::string bytes = Bytes(value);
  v1::WriteChunk header;
  *header.mutable_header()->mutable_path() = PathOf(path);
  header.mutable_header()->set_dtype(v1::FLOAT32);
  for (int64_t d : value.sizes()) header.mutable_header()->add_shape(d);
  header.mutable_header()->set_byte_size(static_cast<int64_t>(bytes.size()));
  writer->Write(header);
  for (size_t at = 0; at < bytes.size(); at += 1 << 20) {
    v1::WriteChunk data;
    data.set_data(bytes.substr(at, 1 << 20));
    writer->Write(data);
  }
  writer->WritesDone();
  return writer->Finish();
}

class E2eWireCompat : public ::testing::Test {
 protected:
  Client client_{DaemonAddress()};
};

TEST_F(E2eWireCompat, ARevision1ClientReadsSmallAndLargeLeavesBitExact) {
  const std::string name = UniqueDictName();
  Dict d = client_.create(name, {64});
  // 20 KB under a nested prefix (the read that came back empty), and 14 MB.
  const at::Tensor small = at::rand({64, 80});
  const at::Tensor large = at::rand({64, 56 * 1024});
  v1::WriteLeavesResponse written;
  ASSERT_TRUE(WriteAsRevision1(name, {"n", "small"}, small, &written).ok());
  ASSERT_TRUE(WriteAsRevision1(name, {"large"}, large, &written).ok());

  for (const auto& [path, expected] :
       std::vector<std::pair<std::vector<std::string>, at::Tensor>>{{{"n"}, small},
                                                                     {{"large"}, large}}) {
    OldRead whole = ReadAsRevision1(name, path);
    ASSERT_TRUE(whole.status.ok()) << whole.status.error_message();
    ASSERT_EQ(whole.leaves.size(), 1u);
    EXPECT_EQ(whole.leaves[0].second, Bytes(expected));
    EXPECT_EQ(whole.leaves[0].second, Bytes(d.get(Key(std::vector<std::string>(
                                          path[0] == "n" ? std::vector<std::string>{"n", "small"}
                                                         : path)))));
    EXPECT_EQ(whole.batch_shape, std::vector<int64_t>{64});

    // Indexed: rows 3, 60, 3 and a step slice, against today's client.
    v1::Index positions;
    v1::IndexItem* item = positions.add_items();
    for (int64_t p : {3, 60, 3}) item->mutable_positions()->add_values(p);
    item->mutable_positions()->add_shape(3);
    OldRead rows = ReadAsRevision1(name, path, &positions);
    ASSERT_TRUE(rows.status.ok()) << rows.status.error_message();
    ASSERT_EQ(rows.leaves.size(), 1u);
    const at::Tensor want = expected.index({at::tensor({3, 60, 3}, at::kLong)});
    EXPECT_EQ(rows.leaves[0].second, Bytes(want));
    EXPECT_EQ(rows.batch_shape, std::vector<int64_t>{3});

    v1::Index step;
    step.add_items()->mutable_slice()->set_step(3);
    OldRead stepped = ReadAsRevision1(name, path, &step);
    ASSERT_TRUE(stepped.status.ok()) << stepped.status.error_message();
    ASSERT_EQ(stepped.leaves.size(), 1u);
    EXPECT_EQ(stepped.leaves[0].second,
              Bytes(expected.index({at::indexing::Slice(at::indexing::None, at::indexing::None, 3)})));
  }
  client_.drop(name);
}

// The other RPCs of revision 1, spoken with its fields only, against what
// today's client sees of the same dict.
TEST_F(E2eWireCompat, ARevision1ClientsOtherCallsMeanWhatTheyMeant) {
  auto stub = Stub();
  const std::string name = UniqueDictName();
  auto call = [&](auto method, const auto& request, auto* response) {
    grpc::ClientContext ctx;
    grpc::Status s = ((*stub).*method)(&ctx, request, response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return s;
  };
  {
    v1::ServerInfo info;
    call(&v1::TdStore::Stub::GetServerInfo, v1::GetServerInfoRequest(), &info);
    EXPECT_EQ(info.protocol_revision(), kProtocolRevision);
    const auto& caps = info.capabilities();
    EXPECT_NE(std::find(caps.begin(), caps.end(), "small_read"), caps.end());
    EXPECT_TRUE(info.redis_ok());
  }
  v1::CreateDictRequest create;
  create.set_name(name);
  create.add_batch_shape(4);
  v1::DictInfo created;
  ASSERT_TRUE(call(&v1::TdStore::Stub::CreateDict, create, &created).ok());
  v1::WriteLeavesResponse written;
  ASSERT_TRUE(WriteAsRevision1(name, {"n", "x"}, at::rand({4, 2}), &written).ok());
  ASSERT_TRUE(WriteAsRevision1(name, {"y"}, at::rand({4}), &written).ok());

  Dict d = client_.open(name);
  // The raw stub is another client: `d` sees its schema changes once it
  // has observed something after them through tdstored (docs/protocol.md,
  // "Causal schema reads"), here a counter read.
  auto observed = [&] { (void)d.counter_get("c"); };
  v1::DescribeDictRequest describe;
  describe.set_name(name);
  v1::DictInfo info;
  call(&v1::TdStore::Stub::DescribeDict, describe, &info);
  EXPECT_EQ(info.leaves_size(), 2);
  EXPECT_EQ(info.version(), d.describe().version);

  v1::ListKeysRequest list;
  list.set_dict(name);
  list.set_include_nested(true);
  v1::ListKeysResponse keys;
  call(&v1::TdStore::Stub::ListKeys, list, &keys);
  EXPECT_EQ(static_cast<size_t>(keys.keys_size()), d.keys(true).size());

  v1::ExistsRequest exists;
  exists.set_dict(name);
  *exists.mutable_path() = PathOf({"n", "x"});
  v1::ExistsResponse kind;
  call(&v1::TdStore::Stub::Exists, exists, &kind);
  EXPECT_EQ(kind.kind(), v1::ExistsResponse::LEAF);

  v1::CounterRequest add;
  add.set_dict(name);
  add.set_name("c");
  add.set_add(5);
  v1::CounterResponse counted;
  call(&v1::TdStore::Stub::Counter, add, &counted);
  EXPECT_EQ(counted.value(), 5);
  EXPECT_EQ(d.counter_get("c"), 5);

  v1::RenameLeavesRequest rename;
  rename.set_dict(name);
  *rename.mutable_from() = PathOf({"n"});
  *rename.mutable_to() = PathOf({"m"});
  v1::RenameLeavesResponse renamed;
  call(&v1::TdStore::Stub::RenameLeaves, rename, &renamed);
  observed();
  EXPECT_TRUE(d.contains(Key({"m", "x"})));

  v1::SetLockedRequest lock;
  lock.set_dict(name);
  lock.set_locked(true);
  v1::DictInfo locked;
  call(&v1::TdStore::Stub::SetLocked, lock, &locked);
  EXPECT_TRUE(locked.locked());
  observed();
  EXPECT_TRUE(d.is_locked());
  lock.set_locked(false);
  call(&v1::TdStore::Stub::SetLocked, lock, &locked);

  v1::ResizeDictRequest resize;
  resize.set_dict(name);
  resize.set_rows(6);
  v1::DictInfo resized;
  call(&v1::TdStore::Stub::ResizeDict, resize, &resized);
  observed();
  EXPECT_EQ(d.batch_size(), (std::vector<int64_t>{6}));

  v1::DeleteLeavesRequest del;
  del.set_dict(name);
  *del.add_paths() = PathOf({"y"});
  v1::DeleteLeavesResponse deleted;
  call(&v1::TdStore::Stub::DeleteLeaves, del, &deleted);
  observed();
  EXPECT_FALSE(d.contains("y"));

  v1::ListDictsResponse dicts;
  call(&v1::TdStore::Stub::ListDicts, v1::ListDictsRequest(), &dicts);
  EXPECT_NE(std::find(dicts.names().begin(), dicts.names().end(), name), dicts.names().end());

  v1::DeleteDictRequest drop;
  drop.set_name(name);
  v1::DeleteDictResponse dropped;
  call(&v1::TdStore::Stub::DeleteDict, drop, &dropped);
  EXPECT_EQ(ErrorOf([&] { client_.open(name); }).code(), StatusCode::kNotFound);
}

// A WriteChunk whose only field is one this server does not know (a newer
// client's frame kind): refused, naming the field, nothing written.
TEST_F(E2eWireCompat, AWriteFrameOfAnUnknownKindIsRefusedByNumber) {
  const std::string name = UniqueDictName();
  Dict d = client_.create(name, {4});
  const int64_t version = d.describe().version;
  for (bool first : {true, false}) {
    auto stub = Stub();
    grpc::ClientContext ctx;
    v1::WriteLeavesResponse response;
    auto writer = stub->WriteLeaves(&ctx, &response);
    if (!first) {
      v1::WriteChunk begin;
      begin.mutable_begin()->set_dict(name);
      begin.mutable_begin()->set_leaf_count(1);
      writer->Write(begin);
    }
    v1::WriteChunk unknown;
    unknown.GetReflection()->MutableUnknownFields(&unknown)->AddLengthDelimited(99, "frame");
    writer->Write(unknown);
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << first;
    EXPECT_NE(s.error_message().find("field 99"), std::string::npos) << s.error_message();
  }
  EXPECT_EQ(d.describe().version, version);
  EXPECT_TRUE(d.keys().empty());
  client_.drop(name);
}

// A server that answers every read with a frame of a kind the core does
// not know, first or after a ReadBegin: the core's read fails with
// DATA_LOSS naming the field, never returns an empty result.
class UnknownFrameServer final : public v1::TdStore::Service {
 public:
  explicit UnknownFrameServer(bool after_begin) : after_begin_(after_begin) {}
  grpc::Status DescribeDict(grpc::ServerContext*, const v1::DescribeDictRequest* request,
                            v1::DictInfo* info) override {
    info->set_name(request->name());
    info->set_id(request->dict_id());
    return grpc::Status::OK;
  }
  grpc::Status ReadLeaves(grpc::ServerContext*, const v1::ReadLeavesRequest*,
                          grpc::ServerWriter<v1::ReadChunk>* writer) override {
    if (after_begin_) {
      v1::ReadChunk begin;
      begin.mutable_begin()->set_leaf_count(1);
      writer->Write(begin);
    }
    v1::ReadChunk unknown;
    unknown.GetReflection()->MutableUnknownFields(&unknown)->AddLengthDelimited(77, "x");
    writer->Write(unknown);
    return grpc::Status::OK;
  }

 private:
  const bool after_begin_;
};

TEST(E2eWireCompatCore, AReadFrameOfAnUnknownKindFailsLoudly) {
  for (bool after_begin : {false, true}) {
    UnknownFrameServer service(after_begin);
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    ASSERT_NE(server, nullptr);
    ClientOptions options;
    options.watch_schemas = false;
    core::Dict d = core::Client::open_handle(
        "tdstore1|127.0.0.1:" + std::to_string(port) + "|d|1", options);
    class Sink final : public core::ReadSink {
     public:
      void Begin(const std::vector<int64_t>&, int64_t) override {}
      void* Leaf(const core::LeafMeta&) override { return nullptr; }
    } sink;
    Error e = ErrorOf([&] { d.read({}, sink); });
    EXPECT_EQ(e.code(), StatusCode::kDataLoss) << after_begin << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find("field 77"), std::string::npos) << e.what();
    server->Shutdown();
  }
}

}  // namespace
}  // namespace tdstore::testing
