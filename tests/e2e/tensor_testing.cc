#include "tests/e2e/tensor_testing.h"

#include <ATen/ATen.h>

#include <cstring>
#include <random>

namespace tdstore::testing {

const std::vector<at::ScalarType>& AllDTypes() {
  static const auto* types = new std::vector<at::ScalarType>{
      at::kBool,  at::kByte,     at::kChar,   at::kShort,         at::kInt,
      at::kLong,  at::kHalf,     at::kBFloat16, at::kFloat,       at::kDouble,
      at::kComplexFloat, at::kComplexDouble};
  return *types;
}

at::Tensor RandomTensor(at::ScalarType type, std::vector<int64_t> shape, uint32_t seed) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
  std::mt19937 rng(seed);
  auto* bytes = static_cast<uint8_t*>(t.data_ptr());
  const size_t n = t.nbytes();
  for (size_t i = 0; i < n; ++i) {
    bytes[i] = static_cast<uint8_t>(type == at::kBool ? rng() & 1 : rng());
  }
  return t;
}

::testing::AssertionResult SameBytes(const at::Tensor& expected, const at::Tensor& actual) {
  if (!actual.defined()) return ::testing::AssertionFailure() << "undefined tensor";
  if (expected.scalar_type() != actual.scalar_type()) {
    return ::testing::AssertionFailure() << "dtype " << actual.scalar_type() << ", expected "
                                         << expected.scalar_type();
  }
  if (expected.sizes() != actual.sizes()) {
    return ::testing::AssertionFailure() << "shape " << actual.sizes() << ", expected "
                                         << expected.sizes();
  }
  const at::Tensor a = expected.resolve_conj().resolve_neg().contiguous();
  const at::Tensor b = actual.contiguous();
  if (a.nbytes() != 0 && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) != 0) {
    const auto* pa = static_cast<const uint8_t*>(a.data_ptr());
    const auto* pb = static_cast<const uint8_t*>(b.data_ptr());
    size_t i = 0;
    while (pa[i] == pb[i]) ++i;
    return ::testing::AssertionFailure() << "bytes differ first at offset " << i << " of "
                                         << a.nbytes();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tdstore::testing
