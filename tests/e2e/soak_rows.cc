#include "tests/e2e/soak_rows.h"

#include <cstring>

namespace tdstore::testing {
namespace {

uint32_t Fnv1a(const char* data, size_t n) {
  uint32_t hash = 2166136261u;
  for (size_t i = 0; i < n; ++i) {
    hash ^= static_cast<unsigned char>(data[i]);
    hash *= 16777619u;
  }
  return hash;
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The filler of [12, n-4): 8 bytes per SplitMix64 step of a seed made of
// every stamp field.
void Filler(const RowStamp& s, char* out, size_t length) {
  const uint64_t seed = (static_cast<uint64_t>(s.row) << 32) ^ s.seq ^
                        (static_cast<uint64_t>(s.writer) << 16) ^
                        (static_cast<uint64_t>(s.leaf) << 48);
  for (size_t at = 0; at < length; at += 8) {
    const uint64_t word = SplitMix64(seed + at);
    std::memcpy(out + at, &word, length - at < 8 ? length - at : 8);
  }
}

void Put32(uint32_t v, char* out) { std::memcpy(out, &v, 4); }
void Put16(uint16_t v, char* out) { std::memcpy(out, &v, 2); }
uint32_t Get32(const char* in) {
  uint32_t v;
  std::memcpy(&v, in, 4);
  return v;
}
uint16_t Get16(const char* in) {
  uint16_t v;
  std::memcpy(&v, in, 2);
  return v;
}

}  // namespace

// The host is little-endian (the client library insists on it too), so the
// memcpy'd integers are the documented little-endian layout.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian hosts only");

void EncodeRow(const RowStamp& stamp, char* out, size_t n) {
  Put32(stamp.row, out);
  Put16(stamp.writer, out + 4);
  Put16(stamp.leaf, out + 6);
  Put32(stamp.seq, out + 8);
  Filler(stamp, out + 12, n - 16);
  Put32(Fnv1a(out, n - 4), out + n - 4);
}

RowState DecodeRow(const char* in, size_t n, RowStamp* stamp, std::string* why) {
  bool zero = true;
  for (size_t i = 0; i < n && zero; ++i) zero = in[i] == 0;
  if (zero) {
    *stamp = RowStamp{};
    return RowState::kUnwritten;
  }
  stamp->row = Get32(in);
  stamp->writer = Get16(in + 4);
  stamp->leaf = Get16(in + 6);
  stamp->seq = Get32(in + 8);
  if (Get32(in + n - 4) != Fnv1a(in, n - 4)) {
    *why = "checksum mismatch";
    return RowState::kCorrupt;
  }
  // The checksum covers the filler, but a row assembled from pieces of two
  // rows could carry a matching checksum only by accident; the filler makes
  // that impossible to miss.
  std::string filler(n - 16, '\0');
  Filler(*stamp, filler.data(), filler.size());
  if (std::memcmp(filler.data(), in + 12, filler.size()) != 0) {
    *why = "filler does not match the stamp";
    return RowState::kCorrupt;
  }
  if (stamp->seq == 0) {
    *why = "sequence number 0 in a written row";
    return RowState::kCorrupt;
  }
  return RowState::kWhole;
}

}  // namespace tdstore::testing
