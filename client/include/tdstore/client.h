// tdstore client library: named tensors sharing leading batch dims, stored
// in tdstored (and through it in Redis), used like a TensorDict.
//
//   tdstore::Client client("127.0.0.1:50051");        // or "unix:///run/td.sock"
//   tdstore::Dict td = client.create("replay", {1000});
//   td.set("obs", torch::rand({1000, 84}));
//   td.set({"next", "obs"}, torch::rand({1000, 84}));
//   at::Tensor obs = td.get("obs");
//   tdstore::LocalDict all = td.to_local();
//
// Errors: every call that fails throws tdstore::Error carrying the gRPC status
// code and the server's message (NOT_FOUND for an unknown dict or leaf,
// INVALID_ARGUMENT for a bad shape, UNAVAILABLE when the daemon or Redis is
// down, DEADLINE_EXCEEDED when the call's deadline passes, ...).
//
// Threads: Client and Dict are cheap to copy (they share one gRPC channel)
// and every method may be called from any number of threads at once.
//
// Data: tensors of any layout are sent as contiguous little-endian C-order
// bytes (a non-contiguous input is made contiguous first). A received tensor
// is allocated once at its final shape and each chunk is copied into place.
#ifndef TDSTORE_CLIENT_CLIENT_H_
#define TDSTORE_CLIENT_CLIENT_H_

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tdstore {

// Mirrors grpc::StatusCode (same numbers).
enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// "NOT_FOUND", "INVALID_ARGUMENT", ...
const char* StatusCodeName(StatusCode code);

class Error : public std::runtime_error {
 public:
  Error(StatusCode code, const std::string& message);
  StatusCode code() const { return code_; }
  // The server's (or the library's) message without the code prefix.
  const std::string& message() const { return message_; }

 private:
  StatusCode code_;
  std::string message_;
};

// A leaf path: Key("obs"), Key({"next", "obs"}).
class Key {
 public:
  Key(const char* component) : parts_{component} {}
  Key(std::string component) : parts_{std::move(component)} {}
  Key(std::initializer_list<std::string> parts) : parts_(parts) {}
  explicit Key(std::vector<std::string> parts) : parts_(std::move(parts)) {}

  const std::vector<std::string>& parts() const { return parts_; }
  // "next/obs", for display.
  std::string str() const;
  bool operator<(const Key& o) const { return parts_ < o.parts_; }
  bool operator==(const Key& o) const { return parts_ == o.parts_; }

 private:
  std::vector<std::string> parts_;
};

struct LeafInfo {
  Key path{std::vector<std::string>{}};
  at::ScalarType dtype = at::ScalarType::Float;
  std::vector<int64_t> shape;  // batch dims first
  int64_t byte_size = 0;
};

struct DictInfo {
  std::string name;
  std::string id;
  std::vector<int64_t> batch_size;
  std::vector<LeafInfo> leaves;
  int64_t rows_per_block = 0;
  int64_t part_bytes = 0;
  int64_t version = 0;
};

// A local, in-process copy of (part of) a dict: path -> tensor.
struct LocalDict {
  std::vector<int64_t> batch_size;
  std::map<Key, at::Tensor> leaves;

  // The tensor at `path`; throws Error(NOT_FOUND) if absent.
  const at::Tensor& at(const Key& path) const;
  bool contains(const Key& path) const { return leaves.count(path) != 0; }
};

struct ClientOptions {
  // Deadline of each call, from its start, retries included. Per call, not
  // per client.
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  // Bytes per data chunk sent (at most 1 MiB, the protocol's limit).
  int64_t chunk_bytes = 1 << 20;

  // Retries. A call that fails UNAVAILABLE (tdstored or its Redis briefly
  // unreachable) is tried again, with backoff from 50 ms doubling to 1 s,
  // for at most `retry_for` after it started (and never past `timeout`),
  // when repeating it is safe:
  //   - reads (get, get_many, index, keys, contains, info, list, server_info)
  //     and leaf writes (update, put, set_index: writing the same values
  //     again leaves the same state) always;
  //   - create, delete, rename and leaf deletion only when tdstored says the
  //     failed attempt changed nothing.
  // Zero disables these retries (a read racing a leaf replacement is still
  // retried 3 times at once on ABORTED; within retry_for, further times with
  // backoff).
  std::chrono::milliseconds retry_for{std::chrono::seconds(30)};

  // Access control (docs/security.md). A bearer token sent with every call
  // (tdstored --tokens-file); empty: none. A token is never sent in the
  // clear beyond this machine: with a token, a TCP address other than
  // loopback requires TLS (INVALID_ARGUMENT otherwise).
  std::string token;
  // TLS: when `tls` is set, the channel is encrypted and tdstored's
  // certificate must be signed by `tls_root_ca_pem` (PEM text; empty: the
  // system's roots). For mutual TLS give the client's certificate and key.
  bool tls = false;
  std::string tls_root_ca_pem;
  std::string tls_client_cert_pem;
  std::string tls_client_key_pem;
  // The name tdstored's certificate must carry, when it differs from the
  // address' host (e.g. connecting by IP to a certificate for "tdstored").
  std::string tls_server_name;
};

struct CreateOptions {
  int64_t rows_per_block = 0;  // 0: server default
  int64_t part_bytes = 0;      // 0: server default
};

// ---- Indices over batch dims: td.index({3, Slice(1, 5)}) ---------------------
//
// The semantics are torch's `t.index({...})` over the dict's batch dims:
// ints select (and remove the dim), slices keep it, int64 tensors (any shape,
// any order, duplicates) and 1-D bool masks are advanced indices that
// broadcast together. Missing trailing dims mean ':'.

// start:stop:step; std::nullopt bounds are omitted, negative ones count from
// the end; step must be > 0 (INVALID_ARGUMENT otherwise).
struct Slice {
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        int64_t step = 1)
      : start(start), stop(stop), step(step) {}
  std::optional<int64_t> start, stop;
  int64_t step;
};

