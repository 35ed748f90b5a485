// consumer: writes a tensor to a tdstored and reads it back through an
// installed libtdstore_client, found with find_package(tdstore).
//
//   consumer [ADDRESS]      ADDRESS: host:port or unix:///path.sock
//                           (default: $TDSTORE_ADDR, else 127.0.0.1:50051)
//
// Exits 0 when the tensor read back equals the one written, 1 otherwise
// (including any tdstore::Error, printed to stderr). The dict it creates is
// deleted before it exits.
#include <ATen/ATen.h>
#include <tdstore/client.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  std::string address = "127.0.0.1:50051";
  if (const char* env = std::getenv("TDSTORE_ADDR")) address = env;
  if (argc > 1) address = argv[1];

  // One name per process, so concurrent runs against one daemon don't clash.
  const std::string name = "consumer-example-" + std::to_string(getpid());
  try {
    tdstore::Client client(address);
    tdstore::Dict td = client.create(name, {8});
    const at::Tensor written = at::arange(8 * 3, at::kFloat).reshape({8, 3});
    td.set({"next", "obs"}, written);
    const at::Tensor read = td.get({"next", "obs"});
    const bool same = read.sizes() == written.sizes() && at::equal(read, written);
    client.drop(name);
    std::cout << "consumer: wrote and read " << name << "/next/obs " << read.sizes() << ": "
              << (same ? "equal" : "DIFFERENT") << "\n";
    return same ? 0 : 1;
  } catch (const tdstore::Error& e) {
    std::cerr << "consumer: " << tdstore::StatusCodeName(e.code()) << ": " << e.message() << "\n";
    return 1;
  }
}
