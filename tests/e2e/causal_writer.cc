// Process B of E2eCausal (causal_test.cc), through the torch-free core:
//
//   causal_writer ADDRESS DICT ITERATIONS ACK_FIFO [SIGNAL]
//
// For step i = 1..ITERATIONS, on the dict DICT (made by process A with leaf
// s0/v and batch shape [10]), in this order:
//   unlock (if step i-1 locked), add leaf k<i>, delete leaf k<i-1>,
//   rename the sub-dict s<i-1> to s<i>, resize batch dim 0 to 10 + i, lock
//   if i is odd,
// and then signals step i: SIGNAL "counter" (the default) bumps the
// counter "step" to i; "row" writes i into row 0 of the int64 leaf
// "signal" (an indexed write, which A reads back with an indexed read).
// It then waits until A has
// checked step i (a byte on the fifo ACK_FIFO, which A holds open) before
// the next step, so that what A must see after step i is exactly the state
// step i left. The acknowledgement goes outside tdstored on purpose: A
// learns of step i only through tdstored (the counter), and B's waiting
// costs the two cores nothing.
// Exits 0 after the last step; 1 (with a message) on any error.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "tdstore/core.h"

int main(int argc, char** argv) {
  const std::string signal = argc == 6 ? argv[5] : "counter";
  if ((argc != 5 && argc != 6) || (signal != "counter" && signal != "row")) {
    std::cerr << "usage: causal_writer ADDRESS DICT ITERATIONS ACK_FIFO [counter|row]\n";
    return 2;
  }
  const int acks = open(argv[4], O_RDONLY);
  if (acks < 0) {
    std::cerr << "causal_writer: cannot open " << argv[4] << "\n";
    return 1;
  }
  const std::string address = argv[1];
  const std::string name = argv[2];
  const int64_t iterations = std::atoll(argv[3]);
  try {
    tdstore::core::Client client(address);
    tdstore::core::Dict dict = client.open(name);
    for (int64_t i = 1; i <= iterations; ++i) {
      if (i > 1 && (i - 1) % 2 == 1) dict.set_locked(false);
      const int64_t rows = 10 + i - 1;
      std::vector<int64_t> values(static_cast<size_t>(rows), i);
      tdstore::core::LeafData leaf;
      leaf.path = tdstore::Key("k" + std::to_string(i));
      leaf.dtype = tdstore::DType::kInt64;
      leaf.shape = {rows};
      leaf.data = values.data();
      leaf.byte_size = rows * static_cast<int64_t>(sizeof(int64_t));
      dict.write({leaf});
      if (i > 1) dict.erase(tdstore::Key("k" + std::to_string(i - 1)));
      dict.rename(tdstore::Key("s" + std::to_string(i - 1)), tdstore::Key("s" + std::to_string(i)));
      dict.resize(10 + i);
      if (i % 2 == 1) dict.set_locked(true);
      if (signal == "counter") {
        dict.counter_add("step", 1);
      } else {
        tdstore::core::LeafData step;
        step.path = tdstore::Key("signal");
        step.dtype = tdstore::DType::kInt64;
        step.shape = {};
        step.data = &i;
        step.byte_size = sizeof(i);
        const tdstore::core::Index row{tdstore::core::IndexTerm::Int(0)};
        tdstore::core::WriteOptions options;
        options.index = &row;
        dict.write({step}, options);
      }
      char ack = 0;
      if (read(acks, &ack, 1) != 1) {
        std::cerr << "causal_writer: no acknowledgement of step " << i << "\n";
        return 1;
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "causal_writer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
