#include "client/cli/npy_header.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tdstore::cli {
namespace {

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr std::string_view kMagic("\x93NUMPY", 6);
// The dict is padded so magic + version + length + dict is a multiple of
// this, which keeps the data aligned for memory-mapping readers.
constexpr size_t kAlignment = 64;

struct DescrInfo {
  DType dtype;
  std::string_view descr;  // as NumPy writes it
};

constexpr DescrInfo kDescrs[] = {
    {DType::kBool, "|b1"},       {DType::kUInt8, "|u1"},     {DType::kInt8, "|i1"},
    {DType::kInt16, "<i2"},      {DType::kInt32, "<i4"},     {DType::kInt64, "<i8"},
    {DType::kFloat16, "<f2"},    {DType::kFloat32, "<f4"},   {DType::kFloat64, "<f8"},
    {DType::kComplex64, "<c8"},  {DType::kComplex128, "<c16"},
    {DType::kUInt16, "<u2"},     {DType::kUInt32, "<u4"},    {DType::kUInt64, "<u8"},
};

absl::Status Invalid(std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("npy header: ", AV(why)));
}

// Maps a descr string to a dtype. NumPy writes '|' for single-byte types and
// '<' for little-endian multi-byte ones; we also take '=' (native, and every
// host we run on is little-endian) and a missing byte-order character, and
// any order for single-byte types, where it means nothing.
absl::StatusOr<DType> DTypeFromDescr(std::string_view descr) {
  char order = '=';
  std::string_view code = descr;
  if (!descr.empty() && std::string_view("<>=|").find(descr[0]) != std::string_view::npos) {
    order = descr[0];
    code = descr.substr(1);
  }
  for (const DescrInfo& info : kDescrs) {
    if (info.descr.substr(1) != code) continue;
    const bool multi_byte = DTypeSize(info.dtype) > 1;
    if (multi_byte && order == '>') {
      return Invalid(absl::StrCat("descr '", AV(descr),
                                  "' is big-endian; only little-endian data is supported"));
    }
    if (multi_byte && order == '|') {
      return Invalid(absl::StrCat("descr '", AV(descr), "' does not state a byte order"));
    }
    return info.dtype;
  }
  return Invalid(absl::StrCat(
      "unsupported dtype descr '", AV(descr),
      "'; supported: bool, uint8, int8, int16/32/64, float16/32/64, complex64/128"));
}

// A recursive-descent reader for the one dict literal NumPy writes. It
// accepts what Python's literal syntax allows for it (either quote style,
// any whitespace, an optional trailing comma) and nothing beyond.
class DictReader {
 public:
  explicit DictReader(std::string_view text) : text_(text) {}

  absl::StatusOr<NpyHeader> Read() {
    bool have_descr = false, have_order = false, have_shape = false;
    std::string descr;
    bool fortran_order = false;
    NpyHeader header;

    SkipSpace();
    if (!Consume('{')) return Syntax("expected '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      std::string key;
      if (absl::Status s = ReadString(&key); !s.ok()) return s;
      SkipSpace();
      if (!Consume(':')) return Syntax("expected ':' after a key");
      SkipSpace();
      if (key == "descr") {
        if (have_descr) return Syntax("duplicate key 'descr'");
        have_descr = true;
        if (Peek('[')) return Invalid("structured dtypes are not supported");
        if (absl::Status s = ReadString(&descr); !s.ok()) return s;
      } else if (key == "fortran_order") {
        if (have_order) return Syntax("duplicate key 'fortran_order'");
        have_order = true;
        if (absl::Status s = ReadBool(&fortran_order); !s.ok()) return s;
      } else if (key == "shape") {
        if (have_shape) return Syntax("duplicate key 'shape'");
        have_shape = true;
        if (absl::Status s = ReadTuple(&header.shape); !s.ok()) return s;
      } else {
        // NumPy itself rejects headers with extra keys.
        return Invalid(absl::StrCat("unexpected key '", key, "'"));
      }
      SkipSpace();
      if (Consume(',')) continue;
      if (Consume('}')) break;
      return Syntax("expected ',' or '}'");
    }
    SkipSpace();
    if (pos_ != text_.size()) return Syntax("unexpected text after the dict");
    if (!have_descr || !have_order || !have_shape) {
      return Invalid("the dict must have the keys 'descr', 'fortran_order' and 'shape'");
    }

    absl::StatusOr<DType> dtype = DTypeFromDescr(descr);
    if (!dtype.ok()) return dtype.status();
    header.dtype = *dtype;
    if (fortran_order) {
      return Invalid("Fortran-order arrays are not supported; save a C-order array");
    }
    return header;
  }

