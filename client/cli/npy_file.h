// .npy files in and out of the store, for `tdstore put` and `tdstore get`,
// without a copy of the data in between: put sends a mapped file's bytes in
// place, get receives a leaf straight into the output file's mapped memory.
#ifndef TDSTORE_CLIENT_CLI_NPY_FILE_H_
#define TDSTORE_CLIENT_CLI_NPY_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/cli/host_tensor.h"
#include "client/cli/mapped_file.h"
#include "tdstore/core.h"

namespace tdstore::cli {

// A .npy file mapped read-only into memory. tensor() views its data region
// without copying it, so it is valid only while this object lives.
class MappedNpy {
 public:
  // Maps and checks the file: header (via npy_header.h: C order, little
  // endian, a tdstore dtype) and data size. Throws CliError naming the file.
  explicit MappedNpy(const std::string& path);

  const HostTensor& tensor() const { return tensor_; }

 private:
  MappedFile file_;
  HostTensor tensor_;
};

// Receives the one leaf of a read into the .npy file `path`, or stdout when
// path is "-". The file is created only when the leaf's header arrives, so
// a read the server refuses leaves none behind, and it is sized and mapped
// then, so the core copies each chunk straight into its place. Where the
// output cannot be mapped (stdout, a pipe, a device) the leaf goes to a
// buffer written out once by Finish().
//
// Errors (CliError): a dtype NumPy has no name for (bfloat16), an I/O error,
// a read carrying more than one leaf. A file left unfinished (an error, no
// Finish) is removed by the destructor.
class NpyFileSink : public core::ReadSink {
 public:
  explicit NpyFileSink(std::string path);
  ~NpyFileSink() override;
  NpyFileSink(const NpyFileSink&) = delete;
  NpyFileSink& operator=(const NpyFileSink&) = delete;

  void Begin(const std::vector<int64_t>& batch_shape, int64_t leaf_count) override;
  void* Leaf(const core::LeafMeta& leaf) override;

  // Completes the file once the read has returned. CliError if no leaf
  // arrived or on an I/O error.
  void Finish();

 private:
  void Open();
  void Unmap();

  const std::string path_;
  int fd_ = -1;
  bool regular_ = false;   // fd_ is a regular file: mapped, and removed on failure
  bool finished_ = false;
  bool received_ = false;  // Leaf() was called in this attempt
  // Mapped mode: the whole file, header then data.
  void* map_ = nullptr;
  size_t map_size_ = 0;
  // Buffered mode: the header and the data, written out by Finish().
  std::string header_;
  std::unique_ptr<char[]> buffer_;
  int64_t buffer_size_ = 0;
};

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_NPY_FILE_H_
