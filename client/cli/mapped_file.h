// A whole file mapped read-only into memory, for the readers of
// .safetensors and .npz files.
//
// Mapping rather than reading lets a file larger than RAM be imported: the
// kernel pages in what is being sent and may drop it again afterwards, and a
// tensor can view its bytes in place without a copy.
#ifndef TDSTORE_CLIENT_CLI_MAPPED_FILE_H_
#define TDSTORE_CLIENT_CLI_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tdstore::cli {

class MappedFile {
 public:
  // Maps `path`. Throws CliError naming the file if it cannot be opened,
  // is not a regular file, or cannot be mapped. An empty file maps to an
  // empty view.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const char* data() const { return static_cast<const char*>(map_); }
  int64_t size() const { return static_cast<int64_t>(size_); }
  // Bytes [offset, offset + length); the caller has checked the bounds.
  std::string_view view(int64_t offset, int64_t length) const {
    return std::string_view(data() + offset, static_cast<size_t>(length));
  }
  // Tells the kernel the bytes [offset, offset + length) will not be read
  // again soon, so a big import does not push everything else out of RAM.
  void Release(int64_t offset, int64_t length) const;

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_MAPPED_FILE_H_
