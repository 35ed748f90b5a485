#include "client/cli/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "client/cli/args.h"

namespace tdstore::cli {
namespace {

[[noreturn]] void SystemError(const std::string& what, const std::string& path) {
  throw CliError("cannot " + what + " '" + path + "': " + std::strerror(errno));
}

}  // namespace

OutputFile::OutputFile(const std::string& path)
    : path_(path), temp_path_(path + ".tdstore-partial") {
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) SystemError("create", temp_path_);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

void OutputFile::Write(const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) SystemError("write", temp_path_);
    bytes += n;
    size -= static_cast<size_t>(n);
    offset_ += n;
  }
}

void OutputFile::Commit() {
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) SystemError("write", temp_path_);
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) SystemError("create", path_);
  committed_ = true;
}

}  // namespace tdstore::cli
