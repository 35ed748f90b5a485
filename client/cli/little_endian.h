// Little-endian integers in byte buffers, for the fixed-layout headers of
// .safetensors and zip files. Byte by byte, so neither the host's byte order
// nor the buffer's alignment matters.
//
// Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_CLIENT_CLI_LITTLE_ENDIAN_H_
#define TDSTORE_CLIENT_CLI_LITTLE_ENDIAN_H_

#include <cstdint>
#include <string>

namespace tdstore::cli {

// The `Bytes`-byte unsigned integer stored at `p`.
template <int Bytes>
uint64_t LoadLE(const char* p) {
  uint64_t value = 0;
  for (int i = Bytes - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
}

// Appends the low `Bytes` bytes of `value` to `out`.
template <int Bytes>
void AppendLE(uint64_t value, std::string* out) {
  for (int i = 0; i < Bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_LITTLE_ENDIAN_H_
