// The service's own rules, served in-process (no tdstored process, no
// socket): TdStoreService on a Store (tests/store/store_under_test.h),
// called through gRPC's in-process channel with the generated stub. Each
// test names the rule it holds: a request translated into its store call
// and back, a limit, a status mapping, the `tdstore-applied: none` retry
// marker, the schema-version trailer, draining and access.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <map>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "common/protocol_metadata.h"
#include "common/protocol_revision.h"
#include "gtest/gtest.h"
#include "server/service/tdstore_service.h"
#include "tdstore/v1/tdstore.grpc.pb.h"
#include "tests/store/store_under_test.h"

namespace tdstore::service {
namespace {

using store::testing::MakeStoreUnderTest;
using store::testing::StoreUnderTest;

std::multimap<std::string, std::string> Trailers(const grpc::ClientContext& ctx) {
  std::multimap<std::string, std::string> out;
  for (const auto& [k, v] : ctx.GetServerTrailingMetadata()) {
    out.emplace(std::string(k.data(), k.size()), std::string(v.data(), v.size()));
  }
  return out;
}

bool NothingApplied(const grpc::ClientContext& ctx) {
  auto t = Trailers(ctx);
  auto it = t.find(kAppliedTrailer);
  return it != t.end() && it->second == kAppliedNone;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Serve({}); }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  void Serve(ServiceOptions options, store::StoreOptions store_options = {}) {
    if (server_) server_->Shutdown();
    server_.reset();
    service_.reset();
    auto sut = MakeStoreUnderTest(std::move(store_options));
    ASSERT_TRUE(sut.ok()) << sut.status();
    sut_ = *std::move(sut);
    service_ = std::make_unique<TdStoreService>(&sut_->store(), std::move(options));
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::TdStore::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
  }

  v1::DictInfo Create(const std::string& name, std::vector<int64_t> batch) {
    grpc::ClientContext ctx;
    v1::CreateDictRequest req;
    req.set_name(name);
    for (int64_t d : batch) req.add_batch_shape(d);
    v1::DictInfo info;
    grpc::Status s = stub_->CreateDict(&ctx, req, &info);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return info;
  }

  // A whole-leaf write of float32 `values` with shape `shape`.
  grpc::Status Put(grpc::ClientContext& ctx, const v1::DictInfo& dict, const std::string& leaf,
                   std::vector<int64_t> shape, const std::vector<float>& values,
                   v1::WriteLeavesResponse* resp) {
    auto writer = stub_->WriteLeaves(&ctx, resp);
    v1::WriteChunk chunk;
    chunk.mutable_begin()->set_dict(dict.name());
    chunk.mutable_begin()->set_dict_id(dict.id());
    writer->Write(chunk);
    chunk.Clear();
    v1::LeafHeader* h = chunk.mutable_header();
    h->mutable_path()->add_components(leaf);
    h->set_dtype(v1::FLOAT32);
    for (int64_t d : shape) h->add_shape(d);
    h->set_byte_size(static_cast<int64_t>(values.size() * sizeof(float)));
    writer->Write(chunk);
    chunk.Clear();
    chunk.set_data(std::string(reinterpret_cast<const char*>(values.data()),
                               values.size() * sizeof(float)));
    writer->Write(chunk);
    writer->WritesDone();
    return writer->Finish();
  }

  // ReadLeaves of `paths` (an index if given): the call's status.
  grpc::Status ReadStatus(const std::string& dict, const std::vector<std::string>& paths,
                          const v1::Index* index = nullptr) {
    grpc::ClientContext ctx;
    v1::ReadLeavesRequest req;
    req.set_dict(dict);
    for (const std::string& p : paths) req.add_paths()->add_components(p);
    if (index != nullptr) *req.mutable_index() = *index;
    auto reader = stub_->ReadLeaves(&ctx, req);
    v1::ReadChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  }

  // Whether the dict has a leaf at `leaf` now.
  bool HasLeaf(const std::string& dict, const std::vector<std::string>& leaf) {
    grpc::ClientContext ctx;
    v1::ExistsRequest req;
    req.set_dict(dict);
    for (const std::string& c : leaf) req.mutable_path()->add_components(c);
    v1::ExistsResponse resp;
    EXPECT_TRUE(stub_->Exists(&ctx, req, &resp).ok());
    return resp.kind() == v1::ExistsResponse::LEAF;
  }

