#include "client/cli/npy_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>

#include "client/cli/args.h"
#include "client/cli/npy_header.h"

namespace tdstore::cli {
namespace {

[[noreturn]] void SystemError(const std::string& what, const std::string& path) {
  const int error = errno;  // before anything else can change it
  throw CliError("cannot " + what + " '" + path + "': " + std::strerror(error));
}

void WriteAll(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) SystemError("write", path);
    data += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

MappedNpy::MappedNpy(const std::string& path) : file_(path) {
  absl::StatusOr<NpyHeader> header = ParseNpyHeader(file_.view(0, file_.size()));
  if (!header.ok()) throw CliError(path + ": " + std::string(header.status().message()));
  absl::StatusOr<int64_t> expected = ByteSize(header->shape, DTypeSize(header->dtype));
  if (!expected.ok()) throw CliError(path + ": invalid shape in the .npy header");
  const int64_t present = file_.size() - header->data_offset;
  if (present != *expected) {
    throw CliError(path + ": the header announces " + std::to_string(*expected) +
                   " data bytes but the file holds " + std::to_string(present) +
                   (present < *expected ? " (truncated?)" : ""));
  }
  tensor_ = HostTensor::View(header->dtype, header->shape, file_.data() + header->data_offset,
                             *expected);
}

NpyFileSink::NpyFileSink(std::string path) : path_(std::move(path)) {}

NpyFileSink::~NpyFileSink() {
  Unmap();
  if (fd_ >= 0 && fd_ != STDOUT_FILENO) ::close(fd_);
  if (!finished_ && regular_) ::unlink(path_.c_str());
}

void NpyFileSink::Begin(const std::vector<int64_t>& /*batch_shape*/, int64_t /*leaf_count*/) {
  // A retried read: Leaf() sizes the output again.
  received_ = false;
}

void* NpyFileSink::Leaf(const core::LeafMeta& leaf) {
  if (received_) throw CliError("'" + path_ + "': the read returned more than one leaf");
  received_ = true;
  if (NpyDescr(leaf.dtype).empty()) {
    throw CliError("leaf '" + leaf.path.str() + "' is " + std::string(DTypeName(leaf.dtype)) +
                   ", which .npy cannot hold (NumPy has no " +
                   std::string(DTypeName(leaf.dtype)) + " dtype)");
  }
  absl::StatusOr<std::string> header = FormatNpyHeader(leaf.dtype, leaf.shape);
  if (!header.ok()) throw CliError(path_ + ": " + std::string(header.status().message()));
  if (fd_ < 0) Open();

  if (!regular_) {
    header_ = *std::move(header);
    buffer_.reset(new (std::nothrow) char[static_cast<size_t>(leaf.byte_size)]);
    if (buffer_ == nullptr) {
      throw CliError("cannot allocate " + std::to_string(leaf.byte_size) + " bytes for leaf '" +
                     leaf.path.str() + "'");
    }
    buffer_size_ = leaf.byte_size;
    return buffer_.get();
  }

  // The file at its final size, its blocks reserved up front: a full disk
  // must fail here with ENOSPC, not later as SIGBUS on a store into the
  // mapping. Filesystems without fallocate only get the size.
  Unmap();
  const size_t size = header->size() + static_cast<size_t>(leaf.byte_size);
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) SystemError("write", path_);
  if (::fallocate(fd_, 0, 0, static_cast<off_t>(size)) != 0 && errno != EOPNOTSUPP) {
    SystemError("write", path_);
  }
  void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (map == MAP_FAILED) SystemError("map", path_);
  map_ = map;
  map_size_ = size;
  ::madvise(map_, map_size_, MADV_SEQUENTIAL);
  std::memcpy(map_, header->data(), header->size());
  return static_cast<char*>(map_) + header->size();
}

void NpyFileSink::Finish() {
  if (!received_) throw CliError("'" + path_ + "': the read returned no leaf");
  if (regular_) {
    Unmap();  // the pages are the file's: nothing to write
  } else {
    WriteAll(fd_, header_.data(), header_.size(), path_);
    WriteAll(fd_, buffer_.get(), static_cast<size_t>(buffer_size_), path_);
  }
  if (fd_ != STDOUT_FILENO && ::close(std::exchange(fd_, -1)) != 0) SystemError("close", path_);
  finished_ = true;
}

// Opens the output: stdout for "-", else the file, created or truncated.
void NpyFileSink::Open() {
  if (path_ == "-") {
    fd_ = STDOUT_FILENO;
    return;
  }
  // Read and write: a shared writable mapping needs both.
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) SystemError("create", path_);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) SystemError("stat", path_);
  regular_ = S_ISREG(st.st_mode);
}

void NpyFileSink::Unmap() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
  map_ = nullptr;
  map_size_ = 0;
}

}  // namespace tdstore::cli
