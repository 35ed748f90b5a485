// The same-host data path end to end (docs/protocol.md, "Same-host data
// path"): clients on tdstored's unix socket lend it a memfd region and move
// a call's bytes through it; everything else moves them over the socket,
// with the same results.
//
//   - every big call through shared memory gives what the same call over
//     TCP gives, and what was written;
//   - spans a client forges, points outside its region, or doubles with
//     inline bytes apply nothing (and the namespace's keys are unchanged),
//     an unknown region carrying the trailer that sends the client back to
//     the socket;
//   - a client killed (SIGKILL) while it writes or reads through shared
//     memory leaves each value whole (never a mix of two writes, never
//     older than a write it saw acknowledged), no pending keys, and no
//     region mapped in tdstored;
//   - regions that run out (--shm-max-bytes, a full arena), a tdstored
//     that restarted, and a client the shared-memory socket refuses by its
//     permissions leave calls on the socket or on a new region, correct;
//   - a write larger than the region streams through a ring of its spans
//     (WriteLeavesShared): what it writes is what the socket writes, each
//     chunk is released once, in order, before the next is read, so a
//     span reused within the call carries its new bytes; shm_data chunks
//     on WriteLeaves, or naming bytes outside the region, apply nothing;
//   - a read larger than the span its client offers streams through a ring
//     cut from that span (ReadLeavesShared): what it reads is what was
//     written, a slot is filled again only after the client released the
//     chunk it held, and a request or a release out of order is refused.
// What tdstored refuses to map, and the arena's spans, are tested in
// tests/server/shm_test.cc.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/core/src/shm_arena.h"
#include "common/shm_protocol.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tdstore/core.h"
#include "tdstore/v1/tdstore.grpc.pb.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/metrics_scrape.h"
#include "tests/support/child_process.h"
#include "tests/support/daemon_process.h"

namespace tdstore::testing {
namespace {

using tdstore::Key;
using core::LeafData;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The bytes a read delivers, by leaf.
class Bytes final : public core::ReadSink {
 public:
  void Begin(const std::vector<int64_t>& batch, int64_t) override {
    batch_ = batch;
    leaves_.clear();
  }
  void* Leaf(const core::LeafMeta& leaf) override {
    std::vector<char>& bytes = leaves_[leaf.path.str()];
    bytes.resize(static_cast<size_t>(leaf.byte_size));
    return bytes.data();
  }
  const std::vector<char>& at(const std::string& path) const { return leaves_.at(path); }
  size_t size() const { return leaves_.size(); }
  const std::vector<int64_t>& batch() const { return batch_; }

