// tdstore client core: the torch-free C++17 library every client sits on.
//
// The libtorch client (tdstore/client.h), the `tdstore` CLI and the Python
// package all talk to tdstored through this one library: the gRPC channel,
// deadlines, TLS and tokens, retries, handles, index encoding and the two
// data streams live here, once. It knows tensors only as (dtype, shape,
// contiguous little-endian C-order bytes).
//
//   tdstore::core::Client client("127.0.0.1:50051");
//   tdstore::core::Dict td = client.create("replay", {1000});
//   std::vector<float> obs(1000 * 84);
//   td.write({{tdstore::Key("obs"), tdstore::DType::kFloat32, {1000, 84},
//              obs.data(), int64_t(obs.size() * 4)}});
//
// Errors: every call that fails throws tdstore::Error carrying the gRPC
// status code and the server's message.
//
// Threads: Client and Dict are cheap to copy (copies share one gRPC channel)
// and every method may be called from any number of threads at once. A call
// blocks its thread until it is done; it holds no lock while it waits.
#ifndef TDSTORE_CLIENT_CORE_H_
#define TDSTORE_CLIENT_CORE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/dtype.h"      // tdstore::DType, DTypeSize, DTypeName
#include "common/leaf_kind.h"  // tdstore::LeafKind: tensor, or text/json/bytes values

namespace tdstore {

// ---- Shared by every client --------------------------------------------------

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

// A write behind (Dict::write_counted_behind) that failed, thrown by its
// client's next call, which did nothing else: code() is the write's own,
// and the message says how many writes queued after it failed with it
// (sent in its call) or were not sent. A type of its own so that code
// that reads its own call's error (a NOT_FOUND taken for "absent", an
// INVALID_ARGUMENT retried on a fresh schema) can tell it is not its
// call's, and let it through.
class WriteBehindError : public Error {
 public:
  WriteBehindError(StatusCode code, const std::string& message, int64_t dropped)
      : Error(code, message), dropped_(dropped) {}
  // Writes queued after the failed one that failed with it (joined into
  // its call: not written, or written and not counted, as the message
  // says) or were not sent.
  int64_t dropped() const { return dropped_; }

 private:
  int64_t dropped_;
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

  // Answer keys(), contains() and describe() from a schema copy that a
  // WatchSchema stream keeps current (one stream per dict asked about), with
  // no round trip. Never older than anything a call of this process has
  // seen: every reply names the dict's schema version, and a copy older
  // than the newest one seen is brought up to date first (causal reads,
  // docs/protocol.md). So another process's change is seen at once after
  // a call on the dict observed anything that followed it (a counter it
  // bumped after, a leaf it wrote after), and otherwise once the watch's
  // event arrives (a pub/sub hop). This client's own changes at once.
  // false: every such call asks tdstored.
  bool watch_schemas = true;

  // The same-host data path (docs/protocol.md). On a unix: address, or a
  // TCP one on loopback (127.0.0.1, localhost, [::1]; capability
  // shared_memory_loopback), whose tdstored offers shared memory, the
  // client lends it a memfd region of this many bytes (pages are used only
  // as calls touch them), and a call whose bytes fit in a free span of it
  // moves them through it instead of the socket: one gRPC message each
  // way, whatever the size. A write too large for any span streams through
  // a ring of up to 16 MiB of it, reused within the call
  // (WriteLeavesShared), and so does a read (whole leaves, or rows by one
  // index term) that the schema copy (watch_schemas) says is larger than
  // the span it can offer (ReadLeavesShared). Anything that cannot (a TCP
  // address off loopback, a tdstored without it, a full region, lending
  // refused) uses the socket, with the same results. 0: never.
  int64_t shared_memory_bytes = int64_t{64} << 20;
};

// How a dict keeps its rows (docs/storage-layout.md, "Record dicts").
enum class Layout {
  kLeaves,  // each leaf's rows in blocks of their own (the default)
  // Each row's leaves together in one record: a sample of every leaf of a
  // row is one range. Its leaves with rows come from the create's schema
  // or the first indexed write and are then fixed; they are written by
  // rows, never whole (FAILED_PRECONDITION). Needs batch dims.
  kRecord,
};

struct CreateOptions {
  int64_t rows_per_block = 0;  // 0: server default
  int64_t part_bytes = 0;      // 0: server default
  Layout layout = Layout::kLeaves;  // not for a copy
};

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

namespace core {

// ---- Indices over batch dims ---------------------------------------------------
//
// The semantics are torch's `t[...]` over the dict's batch dims: an int
// selects (and removes the dim), a slice keeps it, positions (any shape, any
// order, duplicates) and 1-D bool masks are advanced indices that broadcast
// together. Missing trailing dims mean ':'. Bounds are checked by tdstored
// (OUT_OF_RANGE).

class IndexTerm {
 public:
  enum class Kind { kInt, kSlice, kEllipsis, kPositions, kMask };

