// CHECK(cond) for the fuzz targets: prints the failed invariant and aborts,
// which libFuzzer reports as a crash (and saves the input). Unlike assert()
// it stays on in every build type.
#ifndef TDSTORE_TESTS_FUZZ_FUZZ_CHECK_H_
#define TDSTORE_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "common/shape.h"

#define CHECK(cond)                                                                         \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "invariant violated at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)

// A reference numel for the targets' own checks, written independently of
// the code under test: -1 if it overflows int64 (0 if any dim is 0).
inline int64_t Numel(const tdstore::Shape& shape) {
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

#endif  // TDSTORE_TESTS_FUZZ_FUZZ_CHECK_H_
