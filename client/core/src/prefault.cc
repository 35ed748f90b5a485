#include "client/core/src/prefault.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older headers lack the name
#endif

namespace tdstore::core {

void PrefaultForWrite(void* data, size_t bytes) {
  if (data == nullptr || bytes < kPrefaultMinBytes) return;
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + page - 1) & ~(page - 1);
  const uintptr_t last = (begin + bytes) & ~(page - 1);
  if (last <= first) return;
  // EINVAL (an older kernel), EFAULT/ENOMEM (memory that cannot take it):
  // the copy then faults its pages in, as it would have.
  madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
}

}  // namespace tdstore::core
