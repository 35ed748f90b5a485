#include "client/cli/npy_header.h"

#include <iterator>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace tdstore::cli {
namespace {

constexpr DType kNumpyDTypes[] = {
    DType::kBool,    DType::kUInt8,   DType::kInt8,      DType::kInt16,
    DType::kInt32,   DType::kInt64,   DType::kFloat16,   DType::kFloat32,
    DType::kFloat64, DType::kComplex64, DType::kComplex128, DType::kUInt16,
    DType::kUInt32,  DType::kUInt64,
};

// Builds a file prefix the way NumPy does: magic, version, little-endian
// header length, then the dict padded with spaces to a multiple of 64 bytes
// and closed by '\n'.
std::string NpyFile(const std::string& dict, int major = 1, int minor = 0,
                    const std::string& data = "") {
  const size_t preamble = major == 1 ? 10 : 12;
  size_t total = preamble + dict.size() + 1;
  total = (total + 63) / 64 * 64;
  const size_t header_length = total - preamble;
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += static_cast<char>(minor);
  for (size_t i = 0; i < preamble - 8; ++i) {
    out += static_cast<char>((header_length >> (8 * i)) & 0xff);
  }
  out += dict;
  out.append(total - out.size() - 1, ' ');
  out += '\n';
  return out + data;
}

std::string Dict(const std::string& descr, const std::string& shape,
                 const std::string& order = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape +
         ", }";
}

TEST(NpyTest, Descrs) {
  EXPECT_EQ(NpyDescr(DType::kBool), "|b1");
  EXPECT_EQ(NpyDescr(DType::kUInt8), "|u1");
  EXPECT_EQ(NpyDescr(DType::kInt8), "|i1");
  EXPECT_EQ(NpyDescr(DType::kInt16), "<i2");
  EXPECT_EQ(NpyDescr(DType::kInt32), "<i4");
  EXPECT_EQ(NpyDescr(DType::kInt64), "<i8");
  EXPECT_EQ(NpyDescr(DType::kFloat16), "<f2");
  EXPECT_EQ(NpyDescr(DType::kFloat32), "<f4");
  EXPECT_EQ(NpyDescr(DType::kFloat64), "<f8");
  EXPECT_EQ(NpyDescr(DType::kComplex64), "<c8");
  EXPECT_EQ(NpyDescr(DType::kComplex128), "<c16");
  EXPECT_EQ(NpyDescr(DType::kUInt16), "<u2");
  EXPECT_EQ(NpyDescr(DType::kUInt32), "<u4");
  EXPECT_EQ(NpyDescr(DType::kUInt64), "<u8");
  // NumPy has no bfloat16, float8, float4 or complex32.
  for (DType none : {DType::kBFloat16, DType::kFloat8E4M3Fn, DType::kFloat8E5M2,
                     DType::kFloat8E4M3FnUz, DType::kFloat8E5M2FnUz, DType::kFloat8E8M0FnU,
                     DType::kComplex32, DType::kFloat4E2M1FnX2, DType::kUnspecified}) {
    EXPECT_EQ(NpyDescr(none), "") << DTypeName(none);
  }
}

TEST(NpyTest, FormatMatchesNumpyExactly) {
  // np.save of np.zeros((3, 4), np.float32), minus NumPy's optional extra
  // padding for growing the first axis.
  const std::string header = *FormatNpyHeader(DType::kFloat32, {3, 4});
  EXPECT_EQ(header, NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"));
  EXPECT_EQ(header.size(), 128u);
  EXPECT_EQ(*FormatNpyHeader(DType::kInt64, {5}),
            NpyFile("{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }"));
  EXPECT_EQ(*FormatNpyHeader(DType::kBool, {}),
            NpyFile("{'descr': '|b1', 'fortran_order': False, 'shape': (), }"));
}

TEST(NpyTest, FormatParseRoundTrip) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 3000; ++trial) {
    const DType dtype = kNumpyDTypes[rng() % std::size(kNumpyDTypes)];
    Shape shape(trial % 50 == 0 ? kMaxRank : rng() % 6);
    for (int64_t& dim : shape) {
      dim = rng() % 8 == 0 ? 0 : static_cast<int64_t>(rng() % (trial % 3 == 0 ? 1000000 : 5));
    }
    const absl::StatusOr<std::string> header = FormatNpyHeader(dtype, shape);
    if (!ByteSize(shape, DTypeSize(dtype)).ok()) {
      // No such array can exist, so no header is written for it.
      EXPECT_EQ(header.status().code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    ASSERT_TRUE(header.ok()) << header.status();
    ASSERT_EQ(header->size() % 64, 0u);
    ASSERT_EQ(header->back(), '\n');
    ASSERT_EQ((*header)[6], 1);  // version 1.0 suffices for any valid shape
    ASSERT_EQ((*header)[7], 0);

    // Parse with some data after the header, as in a real file.
    const absl::StatusOr<NpyHeader> parsed = ParseNpyHeader(*header + "DATA");
    ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << *header;
    EXPECT_EQ(parsed->dtype, dtype);
    EXPECT_EQ(parsed->shape, shape);
    EXPECT_EQ(parsed->data_offset, static_cast<int64_t>(header->size()));
  }
}

TEST(NpyTest, FormatRejects) {
  EXPECT_EQ(FormatNpyHeader(DType::kBFloat16, {3}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FormatNpyHeader(DType::kUnspecified, {3}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FormatNpyHeader(DType::kFloat32, {-1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FormatNpyHeader(DType::kFloat32, Shape(kMaxRank + 1, 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FormatNpyHeader(DType::kFloat64, {int64_t{1} << 61}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(FormatNpyHeader(DType::kFloat64, {int64_t{1} << 59}).ok());
}

TEST(NpyTest, ParseHandWrittenHeaders) {
  struct Case {
    std::string dict;
    DType dtype;
    Shape shape;
  };
  const Case cases[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", DType::kFloat32, {3, 4}},
      {"{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }", DType::kInt64, {5}},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (), }", DType::kFloat64, {}},
      {"{'descr': '|b1', 'fortran_order': False, 'shape': (2, 0, 3), }", DType::kBool, {2, 0, 3}},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (7,), }", DType::kUInt8, {7}},
      {"{'descr': '|i1', 'fortran_order': False, 'shape': (7,), }", DType::kInt8, {7}},
      {"{'descr': '<i2', 'fortran_order': False, 'shape': (1,), }", DType::kInt16, {1}},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }", DType::kInt32, {1}},
      {"{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }", DType::kFloat16, {1}},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", DType::kComplex64, {1}},
      {"{'descr': '<c16', 'fortran_order': False, 'shape': (2, 2), }", DType::kComplex128, {2, 2}},
      // Native and missing byte order; single-byte types with any order.
      {"{'descr': '=f4', 'fortran_order': False, 'shape': (1,), }", DType::kFloat32, {1}},
      {"{'descr': 'f4', 'fortran_order': False, 'shape': (1,), }", DType::kFloat32, {1}},
      {"{'descr': '<u1', 'fortran_order': False, 'shape': (1,), }", DType::kUInt8, {1}},
      {"{'descr': '=b1', 'fortran_order': False, 'shape': (1,), }", DType::kBool, {1}},
      {"{'descr': '>i1', 'fortran_order': False, 'shape': (1,), }", DType::kInt8, {1}},
      // Other key orders, quotes and spacing Python's literal syntax allows.
      {"{'shape': (3, 4), 'fortran_order': False, 'descr': '<f4'}", DType::kFloat32, {3, 4}},
      {"{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3,4)}", DType::kFloat32,
       {3, 4}},
      {"{'descr':'<f4','fortran_order':False,'shape':(3,4,),}", DType::kFloat32, {3, 4}},
      {"{ 'descr' : '<f4' , 'fortran_order' : False , 'shape' : ( 3 , 4 ) }", DType::kFloat32,
       {3, 4}},
      // The largest byte size that fits.
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (9223372036854775807,), }",
       DType::kUInt8, {9223372036854775807}},
  };
  for (const Case& c : cases) {
    for (int major : {1, 2, 3}) {
      const std::string file = NpyFile(c.dict, major);
      const absl::StatusOr<NpyHeader> header = ParseNpyHeader(file);
      ASSERT_TRUE(header.ok()) << c.dict << " v" << major << ": " << header.status();
      EXPECT_EQ(header->dtype, c.dtype) << c.dict;
      EXPECT_EQ(header->shape, c.shape) << c.dict;
      EXPECT_EQ(header->data_offset, static_cast<int64_t>(file.size())) << c.dict;
    }
  }
}

TEST(NpyTest, ParseVersionTwoAndThreeUseFourByteLength) {
  const std::string dict = Dict("<f4", "(3, 4)");
  const std::string v2 = NpyFile(dict, 2);
  ASSERT_EQ(v2.size() % 64, 0u);
  EXPECT_EQ(ParseNpyHeader(v2)->data_offset, static_cast<int64_t>(v2.size()));
  const std::string v3 = NpyFile(dict, 3);
  EXPECT_EQ(ParseNpyHeader(v3)->shape, (Shape{3, 4}));
}

TEST(NpyTest, ParseDoesNotRequireAlignment) {
  // Old NumPy versions padded to 16 bytes; the length field is what counts.
  std::string file("\x93NUMPY\x01\x00", 8);
  const std::string dict = Dict("<f4", "(2,)") + "   \n";
  file += static_cast<char>(dict.size());
  file += '\0';
  file += dict;
  const absl::StatusOr<NpyHeader> header = ParseNpyHeader(file);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->data_offset, static_cast<int64_t>(file.size()));
}

void ExpectRejected(const std::string& file, const std::string& want_in_message) {
  const absl::StatusOr<NpyHeader> header = ParseNpyHeader(file);
  ASSERT_FALSE(header.ok()) << "accepted: " << file;
  EXPECT_EQ(header.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(header.status().message()).find(want_in_message), std::string::npos)
      << "message: " << header.status().message() << "\nwanted: " << want_in_message;
}

TEST(NpyTest, ParseRejectsWhatTdstoreCannotStore) {
  ExpectRejected(NpyFile(Dict("<f4", "(3, 4)", "True")), "Fortran");
  ExpectRejected(NpyFile(Dict(">f4", "(3,)")), "big-endian");
  ExpectRejected(NpyFile(Dict(">i8", "(3,)")), "big-endian");
  ExpectRejected(NpyFile(Dict(">c16", "(3,)")), "big-endian");
  ExpectRejected(NpyFile(Dict("|f4", "(3,)")), "byte order");
  ExpectRejected(NpyFile(Dict("<U3", "(3,)")), "unsupported dtype");
  ExpectRejected(NpyFile(Dict("|O", "(3,)")), "unsupported dtype");
  ExpectRejected(NpyFile(Dict("<f16", "(3,)")), "unsupported dtype");
  ExpectRejected(NpyFile(Dict("<M8[ns]", "(3,)")), "unsupported dtype");
  ExpectRejected(NpyFile(Dict("", "(3,)")), "unsupported dtype");
  ExpectRejected(NpyFile("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }"),
                 "structured");
  // Too large to address.
  ExpectRejected(NpyFile(Dict("<f8", "(9223372036854775807,)")), "overflow");
  std::string many = "(";
  for (int i = 0; i <= kMaxRank; ++i) many += "1, ";
  ExpectRejected(NpyFile(Dict("<f4", many + ")")), "dimensions");
}

TEST(NpyTest, ParseRejectsBadFiles) {
  const std::string good = NpyFile(Dict("<f4", "(3, 4)"));
  ASSERT_TRUE(ParseNpyHeader(good).ok());

  ExpectRejected("PK\x03\x04 this is a zip file", "magic");
  ExpectRejected(std::string("\x93NUMPZ\x01\x00", 8), "magic");
  ExpectRejected("", "truncated");
  ExpectRejected(std::string("\x93NUM", 4), "truncated");

  // Every strict prefix of a valid header is truncated.
  for (size_t n = 0; n < good.size(); ++n) {
    ExpectRejected(good.substr(0, n), "truncated");
  }

  std::string v4 = good;
  v4[6] = 4;
  ExpectRejected(v4, "version");
  std::string v0 = good;
  v0[6] = 0;
  ExpectRejected(v0, "version");
  std::string v11 = good;
  v11[7] = 1;
  ExpectRejected(v11, "version");
}

TEST(NpyTest, ParseRejectsBadDictSyntax) {
  const char* dicts[] = {
      "",
      "{",
      "}",
      "{'descr': '<f4', 'fortran_order': False}",                       // no shape
      "{'descr': '<f4', 'shape': (3,)}",                                // no order
      "{'fortran_order': False, 'shape': (3,)}",                        // no descr
      "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}",  // extra key
      "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
      "{'descr': '<f4', 'fortran_order': false, 'shape': (3,)}",
      "{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (3)}",   // int, not tuple
      "{'descr': '<f4', 'fortran_order': False, 'shape': [3]}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (3,,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (3 4)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (3.0,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
      "{'descr': '<f4' 'fortran_order': False, 'shape': (3,)}",   // missing comma
      "{'descr': '<f4, 'fortran_order': False, 'shape': (3,)}",   // bad quoting
      "{'descr': \"<f4', 'fortran_order': False, 'shape': (3,)}",
      "{descr: '<f4', 'fortran_order': False, 'shape': (3,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x",
      "{,'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (3,),,}",
  };
  for (const char* dict : dicts) {
    const absl::StatusOr<NpyHeader> header = ParseNpyHeader(NpyFile(dict));
    EXPECT_EQ(header.status().code(), absl::StatusCode::kInvalidArgument) << dict;
  }
}

}  // namespace
}  // namespace tdstore::cli

namespace tdstore::cli {
namespace {

// np.save(f, np.zeros((3, 4), '<f4')) with NumPy 1.24 writes exactly this
// header (118 bytes of dict, padded for the first axis to grow in place).
TEST(NpyNumPyIdentity, HeaderIsByteIdenticalToNumPys) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
  std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict;
  expected.append(128 - 1 - expected.size(), ' ');
  expected += '\n';
  auto header = FormatNpyHeader(DType::kFloat32, {3, 4});
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(*header, expected);
}

}  // namespace
}  // namespace tdstore::cli
