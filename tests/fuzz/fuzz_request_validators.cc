// libFuzzer target: what tdstored does with a request before it touches
// Redis — parse the wire message, convert it (server/service/proto_convert.h)
// and validate names, paths, dtypes, shapes and indices (common/).
//
// The input is parsed as each of ReadLeavesRequest, WriteChunk and
// CreateDictRequest in turn (protobuf's wire format is lenient, so one input
// often parses as several). Each message that parses is run through the
// checks its handler makes (tdstore_service.cc), and the results are checked
// for consistency: an accepted path survives the Redis encoding, an accepted
// index resolves to cells inside the batch, converted errors keep their code.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/block_layout.h"
#include "common/dtype.h"
#include "common/index.h"
#include "common/path.h"
#include "common/shape.h"
#include "google/protobuf/stubs/logging.h"
#include "server/service/proto_convert.h"
#include "server/service/request_limits.h"
#include "server/service/service_limits.h"
#include "tdstore/v1/tdstore.pb.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace v1 = tdstore::v1;
using tdstore::Shape;
using namespace tdstore::service;

constexpr int64_t kMaxCells = 1 << 12;
// Paths and leaves looked at per message; the rest add nothing new.
constexpr int kMaxItems = 16;

// Small batch shapes every index is resolved against, empty dims included.
const std::vector<Shape>& BatchShapes() {
  static const std::vector<Shape> shapes = {{}, {5}, {4, 3}, {2, 0, 3}, {3, 2, 2, 2}};
  return shapes;
}

// An error converted for gRPC keeps its code and message.
void CheckToGrpc(const absl::Status& status) {
  const grpc::Status g = ToGrpc(status);
  CHECK(static_cast<int>(g.error_code()) == static_cast<int>(status.code()));
  CHECK(g.error_message() == std::string(status.message()));
}

void CheckResolved(const tdstore::plan::IndexSpec& spec, const Shape& batch) {
  auto r = tdstore::plan::ResolveIndex(spec, batch, kMaxCells);
  if (!r.ok()) {
    CheckToGrpc(r.status());
    return;
  }
  const int64_t numel = Numel(r->result_shape);
  CHECK(numel >= 0 && numel <= kMaxCells);
  CHECK(static_cast<int64_t>(r->cells.size()) == numel);
  const int64_t batch_numel = Numel(batch);
  for (int64_t cell : r->cells) CHECK(cell >= 0 && cell < batch_numel);
}

void CheckDictName(const std::string& name) {
  const absl::Status s = tdstore::ValidateDictName(name);
  if (!s.ok()) {
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CheckToGrpc(s);
    return;
  }
  CHECK(!name.empty() && name.size() <= tdstore::kMaxDictNameBytes);
}

// FromProto(Path): an accepted path is valid and survives the encoding
// Redis stores and the trip back to the wire.
void CheckPath(const v1::Path& wire) {
  auto path = FromProto(wire);
  if (!path.ok()) {
    CHECK(path.status().code() == absl::StatusCode::kInvalidArgument);
    CheckToGrpc(path.status());
    return;
  }
  CHECK(tdstore::ValidatePath(*path).ok());
  auto decoded = tdstore::DecodePath(tdstore::EncodePath(*path));
  CHECK(decoded.ok() && *decoded == *path);
  CHECK(tdstore::IsPathPrefix(*path, *path));
  v1::Path back;
  ToProto(*path, &back);
  auto again = FromProto(back);
  CHECK(again.ok() && *again == *path);
}

void CheckIndex(const v1::Index& wire) {
  auto spec = FromProto(wire);
  if (!spec.ok()) {
    CheckToGrpc(spec.status());
    return;
  }
  CHECK(static_cast<int>(spec->size()) == wire.items_size());
  for (const Shape& batch : BatchShapes()) CheckResolved(*spec, batch);
}

