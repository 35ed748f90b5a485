// pkg_config_main: the smallest program built with only
//
//   g++ -std=c++17 pkg_config_main.cc $(pkg-config --cflags --libs tdstore) -ltorch_cpu -lc10
//
// (torch's flags are added by hand: see cmake/tdstore.pc.in). It asks the
// daemon at argv[1] (host:port or unix:///path) for its server info and exits
// 0 if the daemon answers and its Redis is reachable, 1 otherwise.
#include <tdstore/client.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: pkg_config_main ADDRESS\n";
    return 2;
  }
  try {
    const tdstore::Client::ServerInfo info = tdstore::Client(argv[1]).server_info();
    std::cout << "pkg_config_main: tdstored " << info.version << ", " << info.backend
              << ", redis ok: " << (info.redis_ok ? "yes" : "no") << "\n";
    return info.redis_ok ? 0 : 1;
  } catch (const tdstore::Error& e) {
    std::cerr << "pkg_config_main: " << e.what() << "\n";
    return 1;
  }
}