  static IndexTerm Int(int64_t position);
  static IndexTerm Of(Slice slice);
  static IndexTerm Of(Ellipsis);
  // `values` in C order, `shape` their shape ({} for one 0-d position).
  // INVALID_ARGUMENT if the shape's element count is not values.size().
  static IndexTerm Positions(std::vector<int64_t> values, std::vector<int64_t> shape);
  // A 1-D mask: one entry per position of its dim.
  static IndexTerm Mask(std::vector<bool> mask);

  Kind kind() const { return kind_; }
  int64_t position() const { return position_; }
  const Slice& slice() const { return slice_; }
  const std::vector<int64_t>& values() const { return values_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<bool>& mask() const { return mask_; }

 private:
  explicit IndexTerm(Kind kind) : kind_(kind) {}
  Kind kind_;
  int64_t position_ = 0;
  Slice slice_;
  std::vector<int64_t> values_;
  std::vector<int64_t> shape_;
  std::vector<bool> mask_;
};

// A tuple of terms over the leading batch dims.
using Index = std::vector<IndexTerm>;

// ---- Data --------------------------------------------------------------------

// A leaf as the store describes it: dtype, full shape (batch dims first)
// and its size in bytes (element count × dtype size).
struct LeafMeta {
  Key path{std::vector<std::string>{}};
  DType dtype = DType::kUnspecified;
  std::vector<int64_t> shape;
  int64_t byte_size = 0;
  // A value leaf (common/leaf_kind.h): uint8 slots of shape batch + [slot]
  // (common/value_rows.h decodes them), or with slot 0 one value, `value`.
  LeafKind kind = LeafKind::kTensor;
  std::string value = {};  // "= {}": aggregate initializers may leave it out
};

// The values of a value leaf (common/leaf_kind.h), decoded: text and JSON
// as their UTF-8 bytes, bytes as they are, a ragged leaf's cells as their
// bytes (common/ragged_cells.h decodes them). `cells` is the batch shape they
// cover (the leaf's shape without its slot dim); a one-value leaf
// (NonTensorData) has `one` set and exactly one value, which stands for every
// cell; otherwise there is one value per cell, C order.
struct Values {
  LeafKind kind = LeafKind::kText;
  std::vector<int64_t> cells;
  bool one = false;
  std::vector<std::string> values;
  // A ragged leaf's cell dtype name (its record's value); empty otherwise.
  std::string cell_dtype;
};

// The values of a value leaf as read: `data` holds its meta.byte_size bytes
// of slots (nothing for a one-value leaf). DATA_LOSS for a slot whose length
// runs past its end; INVALID_ARGUMENT for a tensor leaf.
Values DecodeValues(const LeafMeta& meta, const void* data);

struct DictInfo {
  std::string name;
  std::string id;
  std::vector<int64_t> batch_size;
  std::vector<LeafMeta> leaves;
  int64_t rows_per_block = 0;
  int64_t part_bytes = 0;
  Layout layout = Layout::kLeaves;
  int64_t version = 0;
  // Shared by every client (Dict::set_locked): while locked, leaves cannot
  // be added, replaced by ones of another dtype or shape, deleted or
  // renamed; writes into existing leaves go on.
  bool locked = false;
  // User metadata (Dict::update_attrs).
  std::map<std::string, std::string> attrs;
};

// One leaf to write: `byte_size` bytes at `data`, contiguous C-order
// little-endian, which must equal shape's element count × DTypeSize(dtype)
// (INVALID_ARGUMENT otherwise). The memory is read in place, never copied
// into a buffer of the library's, and must stay valid and unchanged until
// the call returns.
struct LeafData {
  Key path{std::vector<std::string>{}};
  DType dtype = DType::kUnspecified;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  int64_t byte_size = 0;
  // A value leaf: dtype kUInt8, shape batch + [slot], `data` the slots
  // (EncodeValueRows); or slot 0, no data, and the one `value` (written
  // whole only). An indexed write must name the leaf's own kind.
  LeafKind kind = LeafKind::kTensor;
  std::string value = {};  // "= {}": aggregate initializers may leave it out
};

// Where a read puts what it receives. The core calls it on the calling
// thread, in this order, for each attempt of the read (a read the server
// aborts because a leaf was replaced under it starts again: Begin is called
// again and the sink must forget what the earlier attempt gave it):
//   Begin(batch shape of the result, number of leaves),
//   then for each leaf Leaf(meta), which returns where its meta.byte_size
//   bytes go: memory of the caller's, allocated once at the final size
//   (the core copies each chunk straight into it, in order).
// A sink may throw (a tdstore::Error, say, for memory it cannot allocate):
// the read is cancelled and the exception reaches the caller.
class ReadSink {
 public:
  virtual ~ReadSink() = default;
  virtual void Begin(const std::vector<int64_t>& batch_shape, int64_t leaf_count) = 0;
  virtual void* Leaf(const LeafMeta& leaf) = 0;
};

// Called after each data chunk moves, on the calling thread, with the bytes
// moved so far in this call (a retried call starts again from 0) and the
// total bytes of the call when known (-1 for reads, whose total arrives one
// leaf header at a time).
using Progress = std::function<void(int64_t done_bytes, int64_t total_bytes)>;

struct ReadOptions {
  // The read is Dict::get(path): a stream that carries anything but the
  // leaf `exact_leaf` means the path is a nested dict, and the read stops at
  // once with INVALID_ARGUMENT rather than download the whole subtree.
  const Key* exact_leaf = nullptr;
  // An indexed read: each leaf at the indexed batch shape.
  const Index* index = nullptr;
  Progress progress;
};

struct WriteOptions {
  // An indexed write, td[index] = value for each leaf: each value's shape
  // must equal or broadcast to the indexed batch shape + the leaf's element
  // shape (the server broadcasts), and its dtype must equal the leaf's. A
  // leaf that does not exist yet is created zero-filled first.
  const Index* index = nullptr;
  Progress progress;
  // A whole-leaf write that a locked dict refuses (FAILED_PRECONDITION)
  // even where it only rewrites leaves in place: tensordict's td["k"] = v
  // on a locked TensorDict. Without it, a locked dict refuses only new and
  // reshaped leaves.
  bool refuse_if_locked = false;
};

// A ring buffer's append (Dict::append_ring): rows reserved from the
// dict counter `cursor`, written at positions (old cursor + i) mod batch
// dim 0, then counted in the counter `count` (if not empty).
struct RingAppend {
  std::string cursor;
  int64_t rows = 0;
  std::string count;
};
struct RingAppended {
  int64_t start = 0;        // the cursor before: rows start .. start + rows - 1 (mod dim 0)
  int64_t count_value = 0;  // `count` afterwards (0 without one)
};

// One leaf of a fill (Dict::fill): every element set to `element`, one
// value of `dtype` (the leaf's, as the caller knows it), little-endian.
struct LeafFill {
  Key path{std::vector<std::string>{}};
  DType dtype = DType::kUnspecified;
  std::string element;
};

class Dict;
class Appender;

struct AppendOptions {
  // Consecutive rows coalesced into one batch before it is sent (capped so
  // that a batch fits one message).
  int64_t batch_rows = 256;
  // Batches sent and not yet acknowledged; append() waits for the oldest
  // acknowledgement beyond it. Bounds the memory on both ends.
  int window = 8;
};

struct LeafSpec {
  Key path;
  DType dtype;
  std::vector<int64_t> element_shape;
  // A value leaf: dtype kUInt8, element shape [slot], every row empty.
  LeafKind kind = LeafKind::kTensor;
};

struct ServerInfo {
  std::string version;
  std::string backend;
  int redis_masters = 0;
  bool redis_ok = false;
};

class Client {
 public:
  // address: "host:port" or "unix:///path/to.sock". Does not connect yet;
  // gRPC connects on the first call and reconnects after failures.
  // INVALID_ARGUMENT for a malformed address or inconsistent options.
  explicit Client(const std::string& address, ClientOptions options = {});

