#include "client/cli/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "client/cli/args.h"

namespace tdstore::cli {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CliError("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int error = errno;
    ::close(fd);
    throw CliError("cannot read '" + path + "': " +
                   (S_ISREG(st.st_mode) ? std::strerror(error) : "not a regular file"));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int error = errno;
    if (map_ == MAP_FAILED) {
      map_ = nullptr;
      ::close(fd);
      throw CliError("cannot map '" + path + "': " + std::strerror(error));
    }
    ::madvise(map_, size_, MADV_SEQUENTIAL);
  }
  ::close(fd);  // the mapping stays valid
}

MappedFile::~MappedFile() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

void MappedFile::Release(int64_t offset, int64_t length) const {
  if (map_ == nullptr || length <= 0) return;
  // madvise wants a page-aligned start; round it down (the extra bytes
  // before are only a hint's worth of harm).
  const auto page = static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
  const int64_t start = offset / page * page;
  ::madvise(static_cast<char*>(map_) + start, static_cast<size_t>(offset + length - start),
            MADV_DONTNEED);
}

}  // namespace tdstore::cli
