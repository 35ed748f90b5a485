// The client E2eSharedMemory kills (shared_memory_test.cc), through the
// torch-free core over tdstored's unix socket:
//
//   shm_writer ADDRESS DICT write|read [REGION_BYTES [CALLS]]
//
// write: for i = 1, 2, ... writes the leaf "x" of DICT (float32 [2048,
// 1024], 8 MiB) whole, every element i, and after each write returns
// prints "wrote i". read: reads "x" whole, again and again, and prints
// "read N" after each. Either first prints "shares_memory 1" (or 0), and
// runs until it is killed, or exits 0 after CALLS calls if given. Exits 1
// (with a message) on any error. REGION_BYTES: the region the client lends
// (default 64 MiB); under 8 MiB, each write streams through a ring of its
// spans (WriteLeavesShared).
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "tdstore/core.h"

namespace {

constexpr int64_t kRows = 2048, kCols = 1024;

class Buffer final : public tdstore::core::ReadSink {
 public:
  void Begin(const std::vector<int64_t>&, int64_t) override {}
  void* Leaf(const tdstore::core::LeafMeta& leaf) override {
    bytes_.resize(static_cast<size_t>(leaf.byte_size));
    return bytes_.data();
  }

 private:
  std::vector<char> bytes_;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc >= 4 && argc <= 6 ? argv[3] : "";
  if (mode != "write" && mode != "read") {
    std::cerr << "usage: shm_writer ADDRESS DICT write|read [REGION_BYTES [CALLS]]\n";
    return 2;
  }
  try {
    tdstore::ClientOptions options;
    if (argc >= 5) options.shared_memory_bytes = std::stoll(argv[4]);
    const int64_t calls = argc == 6 ? std::stoll(argv[5]) : -1;
    tdstore::core::Client client(argv[1], options);
    tdstore::core::Dict dict = client.open(argv[2]);
    std::cout << "shares_memory " << (client.shares_memory() ? 1 : 0) << std::endl;
    std::vector<float> values(static_cast<size_t>(kRows * kCols));
    for (int64_t i = 1; calls < 0 || i <= calls; ++i) {
      if (mode == "read") {
        Buffer sink;
        dict.read({tdstore::Key("x")}, sink);
        std::cout << "read " << i << std::endl;
        continue;
      }
      std::fill(values.begin(), values.end(), static_cast<float>(i));
      dict.write({{tdstore::Key("x"), tdstore::DType::kFloat32, {kRows, kCols},
                   values.data(), static_cast<int64_t>(values.size() * sizeof(float))}});
      std::cout << "wrote " << i << std::endl;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "shm_writer: " << e.what() << "\n";
    return 1;
  }
}
