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
//
// This library is a thin layer over the torch-free core (tdstore/core.h),
// which the CLI and the Python package share: it maps at::Tensor to the
// core's (dtype, shape, bytes).
#ifndef TDSTORE_CLIENT_CLIENT_H_
#define TDSTORE_CLIENT_CLIENT_H_

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tdstore/core.h"  // Error, StatusCode, Key, ClientOptions, Slice, ...

namespace tdstore {

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
  Layout layout = Layout::kLeaves;  // core::DictInfo::layout
  int64_t version = 0;
  bool locked = false;                       // core::DictInfo::locked
  std::map<std::string, std::string> attrs;  // core::DictInfo::attrs
};

// The cells of a ragged leaf's values (core::Values of kind kRagged) as
// tensors, C order over values.cells. DATA_LOSS for a cell no tdstore client
// wrote; INVALID_ARGUMENT for values of another kind.
std::vector<at::Tensor> RaggedTensors(const core::Values& values);

// A local, in-process copy of (part of) a dict: path -> tensor.
struct LocalDict {
  std::vector<int64_t> batch_size;
  std::map<Key, at::Tensor> leaves;
  // Non-tensor leaves (text, JSON, bytes; Python's NonTensorData and
  // NonTensorStack), decoded. Their paths are not in `leaves`.
  std::map<Key, core::Values> values;

  // The tensor at `path`; throws Error(NOT_FOUND) if absent.
  const at::Tensor& at(const Key& path) const;
  bool contains(const Key& path) const { return leaves.count(path) != 0; }
};

// ---- Indices over batch dims: td.index({3, Slice(1, 5)}) ---------------------
//
// The semantics are torch's `t.index({...})` over the dict's batch dims:
// ints select (and remove the dim), slices keep it, int64 tensors (any shape,
// any order, duplicates) and 1-D bool masks are advanced indices that
// broadcast together. Missing trailing dims mean ':'.

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
  using ServerInfo = core::ServerInfo;
  ServerInfo server_info();
  // Deletes a dict and all its data; NOT_FOUND if there is none.
  void drop(const std::string& name);
  // Renames; NOT_FOUND / ALREADY_EXISTS.
  void rename(const std::string& name, const std::string& new_name);

  // Opens the dict a Dict::handle() string names, connecting to the address
  // it holds. INVALID_ARGUMENT for a malformed handle; NOT_FOUND if the dict
  // is gone or was deleted and created again since.
  static Dict open_handle(const std::string& handle, ClientOptions options = {});

  // The torch-free client this one wraps (same channel).
  const core::Client& core() const { return core_; }

 private:
  core::Client core_;
};

// Rows written as they come, over one stream (core::Appender underneath):
// what a replay buffer's collector needs.
//
//   tdstore::Appender out = td.appender({"obs", "reward"});
//   out.append(cursor, {obs_rows, reward_rows});  // td[cursor : cursor + n] = rows
//   out.flush();                                  // all written, or throws
//
// Consecutive rows are coalesced into one batch per leaf; at most a window
// of batches waits for acknowledgement (core::AppendOptions). A batch the
// server refuses wrote nothing, and its error is thrown by the next append()
// or flush(). One thread at a time.
class Appender {
 public:
  // td[start_row : start_row + n] = rows: one tensor per leaf, in the order
  // the appender was made with, each [n, *element shape] of the leaf's own
  // dtype (no casting: a wrong dtype is INVALID_ARGUMENT, as is a wrong
  // element shape or tensors of different n; nothing is queued then). The
  // bytes are copied before it returns.
  void append(int64_t start_row, const std::vector<at::Tensor>& rows);
  // Sends what is queued and waits until every batch is acknowledged.
  void flush();
  // Rows the server acknowledged as written so far.
  int64_t rows_written() const { return core_.rows_written(); }

 private:
  friend class Dict;
  Appender(core::Appender core, std::vector<LeafInfo> leaves)
      : core_(std::move(core)), leaves_(std::move(leaves)) {}
  core::Appender core_;
  std::vector<LeafInfo> leaves_;  // as the appender was made: dtype, full shape
};

