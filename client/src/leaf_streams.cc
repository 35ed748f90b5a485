#include "client/src/leaf_streams.h"

#include <ATen/ATen.h>
#include <grpcpp/support/sync_stream.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "client/src/convert.h"

// The wire carries little-endian bytes and this client sends and receives
// tensor memory as it is: it only builds where that memory is little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "tdstore's client sends tensor memory as is: little-endian hosts only");

namespace tdstore {
namespace {

[[noreturn]] void DataLoss(const std::string& message) {
  throw Error(StatusCode::kDataLoss, "malformed read stream from tdstored: " + message);
}

// ---- WriteLeaves ------------------------------------------------------------

// Rejects what cannot go on the wire before any stream is opened, so a bad
// leaf anywhere in an update costs no bytes sent.
v1::DType CheckWritable(const Key& path, const at::Tensor& value) {
  if (!value.defined()) {
    throw Error(StatusCode::kInvalidArgument, "leaf '" + path.str() + "' is an undefined tensor");
  }
  if (value.layout() != at::kStrided) {
    throw Error(StatusCode::kInvalidArgument,
                "leaf '" + path.str() + "' is not a dense tensor; convert it with to_dense()");
  }
  return ToProtoDType(value.scalar_type(), path);
}

// The bytes to send: dense C-order CPU memory. Conjugate and negative views
// share memory with their base and only flag the difference, so they are
// materialized first or the store would receive the base's values.
at::Tensor ContiguousCpu(const at::Tensor& value) {
  at::Tensor t = value.device().is_cpu() ? value : value.cpu();
  return t.resolve_conj().resolve_neg().contiguous();
}

// A WriteLeaves call that is cancelled if it is left before Finish (an
// exception while preparing a tensor), so the server commits nothing.
struct WriteStream {
  grpc::ClientContext context;
  v1::WriteLeavesResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::WriteChunk>> writer;
  bool finished = false;

  grpc::Status Finish() {
    finished = true;
    return writer->Finish();
  }
  ~WriteStream() {
    if (writer && !finished) {
      context.TryCancel();
      writer->Finish();
    }
  }
};

// ---- ReadLeaves -------------------------------------------------------------

// A ReadLeaves call that is cancelled and drained if it is left early
// (a malformed stream, a nested path in get()).
struct ReadStream {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::ReadChunk>> reader;
  bool finished = false;

