#include "client/cli/safetensors_file.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string_view>
#include <utility>

#include "client/cli/args.h"
#include "client/cli/json.h"
#include "client/cli/leaf_names.h"
#include "client/cli/little_endian.h"
#include "client/cli/mapped_file.h"
#include "client/cli/output_file.h"

namespace tdstore::cli {
namespace {

constexpr int64_t kMaxHeaderBytes = 100 * 1000 * 1000;
constexpr char kMetadataKey[] = "__metadata__";

struct DTypeSpelling {
  DType dtype;
  const char* name;
};
constexpr DTypeSpelling kDTypes[] = {
    {DType::kBool, "BOOL"},    {DType::kUInt8, "U8"},     {DType::kInt8, "I8"},
    {DType::kInt16, "I16"},    {DType::kInt32, "I32"},    {DType::kInt64, "I64"},
    {DType::kFloat16, "F16"},  {DType::kBFloat16, "BF16"}, {DType::kFloat32, "F32"},
    {DType::kFloat64, "F64"},  {DType::kUInt16, "U16"},   {DType::kUInt32, "U32"},
    {DType::kUInt64, "U64"},
    // safetensors' F8_E4M3 and F8_E8M0 are torch's float8_e4m3fn and
    // float8_e8m0fnu (the format has no NaN-free "fnuz" variants).
    {DType::kFloat8E4M3Fn, "F8_E4M3"}, {DType::kFloat8E5M2, "F8_E5M2"},
    {DType::kFloat8E8M0FnU, "F8_E8M0"},
};
// Dtypes of the format that tdstore has no equivalent for: named as such in
// the error rather than called unknown.
// F4 counts 4-bit elements, where torch's float4_e2m1fn_x2 counts bytes of two.
constexpr const char* kUnsupportedDTypes[] = {"F6_E2M3", "F6_E3M2", "F4", "C64", "C128"};

std::optional<DType> DTypeFromSafetensors(std::string_view name) {
  for (const DTypeSpelling& d : kDTypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

const char* SafetensorsDType(DType dtype) {
  for (const DTypeSpelling& d : kDTypes) {
    if (d.dtype == dtype) return d.name;
  }
  return nullptr;
}

// The tensors of a .safetensors file, viewed in place in the mapped file.
class SafetensorsReader : public TensorFileReader {
 public:
  explicit SafetensorsReader(const std::string& path) : file_(path) {
    if (file_.size() < 8) Fail("too short for a .safetensors file (no 8-byte header length)");
    const uint64_t header_bytes = LoadLE<8>(file_.data());
    if (header_bytes > static_cast<uint64_t>(kMaxHeaderBytes)) {
      Fail("header length " + std::to_string(header_bytes) +
           " is over the 100 MB limit: not a .safetensors file?");
    }
    if (8 + static_cast<int64_t>(header_bytes) > file_.size()) {
      Fail("header length " + std::to_string(header_bytes) + " runs past the end of the file (" +
           std::to_string(file_.size()) + " bytes): truncated?");
    }
    const std::string_view text = file_.view(8, static_cast<int64_t>(header_bytes));
    if (text.empty() || text[0] != '{') Fail("the header is not a JSON object");
    JsonValue header;
    try {
      header = ParseJson(text);
    } catch (const CliError& e) {
      Fail(std::string("header: ") + e.what());
    }
    data_start_ = 8 + static_cast<int64_t>(header_bytes);
    ReadHeader(header);
    CheckTiling(file_.size() - data_start_);
  }

  HostTensor Load(size_t i) override {
    const TensorEntry& entry = entries_[i];
    return HostTensor::View(entry.dtype, entry.shape, file_.data() + data_start_ + begins_[i],
                            entry.data_bytes);
  }

  void Release(size_t i) override {
    file_.Release(data_start_ + begins_[i], entries_[i].data_bytes);
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw CliError(file_.path() + ": " + what);
  }

  void ReadHeader(const JsonValue& header) {
    for (const auto& [name, value] : header.members) {
      if (name == kMetadataKey) {
        ReadMetadata(value);
      } else {
        ReadTensor(name, value);
      }
    }
  }

  void ReadMetadata(const JsonValue& metadata) {
    if (metadata.type != JsonValue::Type::kObject) Fail("__metadata__ is not an object");
    for (const auto& [key, value] : metadata.members) {
      if (value.type != JsonValue::Type::kString) {
        Fail("__metadata__ value of '" + key + "' is not a string");
      }
      if (key != kBatchSizeKey) continue;
      absl::StatusOr<Shape> batch = ShapeFromCsv(value.text);
      if (!batch.ok()) {
        Fail(std::string("bad ") + kBatchSizeKey + " '" + value.text +
             "' in __metadata__: " + std::string(batch.status().message()));
      }
      batch_size_ = *batch;
    }
  }

  void ReadTensor(const std::string& name, const JsonValue& value) {
    auto fail = [&](const std::string& what) { Fail("tensor '" + name + "': " + what); };
    if (value.type != JsonValue::Type::kObject) fail("not an object");
    for (const auto& [field, unused] : value.members) {
      if (field != "dtype" && field != "shape" && field != "data_offsets") {
        fail("unknown field '" + field + "'");
      }
    }
    const JsonValue* dtype = value.Find("dtype");
    const JsonValue* shape = value.Find("shape");
    const JsonValue* offsets = value.Find("data_offsets");
    if (dtype == nullptr || shape == nullptr || offsets == nullptr) {
      fail("needs the fields dtype, shape and data_offsets");
    }
    TensorEntry entry;
    entry.name = name;
    try {
      entry.path = SplitLeafName(name, '.');
    } catch (const CliError& e) {
      Fail(e.what());
    }

    if (dtype->type != JsonValue::Type::kString) fail("dtype is not a string");
    std::optional<DType> type = DTypeFromSafetensors(dtype->text);
    if (!type) {
      const bool known = std::find(std::begin(kUnsupportedDTypes), std::end(kUnsupportedDTypes),
                                   dtype->text) != std::end(kUnsupportedDTypes);
      fail(known ? "dtype " + dtype->text + " has no tdstore equivalent"
                 : "unknown dtype '" + dtype->text + "'");
    }
    entry.dtype = *type;

    if (shape->type != JsonValue::Type::kArray) fail("shape is not an array");
    for (const JsonValue& dim : shape->items) {
      std::optional<int64_t> size = dim.AsCount();
      if (!size) fail("shape holds something other than a non-negative integer");
      entry.shape.push_back(*size);
    }
    const absl::Status valid_shape = ValidateShape(entry.shape, "shape");
    if (!valid_shape.ok()) fail(std::string(valid_shape.message()));
    absl::StatusOr<int64_t> bytes = ByteSize(entry.shape, DTypeSize(entry.dtype));
    if (!bytes.ok()) fail(std::string(bytes.status().message()));
    entry.data_bytes = *bytes;

    if (offsets->type != JsonValue::Type::kArray || offsets->items.size() != 2) {
      fail("data_offsets is not an array [begin, end]");
    }
    std::optional<int64_t> begin = offsets->items[0].AsCount();
    std::optional<int64_t> end = offsets->items[1].AsCount();
    if (!begin || !end || *end < *begin) fail("data_offsets is not [begin, end] with begin <= end");
    if (*end - *begin != entry.data_bytes) {
      fail("data_offsets [" + std::to_string(*begin) + ", " + std::to_string(*end) + "] span " +
           std::to_string(*end - *begin) + " bytes but dtype " + dtype->text + " and shape " +
           ShapeToString(entry.shape) + " need " + std::to_string(entry.data_bytes));
    }
    begins_.push_back(*begin);
    entries_.push_back(std::move(entry));
  }

  // The byte ranges, in offset order, must cover [0, buffer_bytes) exactly:
  // no overlap (two tensors sharing bytes), no gap, nothing after the last.
  void CheckTiling(int64_t buffer_bytes) const {
    std::vector<size_t> order(entries_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return std::make_pair(begins_[a], entries_[a].data_bytes) <
             std::make_pair(begins_[b], entries_[b].data_bytes);
    });
    int64_t expected = 0;
    for (size_t i : order) {
      const int64_t end = begins_[i] + entries_[i].data_bytes;
      if (end > buffer_bytes) {
        Fail("tensor '" + entries_[i].name + "' ends at byte " + std::to_string(end) +
             " of a data buffer of " + std::to_string(buffer_bytes) + " bytes: truncated?");
      }
      if (begins_[i] < expected) {
        Fail("tensor '" + entries_[i].name + "' overlaps the tensor before it (data_offsets)");
      }
      if (begins_[i] > expected) {
        Fail("a gap of unused bytes before tensor '" + entries_[i].name + "' (data_offsets)");
      }
      expected = end;
    }
    if (expected != buffer_bytes) {
      Fail(std::to_string(buffer_bytes - expected) +
           " bytes after the last tensor belong to none (trailing garbage?)");
    }
  }

  MappedFile file_;
  int64_t data_start_ = 0;
  std::vector<int64_t> begins_;  // per entry, in the data buffer
};

class SafetensorsWriter : public TensorFileWriter {
 public:
  SafetensorsWriter(const std::string& path, std::vector<TensorEntry> entries,
                    const Shape& batch_size)
      : path_(path), entries_(std::move(entries)) {
    const std::string header = FormatHeader(batch_size);
    out_.emplace(path);
    std::string length;
    AppendLE<8>(header.size(), &length);
    out_->Write(length);
    out_->Write(header);
  }

  void Add(const HostTensor& tensor) override {
    if (next_ >= entries_.size()) throw CliError(path_ + ": more tensors than announced");
    CheckMatchesEntry(tensor, entries_[next_++]);
    out_->Write(tensor.data, static_cast<size_t>(tensor.byte_size));
  }

  void Finish() override {
    if (next_ != entries_.size()) throw CliError(path_ + ": fewer tensors than announced");
    out_->Commit();
  }

 private:
  // Checks every entry before the file is created, so that a dtype or name
  // the format cannot hold leaves no file behind.
  std::string FormatHeader(const Shape& batch_size) {
    std::string header = "{\"__metadata__\":{\"format\":\"pt\",";
    header += JsonQuote(kBatchSizeKey) + ":" + JsonQuote(ShapeToCsv(batch_size)) + "}";
    int64_t offset = 0;
    for (TensorEntry& entry : entries_) {
      const char* dtype = SafetensorsDType(entry.dtype);
      if (dtype == nullptr) {
        throw CliError("leaf '" + entry.path.str() + "' is " + std::string(DTypeName(entry.dtype)) +
                       ", which .safetensors cannot hold (export it to .npz instead)");
      }
      entry.name = JoinLeafName(entry.path, '.');
      if (entry.name == kMetadataKey) {
        throw CliError("leaf '__metadata__' cannot be written to .safetensors: the name is "
                       "reserved (export it to .npz instead)");
      }
      if (!IsValidUtf8(entry.name)) {
        throw CliError("leaf '" + entry.path.str() +
                       "' has a name that is not UTF-8, which .safetensors needs");
      }
      header += "," + JsonQuote(entry.name) + ":{\"dtype\":\"" + dtype + "\",\"shape\":[";
      for (size_t d = 0; d < entry.shape.size(); ++d) {
        header += (d > 0 ? "," : "") + std::to_string(entry.shape[d]);
      }
      header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
                std::to_string(offset + entry.data_bytes) + "]}";
      offset += entry.data_bytes;
    }
    header += "}";
    // Pad with spaces (valid JSON whitespace) so the data buffer starts
    // 8-byte aligned, as the reference implementation does.
    header.append((8 - header.size() % 8) % 8, ' ');
    if (static_cast<int64_t>(header.size()) > kMaxHeaderBytes) {
      throw CliError("too many leaves for a .safetensors header (over 100 MB)");
    }
    return header;
  }

  std::string path_;
  std::vector<TensorEntry> entries_;
  std::optional<OutputFile> out_;
  size_t next_ = 0;
};

}  // namespace

std::unique_ptr<TensorFileReader> OpenSafetensors(const std::string& path) {
  return std::make_unique<SafetensorsReader>(path);
}

std::unique_ptr<TensorFileWriter> CreateSafetensors(const std::string& path,
                                                    std::vector<TensorEntry> entries,
                                                    const Shape& batch_size) {
  return std::make_unique<SafetensorsWriter>(path, std::move(entries), batch_size);
}

}  // namespace tdstore::cli