// `...`: as many ':' as needed.
struct Ellipsis {};

// One term of an Index.
class IndexTerm {
 public:
  IndexTerm(int64_t position);  // NOLINT: implicit, like torch's t.index({3})
  IndexTerm(int position) : IndexTerm(static_cast<int64_t>(position)) {}
  IndexTerm(Slice slice);
  IndexTerm(Ellipsis);
  // An integer tensor of positions (any integer dtype, any shape) or a 1-D
  // bool mask. Floating-point tensors are rejected with INVALID_ARGUMENT
  // when the index is used.
  IndexTerm(at::Tensor tensor);
  IndexTerm(std::vector<int64_t> positions);

  enum class Kind { kInt, kSlice, kEllipsis, kTensor };
  Kind kind() const { return kind_; }
  int64_t position() const { return position_; }
  const Slice& slice() const { return slice_; }
  const at::Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  int64_t position_ = 0;
  Slice slice_;
  at::Tensor tensor_;
};

// A tuple of terms: Index{3, Slice(1, 5)}; Index(tensor); Index{Ellipsis{}, 0}.
class Index {
 public:
  Index(std::initializer_list<IndexTerm> terms) : terms_(terms) {}
  Index(IndexTerm term) : terms_{std::move(term)} {}  // NOLINT: td.index(5)
  explicit Index(std::vector<IndexTerm> terms) : terms_(std::move(terms)) {}
  // One term straight from its value, so that td.index(5),
  // td.index(Slice(1, 5)), td.index(tensor) and td.set_index(rows, ...)
  // compile: an argument goes through one implicit conversion only, and
  // 5 -> IndexTerm -> Index would be two.
  Index(int position) : Index(IndexTerm(position)) {}                 // NOLINT
  Index(int64_t position) : Index(IndexTerm(position)) {}             // NOLINT
  Index(Slice slice) : Index(IndexTerm(slice)) {}                     // NOLINT
  Index(Ellipsis e) : Index(IndexTerm(e)) {}                          // NOLINT
  Index(at::Tensor tensor) : Index(IndexTerm(std::move(tensor))) {}   // NOLINT
  Index(std::vector<int64_t> positions) : Index(IndexTerm(std::move(positions))) {}  // NOLINT
  const std::vector<IndexTerm>& terms() const { return terms_; }

 private:
  std::vector<IndexTerm> terms_;
};

struct SetIndexOptions {
  // Cast each value to its leaf's dtype first (one extra describe call).
  // Without it a dtype mismatch is INVALID_ARGUMENT.
  bool cast = false;
};

class Dict;

class Client {
 public:
  // address: "host:port" or "unix:///path/to.sock". Does not connect yet;
  // gRPC connects on the first call and reconnects after failures.
  explicit Client(const std::string& address, ClientOptions options = {});

  const std::string& address() const;

