// Files holding many named tensors (.safetensors, .npz), read and written
// one tensor at a time so that a file larger than RAM never has to fit in it.
//
// A reader checks the whole layout of the file (every name, dtype, shape and
// byte range) when it is opened, before anything touches the store; the
// data itself is checked as each tensor is loaded (for .npz, the CRC-32 of
// each member).
//
// One thread at a time per reader or writer.
#ifndef TDSTORE_CLIENT_CLI_TENSOR_FILE_H_
#define TDSTORE_CLIENT_CLI_TENSOR_FILE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/cli/host_tensor.h"
#include "common/dtype.h"
#include "common/shape.h"
#include "tdstore/core.h"

namespace tdstore::cli {

// The key under which exported files record the dict's batch size, as
// "100,4" ("" for none): in the .safetensors __metadata__, and as
// "tdstore.batch_size=100,4" in the .npz (zip) archive comment.
inline constexpr char kBatchSizeKey[] = "tdstore.batch_size";

// One tensor of a file, as its layout describes it.
struct TensorEntry {
  std::string name;  // as written in the file (for messages)
  Key path{std::vector<std::string>{}};
  DType dtype = DType::kUnspecified;
  Shape shape;
  int64_t data_bytes = 0;  // numel * dtype size
};

class TensorFileReader {
 public:
  virtual ~TensorFileReader() = default;

  // Every tensor, in file order.
  const std::vector<TensorEntry>& entries() const { return entries_; }
  // The batch size the file records (written by tdstore export), if any.
  const std::optional<Shape>& batch_size() const { return batch_size_; }

  // The data of entries()[i] at its dtype and shape, valid while the reader
  // lives (a view of the mapped file in place, or bytes of its own when the
  // file holds them compressed: hold few at a time). CliError naming the
  // file and member if the data is corrupt.
  virtual HostTensor Load(size_t i) = 0;
  // Lets go of the memory entries()[i] used, once it is sent.
  virtual void Release(size_t i) = 0;

 protected:
  std::vector<TensorEntry> entries_;
  std::optional<Shape> batch_size_;
};

class TensorFileWriter {
 public:
  virtual ~TensorFileWriter() = default;
  // Appends the next tensor, in the order of the entries the writer was
  // made with; its dtype and shape must match that entry (CliError if the
  // dict changed meanwhile).
  virtual void Add(const HostTensor& tensor) = 0;
  // Completes the file and moves it into place. Without Finish() (an error)
  // nothing is left at the path.
  virtual void Finish() = 0;
};

// "safetensors" or "npz", from the file name's extension; CliError for any
// other name.
std::string TensorFileFormat(const std::string& path);

// Opens and checks a .safetensors or .npz file (by extension). CliError
// naming the file and what is wrong.
std::unique_ptr<TensorFileReader> OpenTensorFile(const std::string& path);

// Starts writing `entries` (names are filled in here from the paths) and
// `batch_size` to `path`, whose extension chooses the format. CliError, with
// nothing written, for a dtype or name the format cannot hold.
std::unique_ptr<TensorFileWriter> CreateTensorFile(const std::string& path,
                                                   std::vector<TensorEntry> entries,
                                                   const Shape& batch_size);

// Throws CliError unless `tensor` has the entry's dtype and shape: a leaf
// replaced while it was being exported.
void CheckMatchesEntry(const HostTensor& tensor, const TensorEntry& entry);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_TENSOR_FILE_H_
