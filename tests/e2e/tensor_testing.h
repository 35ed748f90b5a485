// Tensors for e2e tests: random contents that exercise every bit pattern,
// and byte-for-byte comparison (NaN payloads included, which at::equal
// would not see as equal).
#ifndef TDSTORE_TESTS_E2E_TENSOR_TESTING_H_
#define TDSTORE_TESTS_E2E_TENSOR_TESTING_H_

#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace tdstore::testing {

// Every dtype tdstore stores.
const std::vector<at::ScalarType>& AllDTypes();

// A tensor of `shape` whose bytes are random (so floats include NaNs with
// payloads, infinities and subnormals); bools are 0 or 1.
at::Tensor RandomTensor(at::ScalarType type, std::vector<int64_t> shape, uint32_t seed);

// Same dtype, same shape, same C-order bytes. `expected` may be any layout.
::testing::AssertionResult SameBytes(const at::Tensor& expected, const at::Tensor& actual);

}  // namespace tdstore::testing

#endif  // TDSTORE_TESTS_E2E_TENSOR_TESTING_H_
