#include "common/value_rows.h"

#include <cstring>

#include "common/str_cat.h"
#include "common/leaf_kind.h"

namespace tdstore {
namespace {

void StoreLength(uint32_t length, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((length >> (8 * i)) & 0xff);
}

uint32_t LoadLength(const char* in) {
  uint32_t length = 0;
  for (int i = 0; i < 4; ++i) length |= uint32_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return length;
}

}  // namespace

absl::StatusOr<int64_t> ValueSlotBytes(int64_t longest) {
  if (longest < 0 || longest > kMaxValueBytes) {
    return absl::InvalidArgumentError(StrCat("a value of ", longest,
                                                   " bytes is over the limit of ",
                                                   kMaxValueBytes, " bytes per row"));
  }
  int64_t slot = 16;
  while (slot < longest + kValueLengthBytes) slot *= 2;
  return slot;
}

absl::Status EncodeValueRows(const std::vector<std::string_view>& values, int64_t slot,
                             char* out) {
  const int64_t capacity = slot - kValueLengthBytes;
  for (size_t i = 0; i < values.size(); ++i) {
    if (static_cast<int64_t>(values[i].size()) > capacity) {
      return absl::InvalidArgumentError(
          StrCat("value ", i, " is ", values[i].size(), " bytes; the leaf's rows hold at most ",
                       capacity < 0 ? 0 : capacity, " bytes"));
    }
  }
  for (const std::string_view value : values) {
    StoreLength(value.empty() ? kEmptyValueLength : static_cast<uint32_t>(value.size()), out);
    if (!value.empty()) std::memcpy(out + kValueLengthBytes, value.data(), value.size());
    std::memset(out + kValueLengthBytes + value.size(), 0,
                static_cast<size_t>(capacity) - value.size());
    out += slot;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string_view>> DecodeValueRows(const char* data, int64_t count,
                                                              int64_t slot,
                                                              std::vector<bool>* written) {
  std::vector<std::string_view> values;
  values.reserve(static_cast<size_t>(count));
  if (written != nullptr) written->assign(static_cast<size_t>(count), true);
  for (int64_t i = 0; i < count; ++i) {
    const char* row = data + i * slot;
    uint32_t length = LoadLength(row);
    if (length == 0 && written != nullptr) (*written)[static_cast<size_t>(i)] = false;
    if (length == kEmptyValueLength) length = 0;
    if (slot < kValueLengthBytes || int64_t{length} > slot - kValueLengthBytes) {
      return absl::DataLossError(StrCat("value row ", i, " says it holds ", length,
                                              " bytes but its slot has room for ",
                                              slot - kValueLengthBytes));
    }
    values.emplace_back(row + kValueLengthBytes, length);
  }
  return values;
}

}  // namespace tdstore
