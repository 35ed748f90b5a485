#include "client/cli/scalar_bytes.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "client/cli/args.h"

namespace tdstore::cli {
namespace {

template <typename T>
std::string Bytes(T value) {
  std::string out(sizeof(T), '\0');
  std::memcpy(out.data(), &value, sizeof(T));  // x86/ARM little-endian, as the store
  return out;
}

uint32_t FloatBits(float f) {
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

uint16_t BFloat16Bits(float f) {
  const uint32_t bits = FloatBits(f);
  if (std::isnan(f)) return 0x7fc0;
  // Round to nearest, ties to even, on the 16 bits dropped.
  const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

uint16_t Float16Bits(float f) {
  const uint32_t bits = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t abs = bits & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00;   // NaN
  if (abs >= 0x477ff000) return sign | 0x7c00;  // rounds past 65504: inf
  if (abs < 0x38800000) {                       // below 2^-14: subnormal or zero
    // The value in units of 2^-24, rounded to nearest even.
    const float scaled = std::fabs(f) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  const uint32_t exponent = ((abs >> 23) - 127 + 15) << 10;
  const uint32_t mantissa = abs & 0x7fffff;
  uint32_t half = exponent | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // may carry into the exponent
  return sign | static_cast<uint16_t>(half);
}

template <typename T>
std::string Integer(double value, const std::string& text, DType dtype) {
  const double truncated = std::trunc(value);
  if (!(truncated >= static_cast<double>(std::numeric_limits<T>::min()) &&
        truncated <= static_cast<double>(std::numeric_limits<T>::max()))) {
    throw CliError("value '" + text + "' is out of range for " + std::string(DTypeName(dtype)));
  }
  return Bytes(static_cast<T>(truncated));
}

// As torch's checked conversion: a finite value beyond the type's largest
// is refused (inf and nan are kept).
void FloatInRange(double value, double max, const std::string& text, DType dtype) {
  if (std::isfinite(value) && std::fabs(value) > max) {
    throw CliError("value '" + text + "' is out of range for " + std::string(DTypeName(dtype)));
  }
}

// uint64 values past 2^53 stay exact; negative text is refused as torch
// refuses it.
std::string UInt64Bytes(const std::string& text, double value, DType dtype) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long parsed = std::strtoull(text.c_str(), &end, 10);
  if (!text.empty() && text[0] != '-' && *end == '\0' && errno == 0) {
    return Bytes<uint64_t>(parsed);
  }
  const double truncated = std::trunc(value);
  // 2^64 is the first double past the range.
  if (!(truncated >= 0 && truncated < 18446744073709551616.0)) {
    throw CliError("value '" + text + "' is out of range for " + std::string(DTypeName(dtype)));
  }
  return Bytes(static_cast<uint64_t>(truncated));
}

}  // namespace

std::string ScalarBytes(const std::string& text, DType dtype) {
  double value = 0;
  int64_t exact = 0;
  bool is_exact_integer = false;
  if (text == "true" || text == "True") {
    value = 1;
  } else if (text == "false" || text == "False") {
    value = 0;
  } else {
    errno = 0;
    char* end = nullptr;
    const long long parsed = std::strtoll(text.c_str(), &end, 10);
    if (!text.empty() && *end == '\0' && errno == 0) {
      exact = parsed;  // int64 values beyond 2^53 stay exact
      is_exact_integer = true;
      value = static_cast<double>(parsed);
    } else {
      errno = 0;
      value = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0') {
        throw CliError("fill value '" + text + "' is not a number (or true/false)");
      }
    }
  }
  switch (dtype) {
    case DType::kBool:
      return Bytes<uint8_t>(value != 0 ? 1 : 0);
    case DType::kUInt8:
      return Integer<uint8_t>(value, text, dtype);
    case DType::kInt8:
      return Integer<int8_t>(value, text, dtype);
    case DType::kInt16:
      return Integer<int16_t>(value, text, dtype);
    case DType::kInt32:
      return Integer<int32_t>(value, text, dtype);
    case DType::kInt64:
      if (is_exact_integer) return Bytes<int64_t>(exact);
      return Integer<int64_t>(value, text, dtype);
    case DType::kFloat16:
      FloatInRange(value, 65504.0, text, dtype);
      return Bytes<uint16_t>(Float16Bits(static_cast<float>(value)));
    case DType::kBFloat16:
      FloatInRange(value, 3.3895313892515355e38, text, dtype);
      return Bytes<uint16_t>(BFloat16Bits(static_cast<float>(value)));
    case DType::kFloat32:
      FloatInRange(value, std::numeric_limits<float>::max(), text, dtype);
      return Bytes<float>(static_cast<float>(value));
    case DType::kFloat64:
      return Bytes<double>(value);
    case DType::kComplex64:
      return Bytes<float>(static_cast<float>(value)) + Bytes<float>(0.0f);
    case DType::kComplex128:
      return Bytes<double>(value) + Bytes<double>(0.0);
    case DType::kUInt16:
      return Integer<uint16_t>(value, text, dtype);
    case DType::kUInt32:
      return Integer<uint32_t>(value, text, dtype);
    case DType::kUInt64:
      return UInt64Bytes(text, value, dtype);
    case DType::kComplex32:
      FloatInRange(value, 65504.0, text, dtype);
      return Bytes<uint16_t>(Float16Bits(static_cast<float>(value))) + Bytes<uint16_t>(0);
    // Each float8 format rounds and saturates its own way; the CLI does not
    // copy torch's conversions. Python's fill_ and the C++ client cast with
    // torch itself.
    case DType::kFloat8E4M3Fn:
    case DType::kFloat8E5M2:
    case DType::kFloat8E4M3FnUz:
    case DType::kFloat8E5M2FnUz:
    case DType::kFloat8E8M0FnU:
    case DType::kFloat4E2M1FnX2:
      throw CliError("the CLI cannot fill a " + std::string(DTypeName(dtype)) +
                     " leaf; use fill_ in Python, which casts with torch");
    case DType::kUnspecified:
      break;
  }
  throw CliError("cannot fill a leaf of unknown dtype");
}

}  // namespace tdstore::cli