// A leaf's dtype and shape as a header or a schema entry gives them: the
// checks WriteTxn / CreateDict make, and the block layout the store would
// cut it into.
void CheckLeaf(v1::DType wire_dtype, const Shape& shape, const v1::DictOptions* options) {
  auto dtype = FromProto(wire_dtype);
  if (!dtype.ok()) {
    CheckToGrpc(dtype.status());
    return;
  }
  CHECK(tdstore::DTypeSize(*dtype) >= 1);
  if (!tdstore::ValidateShape(shape, "leaf shape").ok()) return;
  auto bytes = tdstore::ByteSize(shape, tdstore::DTypeSize(*dtype));
  if (!bytes.ok()) return;
  CHECK(*bytes >= 0);
  if (options == nullptr || shape.empty()) return;

  // The store takes the dict's batch shape to be a prefix; use the first dim.
  auto layout = tdstore::BlockLayout::Make(Shape(shape.begin(), shape.begin() + 1), shape,
                                           tdstore::DTypeSize(*dtype), options->rows_per_block(),
                                           options->part_bytes());
  if (!layout.ok()) return;
  CHECK(layout->total_bytes() == *bytes);
  const int64_t blocks = layout->block_count();
  CHECK(blocks >= 0);
  if (blocks > 0) {
    CHECK(layout->block_bytes(blocks - 1) > 0);
    CHECK(layout->part_count(blocks - 1) >= 1);
  }
}

// The request-limit checks, under limits small enough for fuzz input to
// cross and under the defaults: only the documented codes come back, and a
// request within the tight limits is within the looser ones too.
template <typename Request>
void CheckLimits(const Request& req) {
  ServiceLimits tight;
  tight.max_index_length = 16;
  tight.max_leaves_per_call = 4;
  tight.max_name_bytes = 16;
  tight.max_path_bytes = 32;
  const absl::Status within_tight = CheckRequest(tight, req);
  const absl::Status within_default = CheckRequest(ServiceLimits(), req);
  for (const absl::Status& s : {within_tight, within_default}) {
    CHECK(s.ok() || s.code() == absl::StatusCode::kInvalidArgument ||
          s.code() == absl::StatusCode::kResourceExhausted);
    CheckToGrpc(s);
  }
  if (within_tight.ok()) CHECK(within_default.ok());
}

void CheckReadLeaves(const v1::ReadLeavesRequest& req) {
  CheckLimits(req);
  CheckDictName(req.dict());
  for (int i = 0; i < req.paths_size() && i < kMaxItems; ++i) CheckPath(req.paths(i));
  if (req.has_index()) CheckIndex(req.index());
}

void CheckWriteChunk(const v1::WriteChunk& chunk) {
  switch (chunk.kind_case()) {
    case v1::WriteChunk::kBegin:
      CheckLimits(chunk.begin());
      CheckDictName(chunk.begin().dict());
      if (chunk.begin().has_index()) CheckIndex(chunk.begin().index());
      break;
    case v1::WriteChunk::kHeader: {
      const v1::LeafHeader& h = chunk.header();
      const absl::Status call_bytes = CheckCallBytes(ServiceLimits(), h.byte_size());
      CHECK(call_bytes.ok() || call_bytes.code() == absl::StatusCode::kResourceExhausted);
      CheckPath(h.path());
      CheckLeaf(h.dtype(), ShapeFromProto(h.shape()), nullptr);
      break;
    }
    default:
      break;
  }
}

void CheckCreateDict(const v1::CreateDictRequest& req) {
  CheckLimits(req);
  CheckDictName(req.name());
  const Shape batch = ShapeFromProto(req.batch_shape());
  if (!tdstore::ValidateShape(batch, "batch shape").ok()) return;
  // Any valid batch shape, however large, resolves "..." and "-1" without
  // overflow: the cap is checked before anything is allocated.
  CheckResolved({tdstore::plan::IndexTerm::Ellipsis()}, batch);
  if (!batch.empty()) CheckResolved({tdstore::plan::IndexTerm::Int(-1)}, batch);

  for (int i = 0; i < req.leaves_size() && i < kMaxItems; ++i) {
    const v1::LeafSpec& spec = req.leaves(i);
    CheckPath(spec.path());
    Shape shape = batch;
    shape.insert(shape.end(), spec.element_shape().begin(), spec.element_shape().end());
    CheckLeaf(spec.dtype(), shape, &req.options());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Protobuf logs every string field that is not UTF-8; fuzz input is full
  // of them, and the parse failure is all we need.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int n = static_cast<int>(size);
  if (v1::ReadLeavesRequest req; req.ParseFromArray(data, n)) CheckReadLeaves(req);
  if (v1::WriteChunk chunk; chunk.ParseFromArray(data, n)) CheckWriteChunk(chunk);
  if (v1::CreateDictRequest req; req.ParseFromArray(data, n)) CheckCreateDict(req);
  return 0;
}