 private:
  std::vector<int64_t> batch_;
  std::map<std::string, std::vector<char>> leaves_;
};

std::vector<char> RandomBytes(size_t n, std::mt19937& random) {
  std::vector<char> out(n);
  for (char& c : out) c = static_cast<char>(random());
  return out;
}

std::string UnixPath(const std::string& address) { return address.substr(std::strlen("unix://")); }

// The shared-memory regions mapped in process `pid` (tdstored): lines of
// its /proc maps that name the client's memfd.
int MappedRegions(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  int n = 0;
  while (std::getline(maps, line)) n += line.find("memfd:tdstore-shm") != std::string::npos;
  return n;
}

// Polls `done` until it holds or `bound` passes.
template <typename Done>
bool Within(milliseconds bound, Done done) {
  const auto deadline = Clock::now() + bound;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

ClientOptions WithShm(int64_t bytes) {
  ClientOptions options;
  options.shared_memory_bytes = bytes;
  return options;
}

TEST(E2eSharedMemory, BigCallsThroughSharedMemoryGiveWhatTheSocketGives) {
  core::Client shm(DaemonUnixAddress());
  core::Client tcp(DaemonAddress());
  core::Client unix_socket(DaemonUnixAddress(), WithShm(0));
  ASSERT_TRUE(shm.shares_memory());
  EXPECT_FALSE(tcp.shares_memory());
  EXPECT_FALSE(unix_socket.shares_memory());

  std::mt19937 random(20261204);
  for (int round = 0; round < 6; ++round) {
    const int64_t rows = 64 + static_cast<int64_t>(random() % 4000);
    const std::string name = UniqueDictName();
    core::Dict dict = shm.create(name, {rows});
    // Leaves of 1 to 600 bytes per row: some calls fit one small message,
    // most do not.
    std::vector<std::vector<char>> values;
    std::vector<LeafData> leaves;
    const int count = 1 + static_cast<int>(random() % 4);
    for (int i = 0; i < count; ++i) {
      const int64_t cols = 1 + static_cast<int64_t>(random() % 600);
      values.push_back(RandomBytes(static_cast<size_t>(rows * cols), random));
    }
    for (int i = 0; i < count; ++i) {
      const int64_t cols = static_cast<int64_t>(values[i].size()) / rows;
      leaves.push_back({Key("l" + std::to_string(i)), DType::kUInt8, {rows, cols},
                        values[i].data(), static_cast<int64_t>(values[i].size())});
    }
    dict.write(leaves);
    for (core::Client* reader : {&shm, &tcp, &unix_socket}) {
      Bytes got;
      reader->open(name).read({}, got);
      ASSERT_EQ(got.size(), static_cast<size_t>(count));
      for (int i = 0; i < count; ++i) {
        EXPECT_EQ(got.at("l" + std::to_string(i)), values[i])
            << "round " << round << " leaf " << i << " via " << reader->address();
      }
    }
    // An indexed write of random rows through shared memory, then an
    // indexed read of random rows through each path.
    std::vector<int64_t> rows_written;
    for (int64_t r = 0; r < rows; ++r) {
      if (random() % 3 == 0) rows_written.push_back(r);
    }
    if (rows_written.empty()) rows_written.push_back(0);
    const core::Index index_written = {core::IndexTerm::Positions(
        rows_written, {static_cast<int64_t>(rows_written.size())})};
    std::vector<std::vector<char>> row_values;
    std::vector<LeafData> row_leaves;
    for (int i = 0; i < count; ++i) {
      const int64_t cols = static_cast<int64_t>(values[i].size()) / rows;
      row_values.push_back(RandomBytes(rows_written.size() * static_cast<size_t>(cols), random));
      for (size_t k = 0; k < rows_written.size(); ++k) {
        std::memcpy(values[i].data() + rows_written[k] * cols, row_values[i].data() + k * cols,
                    static_cast<size_t>(cols));
      }
      row_leaves.push_back({Key("l" + std::to_string(i)), DType::kUInt8,
                            {static_cast<int64_t>(rows_written.size()), cols},
                            row_values[i].data(), static_cast<int64_t>(row_values[i].size())});
    }
    core::WriteOptions at;
    at.index = &index_written;
    dict.write(row_leaves, at);
    std::vector<int64_t> rows_read;
    for (int k = 0; k < 700; ++k) rows_read.push_back(static_cast<int64_t>(random() % rows));
    const core::Index index_read = {
        core::IndexTerm::Positions(rows_read, {static_cast<int64_t>(rows_read.size())})};
    for (core::Client* reader : {&shm, &tcp, &unix_socket}) {
      Bytes got;
      core::ReadOptions read_at;
      read_at.index = &index_read;
      reader->open(name).read({}, got, read_at);
      for (int i = 0; i < count; ++i) {
        const int64_t cols = static_cast<int64_t>(values[i].size()) / rows;
        std::vector<char> expected;
        for (int64_t r : rows_read) {
          expected.insert(expected.end(), values[i].begin() + r * cols,
                          values[i].begin() + (r + 1) * cols);
        }
        EXPECT_EQ(got.at("l" + std::to_string(i)), expected)
            << "round " << round << " leaf " << i << " via " << reader->address();
      }
    }
    shm.drop(name);
  }
}

class E2eSharedMemorySpans : public ::testing::Test {
 protected:
  void SetUp() override {
    stub_ = v1::TdStore::NewStub(
        grpc::CreateChannel(DaemonUnixAddress(), grpc::InsecureChannelCredentials()));
    std::string why;
    arena_ = core::ShmArena::Lend(UnixPath(DaemonUnixAddress()) + ".shm", 1 << 20, &why);
    ASSERT_NE(arena_, nullptr) << why;
    name_ = UniqueDictName();
    core::Client(DaemonAddress()).create(name_, {256});
  }

  // A SmallWrite of leaf "x", uint8 [256, 1024] (256 KiB), as `fill` sets it.
  grpc::Status Write(const std::function<void(v1::WholeLeaf*)>& fill,
                     grpc::ClientContext* context) {
    v1::WriteChunk chunk;
    v1::SmallWrite* small = chunk.mutable_small();
    small->mutable_begin()->set_dict(name_);
    small->mutable_begin()->set_leaf_count(1);
    v1::WholeLeaf* leaf = small->add_leaves();
    leaf->mutable_header()->mutable_path()->add_components("x");
    leaf->mutable_header()->set_dtype(v1::UINT8);
    leaf->mutable_header()->add_shape(256);
    leaf->mutable_header()->add_shape(1024);
    leaf->mutable_header()->set_byte_size(256 * 1024);
    fill(leaf);
    v1::WriteLeavesResponse response;
    auto writer = stub_->WriteLeaves(context, &response);
    writer->Write(chunk);
    writer->WritesDone();
    return writer->Finish();
  }
  v1::ShmSpan Span(std::string token, int64_t offset, int64_t length) {
    v1::ShmSpan span;
    span.set_region(std::move(token));
    span.set_offset(offset);
    span.set_length(length);
    return span;
  }
  // A ReadLeavesShared call of the fixture's dict whose request (sent)
  // offers all of `span`, a span of arena_.
  std::unique_ptr<grpc::ClientReaderWriter<v1::ReadSharedRequest, v1::ReadChunk>> OpenSharedRead(
      grpc::ClientContext* context, const core::ShmArena::Span& span) {
    auto stream = stub_->ReadLeavesShared(context);
    v1::ReadSharedRequest request;
    request.mutable_request()->set_dict(name_);
    *request.mutable_request()->mutable_shm_reply() =
        Span(arena_->token(), span.offset(), static_cast<int64_t>(span.size()));
    EXPECT_TRUE(stream->Write(request));
    return stream;
  }
  static std::string Trailer(const grpc::ClientContext& context) {
    auto it = context.GetServerTrailingMetadata().find(kShmMetadataKey);
    return it == context.GetServerTrailingMetadata().end()
               ? std::string()
               : std::string(it->second.data(), it->second.size());
  }

  std::unique_ptr<v1::TdStore::Stub> stub_;
  std::shared_ptr<core::ShmArena> arena_;
  std::string name_;
};

TEST_F(E2eSharedMemorySpans, ForgedOutsideOrDoubledSpansApplyNothing) {
  const std::map<std::string, std::string> before = NamespaceSnapshot("e2e");
  const std::string token = arena_->token();
  const int64_t kLeaf = 256 * 1024;
  struct Case {
    std::string name;
    std::function<void(v1::WholeLeaf*)> fill;
    grpc::StatusCode code;
    bool unknown_region;
  };
  const int64_t big = std::numeric_limits<int64_t>::max();
  const std::vector<Case> cases = {
      {"a forged token", [&](v1::WholeLeaf* l) { *l->mutable_shm() = Span(std::string(16, 'f'), 0, kLeaf); },
       grpc::StatusCode::FAILED_PRECONDITION, true},
      {"no token", [&](v1::WholeLeaf* l) { *l->mutable_shm() = Span("", 0, kLeaf); },
       grpc::StatusCode::FAILED_PRECONDITION, true},
      {"past the region's end", [&](v1::WholeLeaf* l) { *l->mutable_shm() = Span(token, (1 << 20) - 100, kLeaf); },
       grpc::StatusCode::OUT_OF_RANGE, false},
      {"a negative offset", [&](v1::WholeLeaf* l) { *l->mutable_shm() = Span(token, -kLeaf, kLeaf); },
       grpc::StatusCode::OUT_OF_RANGE, false},
      {"an offset that overflows", [&](v1::WholeLeaf* l) { *l->mutable_shm() = Span(token, big, kLeaf); },
       grpc::StatusCode::OUT_OF_RANGE, false},
      {"fewer bytes than the header", [&](v1::WholeLeaf* l) { *l->mutable_shm() = Span(token, 0, kLeaf - 1); },
       grpc::StatusCode::INVALID_ARGUMENT, false},
      {"more bytes than the header", [&](v1::WholeLeaf* l) { *l->mutable_shm() = Span(token, 0, kLeaf + 1); },
       grpc::StatusCode::INVALID_ARGUMENT, false},
      {"bytes inline and in shared memory",
       [&](v1::WholeLeaf* l) {
         *l->mutable_shm() = Span(token, 0, kLeaf);
         l->set_data("x");
       },
       grpc::StatusCode::INVALID_ARGUMENT, false},
  };
  for (const Case& c : cases) {
    grpc::ClientContext context;
    grpc::Status status = Write(c.fill, &context);
    EXPECT_EQ(status.error_code(), c.code) << c.name << ": " << status.error_message();
    EXPECT_EQ(Trailer(context), c.unknown_region ? kShmUnknownRegion : "") << c.name;
  }
  // Reads: an unknown reply region, and one outside the region.
  for (const auto& [span, code] : std::vector<std::pair<v1::ShmSpan, grpc::StatusCode>>{
           {Span(std::string(16, 'f'), 0, 1 << 20), grpc::StatusCode::FAILED_PRECONDITION},
           {Span(token, 1, 1 << 20), grpc::StatusCode::OUT_OF_RANGE}}) {
    grpc::ClientContext context;
    v1::ReadLeavesRequest request;
    request.set_dict(name_);
    *request.mutable_shm_reply() = span;
    auto reader = stub_->ReadLeaves(&context, request);
    v1::ReadChunk chunk;
    EXPECT_FALSE(reader->Read(&chunk));
    EXPECT_EQ(reader->Finish().error_code(), code);
  }
  EXPECT_EQ(NamespaceSnapshot("e2e"), before) << "a refused span wrote something";

  // The same write with a good span does write (so the cases above could
  // have): the region's bytes become the leaf.
  {
    core::ShmArena::Span span = arena_->Take(static_cast<size_t>(kLeaf));
    ASSERT_TRUE(span);
    for (int64_t i = 0; i < kLeaf; ++i) span.data()[i] = static_cast<char>(i * 7);
    grpc::ClientContext context;
    grpc::Status status =
        Write([&](v1::WholeLeaf* l) { *l->mutable_shm() = Span(token, span.offset(), kLeaf); },
              &context);
    ASSERT_TRUE(status.ok()) << status.error_message();
    Bytes got;
    core::Client(DaemonAddress()).open(name_).read({Key("x")}, got);
    ASSERT_EQ(got.at("x").size(), static_cast<size_t>(kLeaf));
    EXPECT_EQ(std::memcmp(got.at("x").data(), span.data(), static_cast<size_t>(kLeaf)), 0);
  }
}

TEST_F(E2eSharedMemorySpans, AReplyTooBigForTheOfferedSpanComesOverTheSocket) {
  std::vector<char> value(256 * 1024);
  std::mt19937 random(3);
  for (char& c : value) c = static_cast<char>(random());
  core::Client(DaemonAddress()).open(name_).write(
      {{Key("x"), DType::kUInt8, {256, 1024}, value.data(), static_cast<int64_t>(value.size())}});
  for (const int64_t offered : {int64_t{128} << 10, int64_t{256} << 10}) {
    core::ShmArena::Span span = arena_->Take(static_cast<size_t>(offered));
    ASSERT_TRUE(span);
    std::memset(span.data(), 0, static_cast<size_t>(offered));
    grpc::ClientContext context;
    v1::ReadLeavesRequest request;
    request.set_dict(name_);
    *request.mutable_shm_reply() = Span(arena_->token(), span.offset(), offered);
    auto reader = stub_->ReadLeaves(&context, request);
    std::vector<v1::ReadChunk> chunks;
    for (v1::ReadChunk chunk; reader->Read(&chunk);) chunks.push_back(chunk);
    ASSERT_TRUE(reader->Finish().ok());
    ASSERT_FALSE(chunks.empty());
    if (offered < static_cast<int64_t>(value.size())) {
      // ReadBegin, header, data chunks: the plain stream, the span untouched.
      EXPECT_EQ(chunks[0].kind_case(), v1::ReadChunk::kBegin);
      std::string data;
      for (const v1::ReadChunk& c : chunks) {
        if (c.kind_case() == v1::ReadChunk::kData) data += c.data();
      }
      EXPECT_EQ(data, std::string(value.begin(), value.end()));
      EXPECT_EQ(std::count(span.data(), span.data() + offered, 0), offered);
    } else {
      ASSERT_EQ(chunks.size(), 1u);
      ASSERT_EQ(chunks[0].kind_case(), v1::ReadChunk::kSmall);
      const v1::WholeLeaf& leaf = chunks[0].small().leaves(0);
      ASSERT_TRUE(leaf.has_shm());
      EXPECT_TRUE(leaf.data().empty());
      EXPECT_EQ(leaf.shm().offset(), span.offset());
      EXPECT_EQ(leaf.shm().length(), static_cast<int64_t>(value.size()));
      EXPECT_EQ(std::memcmp(span.data(), value.data(), value.size()), 0);
    }
  }
}

// A daemon of the test's own, on a unix socket, with a short pending
// timeout and sweep interval (as client_faults_test.cc) so that what a
// killed client left is cleaned up quickly.
class E2eSharedMemoryDaemon : public ::testing::Test {
 protected:
  void StartDaemon(std::vector<std::string> extra = {}) {
    static int tests = 0;
    if (ns_.empty()) ns_ = "shm" + std::to_string(tests++);
    std::vector<std::string> args = {"--redis", SharedRedis().url(), "--namespace", ns_,
                                     "--unix-socket", daemon_.dir() + "/td.sock",
                                     "--pending-timeout-ms", "1500", "--sweep-interval-ms", "200"};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::Status started = daemon_.Start(args);
    ASSERT_TRUE(started.ok()) << started;
    unix_ = "unix://" + daemon_.dir() + "/td.sock";
  }
  void TearDown() override {
    if (child_ > 0) KillChild(child_);
    EXPECT_EQ(daemon_.Stop(), 0) << daemon_.LogTail();
  }
  std::vector<std::string> Keys() const { return SharedRedis().Keys(ns_ + ":*"); }

  // The child's log so far.
  std::string ChildLog() const {
    std::ifstream in(child_log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // The last "<word> N" the child printed (0 if none).
  int64_t LastCount(const std::string& word) const {
    const std::string log = ChildLog();
    const size_t at = log.rfind(word + " ");
    return at == std::string::npos ? 0 : std::stoll(log.substr(at + word.size() + 1));
  }

  // tdstored names another tdstored's shared-memory socket: a client of it
  // (through the unix socket, or `loopback` TCP) lends its region to the
  // other one. Every call naming that region must go again over the
  // socket with the same results, and the client stop lending.
  void LendToAnotherTdstored(bool loopback) {
    DaemonProcess other;
    const std::string shm_of_other = other.dir() + "/td.sock.shm";
    StartDaemon({"--shm-socket", shm_of_other});
    ASSERT_TRUE(other.Start({"--redis", SharedRedis().url(), "--namespace", ns_ + "x",
                             "--unix-socket", other.dir() + "/td.sock"})
                    .ok());
    core::Client client(loopback ? daemon_.address() : unix_);
    ASSERT_TRUE(client.shares_memory());
    EXPECT_EQ(MappedRegions(other.pid()), 1) << "the region went to the other tdstored";
    EXPECT_EQ(MappedRegions(daemon_.pid()), 0);
    core::Dict dict = client.create("elsewhere", {1024});
    std::mt19937 random(loopback ? 17 : 13);
    for (int i = 0; i < 3; ++i) {
      std::vector<char> value = RandomBytes(1024 * 1024, random);
      dict.write({{Key("x"), DType::kUInt8, {1024, 1024}, value.data(),
                   static_cast<int64_t>(value.size())}});
      Bytes got;
      dict.read({Key("x")}, got);
      EXPECT_EQ(got.at("x"), value) << i;
    }
    EXPECT_FALSE(client.shares_memory()) << "lends again at once to the wrong tdstored";
    EXPECT_EQ(other.Stop(), 0);
  }

  DaemonProcess daemon_;
  std::string ns_;
  std::string unix_;
  pid_t child_ = -1;
  std::string child_log_;
};

TEST_F(E2eSharedMemoryDaemon, AClientKilledMidCallLeavesWholeValuesAndNothingLent) {
  StartDaemon();
  const std::string name = "killed";
  core::Client tcp(daemon_.address(), WithShm(0));
  core::Dict dict = tcp.create(name, {2048});
  std::vector<float> zeros(2048 * 1024, 0.0f);
  dict.write({{Key("x"), DType::kFloat32, {2048, 1024}, zeros.data(),
               static_cast<int64_t>(zeros.size() * sizeof(float))}});
  const size_t keys_at_rest = Keys().size();
  std::mt19937 random(11);
  float previous = 0;  // the value after the round before
  for (int round = 0; round < 8; ++round) {
    const std::string mode = round % 4 == 3 ? "read" : "write";
    // Rounds 1 and 5 write the 8 MiB value through a 2 MiB region, round 7
    // reads it through one: a ring of its spans, reused within the call.
    const std::string region =
        round % 4 == 1 || round == 7 ? std::to_string(2 << 20) : std::to_string(64 << 20);
    child_log_ = daemon_.dir() + "/child" + std::to_string(round) + ".log";
    ASSERT_TRUE(SpawnChild({TDSTORE_SHM_WRITER_BIN, unix_, name, mode, region}, child_log_,
                           ChildLog::kTruncate, &child_)
                    .ok());
    const std::string word = mode == "write" ? "wrote" : "read";
    // Killed once it has made 1 to 4 calls, at a random point of the next.
    const int64_t calls = 1 + static_cast<int64_t>(random() % 4);
    ASSERT_TRUE(Within(milliseconds(30000), [&] {
      return LastCount(word) >= calls || TryReapChild(child_);
    })) << ChildLog();
    ASSERT_NE(ChildLog().find("shares_memory 1"), std::string::npos) << ChildLog();
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 20000));
    KillChild(child_);
    child_ = -1;
    ASSERT_EQ(ChildLog().find("shm_writer:"), std::string::npos) << ChildLog();

    // The call in flight may still commit after its client died (its
    // message was whole): it is done when tdstored unmapped the dead
    // client's region, which the last span of it keeps mapped.
    ASSERT_TRUE(Within(milliseconds(10000), [&] { return MappedRegions(daemon_.pid()) == 0; }))
        << "round " << round << ": tdstored still maps " << MappedRegions(daemon_.pid())
        << " regions of a dead client";
    // Each value whole: every element the same i, and no older than the
    // last write the writer saw acknowledged (at most the one in flight).
    Bytes got;
    dict.read({Key("x")}, got);
    std::vector<float> value(2048 * 1024);
    std::memcpy(value.data(), got.at("x").data(), got.at("x").size());
    const float first = value[0];
    EXPECT_EQ(std::count(value.begin(), value.end(), first), static_cast<long>(value.size()))
        << "round " << round << ": a value mixed from two writes";
    if (mode == "write") {
      const int64_t acked = LastCount("wrote");
      EXPECT_GE(first, static_cast<float>(acked)) << "round " << round << ": a write was lost";
      EXPECT_LE(first, static_cast<float>(acked + 1)) << "round " << round;
    } else {
      EXPECT_EQ(first, previous) << "round " << round << ": a killed reader changed the value";
    }
    previous = first;
    // No pending keys left.
    EXPECT_TRUE(Within(milliseconds(1500 + 5 * 200 + 5000), [&] {
      return Keys().size() == keys_at_rest;
    })) << "round " << round << ": " << Keys().size() << " keys, " << keys_at_rest << " at rest";
  }
}

TEST_F(E2eSharedMemoryDaemon, WhenRegionsRunOutCallsUseTheSocketWithTheSameResults) {
  StartDaemon({"--shm-max-bytes", std::to_string(8 << 20)});
  core::Client lender(unix_, WithShm(6 << 20));
  core::Client refused(unix_, WithShm(64 << 20));
  core::Client tiny(unix_, WithShm(128 << 10));
  ASSERT_TRUE(lender.shares_memory());
  EXPECT_FALSE(refused.shares_memory()) << "a 64 MiB region past --shm-max-bytes was lent";
  ASSERT_TRUE(tiny.shares_memory());
  EXPECT_EQ(MappedRegions(daemon_.pid()), 2);

  const std::string name = "runout";
  lender.create(name, {1024});
  std::mt19937 random(5);
  // 2.5 MiB per leaf: fits the lender's region twice, never the tiny one's.
  // Four threads per client at once, so the lender's region is full too.
  std::vector<std::future<void>> done;
  for (core::Client* client : {&lender, &refused, &tiny}) {
    for (int t = 0; t < 4; ++t) {
      const uint32_t seed = random();
      done.push_back(std::async(std::launch::async, [client, name, seed, t] {
        std::mt19937 mine(seed);
        core::Dict dict = client->open(name);
        const std::string leaf = client->address() + std::to_string(client->options().shared_memory_bytes) +
                                 "/" + std::to_string(t);
        const Key key(std::to_string(std::hash<std::string>()(leaf)));
        for (int i = 0; i < 5; ++i) {
          std::vector<char> value = RandomBytes(1024 * 2560, mine);
          dict.write({{key, DType::kUInt8, {1024, 2560}, value.data(),
                       static_cast<int64_t>(value.size())}});
          Bytes got;
          dict.read({key}, got);
          ASSERT_EQ(got.at(key.str()), value);
        }
      }));
    }
  }
  for (auto& d : done) d.get();
}

TEST_F(E2eSharedMemoryDaemon, ARestartedDaemonForgetsRegionsAndCallsStillSucceed) {
  StartDaemon();
  core::Client client(unix_);
  ASSERT_TRUE(client.shares_memory());
  const std::string name = "restarted";
  core::Dict dict = client.create(name, {1024});
  std::mt19937 random(9);
  for (int life = 0; life < 3; ++life) {
    std::vector<char> value = RandomBytes(1024 * 1024, random);
    dict.write({{Key("x"), DType::kUInt8, {1024, 1024}, value.data(),
                 static_cast<int64_t>(value.size())}});
    Bytes got;
    dict.read({Key("x")}, got);
    EXPECT_EQ(got.at("x"), value) << "life " << life;
    EXPECT_EQ(MappedRegions(daemon_.pid()), 1) << "life " << life;
    ASSERT_EQ(daemon_.Stop(), 0);
    StartDaemon();
  }
  EXPECT_TRUE(client.shares_memory());
}

// A client the shared-memory socket refuses by its permissions: the socket
// is owner and group only (0660, docs/security.md), so a user outside
// tdstored's group who may still call it (here: its gRPC socket opened to
// every user by the test, and the client run as nobody through setpriv)
// cannot lend a region. Its calls go over the socket with the same results:
// whole values written and read, nothing mapped in tdstored, no pending key
// left. Needs root, to run the client as another user.
TEST_F(E2eSharedMemoryDaemon, AClientRefusedTheSharedMemorySocketByPermissionUsesTheSocket) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to run a client as another user";
  if (access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/setpriv";
  StartDaemon();
  const std::string dir = daemon_.dir();
  const std::string sock = dir + "/td.sock";
  struct stat shm_socket {};
  ASSERT_EQ(stat((sock + ".shm").c_str(), &shm_socket), 0) << strerror(errno);
  ASSERT_EQ(shm_socket.st_mode & 0777, 0660u) << "the shared-memory socket is owner and group only";
  ASSERT_EQ(shm_socket.st_uid, 0u);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0) << strerror(errno);
  ASSERT_EQ(chmod(sock.c_str(), 0666), 0) << strerror(errno);
  // The client binary beside the socket, where every user may run it
  // (the build tree may sit under a directory only root can enter).
  const std::string writer = dir + "/shm_writer";
  {
    std::ifstream from(TDSTORE_SHM_WRITER_BIN, std::ios::binary);
    std::ofstream to(writer, std::ios::binary);
    to << from.rdbuf();
  }
  ASSERT_EQ(chmod(writer.c_str(), 0755), 0) << strerror(errno);

  const std::string name = "refused";
  core::Client owner(unix_, WithShm(0));
  core::Dict dict = owner.create(name, {2048});
  std::vector<float> zeros(2048 * 1024, 0.0f);
  dict.write({{Key("x"), DType::kFloat32, {2048, 1024}, zeros.data(),
               static_cast<int64_t>(zeros.size() * sizeof(float))}});
  const size_t keys_at_rest = Keys().size();
  // Three 8 MiB writes (every element 1, then 2, then 3), then three reads;
  // the child exits after its calls, so each has been answered.
  for (const std::string mode : {"write", "read"}) {
    child_log_ = dir + "/refused_" + mode + ".log";
    ASSERT_TRUE(SpawnChild({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            "--pdeathsig", "keep", writer, unix_, name, mode,
                            std::to_string(64 << 20), "3"},
                           child_log_, ChildLog::kTruncate, &child_)
                    .ok());
    int wait_status = 0;
    ASSERT_TRUE(Within(milliseconds(30000), [&] { return TryReapChild(child_, &wait_status); }))
        << ChildLog();
    child_ = -1;
    ASSERT_EQ(ExitCodeOf(wait_status), 0) << ChildLog();
    EXPECT_NE(ChildLog().find("shares_memory 0"), std::string::npos) << ChildLog();
    EXPECT_EQ(MappedRegions(daemon_.pid()), 0) << "tdstored maps a region of the refused client";
    EXPECT_EQ(LastCount(mode == "write" ? "wrote" : "read"), 3) << ChildLog();

    Bytes got;
    dict.read({Key("x")}, got);
    std::vector<float> value(2048 * 1024);
    std::memcpy(value.data(), got.at("x").data(), got.at("x").size());
    EXPECT_EQ(std::count(value.begin(), value.end(), 3.0f), static_cast<long>(value.size()))
        << mode << ": not the third write's value";
    EXPECT_TRUE(Within(milliseconds(1500 + 5 * 200 + 5000), [&] {
      return Keys().size() == keys_at_rest;
    })) << mode << ": " << Keys().size() << " keys, " << keys_at_rest << " at rest";
  }
}

// A client whose region tdstored does not know (here: lent to another
// tdstored, because this one's --shm-socket names that one's socket; a
// restart between a call's check and its arrival looks the same to the
// client) gets FAILED_PRECONDITION with the unknown-region trailer: the call
// is made again over the socket, and the client stops lending for a while.
TEST_F(E2eSharedMemoryDaemon, ACallWhoseRegionTdstoredDoesNotKnowGoesOverTheSocket) {
  LendToAnotherTdstored(/*loopback=*/false);
}

// A client that reaches tdstored over TCP on loopback (the default
// address's case) lends it memory as a unix-socket client does, and gets
// what the socket gives: random leaves written through a 2 MiB region
// (small writes in one span, larger ones through its ring), read back
// whole and by random rows through it and through a socket-only client.
TEST_F(E2eSharedMemoryDaemon, ALoopbackTcpClientLendsMemoryAndGetsWhatTheSocketGives) {
  StartDaemon();
  const std::string port = daemon_.address().substr(daemon_.address().rfind(':') + 1);
  ASSERT_EQ(daemon_.address(), "127.0.0.1:" + port);
  core::Client socket(daemon_.address(), WithShm(0));
  EXPECT_FALSE(socket.shares_memory());
  std::mt19937 random(20261206);
  for (const std::string& address : {daemon_.address(), "localhost:" + port}) {
    core::Client loopback(address, WithShm(2 << 20));
    ASSERT_TRUE(loopback.shares_memory()) << address;
    EXPECT_EQ(MappedRegions(daemon_.pid()), 1) << address;
    for (int round = 0; round < 4; ++round) {
      const int64_t rows = 256 + static_cast<int64_t>(random() % 4096);
      const std::string name = UniqueDictName();
      core::Dict dict = loopback.create(name, {rows});
      std::vector<std::vector<char>> values;
      std::vector<LeafData> leaves;
      const int count = 1 + static_cast<int>(random() % 3);
      for (int i = 0; i < count; ++i) {
        const int64_t cols = 1 + static_cast<int64_t>(random() % 1500);
        values.push_back(RandomBytes(static_cast<size_t>(rows * cols), random));
      }
      for (int i = 0; i < count; ++i) {
        leaves.push_back({Key("l" + std::to_string(i)), DType::kUInt8,
                          {rows, static_cast<int64_t>(values[i].size()) / rows},
                          values[i].data(), static_cast<int64_t>(values[i].size())});
      }
      dict.write(leaves);
      std::vector<int64_t> picked;
      for (int k = 0; k < 500; ++k) picked.push_back(static_cast<int64_t>(random() % rows));
      const core::Index index = {
          core::IndexTerm::Positions(picked, {static_cast<int64_t>(picked.size())})};
      for (core::Client* reader : {&loopback, &socket}) {
        Bytes whole;
        reader->open(name).read({}, whole);
        Bytes rows_read;
        core::ReadOptions at;
        at.index = &index;
        reader->open(name).read({}, rows_read, at);
        for (int i = 0; i < count; ++i) {
          const std::string leaf = "l" + std::to_string(i);
          EXPECT_EQ(whole.at(leaf), values[i]) << address << " round " << round << " " << leaf
                                               << " via " << reader->address();
          const int64_t cols = static_cast<int64_t>(values[i].size()) / rows;
          std::vector<char> expected;
          for (int64_t r : picked) {
            expected.insert(expected.end(), values[i].begin() + r * cols,
                            values[i].begin() + (r + 1) * cols);
          }
          EXPECT_EQ(rows_read.at(leaf), expected) << address << " round " << round << " "
                                                  << leaf << " via " << reader->address();
        }
      }
      loopback.drop(name);
    }
    EXPECT_TRUE(loopback.shares_memory()) << address << ": stopped lending";
  }
}

// --shm-clients unix: only the unix socket's clients lend; a loopback TCP
// client moves its bytes over the socket, with the same results.
TEST_F(E2eSharedMemoryDaemon, WithShmClientsUnixOnlyUnixSocketClientsLend) {
  StartDaemon({"--shm-clients", "unix"});
  core::Client tcp(daemon_.address());
  core::Client unix_socket(unix_);
  EXPECT_FALSE(tcp.shares_memory());
  ASSERT_TRUE(unix_socket.shares_memory());
  EXPECT_EQ(MappedRegions(daemon_.pid()), 1);
  core::Dict dict = tcp.create("unix-only", {512});
  std::mt19937 random(7);
  const std::vector<char> value = RandomBytes(512 * 1024, random);
  dict.write({{Key("x"), DType::kUInt8, {512, 1024}, value.data(),
               static_cast<int64_t>(value.size())}});
  Bytes got;
  unix_socket.open("unix-only").read({Key("x")}, got);
  EXPECT_EQ(got.at("x"), value);
  EXPECT_FALSE(tcp.shares_memory());
}

// A loopback client whose tdstored names another tdstored's shared-memory
// socket (a port forwarded to a daemon in another mount namespace looks
// the same): the region goes to the other one, the first call naming it
// fails with nothing applied and goes again over the socket, and the
// client stops lending for a while. No byte of that region is used.
TEST_F(E2eSharedMemoryDaemon, ALoopbackClientLentToAnotherTdstoredUsesTheSocket) {
  LendToAnotherTdstored(/*loopback=*/true);
}

// A write of many region-fulls: the client's 2 MiB region gives a ring of
// four 256 KiB spans, and the write's progress moves by at most one of them
// (the socket's chunks are 1 MiB), so the ring carried it. Random leaves,
// some smaller than a span, some not a multiple of it; whole and indexed
// (values larger than the region) writes, read back over TCP.
TEST(E2eSharedMemory, WritesLargerThanTheRegionStreamThroughARingOfItsSpans) {
  core::Client ring(DaemonUnixAddress(), WithShm(2 << 20));
  core::Client tcp(DaemonAddress());
  ASSERT_TRUE(ring.shares_memory());
  std::mt19937 random(20261205);
  for (int round = 0; round < 5; ++round) {
    const int64_t rows = 1000 + static_cast<int64_t>(random() % 3000);
    const std::string name = UniqueDictName();
    core::Dict dict = ring.create(name, {rows});
    const int count = 1 + static_cast<int>(random() % 3);
    std::vector<std::vector<char>> values;
    std::vector<LeafData> leaves;
    for (int i = 0; i < count; ++i) {
      const int64_t cols = i == 0 ? 1 + static_cast<int64_t>(random() % 60)
                                  : 1000 + static_cast<int64_t>(random() % 3000);
      values.push_back(RandomBytes(static_cast<size_t>(rows * cols), random));
    }
    for (int i = 0; i < count; ++i) {
      const int64_t cols = static_cast<int64_t>(values[i].size()) / rows;
      leaves.push_back({Key("l" + std::to_string(i)), DType::kUInt8, {rows, cols},
                        values[i].data(), static_cast<int64_t>(values[i].size())});
    }
    int64_t last = 0, widest_step = 0;
    core::WriteOptions watched;
    watched.progress = [&](int64_t moved, int64_t) {
      widest_step = std::max(widest_step, moved - last);
      last = moved;
    };
    dict.write(leaves, watched);
    EXPECT_LE(widest_step, int64_t{256} << 10) << "round " << round << ": not through the ring";
    Bytes got;
    tcp.open(name).read({}, got);
    for (int i = 0; i < count; ++i) {
      EXPECT_EQ(got.at("l" + std::to_string(i)), values[i]) << "round " << round << " leaf " << i;
    }
    // Rows of the widest leaf at random positions, more bytes than the region.
    const int last_leaf = count - 1;
    const int64_t cols = static_cast<int64_t>(values[last_leaf].size()) / rows;
    std::vector<int64_t> positions;
    for (int64_t r = 0; r < rows; ++r) {
      if (random() % 2 == 0) positions.push_back(r);
    }
    std::vector<char> row_bytes = RandomBytes(positions.size() * static_cast<size_t>(cols), random);
    for (size_t k = 0; k < positions.size(); ++k) {
      std::memcpy(values[last_leaf].data() + positions[k] * cols, row_bytes.data() + k * cols,
                  static_cast<size_t>(cols));
    }
    const core::Index at_rows = {
        core::IndexTerm::Positions(positions, {static_cast<int64_t>(positions.size())})};
    core::WriteOptions indexed;
    indexed.index = &at_rows;
    dict.write({{Key("l" + std::to_string(last_leaf)), DType::kUInt8,
                 {static_cast<int64_t>(positions.size()), cols}, row_bytes.data(),
                 static_cast<int64_t>(row_bytes.size())}},
               indexed);
    Bytes after;
    tcp.open(name).read({Key("l" + std::to_string(last_leaf))}, after);
    EXPECT_EQ(after.at("l" + std::to_string(last_leaf)), values[last_leaf]) << "round " << round;
    ring.drop(name);
  }
}

// WriteLeavesShared by hand: a 256 KiB leaf sent as two 128 KiB chunks in
// the same span. Each chunk's release comes before tdstored reads the next
// message, so the span is rewritten for the second chunk, and the leaf
// holds both chunks' bytes: a release means tdstored is done with the span.
TEST_F(E2eSharedMemorySpans, ChunksAreReleasedOneByOneSoASpanCarriesTheNext) {
  const int64_t kHalf = 128 * 1024;
  core::ShmArena::Span span = arena_->Take(static_cast<size_t>(kHalf));
  ASSERT_TRUE(span);
  grpc::ClientContext context;
  auto stream = stub_->WriteLeavesShared(&context);
  v1::WriteChunk chunk;
  chunk.mutable_begin()->set_dict(name_);
  chunk.mutable_begin()->set_leaf_count(1);
  ASSERT_TRUE(stream->Write(chunk));
  v1::LeafHeader* header = chunk.mutable_header();
  header->mutable_path()->add_components("x");
  header->set_dtype(v1::UINT8);
  header->add_shape(256);
  header->add_shape(1024);
  header->set_byte_size(2 * kHalf);
  ASSERT_TRUE(stream->Write(chunk));
  std::vector<char> expected;
  for (int half = 0; half < 2; ++half) {
    for (int64_t i = 0; i < kHalf; ++i) span.data()[i] = static_cast<char>(i * 3 + half * 101);
    expected.insert(expected.end(), span.data(), span.data() + kHalf);
    *chunk.mutable_shm_data() = Span(arena_->token(), span.offset(), kHalf);
    ASSERT_TRUE(stream->Write(chunk));
    v1::WriteProgress progress;
    ASSERT_TRUE(stream->Read(&progress));
    EXPECT_FALSE(progress.has_done());
    EXPECT_EQ(progress.chunks_released(), half + 1);
  }
  ASSERT_TRUE(stream->WritesDone());
  v1::WriteProgress last;
  ASSERT_TRUE(stream->Read(&last));
  ASSERT_TRUE(last.has_done());
  EXPECT_EQ(last.done().written_size(), 1);
  EXPECT_FALSE(stream->Read(&last));
  grpc::Status status = stream->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  Bytes got;
  core::Client(DaemonAddress()).open(name_).read({Key("x")}, got);
  EXPECT_EQ(got.at("x"), expected);
}

// shm_data chunks that cannot be used apply nothing: on WriteLeaves (which
// cannot release them), naming an unknown region (with the trailer that
// sends the client back to the socket), outside the region, empty, or past
// the leaf's bytes. Each is the leaf's first chunk, so no key may change;
// then a bad chunk after a good one, which must leave the leaf unwritten.
TEST_F(E2eSharedMemorySpans, ChunksThatCannotBeUsedApplyNothing) {
  const std::map<std::string, std::string> before = NamespaceSnapshot("e2e");
  const int64_t kHalf = 128 * 1024;
  const std::string token = arena_->token();
  struct Case {
    std::string name;
    bool on_write_leaves;
    v1::ShmSpan bad;
    grpc::StatusCode code;
    bool unknown_region;
    bool after_a_good_chunk = false;
  };
  // Each on WriteLeavesShared (chunks borrowed) and on WriteLeaves (lent
  // to the call's end, protocol revision 7).
  std::vector<Case> cases;
  for (const bool on_write_leaves : {false, true}) {
    const std::vector<Case> each = {
        {"a forged token", on_write_leaves, Span(std::string(16, 'f'), 0, kHalf),
         grpc::StatusCode::FAILED_PRECONDITION, true},
        {"past the region's end", on_write_leaves, Span(token, (1 << 20) - 100, kHalf),
         grpc::StatusCode::OUT_OF_RANGE, false},
        {"a negative offset", on_write_leaves, Span(token, -kHalf, kHalf),
         grpc::StatusCode::OUT_OF_RANGE, false},
        {"no bytes", on_write_leaves, Span(token, 0, 0), grpc::StatusCode::INVALID_ARGUMENT,
         false},
        {"past the leaf's bytes", on_write_leaves, Span(token, 0, 2 * kHalf + 1),
         grpc::StatusCode::INVALID_ARGUMENT, false},
        {"past the leaf's bytes, after a good chunk", on_write_leaves, Span(token, 0, kHalf + 1),
         grpc::StatusCode::INVALID_ARGUMENT, false, true},
    };
    cases.insert(cases.end(), each.begin(), each.end());
  }
  for (Case c : cases) {
    if (c.on_write_leaves) c.name += " (WriteLeaves)";
    grpc::ClientContext context;
    v1::WriteChunk chunk;
    chunk.mutable_begin()->set_dict(name_);
    chunk.mutable_begin()->set_leaf_count(1);
    std::vector<v1::WriteChunk> chunks = {chunk};
    v1::LeafHeader* header = chunk.mutable_header();
    header->mutable_path()->add_components("x");
    header->set_dtype(v1::UINT8);
    header->add_shape(256);
    header->add_shape(1024);
    header->set_byte_size(2 * kHalf);
    chunks.push_back(chunk);
    if (c.after_a_good_chunk) {
      *chunk.mutable_shm_data() = Span(token, 0, kHalf);
      chunks.push_back(chunk);
    }
    *chunk.mutable_shm_data() = c.bad;
    chunks.push_back(chunk);
    grpc::Status status;
    if (c.on_write_leaves) {
      v1::WriteLeavesResponse response;
      auto writer = stub_->WriteLeaves(&context, &response);
      for (const v1::WriteChunk& each : chunks) writer->Write(each);
      writer->WritesDone();
      status = writer->Finish();
    } else {
      auto stream = stub_->WriteLeavesShared(&context);
      for (const v1::WriteChunk& each : chunks) stream->Write(each);
      stream->WritesDone();
      v1::WriteProgress progress;
      while (stream->Read(&progress)) {
        EXPECT_FALSE(progress.has_done()) << c.name;
      }
      status = stream->Finish();
    }
    EXPECT_EQ(status.error_code(), c.code) << c.name << ": " << status.error_message();
    EXPECT_EQ(Trailer(context), c.unknown_region ? kShmUnknownRegion : "") << c.name;
    if (c.after_a_good_chunk) {
      // Its first chunk reached Redis in a generation of its own, which
      // the abort deletes (and the sweeper would); the dict never shows it.
      Bytes got;
      core::Client(DaemonAddress()).open(name_).read({}, got);
      EXPECT_EQ(got.size(), 0u) << c.name << ": a refused write's leaf is visible";
    } else {
      // The header reserved a generation (next_gen moves, as for a stream
      // over the socket refused at its first chunk); no key came or went.
      std::vector<std::string> keys_before, keys_after;
      for (const auto& [key, value] : before) keys_before.push_back(key);
      for (const auto& [key, value] : NamespaceSnapshot("e2e")) keys_after.push_back(key);
      EXPECT_EQ(keys_after, keys_before) << c.name << ": a refused chunk wrote something";
    }
  }
}

// shm_data chunks on WriteLeaves (protocol revision 7) are lent: each
// stays the client's to keep unchanged until the call ends, so tdstored
// may pass them on to Redis as they come (a write of one leaf is sent
// ahead). Random leaves cut into random chunks read back as written; a
// call of more than WriteStream::kMaxLentChunks chunks, or one the client
// breaks off half-way, applies nothing, and the next write still works.
TEST_F(E2eSharedMemorySpans, LentChunksOnWriteLeavesWriteWholeOrNothing) {
  const std::string token = arena_->token();
  core::Dict dict = core::Client(DaemonAddress()).open(name_);
  std::mt19937 random(17);
  auto header_chunk = [&](int64_t width) {
    v1::WriteChunk chunk;
    v1::LeafHeader* header = chunk.mutable_header();
    header->mutable_path()->add_components("x");
    header->set_dtype(v1::UINT8);
    header->add_shape(256);
    header->add_shape(width);
    header->set_byte_size(256 * width);
    return chunk;
  };
  auto begin_chunk = [&] {
    v1::WriteChunk chunk;
    chunk.mutable_begin()->set_dict(name_);
    chunk.mutable_begin()->set_leaf_count(1);
    return chunk;
  };
  std::vector<char> last;  // the leaf as last written
  for (int round = 0; round < 12; ++round) {
    const int64_t width = 1 + random() % 3000;
    const int64_t bytes = 256 * width;
    core::ShmArena::Span span = arena_->Take(static_cast<size_t>(bytes));
    ASSERT_TRUE(span);
    for (int64_t i = 0; i < bytes; ++i) span.data()[i] = static_cast<char>(random());
    std::vector<int64_t> cuts = {0, bytes};
    for (int k = random() % 6; k > 0; --k) cuts.push_back(1 + random() % (bytes - 1));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    const bool broken_off = round % 3 == 2 && cuts.size() > 2;
    grpc::ClientContext context;
    v1::WriteLeavesResponse response;
    auto writer = stub_->WriteLeaves(&context, &response);
    ASSERT_TRUE(writer->Write(begin_chunk()));
    ASSERT_TRUE(writer->Write(header_chunk(width)));
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      if (broken_off && i == 1) break;
      v1::WriteChunk chunk;
      *chunk.mutable_shm_data() = Span(token, span.offset() + cuts[i], cuts[i + 1] - cuts[i]);
      ASSERT_TRUE(writer->Write(chunk));
    }
    if (broken_off) {
      context.TryCancel();
      EXPECT_FALSE(writer->Finish().ok());
    } else {
      writer->WritesDone();
      grpc::Status status = writer->Finish();
      ASSERT_TRUE(status.ok()) << "round " << round << ": " << status.error_message();
      last.assign(span.data(), span.data() + bytes);
    }
    Bytes got;
    dict.read({}, got);
    if (last.empty()) {
      EXPECT_EQ(got.size(), 0u) << "round " << round;
    } else {
      EXPECT_EQ(got.at("x"), last) << "round " << round;
    }
  }

