// Self-describing rows for the soak test (soak_test.cc): every row a writer
// stores says where it belongs, who wrote it, with which call, and carries a
// checksum, so a reader can tell from the row's bytes alone whether the row
// is whole, in the right place and of the right leaf.
//
// Layout of one row of n >= kMinRowBytes bytes (little-endian):
//
//   [0, 4)      row    position of the row in batch dim 0
//   [4, 6)      writer the writing client's number
//   [6, 8)      leaf   the leaf's number in the test's leaf list
//   [8, 12)     seq    the writer's call number (1, 2, ...) that wrote it
//   [12, n-4)   filler bytes derived from the four fields above, so a row
//                      spliced from two writes never passes
//   [n-4, n)    FNV-1a 32 of bytes [0, n-4)
//
// The dtype of the leaf does not matter: rows are raw bytes to tdstore, and
// the test writes and reads them as such (floats included: tdstore never
// converts them). An all-zero row is a row nobody wrote yet (dicts created
// with a schema are zero-filled); no encoded row is all zeros.
//
// Pure functions: safe from any thread.
#ifndef TDSTORE_TESTS_E2E_SOAK_ROWS_H_
#define TDSTORE_TESTS_E2E_SOAK_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace tdstore::testing {

inline constexpr size_t kMinRowBytes = 16;

struct RowStamp {
  uint32_t row = 0;
  uint16_t writer = 0;
  uint16_t leaf = 0;
  uint32_t seq = 0;  // 0 only for a never-written (all-zero) row
};

// Writes the n bytes of the row `stamp` describes to `out`. n >= kMinRowBytes.
void EncodeRow(const RowStamp& stamp, char* out, size_t n);

enum class RowState {
  kUnwritten,  // all zeros: the initial state; *stamp gets seq 0
  kWhole,      // checksum and filler agree with the stamp, which is in *stamp
  kCorrupt,    // anything else; *why says what is wrong
};

// Checks the n bytes at `in` as EncodeRow wrote them. Does not check that
// the stamp's row and leaf are the ones the caller expected: compare them.
RowState DecodeRow(const char* in, size_t n, RowStamp* stamp, std::string* why);

}  // namespace tdstore::testing

#endif  // TDSTORE_TESTS_E2E_SOAK_ROWS_H_
