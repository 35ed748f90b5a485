// The `tdstore` binary against a real tdstored: every command, .npy files
// written and read by NumPy itself, and one-line errors with the documented
// exit statuses (0 ok, 1 error, 2 usage).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "common/value_rows.h"
#include "tdstore/client.h"
#include "tests/e2e/cli_testing.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/leaf_values.h"
#include "tests/e2e/tensor_testing.h"

namespace tdstore::testing {
namespace {

class E2eCli : public CliTest {};

TEST_F(E2eCli, HelpAndUsageErrors) {
  CliResult help = RunRaw({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_EQ(help.out.rfind("usage: tdstore", 0), 0u) << help.out;
  EXPECT_EQ(help.err, "");

  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {}, {"frobnicate"}, {"create", "x"}, {"ls", "a", "b"}, {"put", "d", "p"},
           {"get", "d", "p"}, {"ls", "--bogus"}, {"info", "d", "-o", "x"},
           {"create", "x", "--batch-size", "3,-1,a"}, {"put", "d", "a//b", "f.npy"}}) {
    CliResult r = RunRaw(args);
    std::string joined;
    for (const std::string& a : args) joined += a + " ";
    EXPECT_EQ(r.status, 2) << joined << r.err;
    EXPECT_TRUE(IsOneLineError(r)) << joined;
    EXPECT_EQ(r.out, "") << joined;
  }
}

// The CLI sits on the torch-free core only: loading libtorch would cost
// every call ~0.8 s before its first request.
TEST_F(E2eCli, LinksNoLibtorch) {
  const std::string command = "ldd " + Quote(TDSTORE_CLI_BIN) + " > " + Quote(File("ldd.out"));
  ASSERT_EQ(ExitStatus(std::system(command.c_str())), 0);
  const std::string libraries = ReadFile(File("ldd.out"));
  EXPECT_NE(libraries.find("libgrpc++"), std::string::npos) << libraries;
  EXPECT_EQ(Lower(libraries).find("torch"), std::string::npos) << libraries;
  EXPECT_EQ(libraries.find("libc10"), std::string::npos) << libraries;
}

TEST_F(E2eCli, CreateLsInfoPutGetRm) {
  ASSERT_TRUE(HasNumpy()) << "needs /usr/bin/python3 with NumPy (deploy/install-deps.sh installs it)";
  const std::string name = UniqueDictName();
  CliResult r = Run({"create", name, "--batch-size", "3", "--rows-per-block", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");

  r = Run({"ls"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(name + "\n"), std::string::npos) << r.out;

  Python("np.save('obs.npy', np.arange(12, dtype=np.float32).reshape(3, 4))\n");
  r = Run({"put", name, "next/obs", File("obs.npy")});
  ASSERT_EQ(r.status, 0) << r.err;
  r = Run({"put", name, "flat", "obs.npy"});  // relative to the working directory
  ASSERT_EQ(r.status, 0) << r.err;

  r = Run({"ls", name});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "flat      float32  [3, 4]  48\n"
            "next/obs  float32  [3, 4]  48\n");

  r = Run({"info", name});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("name:            " + name + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("batch size:      [3]\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rows per block:  2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("leaves:          2 (96 bytes)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  next/obs  float32  [3, 4]  48\n"), std::string::npos) << r.out;
  const size_t handle_at = r.out.find("handle:          tdstore1|");
  ASSERT_NE(handle_at, std::string::npos) << r.out;
  std::string handle = r.out.substr(handle_at + 17);
  handle.pop_back();  // '\n'
  EXPECT_TRUE(at::equal(Client::open_handle(handle).get({"next", "obs"}),
                        at::arange(12, at::kFloat).reshape({3, 4})));

  r = Run({"get", name, "next/obs", "-o", "back.npy"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(ReadFile(File("back.npy")), ReadFile(File("obs.npy")));
  r = Run({"get", name, "flat", "-o", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, ReadFile(File("obs.npy")));

  r = Run({"get", name, "next", "-o", "next.npy"});  // a nested dict, not a leaf
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_NE(r.err.find("nested dict"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(File("next.npy")));

  r = Run({"rm", name, "next"});  // a nested dict: the whole subtree
  ASSERT_EQ(r.status, 0) << r.err;
  r = Run({"ls", name});
  EXPECT_EQ(r.out, "flat  float32  [3, 4]  48\n");
  r = Run({"rm", name});
  ASSERT_EQ(r.status, 0) << r.err;
  r = Run({"ls"});
  EXPECT_EQ(r.out.find(name + "\n"), std::string::npos) << r.out;

  r = Run({"info", name});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_EQ(r.err.rfind("tdstore: NOT_FOUND: ", 0), 0u) << r.err;
}

TEST_F(E2eCli, ValueLeavesAreListedAsWhatTheyHoldAndNotExportedAsNpy) {
  const std::string name = UniqueDictName();
  core::Dict dict = core::Client(DaemonAddress()).create(name, {2});
  std::string slots(2 * 8, '\0');
  ASSERT_TRUE(EncodeValueRows({"a", "bc"}, 8, slots.data()).ok());
  core::LeafData text;
  text.path = Key("t");
  text.dtype = DType::kUInt8;
  text.shape = {2, 8};
  text.data = slots.data();
  text.byte_size = 16;
  text.kind = LeafKind::kText;
  core::LeafData cfg;  // one JSON value standing for both rows
  cfg.path = Key("cfg");
  cfg.dtype = DType::kUInt8;
  cfg.shape = {2, 0};
  cfg.kind = LeafKind::kJson;
  cfg.value = R"({"lr": 0.1})";
  std::vector<float> x{1, 2};
  dict.write({text, cfg, {Key("x"), DType::kFloat32, {2}, x.data(), 8}});

  CliResult r = Run({"ls", name});
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(line);
  ASSERT_EQ(rows.size(), 3u) << r.out;
  auto has = [](const std::string& row, std::initializer_list<const char*> parts) {
    return std::all_of(parts.begin(), parts.end(),
                       [&](const char* p) { return row.find(p) != std::string::npos; });
  };
  EXPECT_TRUE(has(rows[0], {"cfg", "json", "[2] (one value)"})) << rows[0];
  EXPECT_TRUE(has(rows[1], {"t", "text", "[2] (slots of 8 B)", "16"})) << rows[1];
  EXPECT_TRUE(has(rows[2], {"x", "float32", "[2]", "8"})) << rows[2];

  r = Run({"get", name, "t", "-o", "t.npy"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_NE(r.err.find("holds text values"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(File("t.npy")));
  // An export would turn them into uint8 tensors on import: refused, no file.
  r = Run({"export", name, File("all.safetensors")});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_NE(r.err.find("holds json values"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(File("all.safetensors")));
  dict.drop();
}

TEST_F(E2eCli, AppendWritesTheFilesRowsWhereTheRingsCursorReservesThem) {
  ASSERT_TRUE(HasNumpy()) << "needs /usr/bin/python3 with NumPy (deploy/install-deps.sh installs it)";
  const std::string name = UniqueDictName();
  ASSERT_EQ(Run({"create", name, "--batch-size", "5"}).status, 0);
  Python("np.save('a.npy', np.arange(3, dtype=np.int64) + 10)\n"
         "np.save('b.npy', np.arange(4, dtype=np.int64) + 20)\n"
         "np.save('six.npy', np.zeros(6, np.int64))\n");
  CliResult r = Run({"append", name, "v", "a.npy", "--cursor", "c", "--count", "n"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "start 0 count 3\n");
  r = Run({"append", name, "v", "b.npy", "--cursor", "c", "--count", "n"});  // wraps
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "start 3 count 7\n");
  core::Dict dict = core::Client(DaemonAddress()).open(name);
  EXPECT_EQ(ReadLeafAs<int64_t>(dict, "v"), (std::vector<int64_t>{22, 23, 12, 20, 21}));
  // More rows than the ring, or no --cursor: refused, nothing changed.
  r = Run({"append", name, "v", "six.npy", "--cursor", "c"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_NE(r.err.find("INVALID_ARGUMENT"), std::string::npos) << r.err;
  EXPECT_EQ(Run({"append", name, "v", "a.npy"}).status, 2);
  EXPECT_EQ(dict.counter_get("c"), 7);
  EXPECT_EQ(ReadLeafAs<int64_t>(dict, "v"), (std::vector<int64_t>{22, 23, 12, 20, 21}));
  dict.drop();
}

// create --layout record: info and stats say so; rows go in by put --index
// and append, a whole put is refused with a one-line error, nothing written.
TEST_F(E2eCli, RecordLayoutDictsTakeRowsNotWholeLeaves) {
  ASSERT_TRUE(HasNumpy()) << "needs /usr/bin/python3 with NumPy (deploy/install-deps.sh installs it)";
  const std::string name = UniqueDictName();
  EXPECT_EQ(Run({"create", name, "--batch-size", "4", "--layout", "rows"}).status, 2);
  ASSERT_EQ(Run({"create", name, "--batch-size", "4", "--layout", "record"}).status, 0);
  EXPECT_NE(Run({"info", name}).out.find("layout:          record\n"), std::string::npos);
  Python("np.save('two.npy', np.array([5, 6], dtype=np.int64))\n"
         "np.save('four.npy', np.arange(4, dtype=np.int64))\n");
  CliResult r = Run({"put", name, "v", "two.npy", "--index", "1:3"});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(Run({"append", name, "v", "two.npy", "--cursor", "c"}).status, 0);
  core::Dict dict = core::Client(DaemonAddress()).open(name);
  EXPECT_EQ(ReadLeafAs<int64_t>(dict, "v"), (std::vector<int64_t>{5, 6, 6, 0}));
  r = Run({"put", name, "v", "four.npy"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_NE(r.err.find("FAILED_PRECONDITION"), std::string::npos) << r.err;
  EXPECT_EQ(ReadLeafAs<int64_t>(dict, "v"), (std::vector<int64_t>{5, 6, 6, 0}));
  r = Run({"stats", name});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("layout          record\n"), std::string::npos) << r.out;
  dict.drop();
}

TEST_F(E2eCli, NoBatchDims) {
  const std::string a = UniqueDictName();
  const std::string b = UniqueDictName();
  ASSERT_EQ(Run({"create", a, "--batch-size="}).status, 0);
  ASSERT_EQ(Run({"create", b, "--batch-size", ""}).status, 0);
  Client client(DaemonAddress());
  EXPECT_TRUE(client.open(a).batch_size().empty());
  EXPECT_TRUE(client.open(b).batch_size().empty());
  EXPECT_NE(Run({"info", a}).out.find("batch size:      []\n"), std::string::npos);
}

// NumPy writes, tdstore put imports, tdstore get exports: the exported file
// equals NumPy's byte for byte, and the library sees NumPy's exact data.
TEST_F(E2eCli, NumpyFilesRoundTripByteForByte) {
  ASSERT_TRUE(HasNumpy()) << "needs /usr/bin/python3 with NumPy (deploy/install-deps.sh installs it)";
  Python(R"(
rng = np.random.default_rng(7)
def ints(dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
def cplx(dtype, shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
payload_nans = np.array([0x7fc00001, 0xffa00002, 0x7f800000, 0x00000001], np.uint32).view(np.float32)
arrays = {
    'bool': rng.integers(0, 2, (3, 4)).astype(np.bool_),
    'uint8': ints(np.uint8, (3, 5)),
    'int8': ints(np.int8, (3, 5)),
    'int16': ints(np.int16, (3, 2, 2)),
    'int32': ints(np.int32, (7,)),
    'int64': ints(np.int64, (2, 3)),
    'float16': rng.standard_normal((3, 3)).astype(np.float16),
    'float32': np.concatenate([rng.standard_normal(8).astype(np.float32), payload_nans]),
    'float64': rng.standard_normal((4, 2)),
    'complex64': cplx(np.complex64, (2, 3)),
    'complex128': cplx(np.complex128, (3,)),
    'scalar': np.array(2.5),
    'empty': np.zeros((0, 3), np.float32),
    'big': rng.standard_normal((3, 200000)).astype(np.float32),
}
for name, value in arrays.items():
    np.save(name + '.npy', value)
)");
  const std::string name = UniqueDictName();
  ASSERT_EQ(Run({"create", name, "--batch-size="}).status, 0);
  Client client(DaemonAddress());
  Dict td = client.open(name);
  const std::vector<std::string> leaves = {"bool",    "uint8",   "int8",      "int16",
                                           "int32",   "int64",   "float16",   "float32",
                                           "float64", "complex64", "complex128", "scalar",
                                           "empty",   "big"};
  // put then get, one pipeline per leaf, all at once.
  std::vector<std::future<std::pair<CliResult, CliResult>>> pipelines;
  for (const std::string& leaf : leaves) {
    pipelines.push_back(std::async(std::launch::async, [this, name, leaf] {
      CliResult put = Run({"put", name, "npy/" + leaf, leaf + ".npy"});
      CliResult get = Run({"get", name, "npy/" + leaf, "-o", leaf + ".out.npy"});
      return std::make_pair(put, get);
    }));
  }
  for (size_t i = 0; i < leaves.size(); ++i) {
    const std::string& leaf = leaves[i];
    const auto [put, get] = pipelines[i].get();
    ASSERT_EQ(put.status, 0) << leaf << ": " << put.err;
    ASSERT_EQ(get.status, 0) << leaf << ": " << get.err;
    const std::string source = ReadFile(File(leaf + ".npy"));
    EXPECT_EQ(ReadFile(File(leaf + ".out.npy")), source) << leaf;

    // The stored bytes are NumPy's data, which ends the file.
    const at::Tensor value = td.get({"npy", leaf});
    ASSERT_LE(value.nbytes(), source.size()) << leaf;
    EXPECT_EQ(std::memcmp(value.data_ptr(), source.data() + source.size() - value.nbytes(),
                          value.nbytes()),
              0)
        << leaf;
  }
  EXPECT_EQ(td.get({"npy", "float64"}).scalar_type(), at::kDouble);
  EXPECT_EQ(td.get({"npy", "scalar"}).dim(), 0);
  EXPECT_EQ(td.get({"npy", "empty"}).sizes(), at::IntArrayRef({0, 3}));
}

TEST_F(E2eCli, FortranOrderAndBigEndianAreRejected) {
  ASSERT_TRUE(HasNumpy()) << "needs /usr/bin/python3 with NumPy (deploy/install-deps.sh installs it)";
  Python(R"(
np.save('fortran.npy', np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4)))
np.save('big_endian.npy', np.arange(6, dtype='>i4'))
)");
  const std::string name = UniqueDictName();
  ASSERT_EQ(Run({"create", name, "--batch-size="}).status, 0);
  CliResult r = Run({"put", name, "f", "fortran.npy"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_NE(Lower(r.err).find("fortran"), std::string::npos) << r.err;
  r = Run({"put", name, "b", "big_endian.npy"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_NE(Lower(r.err).find("endian"), std::string::npos) << r.err;
  EXPECT_TRUE(Client(DaemonAddress()).open(name).keys(true, false).empty());

  std::ofstream(File("garbage.npy")) << "not a numpy file";
  r = Run({"put", name, "g", "garbage.npy"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  r = Run({"put", name, "m", "missing.npy"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
}

TEST_F(E2eCli, Bfloat16CannotBeExported) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {2});
  td.set("half", at::ones({2, 3}, at::kBFloat16));
  CliResult r = Run({"get", td.name(), "half", "-o", "half.npy"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_NE(r.err.find("bfloat16"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(File("half.npy")));
  // ls still shows it.
  EXPECT_EQ(Run({"ls", td.name()}).out, "half  bfloat16  [2, 3]  12\n");
}

TEST_F(E2eCli, ServerErrorsAreOneLine) {
  ASSERT_TRUE(HasNumpy()) << "needs /usr/bin/python3 with NumPy (deploy/install-deps.sh installs it)";
  const std::string name = UniqueDictName();
  ASSERT_EQ(Run({"create", name, "--batch-size", "4"}).status, 0);

  CliResult r = Run({"create", name, "--batch-size", "4"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_EQ(r.err.rfind("tdstore: ALREADY_EXISTS: ", 0), 0u) << r.err;

  Python("np.save('wrong.npy', np.zeros((5, 2), np.float32))\n");
  r = Run({"put", name, "x", "wrong.npy"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_EQ(r.err.rfind("tdstore: INVALID_ARGUMENT: ", 0), 0u) << r.err;

  r = Run({"get", name, "nope", "-o", "nope.npy"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_EQ(r.err.rfind("tdstore: NOT_FOUND: ", 0), 0u) << r.err;
  EXPECT_FALSE(std::filesystem::exists(File("nope.npy")));

  r = RunRaw({"--addr", "127.0.0.1:" + std::to_string(PickFreePort()), "--retry-for", "0.5",
              "ls"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_EQ(r.err.rfind("tdstore: UNAVAILABLE: ", 0), 0u) << r.err;
  r = RunRaw({"--retry-for", "soon", "ls"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--retry-for takes seconds"), std::string::npos) << r.err;
}

TEST_F(E2eCli, AddressFromEnvironmentOrUnixSocket) {
  const std::string name = UniqueDictName();
  CliResult r = RunRaw({"create", name, "--batch-size", "1"},
                       "TDSTORE_ADDR=" + Quote(DaemonAddress()));
  ASSERT_EQ(r.status, 0) << r.err;
  r = RunRaw({"--addr", DaemonUnixAddress(), "ls"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(name + "\n"), std::string::npos) << r.out;
  // --addr wins over the environment.
  r = RunRaw({"ls", "--addr", DaemonAddress()}, "TDSTORE_ADDR=127.0.0.1:1");
  ASSERT_EQ(r.status, 0) << r.err;
}

}  // namespace
}  // namespace tdstore::testing
