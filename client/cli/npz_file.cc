#include "client/cli/npz_file.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include "client/cli/args.h"
#include "client/cli/leaf_names.h"
#include "client/cli/little_endian.h"
#include "client/cli/mapped_file.h"
#include "client/cli/npy_header.h"
#include "client/cli/output_file.h"
#include "client/cli/zip_archive.h"

namespace tdstore::cli {
namespace {

constexpr std::string_view kNpySuffix = ".npy";
// A .npy header longer than this is not one NumPy writes.
constexpr size_t kMaxNpyHeaderBytes = 16 << 20;

std::string BatchSizeComment(const Shape& batch_size) {
  return std::string(kBatchSizeKey) + "=" + ShapeToCsv(batch_size);
}

// The .npy file inside each member, viewed in place when stored and
// inflated into a tensor of its own when deflated.
class NpzReader : public TensorFileReader {
 public:
  explicit NpzReader(const std::string& path) : file_(path), zip_(file_) {
    const std::string prefix = std::string(kBatchSizeKey) + "=";
    if (zip_.comment().rfind(prefix, 0) == 0) {
      const std::string csv = zip_.comment().substr(prefix.size());
      absl::StatusOr<Shape> batch = ShapeFromCsv(csv);
      if (!batch.ok()) {
        Fail("bad " + prefix + csv + " in the archive comment: " +
             std::string(batch.status().message()));
      }
      batch_size_ = *batch;
    }
    for (const ZipMember& member : zip_.members()) ReadMember(member);
  }

  HostTensor Load(size_t i) override {
    const ZipMember& member = zip_.members()[i];
    const TensorEntry& entry = entries_[i];
    const int64_t skip = npy_offsets_[i];
    if (member.method == kZipStored) {
      zip_.Extract(member, [](const char*, size_t) {});  // checks the CRC only
      return HostTensor::View(entry.dtype, entry.shape,
                              file_.data() + member.data_offset + skip, entry.data_bytes);
    }
    HostTensor tensor = HostTensor::Allocate(entry.dtype, entry.shape, entry.data_bytes,
                                             file_.path() + " member '" + member.name + "'");
    char* out = tensor.mutable_data();
    int64_t at = 0;  // bytes of the member seen so far
    zip_.Extract(member, [&](const char* data, size_t size) {
      // Member bytes [at, at + size) hold which of the data bytes
      // [skip, skip + data_bytes)? The header before them was read already;
      // bytes past them (corrupt data) are dropped and Extract fails.
      const int64_t begin = std::max(at, skip);
      const int64_t end = std::min(at + static_cast<int64_t>(size), skip + entry.data_bytes);
      if (end > begin) {
        std::memcpy(out + (begin - skip), data + (begin - at), static_cast<size_t>(end - begin));
      }
      at += static_cast<int64_t>(size);
    });
    return tensor;
  }

  void Release(size_t i) override {
    const ZipMember& member = zip_.members()[i];
    file_.Release(member.data_offset, member.compressed_size);
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw CliError(file_.path() + ": " + what);
  }