  // Creates a dict; ALREADY_EXISTS if the name is taken.
  Dict create(const std::string& name, std::vector<int64_t> batch_size,
              CreateOptions options = {});
  // Creates a dict with a schema: each leaf (path -> element shape and
  // dtype) exists zero-filled at batch_size + element shape once this
  // returns.
  struct LeafSpec {
    Key path;
    at::ScalarType dtype;
    std::vector<int64_t> element_shape;
  };
  Dict create(const std::string& name, std::vector<int64_t> batch_size,
              const std::vector<LeafSpec>& schema, CreateOptions options = {});
  // Opens an existing dict; NOT_FOUND if there is none.
  Dict open(const std::string& name);
  // Names of all dicts, sorted.
  std::vector<std::string> list();
  // What the daemon serves from: its version, its Redis back end
  // ("standalone redis://host:port", "cluster of 3 masters (seeds ...)"),
  // the number of Redis masters, and whether they all answer PING now.
  struct ServerInfo {
    std::string version;
    std::string backend;
    int redis_masters = 0;
    bool redis_ok = false;
  };
  ServerInfo server_info();
  // Deletes a dict and all its data; NOT_FOUND if there is none.
  void drop(const std::string& name);
  // Renames; NOT_FOUND / ALREADY_EXISTS.
  void rename(const std::string& name, const std::string& new_name);

  // Opens the dict a Dict::handle() string names, connecting to the address
  // it holds. INVALID_ARGUMENT for a malformed handle; NOT_FOUND if the dict
  // is gone or was deleted and created again since.
  static Dict open_handle(const std::string& handle, ClientOptions options = {});

  struct Impl;

 private:
  friend class Dict;
  std::shared_ptr<Impl> impl_;
};

class Dict {
 public:
  const std::string& name() const { return name_; }

  // Stores `value` at `path`, replacing any leaf there. Its leading dims must
  // equal batch_size() (INVALID_ARGUMENT naming both shapes otherwise).
  void set(const Key& path, const at::Tensor& value);
  // Stores several leaves; they become visible together, or none does.
  // An empty map makes no call.
  void update(const std::map<Key, at::Tensor>& values);
  // The leaf at `path`; NOT_FOUND if there is nothing at `path`,
  // INVALID_ARGUMENT if `path` is a nested dict (read the leaves under it
  // with get_many; get stops without downloading them).
  at::Tensor get(const Key& path);
  // Every leaf under each of `paths` (a leaf or a nested prefix), one call.
  // An empty list reads nothing (use to_local() for every leaf).
  LocalDict get_many(const std::vector<Key>& paths);
  // Every leaf of the dict.
  //
  // Reads (get, get_many, to_local) return each leaf whole at one
  // generation. When a leaf is replaced while it streams, the server ends the
  // read with ABORTED and the read starts again: 3 times at once, then with
  // backoff while ClientOptions::retry_for lasts; ABORTED reaches the caller
  // only if leaves keep changing that fast for that long.
  LocalDict to_local();
  // td[index]: every leaf (or those under `paths`) at the indexed batch
  // shape, in one call, moving only the selected bytes. Errors: OUT_OF_RANGE
  // for a position outside its dim; INVALID_ARGUMENT for a bad index (step
  // <= 0, mask length != dim, float tensor, shapes that do not broadcast).
  // Rows of all leaves that share a storage block are read atomically
  // together; rows in different blocks are not (docs/storage-layout.md).
  LocalDict index(const Index& index, const std::vector<Key>& paths = {});
  // td[index] = values, for every leaf given, in one call. Each value's
  // shape must equal or broadcast to the indexed batch shape + the leaf's
  // element shape, and its dtype must equal the leaf's (see
  // SetIndexOptions::cast). A leaf that does not exist yet is created
  // zero-filled at the dict's batch shape first. In every error case nothing
  // is written. Rows of all leaves that share a storage block are written
  // atomically together.
  void set_index(const Index& index, const std::map<Key, at::Tensor>& values,
                 SetIndexOptions options = {});
  void set_index(const Index& index, const Key& path, const at::Tensor& value,
                 SetIndexOptions options = {});
  // As TensorDict.keys(include_nested, leaves_only).
  std::vector<Key> keys(bool include_nested = false, bool leaves_only = false);
  // True if `path` is a leaf or a nested sub-dict.
  bool contains(const Key& path);
  // Removes the leaf or subtree at `path`; NOT_FOUND if absent.
  void erase(const Key& path);
  // Shapes, dtypes and byte sizes of every leaf, and the dict's layout; no data.
  DictInfo describe();
  // The dict's batch shape (one describe() call).
  std::vector<int64_t> batch_size();

  // A string another process can pass to Client::open_handle() to open this
  // same dict (what pickling is to the Python seed):
  // "tdstore1|<address>|<name>|<id>", with the address this Client was given.
  std::string handle();

 private:
  friend class Client;
  Dict(std::shared_ptr<Client::Impl> impl, std::string name, std::string id)
      : impl_(std::move(impl)), name_(std::move(name)), id_(std::move(id)) {}
  std::shared_ptr<Client::Impl> impl_;
  std::string name_;
  std::string id_;
};

}  // namespace tdstore

#endif  // TDSTORE_CLIENT_CLIENT_H_
