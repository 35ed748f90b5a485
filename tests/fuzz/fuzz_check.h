// CHECK(cond) for the fuzz targets: prints the failed invariant and aborts,
// which libFuzzer reports as a crash (and saves the input). Unlike assert()
// it stays on in every build type.
#ifndef TDSTORE_TESTS_FUZZ_FUZZ_CHECK_H_
#define TDSTORE_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define CHECK(cond)                                                                         \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "invariant violated at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)

#endif  // TDSTORE_TESTS_FUZZ_FUZZ_CHECK_H_