  const std::string& address() const;
  const ClientOptions& options() const;

  // Creates a dict, with each schema leaf zero-filled at batch_size +
  // element shape; ALREADY_EXISTS if the name is taken.
  Dict create(const std::string& name, const std::vector<int64_t>& batch_size,
              const std::vector<LeafSpec>& schema = {}, const CreateOptions& options = {}) const;
  // Opens an existing dict; NOT_FOUND if there is none.
  // create and open both answer with the dict's schema: with
  // ClientOptions::watch_schemas, the client's schema copy starts from it
  // and its watch starts then, so the schema calls right after cost no call.
  Dict open(const std::string& name) const;
  // Names of all dicts (those the token may read), sorted.
  std::vector<std::string> list() const;
  // What the daemon serves from: its version, its Redis back end
  // ("standalone redis://host:port", "cluster of 3 masters (seeds ...)"),
  // the number of Redis masters, and whether they all answer PING now.
  ServerInfo server_info() const;
  // Whether calls' bytes cross through shared memory (the same-host data
  // path, ClientOptions::shared_memory_bytes) rather than the socket: lends
  // tdstored a region now if none is lent and one may be. For diagnostics
  // and tests; calls decide this by themselves.
  bool shares_memory() const;
  // Deletes a dict and all its data; NOT_FOUND if there is none.
  void drop(const std::string& name) const;
  // Renames; NOT_FOUND / ALREADY_EXISTS.
  void rename(const std::string& name, const std::string& new_name) const;
  // Waits until every write behind of this client
  // (Dict::write_counted_behind) is applied; throws the first that failed,
  // once. Every other call but the schema reads does this first.
  void settle() const;