 private:
  absl::Status Syntax(std::string_view why) const {
    return Invalid(absl::StrCat("malformed dict at byte ", pos_, ": ", AV(why)));
  }

  bool Peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  bool Consume(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }

  bool ConsumeWord(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  // A quoted string without escapes: nothing NumPy writes for the dtypes we
  // accept needs one.
  absl::Status ReadString(std::string* out) {
    if (!Peek('\'') && !Peek('"')) return Syntax("expected a quoted string");
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return Syntax("unterminated string");
    const std::string_view body = text_.substr(pos_, end - pos_);
    if (body.find('\\') != std::string_view::npos || body.find('\n') != std::string_view::npos) {
      return Syntax("unsupported character in string");
    }
    out->assign(body.data(), body.size());
    pos_ = end + 1;
    return absl::OkStatus();
  }

  absl::Status ReadBool(bool* out) {
    if (ConsumeWord("True")) {
      *out = true;
    } else if (ConsumeWord("False")) {
      *out = false;
    } else {
      return Syntax("expected True or False");
    }
    return absl::OkStatus();
  }

  absl::Status ReadInt(int64_t* out) {
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    const size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const int digit = text_[pos_] - '0';
      if (value > (kMax - digit) / 10) return Syntax("dimension too large");
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) return Syntax("expected a non-negative integer");
    *out = value;
    return absl::OkStatus();
  }

