// tdstore._native: the Python package's native module, a thin pybind11 layer
// over the torch-free client core (tdstore/core.h). It never links libtorch:
// tensors cross as raw memory (a data pointer and a byte count going out, a
// Buffer coming back that torch.frombuffer views without a copy), so the
// module works with any torch the user has, and PyPI's torch never meets
// Debian's libtorch in one process.
//
// The contract is client/python/NATIVE_API.md. Every call that waits on the
// network releases the GIL; core objects are thread-safe, so Python threads
// may share a Client and its Dicts.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/dtype.h"
#include "common/ragged_cells.h"
#include "common/value_rows.h"
#include "tdstore/core.h"

namespace py = pybind11;

namespace tdstore::python {
namespace {

// ---- Errors -------------------------------------------------------------------

// The Python callable that builds the exception for a tdstore::Error
// (set_error_factory); the package maps codes to its exception classes.
py::object& ErrorFactory() {
  // Leaked on purpose: destroying a Python object at process exit, after the
  // interpreter is gone, would crash.
  static py::object* factory = new py::object();
  return *factory;
}

void RaiseError(const Error& error) {
  py::object& factory = ErrorFactory();
  if (!factory) {
    PyErr_SetString(PyExc_RuntimeError, error.what());
    return;
  }
  // A write behind's failure is a class of its own (tdstore.WriteBehindError).
  const auto* behind = dynamic_cast<const tdstore::WriteBehindError*>(&error);
  py::object exception =
      behind != nullptr
          ? factory(static_cast<int>(error.code()), StatusCodeName(error.code()),
                    error.message(), behind->dropped())
          : factory(static_cast<int>(error.code()), StatusCodeName(error.code()), error.message());
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
}

[[noreturn]] void InvalidArgument(const std::string& message) {
  throw Error(StatusCode::kInvalidArgument, message);
}

// ---- Conversions ---------------------------------------------------------------

Key ToKey(const std::vector<std::string>& path) {
  if (path.empty()) InvalidArgument("a leaf path needs at least one component");
  return Key(path);
}

py::tuple FromKey(const Key& key) { return py::cast(key.parts()); }

DType ToDType(const std::string& name) {
  std::optional<DType> dtype = DTypeFromName(name);
  if (!dtype) InvalidArgument("unknown dtype '" + name + "'");
  return *dtype;
}

// "leaves" or "record" (TensorDictStore's layout=); ValueError otherwise.
Layout ToLayout(const std::string& name) {
  if (name == "leaves") return Layout::kLeaves;
  if (name == "record") return Layout::kRecord;
  throw py::value_error("layout must be 'leaves' or 'record', not '" + name + "'");
}

LeafKind ToKind(const std::string& name) {
  std::optional<LeafKind> kind = LeafKindFromName(name);
  if (!kind) InvalidArgument("unknown leaf kind '" + name + "'");
  return *kind;
}

py::tuple ShapeTuple(const std::vector<int64_t>& shape) { return py::cast(shape); }

// A list of index terms (NATIVE_API.md) as the core's Index. Runs with the
// GIL held: it reads Python objects and the caller's memory.
core::Index ToIndex(const py::list& terms) {
  core::Index index;
  index.reserve(terms.size());
  for (const py::handle& item : terms) {
    const py::tuple term = py::reinterpret_borrow<py::tuple>(item);
    if (term.empty()) InvalidArgument("empty index term");
    const std::string kind = term[0].cast<std::string>();
    auto optional_int = [](py::handle h) -> std::optional<int64_t> {
      if (h.is_none()) return std::nullopt;
      return h.cast<int64_t>();
    };
    if (kind == "int" && term.size() == 2) {
      index.push_back(core::IndexTerm::Int(term[1].cast<int64_t>()));
    } else if (kind == "slice" && term.size() == 4) {
      index.push_back(core::IndexTerm::Of(
          Slice(optional_int(term[1]), optional_int(term[2]), term[3].cast<int64_t>())));
    } else if (kind == "ellipsis" && term.size() == 1) {
      index.push_back(core::IndexTerm::Of(Ellipsis{}));
    } else if (kind == "positions" && term.size() == 4) {
      const auto* data = reinterpret_cast<const int64_t*>(term[1].cast<uintptr_t>());
      const auto count = term[2].cast<size_t>();
      if (data == nullptr && count > 0) InvalidArgument("index positions without data");
      index.push_back(core::IndexTerm::Positions(std::vector<int64_t>(data, data + count),
                                                 term[3].cast<std::vector<int64_t>>()));
    } else if (kind == "mask" && term.size() == 3) {
      const auto* data = reinterpret_cast<const uint8_t*>(term[1].cast<uintptr_t>());
      const auto count = term[2].cast<size_t>();
      if (data == nullptr && count > 0) InvalidArgument("index mask without data");
      std::vector<bool> mask(count);
      for (size_t i = 0; i < count; ++i) mask[i] = data[i] != 0;
      index.push_back(core::IndexTerm::Mask(std::move(mask)));
    } else {
      InvalidArgument("malformed index term of kind '" + kind + "'");
    }
  }
  return index;
}

// A Python progress callable as the core's, which the core calls without
// the GIL.
core::Progress ToProgress(const py::object& progress) {
  if (progress.is_none()) return {};
  return [progress](int64_t done, int64_t total) {
    py::gil_scoped_acquire gil;
    progress(done, total);
  };
}

// ---- Read destinations -----------------------------------------------------------

// Memory of one received leaf: allocated once at its final size, written by
// the core, then handed to Python, which views it (torch.frombuffer) through
// the buffer protocol. 64-byte aligned, as torch's own allocations are.
class Buffer {
 public:
  explicit Buffer(int64_t size) : size_(size) {
    if (size == 0) return;
    const size_t rounded = (static_cast<size_t>(size) + 63) / 64 * 64;
    data_ = static_cast<char*>(std::aligned_alloc(64, rounded));
    if (data_ == nullptr) throw std::bad_alloc();
  }
  ~Buffer() { std::free(data_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  char* data() { return data_; }
  int64_t size() const { return size_; }

 private:
  char* data_ = nullptr;
  int64_t size_;
};

// ---- DLPack -------------------------------------------------------------------
//
// A received leaf leaves the module as a DLPack capsule ("dltensor"), so that
// Python makes the tensor of the right dtype and shape in one call
// (torch.from_dlpack) instead of two (frombuffer, then view). These are the
// ABI structs of the DLPack standard (v0.x, the layout every framework
// reads), declared here because no package of ours ships dlpack.h.
struct DLDevice {
  int32_t device_type;  // 1: CPU
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // nullptr: C order
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// DLPack's type codes: 0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool,
// and 10..17 the float8 / float4 formats (dlpack.h's kDLFloat8_* and
// kDLFloat4_e2m1fn), which torch reads back as its own float8 dtypes.
DLDataType DLTypeOf(DType dtype) {
  const auto bits = static_cast<uint8_t>(DTypeSize(dtype) * 8);
  switch (dtype) {
    case DType::kBool: return {6, 8, 1};
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64: return {1, bits, 1};
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64: return {0, bits, 1};
    case DType::kBFloat16: return {4, bits, 1};
    case DType::kFloat16:
    case DType::kFloat32:
    case DType::kFloat64: return {2, bits, 1};
    case DType::kComplex32:
    case DType::kComplex64:
    case DType::kComplex128: return {5, bits, 1};
    case DType::kFloat8E4M3Fn: return {10, 8, 1};
    case DType::kFloat8E4M3FnUz: return {11, 8, 1};
    case DType::kFloat8E5M2: return {12, 8, 1};
    case DType::kFloat8E5M2FnUz: return {13, 8, 1};
    case DType::kFloat8E8M0FnU: return {14, 8, 1};
    // Two 4-bit lanes per element, as torch exports float4_e2m1fn_x2.
    case DType::kFloat4E2M1FnX2: return {17, 4, 2};
    case DType::kUnspecified: break;
  }
  throw Error(StatusCode::kInternal, "no DLPack type for dtype " + std::string(DTypeName(dtype)));
}

// What a capsule owns: the DLManagedTensor, its shape, and the Buffer.
struct DLPackOwner {
  DLManagedTensor managed;
  std::vector<int64_t> shape;
  std::shared_ptr<Buffer> buffer;
};

// A "dltensor" capsule viewing `buffer` as `shape` of `dtype`. The consumer
// (torch) renames it "used_dltensor" and calls the deleter when its tensor
// dies; a capsule never consumed frees itself.
py::capsule ToDLPack(std::shared_ptr<Buffer> buffer, DType dtype, std::vector<int64_t> shape) {
  auto* owner = new DLPackOwner{};
  owner->shape = std::move(shape);
  owner->buffer = std::move(buffer);
  DLTensor& t = owner->managed.dl_tensor;
  // DLPack wants a non-null pointer even for 0 bytes.
  static char empty_leaf;
  t.data = owner->buffer->size() > 0 ? owner->buffer->data() : &empty_leaf;
  t.device = {1, 0};
  t.ndim = static_cast<int32_t>(owner->shape.size());
  t.dtype = DLTypeOf(dtype);
  t.shape = owner->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  owner->managed.manager_ctx = owner;
  owner->managed.deleter = [](DLManagedTensor* self) {
    delete static_cast<DLPackOwner*>(self->manager_ctx);
  };
  return py::capsule(&owner->managed, "dltensor", [](PyObject* capsule) {
    // Still named "dltensor": nobody took ownership.
    if (PyCapsule_IsValid(capsule, "dltensor")) {
      auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
      managed->deleter(managed);
    }
  });
}

// Collects a read's leaves into Buffers. Runs without the GIL (the core
// calls it on the reading thread); touches no Python object.
class BufferSink : public core::ReadSink {
 public:
  struct Received {
    core::LeafMeta meta;
    std::shared_ptr<Buffer> buffer;
  };

  void Begin(const std::vector<int64_t>& batch_shape, int64_t leaf_count) override {
    batch_shape_ = batch_shape;
    leaves_.clear();
    leaves_.reserve(static_cast<size_t>(std::max<int64_t>(leaf_count, 0)));
  }

  void* Leaf(const core::LeafMeta& leaf) override {
    std::shared_ptr<Buffer> buffer;
    try {
      buffer = std::make_shared<Buffer>(leaf.byte_size);
    } catch (const std::bad_alloc&) {
      throw Error(StatusCode::kResourceExhausted,
                  "cannot allocate " + std::to_string(leaf.byte_size) + " bytes for leaf '" +
                      leaf.path.str() + "'");
    }
    void* data = buffer->data();
    leaves_.push_back({leaf, std::move(buffer)});
    return data;
  }

  // (batch_size, [(path, dtype, shape, data)]), data a Buffer or, with
  // `dlpack`, a DLPack capsule of the leaf's dtype and shape; needs the GIL.
  py::tuple ToPython(bool dlpack) const {
    py::list leaves;
    for (const Received& leaf : leaves_) {
      py::object data = dlpack ? py::object(ToDLPack(leaf.buffer, leaf.meta.dtype, leaf.meta.shape))
                               : py::cast(leaf.buffer);
      leaves.append(py::make_tuple(FromKey(leaf.meta.path), DTypeName(leaf.meta.dtype),
                                   ShapeTuple(leaf.meta.shape), std::move(data),
                                   LeafKindName(leaf.meta.kind), py::bytes(leaf.meta.value)));
    }
    return py::make_tuple(ShapeTuple(batch_shape_), leaves);
  }

 private:
  std::vector<int64_t> batch_shape_;
  std::vector<Received> leaves_;
};

// ---- Calls -------------------------------------------------------------------

ClientOptions MakeOptions(const std::string& token, bool tls, const std::string& tls_root_ca_pem,
                          const std::string& tls_client_cert_pem,
                          const std::string& tls_client_key_pem,
                          const std::string& tls_server_name, double timeout, double retry_for,
                          int64_t chunk_bytes, bool watch_schemas,
                          int64_t shared_memory_bytes) {
  ClientOptions options;
  options.token = token;
  options.tls = tls;
  options.tls_root_ca_pem = tls_root_ca_pem;
  options.tls_client_cert_pem = tls_client_cert_pem;
  options.tls_client_key_pem = tls_client_key_pem;
  options.tls_server_name = tls_server_name;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000));
  options.retry_for = std::chrono::milliseconds(static_cast<int64_t>(retry_for * 1000));
  options.chunk_bytes = chunk_bytes;
  options.watch_schemas = watch_schemas;
  options.shared_memory_bytes = shared_memory_bytes;
  return options;
}

// The leaves of a write call, read from Python with the GIL held; the memory
// they point to is the caller's, which keeps it alive during the call.
std::vector<core::LeafData> ToLeafData(const py::list& leaves) {
  std::vector<core::LeafData> out;
  out.reserve(leaves.size());
  for (const py::handle& item : leaves) {
    const py::tuple leaf = py::reinterpret_borrow<py::tuple>(item);
    if (leaf.size() != 5 && leaf.size() != 7) {
      InvalidArgument("a leaf to write is (path, dtype, shape, data_ptr, nbytes[, kind, value])");
    }
    core::LeafData data;
    data.path = ToKey(leaf[0].cast<std::vector<std::string>>());
    data.dtype = ToDType(leaf[1].cast<std::string>());
    data.shape = leaf[2].cast<std::vector<int64_t>>();
    data.data = reinterpret_cast<const void*>(leaf[3].cast<uintptr_t>());
    data.byte_size = leaf[4].cast<int64_t>();
    if (leaf.size() == 7) {
      data.kind = ToKind(leaf[5].cast<std::string>());
      data.value = leaf[6].cast<std::string>();
    }
    out.push_back(std::move(data));
  }
  return out;
}

py::dict DescribeToPython(const core::DictInfo& info) {
  py::list leaves;
  for (const core::LeafMeta& leaf : info.leaves) {
    leaves.append(py::make_tuple(FromKey(leaf.path), DTypeName(leaf.dtype),
                                 ShapeTuple(leaf.shape), leaf.byte_size, LeafKindName(leaf.kind),
                                 py::bytes(leaf.value)));
  }
  py::dict out;
  out["name"] = info.name;
  out["id"] = info.id;
  out["batch_size"] = ShapeTuple(info.batch_size);
  out["leaves"] = leaves;
  out["rows_per_block"] = info.rows_per_block;
  out["part_bytes"] = info.part_bytes;
  out["layout"] = info.layout == Layout::kRecord ? "record" : "leaves";
  out["version"] = info.version;
  out["locked"] = info.locked;
  py::dict attrs;
  for (const auto& [name, value] : info.attrs) attrs[py::str(name)] = py::str(value);
  out["attrs"] = attrs;
  return out;
}

}  // namespace
}  // namespace tdstore::python

// The module is defined at global scope, as pybind11 requires.
PYBIND11_MODULE(_native, m) {
  using namespace tdstore;          // NOLINT: the core's names, for brevity
  using namespace tdstore::python;  // NOLINT

  m.doc() = "tdstore's native module over the torch-free C++ client core (NATIVE_API.md)";
  // Debian builds abseil without NDEBUG, so its Mutex, which gRPC locks
  // many times per call, keeps a lock graph for deadlock detection behind a
  // global spin lock (about 23 ns per Lock/Unlock pair against 6 without).
  // The module carries its own copy of abseil (its symbols are hidden), so
  // this reaches nothing outside tdstore (server/main.cc does the same).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      RaiseError(e);
    }
  });

  // Value leaves' slots (common/value_rows.h), to and from the caller's
  // contiguous uint8 memory.
  // The dtypes tdstore stores, by name (common/dtype.cc): the Python
  // package's one dtype table is made from this list.
  m.def(
      "dtype_names",
      []() {
        std::vector<std::string> names;
        const std::string_view all = KnownDTypeNames();
        size_t start = 0;
        while (start <= all.size()) {
          size_t end = all.find(", ", start);
          if (end == std::string_view::npos) end = all.size();
          names.emplace_back(all.substr(start, end - start));
          start = end + 2;
        }
        return names;
      },
      "every dtype name tdstore stores, in wire-number order");
  m.def(
      "value_slot_bytes",
      [](int64_t longest) {
        absl::StatusOr<int64_t> slot = ValueSlotBytes(longest);
        if (!slot.ok()) InvalidArgument(std::string(slot.status().message()));
        return *slot;
      },
      py::arg("longest"), "the slot size a value leaf gets for values of `longest` bytes");
  m.def(
      "encode_values",
      [](const std::vector<py::bytes>& values, int64_t slot, uintptr_t out_ptr,
         int64_t out_bytes) {
        if (slot < 0 || out_bytes != static_cast<int64_t>(values.size()) * slot) {
          InvalidArgument("encode_values: " + std::to_string(values.size()) + " slots of " +
                          std::to_string(slot) + " bytes do not fill " +
                          std::to_string(out_bytes) + " bytes");
        }
        std::vector<std::string_view> views;
        views.reserve(values.size());
        for (const py::bytes& v : values) {
          char* data = nullptr;
          Py_ssize_t size = 0;
          PyBytes_AsStringAndSize(v.ptr(), &data, &size);
          views.emplace_back(data, static_cast<size_t>(size));
        }
        absl::Status s = EncodeValueRows(views, slot, reinterpret_cast<char*>(out_ptr));
        if (!s.ok()) InvalidArgument(std::string(s.message()));
      },
      py::arg("values"), py::arg("slot"), py::arg("out_ptr"), py::arg("out_bytes"),
      "writes len(values) slots of `slot` bytes into the out_bytes at out_ptr; ValueError if "
      "one does not fit");
  m.def(
      "decode_values",
      [](uintptr_t ptr, int64_t count, int64_t slot) {
        std::vector<bool> written;
        auto values = DecodeValueRows(reinterpret_cast<const char*>(ptr), count, slot, &written);
        if (!values.ok()) {
          throw Error(StatusCode::kDataLoss, std::string(values.status().message()));
        }
        py::list out;
        for (size_t i = 0; i < values->size(); ++i) {
          const std::string_view v = (*values)[i];
          if (written[i]) {
            out.append(py::bytes(v.data(), v.size()));
          } else {
            out.append(py::none());
          }
        }
        return out;
      },
      py::arg("ptr"), py::arg("count"), py::arg("slot"),
      "the values of `count` slots of `slot` bytes at ptr, as bytes; None for a row never "
      "written");

  // Ragged leaves' cells (common/ragged_cells.h): a tensor of its own shape
  // as the value of one slot, and back.
  m.def(
      "encode_ragged_cell",
      [](const std::string& dtype_name, const std::vector<int64_t>& shape, uintptr_t ptr,
         int64_t nbytes) {
        absl::StatusOr<DType> dtype = RaggedDType(dtype_name);
        if (!dtype.ok()) InvalidArgument(std::string(dtype.status().message()));
        absl::StatusOr<std::string> cell = EncodeRaggedCell(
            *dtype, shape,
            std::string_view(reinterpret_cast<const char*>(ptr), static_cast<size_t>(nbytes)));
        if (!cell.ok()) InvalidArgument(std::string(cell.status().message()));
        return py::bytes(*cell);
      },
      py::arg("dtype"), py::arg("shape"), py::arg("ptr"), py::arg("nbytes"),
      "the value (bytes) of the ragged cell holding the nbytes at ptr as a tensor of `shape`");
  m.def(
      "decode_ragged_rows",
      [](const std::string& dtype_name, uintptr_t ptr, int64_t count, int64_t slot) {
        absl::StatusOr<DType> dtype = RaggedDType(dtype_name);
        if (!dtype.ok()) throw Error(StatusCode::kDataLoss, std::string(dtype.status().message()));
        auto values = DecodeValueRows(reinterpret_cast<const char*>(ptr), count, slot);
        if (!values.ok()) {
          throw Error(StatusCode::kDataLoss, std::string(values.status().message()));
        }
        py::list out;
        for (std::string_view v : *values) {
          absl::StatusOr<RaggedCell> cell = DecodeRaggedCell(*dtype, v);
          if (!cell.ok()) {
            throw Error(StatusCode::kDataLoss, std::string(cell.status().message()));
          }
          out.append(py::make_tuple(py::tuple(py::cast(cell->shape)),
                                    py::bytearray(cell->data.data(), cell->data.size())));
        }
        return out;
      },
      py::arg("dtype"), py::arg("ptr"), py::arg("count"), py::arg("slot"),
      "[(shape, element bytes as a bytearray)] of the `count` ragged cells in the slots at ptr, "
      "in one call; DataLossError for bytes no tdstore client wrote");

  m.def(
      "set_error_factory", [](py::object factory) { ErrorFactory() = std::move(factory); },
      "fn(code, code_name, message) -> exception instance, for every tdstore error");

  py::class_<Buffer, std::shared_ptr<Buffer>>(m, "Buffer", py::buffer_protocol())
      .def_buffer([](Buffer& b) {
        return py::buffer_info(b.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {b.size()}, {1}, /*readonly=*/false);
      })
      .def("__len__", &Buffer::size);

  py::class_<core::Client>(m, "Client")
      .def(py::init([](const std::string& address, const std::string& token, bool tls,
                       const std::string& ca, const std::string& cert, const std::string& key,
                       const std::string& server_name, double timeout, double retry_for,
                       int64_t chunk_bytes, bool watch_schemas, int64_t shared_memory_bytes) {
             return core::Client(address, MakeOptions(token, tls, ca, cert, key, server_name,
                                                      timeout, retry_for, chunk_bytes,
                                                      watch_schemas, shared_memory_bytes));
           }),
           py::arg("address"), py::kw_only(), py::arg("token") = "", py::arg("tls") = false,
           py::arg("tls_root_ca_pem") = "", py::arg("tls_client_cert_pem") = "",
           py::arg("tls_client_key_pem") = "", py::arg("tls_server_name") = "",
           py::arg("timeout") = 600.0, py::arg("retry_for") = 30.0,
           py::arg("chunk_bytes") = 1 << 20, py::arg("watch_schemas") = true,
           py::arg("shared_memory_bytes") = ClientOptions().shared_memory_bytes)
      .def_property_readonly("address", &core::Client::address)
      .def(
          "create",
          [](const core::Client& client, const std::string& name,
             const std::vector<int64_t>& batch_size, const py::list& schema,
             int64_t rows_per_block, int64_t part_bytes, const std::string& layout) {
            std::vector<core::LeafSpec> specs;
            for (const py::handle& item : schema) {
              const py::tuple spec = py::reinterpret_borrow<py::tuple>(item);
              if (spec.size() != 3 && spec.size() != 4) {
                InvalidArgument("a schema leaf is (path, dtype, element_shape[, kind])");
              }
              specs.push_back({ToKey(spec[0].cast<std::vector<std::string>>()),
                               ToDType(spec[1].cast<std::string>()),
                               spec[2].cast<std::vector<int64_t>>(),
                               spec.size() == 4 ? ToKind(spec[3].cast<std::string>())
                                                : LeafKind::kTensor});
            }
            CreateOptions options;
            options.rows_per_block = rows_per_block;
            options.part_bytes = part_bytes;
            options.layout = ToLayout(layout);
            py::gil_scoped_release nogil;
            return client.create(name, batch_size, specs, options);
          },
          py::arg("name"), py::arg("batch_size"), py::arg("schema") = py::list(),
          py::arg("rows_per_block") = 0, py::arg("part_bytes") = 0,
          py::arg("layout") = "leaves")
      .def("open", &core::Client::open, py::arg("name"),
           py::call_guard<py::gil_scoped_release>())
      .def("list", &core::Client::list, py::call_guard<py::gil_scoped_release>())
      .def("server_info",
           [](const core::Client& client) {
             core::ServerInfo info;
             {
               py::gil_scoped_release nogil;
               info = client.server_info();
             }
             py::dict out;
             out["version"] = info.version;
             out["backend"] = info.backend;
             out["redis_masters"] = info.redis_masters;
             out["redis_ok"] = info.redis_ok;
             return out;
           })
      .def("shares_memory", &core::Client::shares_memory,
           py::call_guard<py::gil_scoped_release>())
      .def("drop", &core::Client::drop, py::arg("name"),
           py::call_guard<py::gil_scoped_release>())
      .def("rename", &core::Client::rename, py::arg("name"), py::arg("new_name"),
           py::call_guard<py::gil_scoped_release>())
      .def("settle", &core::Client::settle, py::call_guard<py::gil_scoped_release>());

  m.def(
      "open_handle",
      [](const std::string& handle, const std::string& token, bool tls, const std::string& ca,
         const std::string& cert, const std::string& key, const std::string& server_name,
         double timeout, double retry_for, int64_t chunk_bytes, bool watch_schemas,
         int64_t shared_memory_bytes) {
        const ClientOptions options =
            MakeOptions(token, tls, ca, cert, key, server_name, timeout, retry_for, chunk_bytes,
                        watch_schemas, shared_memory_bytes);
        py::gil_scoped_release nogil;
        return core::Client::open_handle(handle, options);
      },
      py::arg("handle"), py::kw_only(), py::arg("token") = "", py::arg("tls") = false,
      py::arg("tls_root_ca_pem") = "", py::arg("tls_client_cert_pem") = "",
      py::arg("tls_client_key_pem") = "", py::arg("tls_server_name") = "",
      py::arg("timeout") = 600.0, py::arg("retry_for") = 30.0,
      py::arg("chunk_bytes") = 1 << 20, py::arg("watch_schemas") = true,
      py::arg("shared_memory_bytes") = ClientOptions().shared_memory_bytes);

  py::class_<core::Appender>(m, "Appender")
      .def(
          "append",
          [](core::Appender& out, int64_t start_row, int64_t rows,
             const std::vector<uintptr_t>& data_ptrs) {
            std::vector<const void*> leaf_rows;
            leaf_rows.reserve(data_ptrs.size());
            for (uintptr_t p : data_ptrs) leaf_rows.push_back(reinterpret_cast<const void*>(p));
            py::gil_scoped_release nogil;
            out.append(start_row, rows, leaf_rows);
          },
          py::arg("start_row"), py::arg("rows"), py::arg("data_ptrs"))
      .def("flush", &core::Appender::flush, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("rows_written", &core::Appender::rows_written)
      .def_property_readonly("row_bytes", &core::Appender::row_bytes);

  py::class_<core::Dict>(m, "Dict")
      .def_property_readonly("name", &core::Dict::name)
      .def_property_readonly("id", &core::Dict::id)
      .def_property_readonly("handle", &core::Dict::handle)
      .def_property_readonly("client", &core::Dict::client)
      .def(
          "write",
          [](const core::Dict& dict, const py::list& leaves, const py::object& index,
             const py::object& progress, bool refuse_if_locked) {
            const std::vector<core::LeafData> data = ToLeafData(leaves);
            core::Index terms;
            core::WriteOptions options;
            if (!index.is_none()) {
              terms = ToIndex(index.cast<py::list>());
              options.index = &terms;
            }
            options.progress = ToProgress(progress);
            options.refuse_if_locked = refuse_if_locked;
            py::gil_scoped_release nogil;
            dict.write(data, options);
          },
          py::arg("leaves"), py::arg("index") = py::none(), py::arg("progress") = py::none(),
          py::arg("refuse_if_locked") = false)
      .def(
          "write_counted",
          [](const core::Dict& dict, const py::list& leaves, const py::list& index,
             const std::string& counter, int64_t add) {
            const std::vector<core::LeafData> data = ToLeafData(leaves);
            const core::Index terms = ToIndex(index);
            core::WriteOptions options;
            options.index = &terms;
            py::gil_scoped_release nogil;
            return dict.write_counted(data, options, counter, add);
          },
          py::arg("leaves"), py::arg("index"), py::arg("counter"), py::arg("add"))
      .def(
          "write_counted_behind",
          [](const core::Dict& dict, const py::list& leaves, const py::list& index,
             const std::string& counter, int64_t add) -> py::object {
            const std::vector<core::LeafData> data = ToLeafData(leaves);
            const core::Index terms = ToIndex(index);
            std::optional<int64_t> value;
            {
              py::gil_scoped_release nogil;
              value = dict.write_counted_behind(data, terms, counter, add);
            }
            return value ? py::object(py::int_(*value)) : py::object(py::none());
          },
          py::arg("leaves"), py::arg("index"), py::arg("counter"), py::arg("add"))
      .def(
          "append_ring",
          [](const core::Dict& dict, const py::list& leaves, const std::string& cursor,
             int64_t rows, const std::string& count) {
            const std::vector<core::LeafData> data = ToLeafData(leaves);
            core::RingAppended out;
            {
              py::gil_scoped_release nogil;
              out = dict.append_ring(data, {cursor, rows, count});
            }
            return py::make_tuple(out.start, out.count_value);
          },
          py::arg("leaves"), py::arg("cursor"), py::arg("rows"), py::arg("count") = "")
      .def(
          "read",
          [](const core::Dict& dict, const std::vector<std::vector<std::string>>& paths,
             const py::object& index, const py::object& exact_leaf, const py::object& progress,
             bool dlpack) {
            std::vector<Key> keys;
            keys.reserve(paths.size());
            for (const auto& path : paths) keys.push_back(ToKey(path));
            core::Index terms;
            std::optional<Key> exact;
            core::ReadOptions options;
            if (!index.is_none()) {
              terms = ToIndex(index.cast<py::list>());
              options.index = &terms;
            }
            if (!exact_leaf.is_none()) {
              exact = ToKey(exact_leaf.cast<std::vector<std::string>>());
              options.exact_leaf = &*exact;
            }
            options.progress = ToProgress(progress);
            BufferSink sink;
            {
              py::gil_scoped_release nogil;
              dict.read(keys, sink, options);
            }
            return sink.ToPython(dlpack);
          },
          py::arg("paths"), py::arg("index") = py::none(), py::arg("exact_leaf") = py::none(),
          py::arg("progress") = py::none(), py::arg("dlpack") = false)
      .def(
          "keys",
          [](const core::Dict& dict, bool include_nested, bool leaves_only,
             const std::vector<std::string>& prefix) {
            std::vector<Key> keys;
            {
              py::gil_scoped_release nogil;
              keys = prefix.empty() ? dict.keys(include_nested, leaves_only)
                                    : dict.keys_under(Key(prefix), include_nested, leaves_only);
            }
            py::list out;
            for (const Key& key : keys) out.append(FromKey(key));
            return out;
          },
          py::arg("include_nested") = false, py::arg("leaves_only") = false,
          py::arg("prefix") = std::vector<std::string>{})
      .def(
          "key_names",
          // keys() of the root without include_nested, each a str: what
          // list(td.keys()) shows. One key per name, so no tuples to build
          // and unpack (the seed's keys() is a listing kept in the process).
          [](const core::Dict& dict, bool leaves_only) {
            std::vector<Key> keys;
            {
              py::gil_scoped_release nogil;
              keys = dict.keys(false, leaves_only);
            }
            py::list out(keys.size());
            for (size_t i = 0; i < keys.size(); ++i) {
              out[i] = py::str(keys[i].parts().front());
            }
            return out;
          },
          py::arg("leaves_only") = false)
      .def(
          "rename",
          [](const core::Dict& dict, const std::vector<std::string>& from,
             const std::vector<std::string>& to, bool replace) {
            const Key a = ToKey(from);
            const Key b = ToKey(to);
            py::gil_scoped_release nogil;
            dict.rename(a, b, replace);
          },
          py::arg("from_path"), py::arg("to_path"), py::arg("replace") = false)
      .def(
          "copy",
          [](const core::Dict& dict, const std::vector<std::string>& from,
             const core::Dict& target, const std::vector<std::string>& to) {
            const Key a(from);
            const Key b(to);
            py::gil_scoped_release nogil;
            dict.copy(a, target, b);
          },
          py::arg("from_path"), py::arg("target"), py::arg("to_path"))
      .def(
          "clone",
          [](const core::Dict& dict, const std::string& name,
             const std::vector<std::string>& from) {
            const Key path(from);
            py::gil_scoped_release nogil;
            return dict.clone(name, path);
          },
          py::arg("name"), py::arg("from_path"))
      .def(
          "fill",
          [](const core::Dict& dict, const py::list& leaves, const py::object& index) {
            std::vector<core::LeafFill> fills;
            for (const py::handle& item : leaves) {
              const py::tuple leaf = item.cast<py::tuple>();
              core::LeafFill fill;
              fill.path = ToKey(leaf[0].cast<std::vector<std::string>>());
              fill.dtype = ToDType(leaf[1].cast<std::string>());
              fill.element = leaf[2].cast<std::string>();
              fills.push_back(std::move(fill));
            }
            core::Index terms;
            const bool indexed = !index.is_none();
            if (indexed) terms = ToIndex(index.cast<py::list>());
            py::gil_scoped_release nogil;
            dict.fill(fills, indexed ? &terms : nullptr);
          },
          py::arg("leaves"), py::arg("index") = py::none())
      .def(
          "contains",
          [](const core::Dict& dict, const std::vector<std::string>& path) {
            const Key key = ToKey(path);
            py::gil_scoped_release nogil;
            return dict.contains(key);
          },
          py::arg("path"))
      .def(
          "erase",
          [](const core::Dict& dict, const std::vector<std::string>& path) {
            const Key key = ToKey(path);
            py::gil_scoped_release nogil;
            dict.erase(key);
          },
          py::arg("path"))
      .def("drop", &core::Dict::drop, py::call_guard<py::gil_scoped_release>())
      .def(
          "appender",
          [](const core::Dict& dict, const std::vector<std::vector<std::string>>& paths,
             int64_t batch_rows, int window) {
            std::vector<Key> keys;
            for (const auto& path : paths) keys.push_back(ToKey(path));
            core::AppendOptions options;
            options.batch_rows = batch_rows;
            options.window = window;
            py::gil_scoped_release nogil;
            return dict.appender(keys, options);
          },
          py::arg("paths"), py::arg("batch_rows") = 256, py::arg("window") = 8)
      .def("describe", [](const core::Dict& dict) {
        core::DictInfo info;
        {
          py::gil_scoped_release nogil;
          info = dict.describe();
        }
        return DescribeToPython(info);
      })
      .def(
          "is_locked", [](const core::Dict& dict) { return dict.describe().locked; },
          py::call_guard<py::gil_scoped_release>())
      .def(
          "batch_size",
          [](const core::Dict& dict) {
            std::vector<int64_t> size;
            {
              py::gil_scoped_release nogil;
              size = dict.batch_size();
            }
            return py::tuple(py::cast(size));
          })
      .def(
          "resize",
          [](const core::Dict& dict, int64_t rows) {
            core::DictInfo info;
            {
              py::gil_scoped_release nogil;
              info = dict.resize(rows);
            }
            return DescribeToPython(info);
          },
          py::arg("rows"))
      .def(
          "set_locked",
          [](const core::Dict& dict, bool locked) {
            core::DictInfo info;
            {
              py::gil_scoped_release nogil;
              info = dict.set_locked(locked);
            }
            return DescribeToPython(info);
          },
          py::arg("locked"))
      .def(
          "update_attrs",
          [](const core::Dict& dict, const std::map<std::string, std::string>& set,
             const std::vector<std::string>& remove) {
            core::DictInfo info;
            {
              py::gil_scoped_release nogil;
              info = dict.update_attrs(set, remove);
            }
            return DescribeToPython(info);
          },
          py::arg("set"), py::arg("remove") = std::vector<std::string>{})
      .def("counter_add", &core::Dict::counter_add, py::arg("name"), py::arg("delta") = 1,
           py::call_guard<py::gil_scoped_release>())
      .def("counter_get", &core::Dict::counter_get, py::arg("name"),
           py::call_guard<py::gil_scoped_release>())
      .def(
          "counter_cas",
          [](const core::Dict& dict, const std::string& name, int64_t expected,
             int64_t new_value) {
            py::gil_scoped_release nogil;
            return dict.counter_cas(name, expected, new_value);
          },
          py::arg("name"), py::arg("expected"), py::arg("new_value"));
}
