#include "client/cli/npy_file.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "client/cli/args.h"
#include "client/src/scalar_type.h"
#include "common/npy.h"

namespace tdstore::cli {
namespace {

[[noreturn]] void SystemError(const std::string& what, const std::string& path) {
  const int error = errno;  // before anything else can change it
  throw CliError("cannot " + what + " '" + path + "': " + std::strerror(error));
}

// Closes a file descriptor on every path out of a function.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

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

MappedNpy::MappedNpy(const std::string& path) {
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) SystemError("open", path);
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) SystemError("stat", path);
  map_size_ = static_cast<size_t>(st.st_size);
  if (map_size_ > 0) {
    map_ = ::mmap(nullptr, map_size_, PROT_READ, MAP_PRIVATE, file.fd, 0);
    if (map_ == MAP_FAILED) {
      map_ = nullptr;
      SystemError("map", path);
    }
    ::madvise(map_, map_size_, MADV_SEQUENTIAL);
  }
  const char* bytes = static_cast<const char*>(map_);

  absl::StatusOr<NpyHeader> header = ParseNpyHeader(std::string_view(bytes, map_size_));
  if (!header.ok()) throw CliError(path + ": " + std::string(header.status().message()));
  std::optional<at::ScalarType> type = ScalarTypeFromDType(header->dtype);
  if (!type) throw CliError(path + ": dtype not supported by this tdstore client");

  int64_t expected = static_cast<int64_t>(c10::elementSize(*type));
  for (int64_t dim : header->shape) {
    if (dim < 0 || __builtin_mul_overflow(expected, dim, &expected)) {
      throw CliError(path + ": invalid shape in the .npy header");
    }
  }
  const int64_t present = static_cast<int64_t>(map_size_) - header->data_offset;
  if (present != expected) {
    throw CliError(path + ": the header announces " + std::to_string(expected) +
                   " data bytes but the file holds " + std::to_string(present) +
                   (present < expected ? " (truncated?)" : ""));
  }
  // from_blob wants a mutable pointer; the mapping is read-only and the
  // tensor is only ever read (sent to tdstored).
  void* data = const_cast<char*>(bytes) + header->data_offset;
  tensor_ = at::from_blob(data, header->shape, at::TensorOptions().dtype(*type));
}

MappedNpy::~MappedNpy() {
  tensor_.reset();
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

void WriteNpy(const std::string& path, const at::Tensor& tensor) {
  std::optional<DType> dtype = DTypeFromScalarType(tensor.scalar_type());
  if (!dtype || NpyDescr(*dtype).empty()) {
    throw CliError(std::string("a ") + c10::toString(tensor.scalar_type()) +
                   " tensor cannot be written as .npy: NumPy has no such dtype");
  }
  absl::StatusOr<std::string> header = FormatNpyHeader(*dtype, tensor.sizes().vec());
  if (!header.ok()) throw CliError(path + ": " + std::string(header.status().message()));
  const at::Tensor data = tensor.contiguous();

  const bool to_stdout = path == "-";
  Fd file{to_stdout ? -1 : ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (!to_stdout && file.fd < 0) SystemError("create", path);
  const int fd = to_stdout ? STDOUT_FILENO : file.fd;
  try {
    WriteAll(fd, header->data(), header->size(), path);
    WriteAll(fd, static_cast<const char*>(data.data_ptr()), data.nbytes(), path);
    if (!to_stdout && ::close(std::exchange(file.fd, -1)) != 0) SystemError("close", path);
  } catch (...) {
    if (!to_stdout) ::unlink(path.c_str());
    throw;
  }
}

}  // namespace tdstore::cli
