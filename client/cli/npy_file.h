// .npy files in and out of tensors, for `tdstore put` and `tdstore get`.
#ifndef TDSTORE_CLIENT_CLI_NPY_FILE_H_
#define TDSTORE_CLIENT_CLI_NPY_FILE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace tdstore::cli {

// A .npy file mapped read-only into memory. tensor() views its data region
// without copying it, so the tensor is valid only while this object lives.
class MappedNpy {
 public:
  // Maps and checks the file: header (via common/npy.h) and data size.
  // Throws CliError naming the file.
  explicit MappedNpy(const std::string& path);
  ~MappedNpy();
  MappedNpy(const MappedNpy&) = delete;
  MappedNpy& operator=(const MappedNpy&) = delete;

  const at::Tensor& tensor() const { return tensor_; }

 private:
  void* map_ = nullptr;
  size_t map_size_ = 0;
  at::Tensor tensor_;
};

// Writes `tensor` (contiguous, on the CPU) as a .npy file at `path`, or to
// stdout when path is "-". CliError for a dtype NumPy has no name for
// (bfloat16) or an I/O error; a partly written file is removed.
void WriteNpy(const std::string& path, const at::Tensor& tensor);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_NPY_FILE_H_