  // "()", "(5,)", "(3, 4)" or "(3, 4,)". "(5)" is an int in Python, not a
  // tuple, so it is rejected.
  absl::Status ReadTuple(Shape* out) {
    if (!Consume('(')) return Syntax("expected a tuple for 'shape'");
    SkipSpace();
    if (Consume(')')) return absl::OkStatus();
    while (true) {
      if (out->size() >= static_cast<size_t>(kMaxRank)) {
        return Invalid(absl::StrCat("shape has more than ", kMaxRank, " dimensions"));
      }
      int64_t dim = 0;
      if (absl::Status s = ReadInt(&dim); !s.ok()) return s;
      out->push_back(dim);
      SkipSpace();
      if (Consume(')')) {
        if (out->size() == 1) return Syntax("a one-element tuple needs a trailing comma");
        return absl::OkStatus();
      }
      if (!Consume(',')) return Syntax("expected ',' or ')' in 'shape'");
      SkipSpace();
      if (Consume(')')) return absl::OkStatus();
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

uint32_t ReadLittleEndian(std::string_view bytes) {
  uint32_t value = 0;
  for (size_t i = bytes.size(); i-- > 0;) {
    value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  }
  return value;
}

void AppendLittleEndian(std::string* out, uint32_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
}

}  // namespace

absl::StatusOr<NpyHeader> ParseNpyHeader(std::string_view prefix) {
  // Tell a short prefix of a real file from something that is not .npy.
  const size_t magic_seen = std::min(prefix.size(), kMagic.size());
  if (prefix.substr(0, magic_seen) != kMagic.substr(0, magic_seen)) {
    return Invalid("bad magic: not a .npy file");
  }
  constexpr size_t kVersionEnd = 8;  // magic + major + minor
  if (prefix.size() < kVersionEnd) return Invalid("truncated before the version");

  const int major = static_cast<unsigned char>(prefix[6]);
  const int minor = static_cast<unsigned char>(prefix[7]);
  if (major < 1 || major > 3 || minor != 0) {
    return Invalid(absl::StrCat("unsupported format version ", major, ".", minor,
                                " (supported: 1.0, 2.0, 3.0)"));
  }
  // Version 1.0 stores the header length in 2 bytes, 2.0 and 3.0 in 4. (3.0
  // only allows UTF-8 in the dict, which matters for field names we reject
  // anyway.)
  const size_t length_bytes = major == 1 ? 2 : 4;
  const size_t dict_start = kVersionEnd + length_bytes;
  if (prefix.size() < dict_start) return Invalid("truncated in the header length");
  const uint32_t dict_length = ReadLittleEndian(prefix.substr(kVersionEnd, length_bytes));
  if (prefix.size() - dict_start < dict_length) {
    return Invalid(absl::StrCat("truncated: the header needs ", dict_start + dict_length,
                                " bytes, got ", prefix.size()));
  }

  absl::StatusOr<NpyHeader> header =
      DictReader(prefix.substr(dict_start, dict_length)).Read();
  if (!header.ok()) return header.status();
  // The dims are non-negative and at most kMaxRank by construction; the size
  // must also fit the byte counts the store works with.
  if (absl::StatusOr<int64_t> bytes = ByteSize(header->shape, DTypeSize(header->dtype));
      !bytes.ok()) {
    return Invalid(std::string(bytes.status().message()));
  }
  header->data_offset = static_cast<int64_t>(dict_start + dict_length);
  return header;
}

absl::StatusOr<std::string> FormatNpyHeader(DType dtype, const Shape& shape) {
  const std::string_view descr = NpyDescr(dtype);
  if (descr.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dtype ", AV(DTypeName(dtype)), " has no NumPy equivalent and cannot be saved as .npy"));
  }
  if (absl::Status s = ValidateShape(shape, "shape"); !s.ok()) return s;
  // ParseNpyHeader rejects such headers, so never write one.
  if (absl::StatusOr<int64_t> bytes = ByteSize(shape, DTypeSize(dtype)); !bytes.ok()) {
    return bytes.status();
  }

  // Exactly NumPy's own layout, Python's tuple repr included.
  std::string dict = absl::StrCat("{'descr': '", AV(descr), "', 'fortran_order': False, 'shape': (");
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) dict += ", ";
    absl::StrAppend(&dict, shape[i]);
  }
  if (shape.size() == 1) dict += ",";
  dict += "), }";
  // NumPy (>= 1.23) leaves room for the first axis to grow in place: spaces
  // up to 21 digits of shape[0]. Matching it makes our files byte-identical
  // to np.save's.
  if (!shape.empty()) {
    const size_t digits = absl::StrCat(shape[0]).size();
    if (digits < 21) dict.append(21 - digits, ' ');
  }

  auto padded_length = [&](size_t preamble) {
    const size_t unpadded = preamble + dict.size() + 1;  // + '\n'
    return (unpadded + kAlignment - 1) / kAlignment * kAlignment;
  };
  int major = 1;
  size_t preamble = kMagic.size() + 2 + 2;
  if (padded_length(preamble) - preamble > 0xffff) {
    major = 2;
    preamble = kMagic.size() + 2 + 4;
  }
  const size_t total = padded_length(preamble);
  const size_t header_length = total - preamble;

  std::string out;
  out.reserve(total);
  out.append(kMagic.data(), kMagic.size());
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  AppendLittleEndian(&out, static_cast<uint32_t>(header_length), major == 1 ? 2 : 4);
  out += dict;
  out.append(total - out.size() - 1, ' ');
  out.push_back('\n');
  return out;
}

std::string_view NpyDescr(DType dtype) {
  for (const DescrInfo& info : kDescrs) {
    if (info.dtype == dtype) return info.descr;
  }
  return {};
}

}  // namespace tdstore::cli
