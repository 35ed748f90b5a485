// Faulting in, in one step, the pages a large copy is about to write.
//
// Why: a read's leaves land in memory the caller's sink has just allocated
// (a fresh tensor: every `td[key]` returns one), so each page the core
// copies into faults first, one trap per 4 KiB. MADV_POPULATE_WRITE
// (Linux 5.14) makes them in one call instead. On this VM a fresh 256 MiB
// buffer filled 4 MiB at a time took 130–163 ms with the faults and 96–127
// ms populated chunk by chunk before each copy (docs/benchmarks.md, *A
// read's pages faulted in ahead of its copy*). Huge pages were measured
// too, and not adopted: the first use of each took far longer here.
#ifndef TDSTORE_CLIENT_CORE_SRC_PREFAULT_H_
#define TDSTORE_CLIENT_CORE_SRC_PREFAULT_H_

#include <cstddef>

namespace tdstore::core {

// Copies below this many bytes are left to fault as they go: the call
// would cost more than the traps it saves.
inline constexpr size_t kPrefaultMinBytes = size_t{256} << 10;

// Makes present, writable, the whole pages inside [data, data + bytes)
// (the partial pages at either end fault as usual), when bytes >=
// kPrefaultMinBytes. A hint: it never fails (a kernel without
// MADV_POPULATE_WRITE, or memory that cannot take it, is left as it was)
// and never changes the memory's contents.
void PrefaultForWrite(void* data, size_t bytes);

}  // namespace tdstore::core

#endif  // TDSTORE_CLIENT_CORE_SRC_PREFAULT_H_