  // One chunk past the limit: refused, nothing applied.
  const int chunks = 64 + 1;  // tdstored's WriteStream::kMaxLentChunks, and one more
  core::ShmArena::Span span = arena_->Take(static_cast<size_t>(chunks));
  ASSERT_TRUE(span);
  grpc::ClientContext context;
  v1::WriteLeavesResponse response;
  auto writer = stub_->WriteLeaves(&context, &response);
  writer->Write(begin_chunk());
  v1::WriteChunk header = header_chunk(1);
  header.mutable_header()->set_byte_size(chunks);
  header.mutable_header()->set_shape(1, 1);
  header.mutable_header()->set_shape(0, chunks);
  writer->Write(header);
  for (int i = 0; i < chunks; ++i) {
    v1::WriteChunk chunk;
    *chunk.mutable_shm_data() = Span(token, span.offset() + i, 1);
    if (!writer->Write(chunk)) break;
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  Bytes got;
  dict.read({}, got);
  EXPECT_EQ(got.size(), last.empty() ? 0u : 1u);
  if (!last.empty()) {
    EXPECT_EQ(got.at("x"), last);
  }
}

// A client lending 2 MiB offers reply spans of at most 1 MiB: a larger
// whole read streams through four 256 KiB slots of it (ReadLeavesShared),
// so the read's progress moves by at most a slot, and tdstored counts the
// call; one that fits the span is one ReadLeaves, as before. Random leaves
// (some smaller than a slot, some not a multiple of it), written over TCP,
// read whole, one leaf, a nested prefix, and rows by positions, a slice
// and a mask.
TEST_F(E2eSharedMemoryDaemon, ReadsLargerThanTheSpanStreamThroughARingCutFromIt) {
  StartDaemon({"--metrics-listen", "127.0.0.1:0"});
  auto calls = [&](const std::string& method) {
    return Scrape(daemon_.metrics_url())
        .Value("tdstore_rpc_calls_total",
               {{"code", "OK"}, {"method", "tdstore.v1.TdStore/" + method}});
  };
  core::Client ring(unix_, WithShm(2 << 20));
  core::Client tcp(daemon_.address(), WithShm(0));
  ASSERT_TRUE(ring.shares_memory());
  std::mt19937 random(20261206);
  for (int round = 0; round < 5; ++round) {
    const int64_t rows = 1000 + static_cast<int64_t>(random() % 3000);
    const std::string name = "ring" + std::to_string(round);
    core::Dict written = tcp.create(name, {rows});
    const int count = 1 + static_cast<int>(random() % 3);
    std::map<std::string, std::vector<char>> values;
    std::vector<LeafData> leaves;
    for (int i = 0; i < count; ++i) {
      const int64_t cols = i == 0 ? 1 + static_cast<int64_t>(random() % 60)
                                  : 1000 + static_cast<int64_t>(random() % 3000);
      const std::string path = i == 2 ? "n/l2" : "l" + std::to_string(i);
      values[path] = RandomBytes(static_cast<size_t>(rows * cols), random);
    }
    for (const auto& [path, bytes] : values) {
      const int64_t cols = static_cast<int64_t>(bytes.size()) / rows;
      leaves.push_back({path.rfind("n/", 0) == 0 ? Key({"n", path.substr(2)}) : Key(path),
                        DType::kUInt8, {rows, cols}, bytes.data(),
                        static_cast<int64_t>(bytes.size())});
    }
    written.write(leaves);
    core::Dict dict = ring.open(name);
    std::vector<std::vector<Key>> reads = {{}, {Key("l0")}};
    if (count > 1) reads.push_back({Key("l1")});
    if (count > 2) reads.push_back({Key("n")});
    for (const std::vector<Key>& paths : reads) {
      int64_t bytes = 0;
      for (const auto& [path, value] : values) {
        bool named = paths.empty();
        for (const Key& p : paths) named |= path == p.str() || path.rfind(p.str() + "/", 0) == 0;
        if (named) bytes += static_cast<int64_t>(value.size());
      }
      const double shared_before = calls("ReadLeavesShared");
      const double plain_before = calls("ReadLeaves");
      int64_t last = 0, widest_step = 0;
      core::ReadOptions watched;
      watched.progress = [&](int64_t moved, int64_t) {
        widest_step = std::max(widest_step, moved - last);
        last = moved;
      };
      Bytes got;
      dict.read(paths, got, watched);
      const bool ringed = bytes > (int64_t{1} << 20);
      EXPECT_EQ(calls("ReadLeavesShared") - shared_before, ringed ? 1 : 0)
          << "round " << round << ", " << bytes << " bytes";
      EXPECT_EQ(calls("ReadLeaves") - plain_before, ringed ? 0 : 1) << "round " << round;
      if (ringed) {
        EXPECT_LE(widest_step, int64_t{256} << 10) << "round " << round;
      }
      for (const auto& [path, value] : values) {
        bool named = paths.empty();
        for (const Key& p : paths) named |= path == p.str() || path.rfind(p.str() + "/", 0) == 0;
        if (!named) continue;
        EXPECT_EQ(got.at(path), value) << "round " << round << " leaf " << path;
      }
    }
    // Rows of every leaf by a one-term index (positions, a strided slice,
    // a mask), some selections larger than the span and some not: the
    // larger ones through the ring, each what the rows hold.
    int64_t row_bytes = 0;
    for (const auto& [path, value] : values) row_bytes += static_cast<int64_t>(value.size()) / rows;
    for (int k = 0; k < 3; ++k) {
      std::vector<int64_t> selected;
      core::Index index;
      if (k == 0) {
        const int64_t n = 1 + static_cast<int64_t>(random() % rows);
        for (int64_t i = 0; i < n; ++i) selected.push_back(static_cast<int64_t>(random() % rows));
        index = {core::IndexTerm::Positions(selected, {n})};
      } else if (k == 1) {
        const int64_t start = static_cast<int64_t>(random() % 100), step = 1 + random() % 3;
        for (int64_t r = start; r < rows; r += step) selected.push_back(r);
        index = {core::IndexTerm::Of(Slice(start, std::nullopt, step))};
      } else {
        std::vector<bool> mask(static_cast<size_t>(rows));
        for (int64_t r = 0; r < rows; ++r) {
          mask[r] = random() % 4 != 0;
          if (mask[r]) selected.push_back(r);
        }
        index = {core::IndexTerm::Mask(mask)};
      }
      const bool ringed = static_cast<int64_t>(selected.size()) * row_bytes > (int64_t{1} << 20);
      const double shared_before = calls("ReadLeavesShared");
      core::ReadOptions at;
      at.index = &index;
      Bytes got;
      dict.read({}, got, at);
      EXPECT_EQ(calls("ReadLeavesShared") - shared_before, ringed ? 1 : 0)
          << "round " << round << " index " << k << ", " << selected.size() << " rows";
      for (const auto& [path, value] : values) {
        const int64_t cols = static_cast<int64_t>(value.size()) / rows;
        std::vector<char> expected;
        for (int64_t r : selected) {
          expected.insert(expected.end(), value.begin() + r * cols, value.begin() + (r + 1) * cols);
        }
        EXPECT_EQ(got.at(path), expected) << "round " << round << " index " << k << " " << path;
      }
    }
    tcp.drop(name);
  }
}

// ReadLeavesShared by hand: a 2 MiB leaf through a 256 KiB span, so four
// 64 KiB slots carry 32 chunks. The first four come before any release;
// chunk k names slot k % 4 of the span and holds the leaf's bytes k, and a
// slot keeps them until its chunk is released (chunk 1's slot still holds
// chunk 1 once chunk 4 arrived), after which it carries chunk k + 4.
TEST_F(E2eSharedMemorySpans, ReadChunksFillASlotAgainOnlyOnceReleased) {
  const int64_t kLeaf = int64_t{2} << 20, kOffered = int64_t{256} << 10;
  const int64_t kSlot = kOffered / 4;
  std::mt19937 random(7);
  const std::vector<char> value = RandomBytes(static_cast<size_t>(kLeaf), random);
  core::Dict dict = core::Client(DaemonAddress()).open(name_);
  dict.write({{Key("x"), DType::kUInt8, {256, kLeaf / 256}, value.data(), kLeaf}});
  core::ShmArena::Span span = arena_->Take(static_cast<size_t>(kOffered));
  ASSERT_TRUE(span);
  grpc::ClientContext context;
  auto stream = OpenSharedRead(&context, span);
  v1::ReadChunk chunk;
  ASSERT_TRUE(stream->Read(&chunk));
  ASSERT_EQ(chunk.kind_case(), v1::ReadChunk::kBegin);
  ASSERT_TRUE(stream->Read(&chunk));
  ASSERT_EQ(chunk.kind_case(), v1::ReadChunk::kHeader);
  EXPECT_EQ(chunk.header().byte_size(), kLeaf);
  std::vector<v1::ShmSpan> held;  // received, not yet released
  int64_t received = 0, released = 0;
  auto slot_holds = [&](const v1::ShmSpan& at, int64_t k) {
    return std::memcmp(span.data() + (at.offset() - span.offset()),
                       value.data() + k * kSlot, static_cast<size_t>(kSlot)) == 0;
  };
  while (received < kLeaf / kSlot) {
    ASSERT_TRUE(stream->Read(&chunk)) << "after chunk " << received;
    ASSERT_EQ(chunk.kind_case(), v1::ReadChunk::kShmData) << "chunk " << received + 1;
    const v1::ShmSpan& at = chunk.shm_data();
    EXPECT_EQ(at.region(), arena_->token());
    EXPECT_EQ(at.offset(), span.offset() + (received % 4) * kSlot) << "chunk " << received + 1;
    ASSERT_EQ(at.length(), kSlot);
    EXPECT_TRUE(slot_holds(at, received)) << "chunk " << received + 1 << " holds other bytes";
    held.push_back(at);
    ++received;
    if (received < 4) continue;  // four before any release
    // The oldest held slot still holds its chunk: nothing overwrote it
    // before its release.
    EXPECT_TRUE(slot_holds(held.front(), released)) << "chunk " << released + 1;
    held.erase(held.begin());
    // After the last chunk tdstored awaits no release and may have ended
    // the call already, so a release then may find it closed.
    if (received == kLeaf / kSlot) break;
    v1::ReadSharedRequest release;
    release.set_chunks_released(++released);
    ASSERT_TRUE(stream->Write(release)) << "release " << released;
  }
  EXPECT_FALSE(stream->Read(&chunk));
  stream->WritesDone();
  grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// What ReadLeavesShared refuses, with nothing read: a first message that is
// no request, a request that offers no span, a span of a region tdstored
// does not hold (with the trailer that sends the client to the socket) or
// outside the region, and a release out of order.
TEST_F(E2eSharedMemorySpans, ReadLeavesSharedRefusesWhatItCannotServe) {
  const int64_t kLeaf = int64_t{1} << 20;
  std::vector<char> value(static_cast<size_t>(kLeaf), 5);
  core::Client(DaemonAddress()).open(name_).write(
      {{Key("x"), DType::kUInt8, {256, kLeaf / 256}, value.data(), kLeaf}});
  const std::string token = arena_->token();
  struct Case {
    std::string name;
    std::function<void(v1::ReadSharedRequest*)> first;
    grpc::StatusCode code;
    bool unknown_region = false;
  };
  const std::vector<Case> cases = {
      {"a release first", [](v1::ReadSharedRequest* r) { r->set_chunks_released(1); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {"no reply span", [&](v1::ReadSharedRequest* r) { r->mutable_request()->set_dict(name_); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {"an unknown region",
       [&](v1::ReadSharedRequest* r) {
         r->mutable_request()->set_dict(name_);
         *r->mutable_request()->mutable_shm_reply() = Span(std::string(16, 'f'), 0, 256 << 10);
       },
       grpc::StatusCode::FAILED_PRECONDITION, true},
      {"outside the region",
       [&](v1::ReadSharedRequest* r) {
         r->mutable_request()->set_dict(name_);
         *r->mutable_request()->mutable_shm_reply() = Span(token, (1 << 20) - 100, 256 << 10);
       },
       grpc::StatusCode::OUT_OF_RANGE},
  };
  for (const Case& c : cases) {
    grpc::ClientContext context;
    auto stream = stub_->ReadLeavesShared(&context);
    v1::ReadSharedRequest first;
    c.first(&first);
    stream->Write(first);
    stream->WritesDone();
    v1::ReadChunk chunk;
    EXPECT_FALSE(stream->Read(&chunk)) << c.name;
    grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), c.code) << c.name << ": " << status.error_message();
    EXPECT_EQ(Trailer(context), c.unknown_region ? kShmUnknownRegion : "") << c.name;
  }
  // Four chunks come before any release; releasing the second first is
  // refused.
  core::ShmArena::Span span = arena_->Take(static_cast<size_t>(256 << 10));
  ASSERT_TRUE(span);
  grpc::ClientContext context;
  auto stream = OpenSharedRead(&context, span);
  v1::ReadChunk chunk;
  int shm_chunks = 0;
  while (shm_chunks < 4 && stream->Read(&chunk)) {
    shm_chunks += chunk.kind_case() == v1::ReadChunk::kShmData;
  }
  ASSERT_EQ(shm_chunks, 4);
  v1::ReadSharedRequest release;
  release.set_chunks_released(2);
  stream->Write(release);
  stream->WritesDone();
  while (stream->Read(&chunk)) {
  }
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
}

// A read left mid-ring: get() of a nested path stops at ReadBegin (two
// leaves, not one) while tdstored may still be filling slots of the span.
// That span must never carry another call's bytes, so the client stops
// using its region, as after a call without an answer: every write made
// right after, through the same client, is exactly what it wrote. (The
// race it guards is narrow: tdstored stops at four slots without a
// release, and checks for the cancel before each; so this can only fail,
// and rarely, if the span were handed on.)
TEST(E2eSharedMemory, AReadLeftMidRingNeverLendsItsSpanToTheNextCall) {
  core::Client ring(DaemonUnixAddress(), WithShm(2 << 20));
  core::Client tcp(DaemonAddress());
  ASSERT_TRUE(ring.shares_memory());
  const std::string name = UniqueDictName();
  core::Dict dict = ring.create(name, {256});
  std::mt19937 random(41);
  std::vector<char> a = RandomBytes(1 << 20, random), b = RandomBytes(1 << 20, random);
  dict.write({{Key({"n", "a"}), DType::kUInt8, {256, 4096}, a.data(), 1 << 20},
              {Key({"n", "b"}), DType::kUInt8, {256, 4096}, b.data(), 1 << 20}});
  for (int round = 0; round < 20; ++round) {
    const Key nested("n");
    core::ReadOptions get;
    get.exact_leaf = &nested;
    Bytes got;
    try {
      dict.read({nested}, got, get);
      ADD_FAILURE() << "get() of a nested dict read it";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << e.what();
    }
    std::vector<char> w = RandomBytes(512 << 10, random);
    dict.write({{Key("w"), DType::kUInt8, {256, 2048}, w.data(), 512 << 10}});
    Bytes back;
    tcp.open(name).read({Key("w")}, back);
    ASSERT_EQ(back.at("w"), w) << "round " << round << ": the write took another call's bytes";
  }
  ring.drop(name);
}

}  // namespace
}  // namespace tdstore::testing
