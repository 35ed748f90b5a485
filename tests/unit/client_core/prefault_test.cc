// client/core/src/prefault.h: the pages a large copy is about to write are
// made present beforehand, the memory's contents never change, and small
// or odd ranges are left alone.
#include "client/core/src/prefault.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace tdstore::core {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// A fresh anonymous mapping: no page present until touched.
struct Mapping {
  explicit Mapping(size_t bytes, int prot = PROT_READ | PROT_WRITE) : size(bytes) {
    void* p = mmap(nullptr, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
    // Pages of 4 KiB whatever the host's transparent huge pages are, so
    // that presence is counted page by page.
    if (data != nullptr) madvise(data, bytes, MADV_NOHUGEPAGE);
  }
  ~Mapping() {
    if (data != nullptr) munmap(data, size);
  }
  // Whether each page of the mapping is present (mincore).
  std::vector<bool> Present() const {
    std::vector<unsigned char> v((size + kPage - 1) / kPage);
    EXPECT_EQ(mincore(data, size, v.data()), 0);
    std::vector<bool> out;
    for (unsigned char c : v) out.push_back((c & 1) != 0);
    return out;
  }
  char* data = nullptr;
  size_t size = 0;
};

// Whether this kernel has MADV_POPULATE_WRITE (Linux 5.14).
bool KernelPopulates() {
  Mapping probe(kPage);
  return madvise(probe.data, kPage, 23 /* MADV_POPULATE_WRITE */) == 0;
}

TEST(PrefaultTest, TheWholePagesOfALargeRangeArePresentAndNoOthers) {
  if (!KernelPopulates()) GTEST_SKIP() << "no MADV_POPULATE_WRITE (Linux < 5.14)";
  std::mt19937_64 rng(7);
  for (int round = 0; round < 20; ++round) {
    const size_t pages = 80 + rng() % 200;
    Mapping m(pages * kPage);
    ASSERT_NE(m.data, nullptr);
    // An unaligned range of at least kPrefaultMinBytes inside the mapping.
    const size_t begin = kPage / 2 + rng() % (8 * kPage);
    const size_t span = kPrefaultMinBytes + rng() % (m.size - begin - kPrefaultMinBytes);
    PrefaultForWrite(m.data + begin, span);
    const std::vector<bool> present = m.Present();
    const size_t first = (begin + kPage - 1) / kPage;  // first whole page
    const size_t last = (begin + span) / kPage;        // one past the last whole page
    for (size_t p = 0; p < present.size(); ++p) {
      EXPECT_EQ(present[p], p >= first && p < last)
          << "page " << p << " of " << present.size() << ", range [" << begin << ", "
          << begin + span << ")";
    }
  }
}

TEST(PrefaultTest, ContentsNeverChange) {
  std::mt19937_64 rng(11);
  Mapping m(512 * kPage);
  ASSERT_NE(m.data, nullptr);
  for (size_t i = 0; i < m.size; ++i) m.data[i] = static_cast<char>(rng());
  const std::vector<char> before(m.data, m.data + m.size);
  for (int round = 0; round < 50; ++round) {
    const size_t begin = rng() % m.size;
    const size_t span = rng() % (m.size - begin + 1);
    PrefaultForWrite(m.data + begin, span);
  }
  EXPECT_EQ(std::memcmp(before.data(), m.data, m.size), 0);
}

TEST(PrefaultTest, SmallEmptyAndUnwritableRangesAreLeftAlone) {
  Mapping m(256 * kPage);
  ASSERT_NE(m.data, nullptr);
  PrefaultForWrite(m.data, kPrefaultMinBytes - 1);
  PrefaultForWrite(m.data, 0);
  PrefaultForWrite(nullptr, kPrefaultMinBytes * 4);
  for (bool present : m.Present()) EXPECT_FALSE(present);
  // Within one page: no whole page to make present.
  PrefaultForWrite(m.data + 1, kPage - 2);
  EXPECT_FALSE(m.Present()[0]);
  // Read-only memory cannot take it: no crash, nothing written.
  Mapping read_only(128 * kPage, PROT_READ);
  ASSERT_NE(read_only.data, nullptr);
  PrefaultForWrite(read_only.data, read_only.size);
  for (size_t i = 0; i < read_only.size; i += kPage) EXPECT_EQ(read_only.data[i], 0);
}

}  // namespace
}  // namespace tdstore::core
