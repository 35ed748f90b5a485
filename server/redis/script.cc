// Scripts and the SHA1 that names them for EVALSHA.
//
// SHA1 is implemented here (FIPS 180-4, section 6.1) rather than pulled from
// a crypto library: it is only an identifier that must match what Redis
// computes, it runs once per script at startup, and it keeps tdstored free
// of an OpenSSL dependency.
#include "server/redis/script.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

namespace tdstore::redis {
namespace {

constexpr size_t kBlockBytes = 64;

uint32_t RotL(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

class Sha1 {
 public:
  // Hashes whole 64-byte blocks straight from the input; only the tail and
  // the padding are copied.
  void Update(std::string_view data) {
    if (data.empty()) return;  // data() may be null: keep it away from memcpy
    total_bytes_ += data.size();
    const auto* p = reinterpret_cast<const unsigned char*>(data.data());
    size_t n = data.size();
    if (buffered_ > 0) {
      const size_t take = std::min(n, kBlockBytes - buffered_);
      std::memcpy(buffer_.data() + buffered_, p, take);
      buffered_ += take;
      p += take;
      n -= take;
      if (buffered_ < kBlockBytes) return;
      Block(buffer_.data());
      buffered_ = 0;
    }
    for (; n >= kBlockBytes; p += kBlockBytes, n -= kBlockBytes) Block(p);
    std::memcpy(buffer_.data(), p, n);
    buffered_ = n;
  }

  // Pads (a 1 bit, zeros, the 64-bit big-endian bit length) and returns the
  // digest as lower-case hex.
  std::string FinishHex() {
    const uint64_t bit_length = total_bytes_ * 8;
    static constexpr unsigned char kPad[kBlockBytes] = {0x80};
    // Room for the 8 length bytes must remain in the last block.
    const size_t pad = (buffered_ < 56 ? 56 : 120) - buffered_;
    Update(std::string_view(reinterpret_cast<const char*>(kPad), pad));
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(bit_length >> (56 - 8 * i));
    Update(std::string_view(reinterpret_cast<const char*>(length), 8));

    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(40);
    for (uint32_t word : h_) {
      for (int shift = 28; shift >= 0; shift -= 4) out.push_back(kHex[(word >> shift) & 0xf]);
    }
    return out;
  }

 private:
  void Block(const unsigned char* p) {
    uint32_t w[80];
    for (int t = 0; t < 16; ++t) {
      w[t] = uint32_t{p[4 * t]} << 24 | uint32_t{p[4 * t + 1]} << 16 |
             uint32_t{p[4 * t + 2]} << 8 | uint32_t{p[4 * t + 3]};
    }
    for (int t = 16; t < 80; ++t) w[t] = RotL(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);

    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4];
    for (int t = 0; t < 80; ++t) {
      uint32_t f, k;
      if (t < 20) {
        f = (b & c) | (~b & d);  // Ch
        k = 0x5a827999;
      } else if (t < 40) {
        f = b ^ c ^ d;  // Parity
        k = 0x6ed9eba1;
      } else if (t < 60) {
        f = (b & c) | (b & d) | (c & d);  // Maj
        k = 0x8f1bbcdc;
      } else {
        f = b ^ c ^ d;  // Parity
        k = 0xca62c1d6;
      }
      const uint32_t temp = RotL(a, 5) + f + e + k + w[t];
      e = d;
      d = c;
      c = RotL(b, 30);
      b = a;
      a = temp;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
  }

  std::array<uint32_t, 5> h_ = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
  std::array<unsigned char, kBlockBytes> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

}  // namespace

std::string Sha1Hex(std::string_view data) {
  Sha1 sha;
  sha.Update(data);
  return sha.FinishHex();
}

Script::Script(std::string name, std::string body)
    : name_(std::move(name)), body_(std::move(body)), sha1_(Sha1Hex(body_)) {}

}  // namespace tdstore::redis