  grpc::Status Finish() {
    finished = true;
    return reader->Finish();
  }
  ~ReadStream() {
    if (reader && !finished) {
      context.TryCancel();
      v1::ReadChunk ignored;
      while (reader->Read(&ignored)) {
      }
      reader->Finish();
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

// Allocates the tensor a header announces, once, at its final shape.
at::Tensor AllocateLeaf(const Key& path, const v1::LeafHeader& header) {
  const at::ScalarType type = FromProtoDType(header.dtype(), path);
  const std::vector<int64_t> shape = FromProto(header.shape());
  int64_t bytes = static_cast<int64_t>(c10::elementSize(type));
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(bytes, dim, &bytes)) {
      DataLoss("leaf '" + path.str() + "' has an invalid shape");
    }
  }
  if (bytes != header.byte_size()) {
    DataLoss("leaf '" + path.str() + "' announces " + std::to_string(header.byte_size()) +
             " bytes but its shape and dtype make " + std::to_string(bytes));
  }
  try {
    return at::empty(shape, at::TensorOptions().dtype(type));
  } catch (const c10::Error&) {
    throw Error(StatusCode::kResourceExhausted,
                "cannot allocate " + std::to_string(bytes) + " bytes for leaf '" + path.str() + "'");
  }
}

// One attempt at a read. Returns the server's final status and fills *out
// when it is OK; throws for a stream that does not add up.
grpc::Status ReadOnce(const Client::Impl& impl, const v1::ReadLeavesRequest& request,
                      const Key* exact_leaf, ReadStream& stream, LocalDict* out) {
  stream.reader = impl.stub->ReadLeaves(&stream.context, request);

  v1::ReadChunk chunk;
  // No message at all: the request failed (unknown dict or path, ...).
  if (!stream.reader->Read(&chunk)) return stream.Finish();
  if (chunk.kind_case() != v1::ReadChunk::kBegin) DataLoss("it does not start with ReadBegin");
  out->batch_size = FromProto(chunk.begin().batch_shape());
  const int64_t leaf_count = chunk.begin().leaf_count();
  if (exact_leaf != nullptr && leaf_count > 1) NestedDict(request.dict(), *exact_leaf);

  // The leaf being received: its path, bytes expected and bytes so far.
  Key path{std::vector<std::string>{}};
  char* data = nullptr;
  int64_t expected = -1;
  int64_t received = 0;
  auto check_complete = [&] {
    if (expected >= 0 && received != expected) {
      DataLoss("leaf '" + path.str() + "' ended after " + std::to_string(received) + " of " +
               std::to_string(expected) + " bytes");
    }
  };

  while (stream.reader->Read(&chunk)) {
    switch (chunk.kind_case()) {
      case v1::ReadChunk::kHeader: {
        check_complete();
        path = FromProto(chunk.header().path());
        if (exact_leaf != nullptr && !(path == *exact_leaf)) NestedDict(request.dict(), *exact_leaf);
        at::Tensor leaf = AllocateLeaf(path, chunk.header());
        if (!out->leaves.emplace(path, leaf).second) DataLoss("leaf '" + path.str() + "' sent twice");
        data = static_cast<char*>(leaf.data_ptr());
        expected = chunk.header().byte_size();
        received = 0;
        break;
      }
      case v1::ReadChunk::kData: {
        const std::string& bytes = chunk.data();
        if (expected < 0) DataLoss("data before any leaf header");
        if (static_cast<int64_t>(bytes.size()) > expected - received) {
          DataLoss("leaf '" + path.str() + "' has more than the " + std::to_string(expected) +
                   " bytes its header announced");
        }
        std::memcpy(data + received, bytes.data(), bytes.size());
        received += static_cast<int64_t>(bytes.size());
        break;
      }
      case v1::ReadChunk::kBegin:
        DataLoss("a second ReadBegin");
      default:
        DataLoss("a chunk of unknown kind");
    }
  }
  grpc::Status status = stream.Finish();
  if (!status.ok()) return status;
  check_complete();
  if (static_cast<int64_t>(out->leaves.size()) != leaf_count) {
    DataLoss(std::to_string(out->leaves.size()) + " leaves received, " +
             std::to_string(leaf_count) + " announced");
  }
  return status;
}

// One attempt at a write; returns the server's final status.
grpc::Status WriteOnce(const Client::Impl& impl, const v1::WriteChunk& begin,
                       const std::vector<std::pair<Key, at::Tensor>>& leaves,
                       const std::vector<v1::DType>& dtypes, WriteStream& stream) {
  const int64_t chunk_bytes = impl.options.chunk_bytes;
  stream.writer = impl.stub->WriteLeaves(&stream.context, &stream.response);
  // A failed Write means the server ended the call (unknown dict, bad
  // header, ...): its status says why.
  auto send = [&](const v1::WriteChunk& chunk) -> bool {
    return stream.writer->Write(chunk);
  };
  auto ended_early = [&] {
    grpc::Status status = stream.Finish();
    if (status.ok()) {
      status = grpc::Status(grpc::StatusCode::UNKNOWN, "tdstored closed the write stream early");
    }
    return status;
  };

  if (!send(begin)) return ended_early();
  v1::WriteChunk chunk;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Key& path = leaves[i].first;
    const at::Tensor bytes = ContiguousCpu(leaves[i].second);
    const int64_t size = static_cast<int64_t>(bytes.nbytes());

    v1::LeafHeader* header = chunk.mutable_header();
    header->Clear();
    ToProto(path, header->mutable_path());
    header->set_dtype(dtypes[i]);
    header->mutable_shape()->Assign(bytes.sizes().begin(), bytes.sizes().end());
    header->set_byte_size(size);
    if (!send(chunk)) return ended_early();

    // Chunks come straight from the tensor's memory: one copy, into the message.
    const char* data = static_cast<const char*>(bytes.data_ptr());
    for (int64_t offset = 0; offset < size; offset += chunk_bytes) {
      chunk.set_data(data + offset, static_cast<size_t>(std::min(chunk_bytes, size - offset)));
      if (!send(chunk)) return ended_early();
    }
  }
  stream.writer->WritesDone();
  return stream.Finish();
}

}  // namespace

void WriteLeaves(const Client::Impl& impl, const std::string& dict,
                 const std::vector<std::pair<Key, at::Tensor>>& leaves, const v1::Index* index) {
  std::vector<v1::DType> dtypes;
  dtypes.reserve(leaves.size());
  for (const auto& [path, value] : leaves) dtypes.push_back(CheckWritable(path, value));

  v1::WriteChunk begin;
  begin.mutable_begin()->set_dict(dict);
  begin.mutable_begin()->set_leaf_count(static_cast<int32_t>(leaves.size()));
  if (index != nullptr) *begin.mutable_begin()->mutable_index() = *index;
  CheckRequestSize(begin);

  // Writing the same values again leaves the same state, so a write that
  // failed UNAVAILABLE (whatever it did) is simply sent again.
  Retrier retry(impl.options);
  for (;;) {
    WriteStream stream;
    impl.Prepare(&stream.context, retry.deadline());
    grpc::Status status = WriteOnce(impl, begin, leaves, dtypes, stream);
    if (status.ok()) return;
    if (!retry.Again(status, Retrier::kIdempotent, stream.context)) impl.Fail(status);
  }
}

LocalDict ReadLeaves(const Client::Impl& impl, const std::string& dict,
                     const std::vector<Key>& paths, const Key* exact_leaf,
                     const v1::Index* index) {
  v1::ReadLeavesRequest request;
  request.set_dict(dict);
  for (const Key& path : paths) ToProto(path, request.add_paths());
  if (index != nullptr) {
    *request.mutable_index() = *index;
    CheckRequestSize(request);
  }

  Retrier retry(impl.options);
  for (int aborted = 0;;) {
    LocalDict out;
    ReadStream stream;
    impl.Prepare(&stream.context, retry.deadline());
    grpc::Status status = ReadOnce(impl, request, exact_leaf, stream, &out);
    if (status.ok()) return out;
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

}  // namespace tdstore
