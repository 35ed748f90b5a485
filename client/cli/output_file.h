// A file written front to back under a temporary name and renamed into place
// by Commit(), so a failed export never leaves a half-written file behind nor
// destroys the file it was to replace.
//
// One thread at a time.
#ifndef TDSTORE_CLIENT_CLI_OUTPUT_FILE_H_
#define TDSTORE_CLIENT_CLI_OUTPUT_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tdstore::cli {

class OutputFile {
 public:
  // Creates "<path>.tdstore-partial" (replacing a leftover). CliError if it
  // cannot be created.
  explicit OutputFile(const std::string& path);
  // Removes the temporary file unless Commit() succeeded.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Appends bytes; CliError on an I/O error (disk full, ...).
  void Write(const void* data, size_t size);
  void Write(std::string_view bytes) { Write(bytes.data(), bytes.size()); }
  // Bytes written so far: the offset of the next Write.
  int64_t offset() const { return offset_; }
  // Closes the file and renames it to `path`; CliError on failure.
  void Commit();

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  int64_t offset_ = 0;
  bool committed_ = false;
};

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_OUTPUT_FILE_H_