  // Opens the dict a Dict::handle() string names, connecting to the address
  // it holds. INVALID_ARGUMENT for a malformed handle; NOT_FOUND if the dict
  // is gone or was deleted and created again since.
  static Dict open_handle(const std::string& handle, ClientOptions options = {});

  struct Impl;

 private:
  friend class Dict;
  explicit Client(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

// One dict, as opened: every call names it by its name and its id, so a
// Dict held across a delete and re-create of its name, or a rename, gets
// NOT_FOUND and never reads or writes the dict that has the name now
// (reopen by name for that).
class Dict {
 public:
  const std::string& name() const { return name_; }
  const std::string& id() const { return id_; }
  // The client this dict was opened through (same channel).
  Client client() const;

  // Stores every leaf in one stream; they become visible together when it
  // ends, or none does. With options.index, an indexed write (see
  // WriteOptions). An empty list makes no call (the index is still checked).
  void write(const std::vector<LeafData>& leaves, const WriteOptions& options = {}) const;

  // Reads every leaf under `paths` (a leaf or a nested prefix each; the whole
  // dict when empty) into `sink`, each leaf whole at one generation. Errors:
  // NOT_FOUND for an unknown path; with an index OUT_OF_RANGE /
  // INVALID_ARGUMENT as tdstored checks it. A read the server aborts because
  // a leaf was replaced mid-stream is retried from the start: 3 times at
  // once, then with backoff while ClientOptions::retry_for lasts.
  void read(const std::vector<Key>& paths, ReadSink& sink, const ReadOptions& options = {}) const;

  // A ring buffer's append in one call: what a replay buffer's collectors
  // need to extend one buffer from many processes and machines. tdstored
  // adds ring.rows to the counter ring.cursor (atomic), writes `leaves`
  // (each of ring.rows rows, or broadcasting to them) at the rows reserved,
  // as write() with an index of those positions (missing leaves created
  // zero-filled), and then adds ring.rows to the counter ring.count, which
  // so counts rows once they are written (with several writers at once, a
  // total: a slower writer's earlier rows may still be in flight). Writers
  // never get the same rows of one turn. Errors: as write(), and INVALID_ARGUMENT for rows
  // outside 1..batch dim 0 or a counter name outside 1..256 bytes. A
  // refused append wrote nothing and gave its reservation back, unless
  // another writer reserved after it (those rows then keep what they held,
  // uncounted). Not repeated after UNAVAILABLE unless tdstored says it
  // changed nothing: it is not safe to repeat.
  RingAppended append_ring(const std::vector<LeafData>& leaves, const RingAppend& ring) const;
  // An indexed write (options.index required, INVALID_ARGUMENT otherwise)
  // that then adds `add` to the dict counter `counter`, as counter_add
  // would, and returns the counter's value afterwards: a writer that keeps
  // a length (torchrl's RoundRobinWriter) writes and counts in one call
  // (WriteBegin.count_after), and the counter never counts rows not yet
  // written. From a tdstored older than protocol revision 4, which does not
  // count, the write is followed by counter_add. Errors: as write(); a
  // refused write counts nothing. Not repeated after UNAVAILABLE unless
  // tdstored says it changed nothing: it is not safe to repeat.
  int64_t write_counted(const std::vector<LeafData>& leaves, const WriteOptions& options,
                        const std::string& counter, int64_t add) const;
  // write_counted() that returns before tdstored applies it (written
  // behind) where the write can be checked here, against the trusted schema
  // copy (ClientOptions::watch_schemas): the index is one position, or one
  // 1-D list of them, in 0 .. batch dim 0 - 1, and every leaf exists as a
  // tensor leaf of the same dtype, its value shaped exactly as the rows
  // selected.
  // Then the bytes are copied, the write is queued on the client's writer
  // thread and this returns nullopt. Otherwise (and past the window below)
  // it is write_counted(), and returns the counter's value.
  //
  // What a caller can rely on:
  //   - writes behind are applied in the order they were made, and every
  //     later call of this client, on any of its Dicts, first waits for
  //     them (so a process reads its own writes; Client::settle waits alone),
  //     but for the schema reads (describe, batch_size, keys, keys_under,
  //     contains), which they cannot change;
  //   - writes waiting together into the same dict and counter, each one
  //     1-D list of positions and no row in two of them, may go as one
  //     call (at most 4 MiB): the same rows and count as in turn, landing
  //     together;
  //   - the first that fails is thrown by the client's next call, once,
  //     as a WriteBehindError with the write's own code; the writes queued
  //     after it are dropped unsent, and the error says how many (and
  //     counts those that went in its call, which failed with it). Limits
  //     only tdstored knows (its --max-indexed-bytes, its memory budget)
  //     refuse such a write then, not here (a joined call they refuse is
  //     sent again as its writes, one by one);
  //   - at most 32 writes and 16 MiB wait; a write behind waits for room;
  //   - a client destroyed with writes queued sends them first (a failure
  //     then goes to stderr); a process killed first loses them, as an
  //     in-memory buffer would lose its rows.
  // A replay buffer's writer (torchrl's RoundRobinWriter) knows the rows'
  // positions before it writes, so its extends need not wait for tdstored.
  std::optional<int64_t> write_counted_behind(const std::vector<LeafData>& leaves,
                                              const Index& index, const std::string& counter,
                                              int64_t add) const;

  // read() without waiting: the read runs on one of the library's
  // read-ahead threads (RunOnReadAheadThread) and this returns at once, so
  // a trainer keeps the next batches in flight while it computes:
  //
  //   auto next = td.read_async({}, sink_b, core::Index{positions_b});
  //   train(batch_a);
  //   next.get();  // sink_b holds the rows, or this throws read()'s error
  //
  // The call owns copies of everything it needs (this Dict's client stays
  // alive until it ends); `sink` must not be used by the caller before
  // get() returns. INVALID_ARGUMENT (thrown here) for a null sink.
  std::future<void> read_async(std::vector<Key> paths, std::shared_ptr<ReadSink> sink,
                               std::optional<Index> index = std::nullopt) const;

  // As TensorDict.keys(include_nested, leaves_only).
  std::vector<Key> keys(bool include_nested = false, bool leaves_only = false) const;
  // The keys of the sub-dict at `prefix`, relative to it (a sub-dict
  // view's keys() in one call; no call when a watched copy is trusted).
  // NOT_FOUND if nothing lies under it; INVALID_ARGUMENT if it is a leaf.
  std::vector<Key> keys_under(const Key& prefix, bool include_nested = false,
                              bool leaves_only = false) const;
  // True if `path` is a leaf or a nested sub-dict.
  bool contains(const Key& path) const;
  // Removes the leaf or subtree at `path`; NOT_FOUND if absent.
  void erase(const Key& path) const;
  // Moves the leaf or subtree at `from` to `to` in one step on the server;
  // no data moves. With `replace`, what is at `to` goes; otherwise it is
  // ALREADY_EXISTS. NOT_FOUND if nothing is at `from`; FAILED_PRECONDITION
  // if `to` lies under a leaf, one path holds the other, or the dict is
  // locked. Nothing changes on an error.
  void rename(const Key& from, const Key& to, bool replace = false) const;
  // Sets every element of the given leaves, or of the rows `index` selects
  // (if not null), on the server: no leaf bytes cross the network. Whole
  // leaves become visible together. NOT_FOUND for a missing leaf;
  // FAILED_PRECONDITION if a leaf's dtype is no longer the one named (it
  // was replaced); INVALID_ARGUMENT for an element of the wrong size. An
  // indexed fill is bounded by tdstored's --max-indexed-bytes.
  void fill(const std::vector<LeafFill>& leaves, const Index* index = nullptr) const;
  // Copies the leaves at or under `from` (empty: every leaf) into `target`
  // (a dict of the same tdstored; may be this one) at `to` + their path
  // below `from`, inside tdstored: no data crosses the network. The copies
  // become visible together and replace what is at their paths; a copy
  // that fails leaves nothing. INVALID_ARGUMENT if batch dims do not fit
  // the target; NOT_FOUND if nothing is at `from`.
  void copy(const Key& from, const Dict& target, const Key& to) const;
  // A new dict `name` holding a copy of the leaves at or under `from`
  // (empty: every leaf), made inside tdstored: the same batch shape, and the
  // same block layout unless `options` sets one. It appears, under its name,
  // only once every leaf is in place; a copy that fails leaves no dict.
  // ALREADY_EXISTS if the name is taken; NOT_FOUND if nothing is at `from`.
  Dict clone(const std::string& name, const Key& from = {},
             const CreateOptions& options = {}) const;
  // Deletes this dict and all its data. NOT_FOUND if it is gone, even if
  // another dict has its name now (Client::drop deletes by name).
  void drop() const;
  // A stream of row writes into existing `leaves` (Appender). NOT_FOUND for
  // a leaf that does not exist; INVALID_ARGUMENT for none, or a dict without
  // batch dims. Opens no stream before the first batch is sent.
  Appender appender(const std::vector<Key>& leaves, const AppendOptions& options = {}) const;
  // Shapes, dtypes and byte sizes of every leaf, the dict's layout, lock
  // and attributes.
  DictInfo describe() const;
  // describe().batch_size, without copying the leaves when a watched copy
  // answers (no round trip then).
  std::vector<int64_t> batch_size() const;
  // Sets batch dim 0 of the dict and of every leaf to `rows`, on the
  // server, moving no byte: rows both sizes have keep their bytes, new rows
  // read zeros, and readers see the old size or the new one. Returns the
  // schema afterwards; resizing to the current size changes nothing.
  // INVALID_ARGUMENT for no batch dims or rows < 0; FAILED_PRECONDITION
  // while locked; RESOURCE_EXHAUSTED past a quota; ABORTED if the dict
  // kept changing meanwhile (retry).
  DictInfo resize(int64_t rows) const;

  // ---- State shared by every client (docs/protocol.md, *Lock, attributes
  // and counters*). Each is one call, atomic on the server. NOT_FOUND if
  // the dict is gone (or renamed, or replaced by a namesake).

  // Locks or unlocks the dict; idempotent. Returns the schema afterwards.
  // While locked, adding, replacing (by another dtype or shape), deleting
  // or renaming leaves fails with FAILED_PRECONDITION.
  DictInfo set_locked(bool locked) const;
  // Sets and removes attributes in one step, all or nothing; absent names
  // in `remove` are no error. INVALID_ARGUMENT for a name outside 1..256
  // bytes, a value over 4096 bytes, or a name both set and removed;
  // RESOURCE_EXHAUSTED past 256 attributes.
  DictInfo update_attrs(const std::map<std::string, std::string>& set,
                        const std::vector<std::string>& remove = {}) const;
  // The dict's 64-bit counters, by name (1..256 bytes; at most 1024 per
  // dict, RESOURCE_EXHAUSTED beyond). A counter never set reads 0.
  // counter_add returns the new value (OUT_OF_RANGE, unchanged, on
  // overflow). counter_cas sets it to `new_value` if it equals `expected`,
  // and says whether it did (`*current`, if given, gets the value now).
  // An add or cas whose reply is lost is not retried (it may have run).
  int64_t counter_add(const std::string& name, int64_t delta = 1) const;
  int64_t counter_get(const std::string& name) const;
  bool counter_cas(const std::string& name, int64_t expected, int64_t new_value,
                   int64_t* current = nullptr) const;
  // "tdstore1|<address>|<name>|<id>": Client::open_handle() opens this dict
  // from any process.
  std::string handle() const;

 private:
  friend class Client;
  // The watched schema copy, when one is trusted (ClientOptions::watch_schemas).
  std::shared_ptr<const DictInfo> TrustedSchema() const;
  Dict(std::shared_ptr<Client::Impl> impl, std::string name, std::string id)
      : impl_(std::move(impl)), name_(std::move(name)), id_(std::move(id)) {}
  std::shared_ptr<Client::Impl> impl_;
  std::string name_;
  std::string id_;
};

// Row writes over one open stream (tdstored's AppendRows): what a replay
// buffer's collector or a logger needs to write rows as they come, at a
// rate single calls cannot reach.
//
//   core::Appender out = dict.appender({"obs", "reward"});
//   out.append(cursor, 1, {obs_row, &reward});   // td[cursor] = row, queued
//   ...
//   out.flush();                                 // all written, or throws
//
// Rows appended at consecutive positions are coalesced into one batch of
// up to options.batch_rows rows (one range per leaf on the server, written
// as an indexed write: all its rows of one storage block at once); a batch
// is sent when it is full, when the next row is not consecutive, or on
// flush(). At most options.window batches wait for their acknowledgement.
// A batch the server refuses (rows out of range, a leaf replaced by one of
// another dtype) wrote nothing; its error is thrown by the next append()
// or flush(), once, and the appender goes on. A stream that breaks with
// batches unacknowledged throws UNAVAILABLE naming how many rows' fate is
// unknown; an idle stream that the server closed is reopened.
//
// One thread at a time. The destructor sends what is queued and waits for
// it, but cannot report a failure: call flush() to know.
class Appender {
 public:
  Appender(Appender&&) noexcept;
  Appender& operator=(Appender&&) noexcept;
  ~Appender();

  // td[start_row : start_row + rows] = the rows, given per leaf (in the
  // order of Dict::appender's `leaves`) as `rows` contiguous C-order rows
  // at `leaf_rows[i]`. The bytes are copied before it returns.
  void append(int64_t start_row, int64_t rows, const std::vector<const void*>& leaf_rows);
  // Sends what is queued and waits until every batch is acknowledged.
  void flush();
  // Rows the server acknowledged as written so far.
  int64_t rows_written() const;
  // Bytes of one row of each leaf, in order.
  const std::vector<int64_t>& row_bytes() const;

  struct State;

 private:
  friend class Dict;
  explicit Appender(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// ---- Read-ahead ----------------------------------------------------------------

// The library's read-ahead threads: kReadAheadThreads per process, shared by
// every client, started on first use (and anew in a forked child, which
// never touches its parent's). Runs `task` on one of them, in the order
// given, and returns at once. Tasks should be reads (Dict::read_async): a
// task that blocks on another task's future may wait forever once every
// thread does. An exception escaping `task` is dropped: use ReadAhead to
// receive it.
inline constexpr int kReadAheadThreads = 4;
void RunOnReadAheadThread(std::function<void()> task);

// `task()` on a read-ahead thread; its future gives the result, or throws
// what the task threw. The libtorch client's Dict::index_async is one.
template <typename Task>
auto ReadAhead(Task task) -> std::future<decltype(task())> {
  using Result = decltype(task());
  auto packaged = std::make_shared<std::packaged_task<Result()>>(std::move(task));
  std::future<Result> result = packaged->get_future();
  RunOnReadAheadThread([packaged] { (*packaged)(); });
  return result;
}

// The element count of `shape` times the dtype's size; INVALID_ARGUMENT
// naming `path` for a negative dim or an overflow.
int64_t ByteSize(const Key& path, DType dtype, const std::vector<int64_t>& shape);

}  // namespace core
}  // namespace tdstore

#endif  // TDSTORE_CLIENT_CORE_H_