  std::vector<float> Get(const v1::DictInfo& dict, const std::string& leaf) {
    grpc::ClientContext ctx;
    v1::ReadLeavesRequest req;
    req.set_dict(dict.name());
    req.set_dict_id(dict.id());
    req.add_paths()->add_components(leaf);
    auto reader = stub_->ReadLeaves(&ctx, req);
    v1::ReadChunk chunk;
    std::string bytes;
    while (reader->Read(&chunk)) {
      if (chunk.kind_case() == v1::ReadChunk::kData) bytes += chunk.data();
    }
    grpc::Status s = reader->Finish();
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::vector<float> out(bytes.size() / sizeof(float));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return out;
  }

  std::unique_ptr<StoreUnderTest> sut_;
  std::unique_ptr<TdStoreService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::TdStore::Stub> stub_;
};

TEST_F(ServiceTest, ServerInfoSaysWhatServesAndWhatItSpeaks) {
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  ASSERT_TRUE(stub_->GetServerInfo(&ctx, {}, &info).ok());
  EXPECT_EQ(info.protocol_revision(), kProtocolRevision);
  EXPECT_TRUE(info.redis_ok());
  EXPECT_FALSE(info.backend().empty());
  EXPECT_FALSE(info.version().empty());
  EXPECT_GT(info.capabilities_size(), 0);
}

TEST_F(ServiceTest, CreateTranslatesTheSchemaAndReportsTheVersionSeen) {
  grpc::ClientContext ctx;
  v1::CreateDictRequest req;
  req.set_name("d");
  req.add_batch_shape(3);
  v1::LeafSpec* leaf = req.add_leaves();
  leaf->mutable_path()->add_components("x");
  leaf->set_dtype(v1::INT64);
  leaf->add_element_shape(2);
  v1::DictInfo info;
  ASSERT_TRUE(stub_->CreateDict(&ctx, req, &info).ok());
  ASSERT_EQ(info.leaves_size(), 1);
  EXPECT_EQ(info.leaves(0).dtype(), v1::INT64);
  EXPECT_EQ(std::vector<int64_t>(info.leaves(0).shape().begin(), info.leaves(0).shape().end()),
            (std::vector<int64_t>{3, 2}));
  auto trailers = Trailers(ctx);
  auto seen = trailers.find(kSchemaVersionTrailer);
  ASSERT_NE(seen, trailers.end());
  EXPECT_EQ(seen->second, info.id() + ":" + std::to_string(info.version()));
}

TEST_F(ServiceTest, RefusedRequestsSayNothingWasApplied) {
  {  // an unknown dtype
    grpc::ClientContext ctx;
    v1::CreateDictRequest req;
    req.set_name("d");
    v1::LeafSpec* leaf = req.add_leaves();
    leaf->mutable_path()->add_components("x");
    leaf->set_dtype(static_cast<v1::DType>(999));
    v1::DictInfo info;
    grpc::Status s = stub_->CreateDict(&ctx, req, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_TRUE(NothingApplied(ctx));
  }
  {  // an unknown layout
    grpc::ClientContext ctx;
    v1::CreateDictRequest req;
    req.set_name("d");
    req.mutable_options()->set_layout(static_cast<v1::DictLayout>(77));
    v1::DictInfo info;
    grpc::Status s = stub_->CreateDict(&ctx, req, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_TRUE(NothingApplied(ctx));
  }
  {  // a write stream without its WriteBegin
    grpc::ClientContext ctx;
    v1::WriteLeavesResponse resp;
    auto writer = stub_->WriteLeaves(&ctx, &resp);
    v1::WriteChunk chunk;
    chunk.set_data("xx");
    writer->Write(chunk);
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_TRUE(NothingApplied(ctx));
  }
  {  // a whole-leaf write of the wrong batch shape: nothing visible
    const v1::DictInfo d = Create("w", {4});
    grpc::ClientContext ctx;
    v1::WriteLeavesResponse resp;
    grpc::Status s = Put(ctx, d, "x", {5}, std::vector<float>(5, 1.0f), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_TRUE(NothingApplied(ctx));
    grpc::ClientContext ectx;
    v1::ExistsRequest ereq;
    ereq.set_dict("w");
    ereq.mutable_path()->add_components("x");
    v1::ExistsResponse eresp;
    ASSERT_TRUE(stub_->Exists(&ectx, ereq, &eresp).ok());
    EXPECT_EQ(eresp.kind(), v1::ExistsResponse::ABSENT);
  }
}

TEST_F(ServiceTest, WritesAndReadsRoundTripAndReportTheirVersion) {
  const v1::DictInfo d = Create("d", {3});
  grpc::ClientContext ctx;
  v1::WriteLeavesResponse resp;
  ASSERT_TRUE(Put(ctx, d, "x", {3, 2}, {1, 2, 3, 4, 5, 6}, &resp).ok());
  ASSERT_EQ(resp.written_size(), 1);
  EXPECT_GT(resp.version(), d.version());
  auto trailers = Trailers(ctx);
  auto seen = trailers.find(kSchemaVersionTrailer);
  ASSERT_NE(seen, trailers.end());
  EXPECT_EQ(seen->second, d.id() + ":" + std::to_string(resp.version()));
  EXPECT_EQ(Get(d, "x"), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

// WriteBegin.count_after: the rows an indexed write wrote, then the counter,
// in one call; a refused write counts nothing, and count_after anywhere
// but on an indexed write is refused before anything is written.
TEST_F(ServiceTest, ACountedIndexedWriteCountsOnlyWhatItWrote) {
  const v1::DictInfo d = Create("counted", {4});
  {
    grpc::ClientContext ctx;
    v1::WriteLeavesResponse resp;
    ASSERT_TRUE(Put(ctx, d, "x", {4, 2}, {0, 0, 0, 0, 0, 0, 0, 0}, &resp).ok());
  }
  auto counter = [&] {
    grpc::ClientContext ctx;
    v1::CounterRequest req;
    req.set_dict(d.name());
    req.set_name("n");
    req.set_get(true);
    v1::CounterResponse resp;
    EXPECT_TRUE(stub_->Counter(&ctx, req, &resp).ok());
    return resp.value();
  };
  // td[rows] = values as float32 (or `dtype`), counted by `add` in `name`.
  auto write = [&](std::vector<int64_t> rows, std::vector<float> values, int64_t add,
                   const std::string& name, v1::DType dtype, bool indexed, bool ring,
                   v1::WriteLeavesResponse* resp) {
    grpc::ClientContext ctx;
    auto writer = stub_->WriteLeaves(&ctx, resp);
    v1::WriteChunk chunk;
    v1::WriteBegin* begin = chunk.mutable_begin();
    begin->set_dict(d.name());
    begin->set_leaf_count(1);
    if (indexed) {
      auto* positions = begin->mutable_index()->add_items()->mutable_positions();
      for (int64_t r : rows) positions->add_values(r);
      positions->add_shape(static_cast<int64_t>(rows.size()));
    }
    if (ring) {
      begin->mutable_ring()->set_cursor("c");
      begin->mutable_ring()->set_rows(static_cast<int64_t>(rows.size()));
    }
    begin->mutable_count_after()->set_counter(name);
    begin->mutable_count_after()->set_add(add);
    writer->Write(chunk);
    chunk.Clear();
    v1::LeafHeader* h = chunk.mutable_header();
    h->mutable_path()->add_components("x");
    h->set_dtype(dtype);
    h->add_shape(static_cast<int64_t>(indexed || ring ? rows.size() : 4));
    h->add_shape(2);
    h->set_byte_size(static_cast<int64_t>(values.size() * sizeof(float)));
    writer->Write(chunk);
    chunk.Clear();
    chunk.set_data(std::string(reinterpret_cast<const char*>(values.data()),
                               values.size() * sizeof(float)));
    writer->Write(chunk);
    writer->WritesDone();
    return writer->Finish();
  };
  v1::WriteLeavesResponse resp;
  ASSERT_TRUE(write({1, 3}, {1, 2, 3, 4}, 2, "n", v1::FLOAT32, true, false, &resp).ok());
  EXPECT_TRUE(resp.counted());
  EXPECT_EQ(resp.count_value(), 2);
  resp.Clear();
  ASSERT_TRUE(write({0}, {5, 6}, 5, "n", v1::FLOAT32, true, false, &resp).ok());
  EXPECT_TRUE(resp.counted());
  EXPECT_EQ(resp.count_value(), 7);
  const std::vector<float> written = {5, 6, 1, 2, 0, 0, 3, 4};
  EXPECT_EQ(Get(d, "x"), written);
  // Refused: nothing written, nothing counted.
  struct Refused {
    std::string what;
    std::vector<int64_t> rows;
    std::string counter;
    v1::DType dtype;
    bool indexed, ring;
    grpc::StatusCode code;
  };
  for (const Refused& r : std::vector<Refused>{
           {"another dtype", {2}, "n", v1::INT32, true, false, grpc::StatusCode::INVALID_ARGUMENT},
           {"a row outside", {9}, "n", v1::FLOAT32, true, false, grpc::StatusCode::OUT_OF_RANGE},
           {"whole leaves", {}, "n", v1::FLOAT32, false, false, grpc::StatusCode::INVALID_ARGUMENT},
           {"a ring", {2}, "n", v1::FLOAT32, false, true, grpc::StatusCode::INVALID_ARGUMENT},
           {"no counter name", {2}, "", v1::FLOAT32, true, false,
            grpc::StatusCode::INVALID_ARGUMENT}}) {
    v1::WriteLeavesResponse refused;
    const std::vector<float> values(r.indexed || r.ring ? r.rows.size() * 2 : 8, 9.0f);
    grpc::Status status = write(r.rows, values, 3, r.counter, r.dtype, r.indexed, r.ring, &refused);
    EXPECT_EQ(status.error_code(), r.code) << r.what << ": " << status.error_message();
    EXPECT_FALSE(refused.counted()) << r.what;
    EXPECT_EQ(counter(), 7) << r.what;
    EXPECT_EQ(Get(d, "x"), written) << r.what;
  }
}

TEST_F(ServiceTest, LimitsAreCheckedBeforeTheStore) {
  ServiceOptions options;
  options.limits.max_leaves_per_call = 2;
  options.limits.max_name_bytes = 8;
  Serve(options);
  {
    grpc::ClientContext ctx;
    v1::CreateDictRequest req;
    req.set_name("a-name-too-long");
    v1::DictInfo info;
    grpc::Status s = stub_->CreateDict(&ctx, req, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    v1::CreateDictRequest req;
    req.set_name("d");
    req.add_batch_shape(1);
    for (const char* n : {"a", "b", "c"}) {
      v1::LeafSpec* leaf = req.add_leaves();
      leaf->mutable_path()->add_components(n);
      leaf->set_dtype(v1::FLOAT32);
    }
    v1::DictInfo info;
    grpc::Status s = stub_->CreateDict(&ctx, req, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_TRUE(NothingApplied(ctx));
    grpc::ClientContext lctx;
    v1::ListDictsResponse list;
    ASSERT_TRUE(stub_->ListDicts(&lctx, {}, &list).ok());
    EXPECT_EQ(list.names_size(), 0);
  }
}

bool Names(const grpc::Status& s, const std::string& flag) {
  return s.error_message().find(flag) != std::string::npos;
}

// Each limit of ServiceLimits, at the limit and one past it; a refused
// call names its flag and writes nothing.
TEST_F(ServiceTest, EveryCallLimitNamesItsFlagAndWritesNothing) {
  ServiceOptions options;
  options.limits.max_call_bytes = 1000;
  options.limits.max_index_length = 100;
  options.limits.max_leaves_per_call = 3;
  options.limits.max_name_bytes = 16;
  options.limits.max_path_bytes = 20;
  store::StoreOptions store_options;
  store_options.max_dicts = 2;
  Serve(std::move(options), store_options);
  const v1::DictInfo d = Create("d", {250});

  {  // bytes per call: 250 float32 = 1000 bytes pass, 1004 do not
    grpc::ClientContext ok;
    v1::WriteLeavesResponse resp;
    ASSERT_TRUE(Put(ok, d, "ok", {250}, std::vector<float>(250, 1.0f), &resp).ok());
    grpc::ClientContext big;
    grpc::Status s = Put(big, d, "big", {250, 2}, std::vector<float>(500, 1.0f), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_TRUE(Names(s, "--max-call-bytes")) << s.error_message();
    EXPECT_TRUE(NothingApplied(big));
    EXPECT_FALSE(HasLeaf("d", {"big"}));
    grpc::ClientContext ok2;
    ASSERT_TRUE(Put(ok2, d, "ok2", {250}, std::vector<float>(250, 2.0f), &resp).ok());
    // A read of two leaves that together pass it is refused whole.
    s = ReadStatus("d", {"ok", "ok2"});
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_TRUE(ReadStatus("d", {"ok"}).ok());
  }
  {  // index length: 100 positions pass, 101 do not
    v1::Index index;
    auto* positions = index.add_items()->mutable_positions();
    for (int i = 0; i < 100; ++i) positions->add_values(i);
    positions->add_shape(100);
    EXPECT_TRUE(ReadStatus("d", {"ok"}, &index).ok());
    positions->add_values(100);
    positions->set_shape(0, 101);
    grpc::Status s = ReadStatus("d", {"ok"}, &index);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_TRUE(Names(s, "--max-index-length")) << s.error_message();
  }
  {  // leaves per call: three pass, four do not
    grpc::Status s = ReadStatus("d", {"ok", "ok2", "ok", "ok2"});
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_TRUE(Names(s, "--max-leaves-per-call")) << s.error_message();
    grpc::ClientContext ctx;
    v1::DeleteLeavesRequest req;
    req.set_dict("d");
    for (const char* p : {"ok", "ok2", "a", "b"}) req.add_paths()->add_components(p);
    v1::DeleteLeavesResponse resp;
    s = stub_->DeleteLeaves(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_TRUE(NothingApplied(ctx));
    EXPECT_TRUE(HasLeaf("d", {"ok"}));
  }
  {  // name and path bytes: 16 and 20 pass, 17 and 21 do not
    grpc::ClientContext ctx;
    v1::CreateDictRequest req;
    req.set_name("seventeen-chars-x");
    v1::DictInfo info;
    grpc::Status s = stub_->CreateDict(&ctx, req, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_TRUE(Names(s, "--max-name-bytes")) << s.error_message();
    s = ReadStatus("d", {"abcdefghijklmnopqrstu"});
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_TRUE(Names(s, "--max-path-bytes")) << s.error_message();
    grpc::ClientContext put;
    v1::WriteLeavesResponse resp;
    s = Put(put, d, "abcdefghijklmnopqrstu", {250}, std::vector<float>(250, 0.0f), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    {
      grpc::ClientContext dctx;
      v1::DescribeDictRequest dreq;
      dreq.set_name("d");
      v1::DictInfo info;
      ASSERT_TRUE(stub_->DescribeDict(&dctx, dreq, &info).ok());
      EXPECT_EQ(info.leaves_size(), 2);  // ok, ok2
    }
    grpc::ClientContext put20;
    EXPECT_TRUE(Put(put20, d, "abcdefghijklmnopqrst", {250}, std::vector<float>(250, 0.0f), &resp)
                    .ok());
  }
  {  // dicts per namespace (the store's max_dicts): the second passes, the third does not
    Create("e", {1});
    grpc::ClientContext ctx;
    v1::CreateDictRequest req;
    req.set_name("f");
    v1::DictInfo info;
    grpc::Status s = stub_->CreateDict(&ctx, req, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_TRUE(Names(s, "--max-dicts")) << s.error_message();
    EXPECT_TRUE(NothingApplied(ctx));
    grpc::ClientContext lctx;
    v1::ListDictsResponse list;
    ASSERT_TRUE(stub_->ListDicts(&lctx, {}, &list).ok());
    EXPECT_EQ(std::vector<std::string>(list.names().begin(), list.names().end()),
              (std::vector<std::string>{"d", "e"}));
  }
}

// Waits for `done` with a deadline (a documented guarantee that holds
// soon, never a fixed sleep).
bool WaitedFor(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// A WriteLeaves stream that sends half a leaf and then nothing: a client
// that hangs mid-write.
struct StalledWrite {
  grpc::ClientContext ctx;
  v1::WriteLeavesResponse resp;
  std::unique_ptr<grpc::ClientWriter<v1::WriteChunk>> writer;

  explicit StalledWrite(v1::TdStore::Stub& stub) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    writer = stub.WriteLeaves(&ctx, &resp);
    v1::WriteChunk chunk;
    chunk.mutable_begin()->set_dict("d");
    writer->Write(chunk);
    chunk.Clear();
    v1::LeafHeader* h = chunk.mutable_header();
    h->mutable_path()->add_components("x");
    h->set_dtype(v1::FLOAT32);
    h->add_shape(4);
    h->set_byte_size(16);
    writer->Write(chunk);
    chunk.Clear();
    chunk.set_data(std::string(8, 'a'));
    writer->Write(chunk);
  }
};

// A stream past --max-concurrent-streams is refused at once, naming the
// flag; a slot serves again once its stream has ended.
TEST_F(ServiceTest, StreamSlotsAreBounded) {
  ServiceOptions options;
  options.limits.max_concurrent_streams = 1;
  options.limits.idle_stream_timeout = std::chrono::minutes(5);  // never, here
  Serve(std::move(options));
  Create("d", {4});
  StalledWrite stalled(*stub_);
  // The stalled stream holds the one slot once the service has admitted
  // it, which the client cannot see: wait until a read stream is refused.
  grpc::Status refused;
  ASSERT_TRUE(WaitedFor([&] {
    refused = ReadStatus("d", {});
    return refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
  })) << "the stalled stream never held the slot";
  EXPECT_TRUE(Names(refused, "--max-concurrent-streams")) << refused.error_message();
  stalled.ctx.TryCancel();
  stalled.writer->Finish();
  // Its slot is free once its handler has rolled the write back.
  EXPECT_TRUE(WaitedFor([&] { return ReadStatus("d", {}).ok(); }))
      << "the cancelled stream's slot was never freed";
  EXPECT_FALSE(HasLeaf("d", {"x"}));
}

// A stream idle past --idle-stream-timeout-ms is cancelled and rolled back.
TEST_F(ServiceTest, IdleStreamsAreCancelledAndRolledBack) {
  ServiceOptions options;
  options.limits.idle_stream_timeout = std::chrono::milliseconds(200);
  Serve(std::move(options));
  Create("d", {4});
  StalledWrite stalled(*stub_);
  grpc::Status s = stalled.writer->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED) << s.error_message();
  EXPECT_FALSE(HasLeaf("d", {"x"}));
}

TEST_F(ServiceTest, StatusCodesMapOneToOne) {
  const v1::DictInfo d = Create("d", {2});
  {
    grpc::ClientContext ctx;
    v1::DescribeDictRequest req;
    req.set_name("absent");
    v1::DictInfo info;
    EXPECT_EQ(stub_->DescribeDict(&ctx, req, &info).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    v1::CreateDictRequest req;
    req.set_name("d");
    v1::DictInfo info;
    EXPECT_EQ(stub_->CreateDict(&ctx, req, &info).error_code(), grpc::StatusCode::ALREADY_EXISTS);
    EXPECT_TRUE(NothingApplied(ctx));
  }
  {
    grpc::ClientContext ctx;
    v1::CounterRequest req;
    req.set_dict("d");
    req.set_name("c");
    req.set_add(std::numeric_limits<int64_t>::max());
    v1::CounterResponse resp;
    ASSERT_TRUE(stub_->Counter(&ctx, req, &resp).ok());
    grpc::ClientContext ctx2;
    req.set_add(1);
    EXPECT_EQ(stub_->Counter(&ctx2, req, &resp).error_code(), grpc::StatusCode::OUT_OF_RANGE);
  }
  {
    grpc::ClientContext ctx;
    v1::CounterRequest req;
    req.set_dict("d");
    req.set_name("c");  // no operation
    v1::CounterResponse resp;
    EXPECT_EQ(stub_->Counter(&ctx, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    v1::SetLockedRequest req;
    req.set_dict("d");
    req.set_locked(true);
    v1::DictInfo info;
    ASSERT_TRUE(stub_->SetLocked(&ctx, req, &info).ok());
    EXPECT_TRUE(info.locked());
    grpc::ClientContext wctx;
    v1::WriteLeavesResponse resp;
    EXPECT_EQ(Put(wctx, d, "new", {2}, {1, 2}, &resp).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
  }
}

TEST_F(ServiceTest, AppendRowsAcksEveryBatchWithItsOwnStatus) {
  const v1::DictInfo d = Create("d", {4});
  {
    grpc::ClientContext ctx;
    v1::WriteLeavesResponse resp;
    ASSERT_TRUE(Put(ctx, d, "x", {4}, {0, 0, 0, 0}, &resp).ok());
  }
  grpc::ClientContext ctx;
  auto stream = stub_->AppendRows(&ctx);
  v1::AppendRequest req;
  req.mutable_begin()->set_dict("d");
  req.mutable_begin()->add_leaves()->add_components("x");
  ASSERT_TRUE(stream->Write(req));
  auto batch = [&](int64_t seq, int64_t start, std::vector<float> rows) {
    v1::AppendRequest r;
    v1::RowBatch* b = r.mutable_batch();
    b->set_sequence(seq);
    b->set_start_row(start);
    b->set_rows(static_cast<int64_t>(rows.size()));
    b->add_leaf_rows(std::string(reinterpret_cast<const char*>(rows.data()),
                                 rows.size() * sizeof(float)));
    EXPECT_TRUE(stream->Write(r));
    v1::AppendAck ack;
    EXPECT_TRUE(stream->Read(&ack));
    EXPECT_EQ(ack.sequence(), seq);
    return ack.code();
  };
  EXPECT_EQ(batch(1, 1, {7, 8}), 0);
  EXPECT_EQ(batch(2, 3, {1, 2}), static_cast<int>(grpc::StatusCode::OUT_OF_RANGE));
  EXPECT_EQ(batch(3, 0, {9}), 0);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(Get(d, "x"), (std::vector<float>{9, 7, 8, 0}));
}

// The RPCs not covered above, each once: its request reaches the store
// call it names, and the reply carries what the store returned.
TEST_F(ServiceTest, EveryRemainingRpcTranslatesToItsStoreCall) {
  const v1::DictInfo d = Create("d", {3});
  {
    grpc::ClientContext ctx;
    v1::WriteLeavesResponse resp;
    ASSERT_TRUE(Put(ctx, d, "x", {3}, {1, 2, 3}, &resp).ok());
  }
  auto path = [](std::initializer_list<const char*> parts) {
    v1::Path p;
    for (const char* c : parts) p.add_components(c);
    return p;
  };
  {  // DescribeDict, by name and id
    grpc::ClientContext ctx;
    v1::DescribeDictRequest req;
    req.set_name("d");
    req.set_dict_id(d.id());
    v1::DictInfo info;
    ASSERT_TRUE(stub_->DescribeDict(&ctx, req, &info).ok());
    EXPECT_EQ(info.id(), d.id());
    EXPECT_EQ(info.leaves_size(), 1);
  }
  {  // RenameLeaves: x -> n.x
    grpc::ClientContext ctx;
    v1::RenameLeavesRequest req;
    req.set_dict("d");
    *req.mutable_from() = path({"x"});
    *req.mutable_to() = path({"n", "x"});
    v1::RenameLeavesResponse resp;
    ASSERT_TRUE(stub_->RenameLeaves(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.moved_size(), 2);  // before, after
    EXPECT_EQ(resp.moved(1).components_size(), 2);
    EXPECT_GT(resp.version(), d.version());
  }
  {  // ListKeys under a prefix, and Exists
    grpc::ClientContext ctx;
    v1::ListKeysRequest req;
    req.set_dict("d");
    req.set_include_nested(true);
    req.set_leaves_only(true);
    v1::ListKeysResponse resp;
    ASSERT_TRUE(stub_->ListKeys(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.keys_size(), 1);
    EXPECT_EQ(resp.keys(0).components(1), "x");
    grpc::ClientContext ectx;
    v1::ExistsRequest ereq;
    ereq.set_dict("d");
    *ereq.mutable_path() = path({"n"});
    v1::ExistsResponse eresp;
    ASSERT_TRUE(stub_->Exists(&ectx, ereq, &eresp).ok());
    EXPECT_EQ(eresp.kind(), v1::ExistsResponse::NODE);
  }
  {  // FillLeaves: every element of n.x set to 5
    grpc::ClientContext ctx;
    v1::FillLeavesRequest req;
    req.set_dict("d");
    v1::FillLeavesRequest::Fill* f = req.add_leaves();
    *f->mutable_path() = path({"n", "x"});
    f->set_dtype(v1::FLOAT32);
    const float five = 5;
    f->set_element(std::string(reinterpret_cast<const char*>(&five), 4));
    v1::FillLeavesResponse resp;
    ASSERT_TRUE(stub_->FillLeaves(&ctx, req, &resp).ok());
    EXPECT_GT(resp.version(), 0);
  }
  const v1::DictInfo e = Create("e", {3});
  {  // CopyLeaves into another dict
    grpc::ClientContext ctx;
    v1::CopyLeavesRequest req;
    req.set_dict("d");
    *req.mutable_from() = path({"n", "x"});
    req.set_to_dict("e");
    *req.mutable_to() = path({"y"});
    v1::WriteLeavesResponse resp;
    ASSERT_TRUE(stub_->CopyLeaves(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.written_size(), 1);
    EXPECT_EQ(Get(e, "y"), (std::vector<float>{5, 5, 5}));
  }
  {  // ResizeDict and UpdateAttrs return the schema afterwards
    grpc::ClientContext ctx;
    v1::ResizeDictRequest req;
    req.set_dict("e");
    req.set_rows(4);
    v1::DictInfo info;
    ASSERT_TRUE(stub_->ResizeDict(&ctx, req, &info).ok());
    EXPECT_EQ(info.batch_shape(0), 4);
    EXPECT_EQ(Get(e, "y"), (std::vector<float>{5, 5, 5, 0}));
    grpc::ClientContext actx;
    v1::UpdateAttrsRequest areq;
    areq.set_dict("e");
    (*areq.mutable_set())["k"] = "v";
    ASSERT_TRUE(stub_->UpdateAttrs(&actx, areq, &info).ok());
    EXPECT_EQ(info.attrs().at("k"), "v");
  }
  {  // WatchSchema: the schema now, then gone once deleted
    grpc::ClientContext ctx;
    v1::WatchSchemaRequest req;
    req.set_dict("e");
    req.set_dict_id(e.id());
    auto reader = stub_->WatchSchema(&ctx, req);
    v1::SchemaEvent event;
    ASSERT_TRUE(reader->Read(&event));
    EXPECT_FALSE(event.gone());
    EXPECT_EQ(event.info().id(), e.id());
    grpc::ClientContext dctx;
    v1::DeleteDictRequest dreq;
    dreq.set_name("e");
    v1::DeleteDictResponse dresp;
    ASSERT_TRUE(stub_->DeleteDict(&dctx, dreq, &dresp).ok());
    bool gone = false;
    while (!gone && reader->Read(&event)) gone = event.gone();
    EXPECT_TRUE(gone);
    ctx.TryCancel();
    reader->Finish();
  }
  {  // RenameDict
    grpc::ClientContext ctx;
    v1::RenameDictRequest req;
    req.set_name("d");
    req.set_new_name("renamed");
    v1::DictInfo info;
    ASSERT_TRUE(stub_->RenameDict(&ctx, req, &info).ok());
    EXPECT_EQ(info.name(), "renamed");
    EXPECT_EQ(info.id(), d.id());
    grpc::ClientContext lctx;
    v1::ListDictsResponse list;
    ASSERT_TRUE(stub_->ListDicts(&lctx, {}, &list).ok());
    EXPECT_EQ(std::vector<std::string>(list.names().begin(), list.names().end()),
              (std::vector<std::string>{"renamed"}));
  }
}

TEST_F(ServiceTest, DrainingRefusesNewCallsAsRetryable) {
  service_->StartDraining();
  grpc::ClientContext ctx;
  v1::ListDictsResponse list;
  grpc::Status s = stub_->ListDicts(&ctx, {}, &list);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_TRUE(NothingApplied(ctx));
  EXPECT_TRUE(service_->WaitIdle(std::chrono::system_clock::now() + std::chrono::seconds(10)));
}

TEST_F(ServiceTest, TokensLimitCallersToTheirPrefixes) {
  auto access = AccessControl::Parse("reader-token-0123456789 ro pub/\n"
                                     "writer-token-0123456789 rw pub/,own/\n");
  ASSERT_TRUE(access.ok()) << access.status();
  ServiceOptions options;
  options.access = *std::move(access);
  Serve(std::move(options));
  auto create = [&](const std::string& token, const std::string& name) {
    grpc::ClientContext ctx;
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    v1::CreateDictRequest req;
    req.set_name(name);
    v1::DictInfo info;
    return stub_->CreateDict(&ctx, req, &info).error_code();
  };
  EXPECT_EQ(create("", "pub/a"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(create("not-a-known-token-000", "pub/a"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(create("reader-token-0123456789", "pub/a"), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(create("writer-token-0123456789", "other/a"), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(create("writer-token-0123456789", "own/a"), grpc::StatusCode::OK);
  EXPECT_EQ(create("writer-token-0123456789", "pub/a"), grpc::StatusCode::OK);
  // A reader lists only what its prefixes cover.
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer reader-token-0123456789");
  v1::ListDictsResponse list;
  ASSERT_TRUE(stub_->ListDicts(&ctx, {}, &list).ok());
  EXPECT_EQ(std::vector<std::string>(list.names().begin(), list.names().end()),
            (std::vector<std::string>{"pub/a"}));
}

}  // namespace
}  // namespace tdstore::service
