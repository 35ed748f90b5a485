// libFuzzer target: the CLI's .npy header reader (client/cli/npy_header.h).
//
// The input is the start of a file. Whatever it holds, ParseNpyHeader must
// return (never crash, never read past the input). When it accepts the
// header, the result must be something tdstore can store, and formatting it
// again and re-parsing must give the same dtype and shape back.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "client/cli/npy_header.h"
#include "common/dtype.h"
#include "common/shape.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // libFuzzer's buffer is exactly `size` bytes, so ASan flags any read past it.
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto header = tdstore::cli::ParseNpyHeader(input);
  if (!header.ok()) return 0;

  // What the reader accepts, the store can hold.
  CHECK(tdstore::IsKnownDType(static_cast<int>(header->dtype)));
  CHECK(!tdstore::cli::NpyDescr(header->dtype).empty());
  CHECK(tdstore::ValidateShape(header->shape, "shape").ok());
  CHECK(tdstore::ByteSize(header->shape, tdstore::DTypeSize(header->dtype)).ok());
  CHECK(header->data_offset > 0 && header->data_offset <= static_cast<int64_t>(size));

  // Round trip: our own header for the same array parses to the same fields.
  auto formatted = tdstore::cli::FormatNpyHeader(header->dtype, header->shape);
  CHECK(formatted.ok());
  CHECK(formatted->size() % 64 == 0);
  auto again = tdstore::cli::ParseNpyHeader(*formatted);
  CHECK(again.ok());
  CHECK(again->dtype == header->dtype);
  CHECK(again->shape == header->shape);
  CHECK(again->data_offset == static_cast<int64_t>(formatted->size()));

  // One byte short of the header is "truncated", never a success.
  const std::string short_by_one = formatted->substr(0, formatted->size() - 1);
  CHECK(!tdstore::cli::ParseNpyHeader(short_by_one).ok());
  return 0;
}
