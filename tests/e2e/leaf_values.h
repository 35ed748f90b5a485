// Reading one leaf through the torch-free core into a std::vector of its
// element type, for e2e tests that compare against a local model.
#ifndef TDSTORE_TESTS_E2E_LEAF_VALUES_H_
#define TDSTORE_TESTS_E2E_LEAF_VALUES_H_

#include <cstdint>
#include <vector>

#include "tdstore/core.h"

namespace tdstore::testing {

// A ReadSink that keeps the one leaf it is given as elements of type T.
template <typename T>
class VectorOf : public core::ReadSink {
 public:
  void Begin(const std::vector<int64_t>&, int64_t) override {}
  void* Leaf(const core::LeafMeta& leaf) override {
    values.resize(static_cast<size_t>(leaf.byte_size) / sizeof(T));
    return values.data();
  }
  std::vector<T> values;
};

// `path` read whole (or at `index`, if given) as elements of type T.
template <typename T>
std::vector<T> ReadLeafAs(const core::Dict& dict, const Key& path,
                          const core::Index* index = nullptr) {
  VectorOf<T> sink;
  core::ReadOptions options;
  options.index = index;
  dict.read({path}, sink, options);
  return sink.values;
}

}  // namespace tdstore::testing

#endif  // TDSTORE_TESTS_E2E_LEAF_VALUES_H_