  void ReadMember(const ZipMember& member) {
    const std::string where = "member '" + member.name + "': ";
    const std::string_view name = member.name;
    if (name.size() <= kNpySuffix.size() ||
        name.substr(name.size() - kNpySuffix.size()) != kNpySuffix) {
      Fail(where + "not a .npy file (an .npz holds KEY.npy members only)");
    }
    TensorEntry entry;
    entry.name = std::string(name.substr(0, name.size() - kNpySuffix.size()));
    try {
      entry.path = SplitLeafName(entry.name, '/');
    } catch (const CliError& e) {
      Fail(e.what());
    }

    // The header's own length field says how much of the member to read:
    // magic (6), version (2), then 2 (v1.0) or 4 (v2.0, v3.0) length bytes.
    std::string prefix = zip_.ReadPrefix(member, 12);
    size_t header_bytes = prefix.size();
    if (prefix.size() >= 10 && prefix[6] == 1) {
      header_bytes = 10 + LoadLE<2>(prefix.data() + 8);
    } else if (prefix.size() >= 12 && (prefix[6] == 2 || prefix[6] == 3)) {
      header_bytes = 12 + LoadLE<4>(prefix.data() + 8);
    }
    if (header_bytes > kMaxNpyHeaderBytes) Fail(where + ".npy header too long");
    if (header_bytes > prefix.size()) prefix = zip_.ReadPrefix(member, header_bytes);
    absl::StatusOr<NpyHeader> header = ParseNpyHeader(prefix);
    if (!header.ok()) Fail(where + std::string(header.status().message()));

    entry.dtype = header->dtype;
    entry.shape = header->shape;
    const absl::Status valid_shape = ValidateShape(entry.shape, "shape");
    if (!valid_shape.ok()) Fail(where + std::string(valid_shape.message()));
    absl::StatusOr<int64_t> bytes = ByteSize(entry.shape, DTypeSize(entry.dtype));
    if (!bytes.ok()) Fail(where + std::string(bytes.status().message()));
    entry.data_bytes = *bytes;
    const int64_t present = member.size - header->data_offset;
    if (present != entry.data_bytes) {
      Fail(where + "its .npy header announces " + std::to_string(entry.data_bytes) +
           " data bytes but the member holds " + std::to_string(present));
    }
    npy_offsets_.push_back(header->data_offset);
    entries_.push_back(std::move(entry));
  }

  MappedFile file_;
  ZipReader zip_;
  std::vector<int64_t> npy_offsets_;  // per entry: .npy header length
};

class NpzWriter : public TensorFileWriter {
 public:
  NpzWriter(const std::string& path, std::vector<TensorEntry> entries, const Shape& batch_size)
      : path_(path), entries_(std::move(entries)), comment_(BatchSizeComment(batch_size)) {
    // Every header is made before the file is: a dtype .npy cannot hold
    // (bfloat16) leaves no file behind.
    for (TensorEntry& entry : entries_) {
      if (NpyDescr(entry.dtype).empty()) {
        throw CliError("leaf '" + entry.path.str() + "' is " +
                       std::string(DTypeName(entry.dtype)) +
                       ", which .npz cannot hold: NumPy has no such dtype (export it to "
                       ".safetensors instead)");
      }
      absl::StatusOr<std::string> header = FormatNpyHeader(entry.dtype, entry.shape);
      if (!header.ok()) {
        throw CliError("leaf '" + entry.path.str() + "': " + std::string(header.status().message()));
      }
      entry.name = JoinLeafName(entry.path, '/');
      headers_.push_back(*std::move(header));
    }
    out_.emplace(path);
    zip_.emplace(&*out_);
  }

  void Add(const HostTensor& tensor) override {
    if (next_ >= entries_.size()) throw CliError(path_ + ": more tensors than announced");
    const TensorEntry& entry = entries_[next_];
    CheckMatchesEntry(tensor, entry);
    zip_->AddStored(entry.name + std::string(kNpySuffix),
                    {headers_[next_],
                     std::string_view(tensor.data, static_cast<size_t>(tensor.byte_size))});
    ++next_;
  }

  void Finish() override {
    if (next_ != entries_.size()) throw CliError(path_ + ": fewer tensors than announced");
    zip_->Finish(comment_);
    out_->Commit();
  }

 private:
  std::string path_;
  std::vector<TensorEntry> entries_;
  std::string comment_;
  std::vector<std::string> headers_;
  std::optional<OutputFile> out_;
  std::optional<ZipWriter> zip_;
  size_t next_ = 0;
};

}  // namespace

std::unique_ptr<TensorFileReader> OpenNpz(const std::string& path) {
  return std::make_unique<NpzReader>(path);
}

std::unique_ptr<TensorFileWriter> CreateNpz(const std::string& path,
                                            std::vector<TensorEntry> entries,
                                            const Shape& batch_size) {
  return std::make_unique<NpzWriter>(path, std::move(entries), batch_size);
}

}  // namespace tdstore::cli