class Dict {
 public:
  const std::string& name() const { return core_.name(); }

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
  // The values of the non-tensor leaf at `path` (INVALID_ARGUMENT for a
  // tensor leaf; get() refuses a value leaf the same way), whole or, with
  // `index`, at the indexed cells. This client reads values; it writes them
  // through the core (core::LeafData with kind and EncodeValueRows).
  core::Values get_values(const Key& path, const Index* index = nullptr);
  // The cells of the ragged leaf at `path` (a tensor of its own shape per
  // batch cell, C order; Python's lazy stacks), whole or at the indexed
  // cells. INVALID_ARGUMENT for any other kind of leaf.
  std::vector<at::Tensor> get_ragged(const Key& path, const Index* index = nullptr);
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
  // index() without waiting: it runs on the core's read-ahead threads
  // (core::Dict::read_async says how) and the future gives the LocalDict,
  // or throws index()'s error. The index is copied before it returns (a
  // malformed one throws here). For keeping batches in flight while a
  // trainer computes.
  std::future<LocalDict> index_async(Index index, std::vector<Key> paths = {}) const;
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
  // A ring buffer's append in one call (core::Dict::append_ring): `rows`,
  // one tensor per leaf, each [n, *element shape] of the leaf's dtype (no
  // cast; a missing leaf is created with the tensor's), written at the n
  // rows tdstored reserves from the counter `cursor`, then counted in the
  // counter `count` (if not empty). What replay-buffer collectors need to
  // extend one buffer from many processes. INVALID_ARGUMENT for no rows,
  // tensors of different n, or n outside 1..batch dim 0; nothing written.
  core::RingAppended append_ring(const std::map<Key, at::Tensor>& rows,
                                 const std::string& cursor, const std::string& count = "");
  // As TensorDict.keys(include_nested, leaves_only).
  std::vector<Key> keys(bool include_nested = false, bool leaves_only = false);
  // True if `path` is a leaf or a nested sub-dict.
  bool contains(const Key& path);
  // Removes the leaf or subtree at `path`; NOT_FOUND if absent.
  void erase(const Key& path);
  // The keys of the sub-dict at `prefix`, relative to it (core::Dict::keys_under).
  std::vector<Key> keys_under(const Key& prefix, bool include_nested = false,
                              bool leaves_only = false) {
    return core_.keys_under(prefix, include_nested, leaves_only);
  }
  // Moves a leaf or subtree on the server, no data moved (core::Dict::rename).
  void rename(const Key& from, const Key& to, bool replace = false) {
    core_.rename(from, to, replace);
  }
  // Every element of the leaves `paths` (leaves or sub-dicts: every leaf
  // under them), or of their rows at `index`, set to `value` cast to each
  // leaf's dtype as torch's fill_ does — on the server, no leaf bytes sent
  // (core::Dict::fill). An empty `paths` fills every leaf.
  void fill(const std::vector<Key>& paths, const at::Scalar& value,
            const Index* index = nullptr);
  // Copies leaves into `target` inside tdstored (core::Dict::copy).
  void copy(const Key& from, Dict& target, const Key& to) { core_.copy(from, target.core_, to); }
  // A new dict `name` holding a copy of the leaves at or under `from`, made
  // inside tdstored; it appears only once complete (core::Dict::clone).
  Dict clone(const std::string& name, const Key& from = Key(std::vector<std::string>{})) {
    return Dict(core_.clone(name, from));
  }
  // Shapes, dtypes and byte sizes of every leaf, and the dict's layout; no data.
  DictInfo describe();
  // The dict's batch shape (one describe() call).
  std::vector<int64_t> batch_size();
  // Sets batch dim 0 to `rows` on the server, moving no byte; new rows read
  // zeros (core::Dict::resize says what it refuses).
  void resize(int64_t rows) { core_.resize(rows); }

  // Lock, attributes and counters, shared by every client; as core::Dict's
  // (tdstore/core.h says what each refuses).
  void lock() { core_.set_locked(true); }
  void unlock() { core_.set_locked(false); }
  bool is_locked() { return core_.describe().locked; }
  std::map<std::string, std::string> attrs() { return core_.describe().attrs; }
  void update_attrs(const std::map<std::string, std::string>& set,
                    const std::vector<std::string>& remove = {}) {
    core_.update_attrs(set, remove);
  }
  int64_t counter_add(const std::string& name, int64_t delta = 1) {
    return core_.counter_add(name, delta);
  }
  int64_t counter_get(const std::string& name) { return core_.counter_get(name); }
  bool counter_cas(const std::string& name, int64_t expected, int64_t new_value) {
    return core_.counter_cas(name, expected, new_value);
  }

  // Row writes over one open stream (Appender), into the existing `leaves`.
  // NOT_FOUND for a leaf that does not exist; INVALID_ARGUMENT for none, or
  // a dict without batch dims.
  Appender appender(const std::vector<Key>& leaves, core::AppendOptions options = {});

  // A string another process can pass to Client::open_handle() to open this
  // same dict (what pickling is to the Python seed):
  // "tdstore1|<address>|<name>|<id>", with the address this Client was given.
  std::string handle();

  // The torch-free dict this one wraps.
  const core::Dict& core() const { return core_; }

 private:
  friend class Client;
  explicit Dict(core::Dict core) : core_(std::move(core)) {}
  core::Dict core_;
};

}  // namespace tdstore

#endif  // TDSTORE_CLIENT_CLIENT_H_
