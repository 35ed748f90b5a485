// `tdstore import`, `export`, `cp` and `stats` against a real tdstored, with
// .safetensors and .npz files written and read by other tools: Python with
// a hand-rolled safetensors header (struct + json), NumPy's np.savez and
// np.savez_compressed, np.load and zipfile. Every comparison is bit-exact.
// Also: malformed files fail cleanly and create nothing, the progress bar's
// text, and that it shows on a terminal only.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "client/cli/args.h"
#include "client/cli/mapped_file.h"
#include "client/cli/output_file.h"
#include "client/cli/progress.h"
#include "client/cli/tensor_file.h"
#include "client/cli/zip_archive.h"
#include "client/torch/src/scalar_type.h"
#include "common/dtype.h"
#include "common/shape.h"
#include "tdstore/client.h"
#include "tdstore/core.h"
#include "tests/e2e/cli_testing.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/tensor_testing.h"

namespace tdstore::testing {
namespace {

constexpr char kNeedsNumpy[] =
    "needs /usr/bin/python3 with NumPy (deploy/install-deps.sh installs it)";

class E2eCliData : public CliTest {
 protected:
  // Runs the commands a few at a time (each CLI run spends most of its time
  // loading libtorch, mostly waiting on the disk) and returns the results in
  // order.
  std::vector<CliResult> RunAll(const std::vector<std::vector<std::string>>& commands) const {
    constexpr size_t kAtOnce = 4;
    std::vector<CliResult> results(commands.size());
    std::atomic<size_t> next{0};
    std::vector<std::future<void>> workers;
    for (size_t w = 0; w < std::min(kAtOnce, commands.size()); ++w) {
      workers.push_back(std::async(std::launch::async, [&] {
        for (size_t i = next++; i < commands.size(); i = next++) results[i] = Run(commands[i]);
      }));
    }
    for (auto& worker : workers) worker.get();
    return results;
  }

  void WriteBytes(const std::string& name, const std::string& bytes) const {
    std::ofstream(File(name), std::ios::binary) << bytes;
  }
};

std::string Hex(const at::Tensor& tensor) {
  const at::Tensor t = tensor.contiguous();
  const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (size_t i = 0; i < t.nbytes(); ++i) {
    hex += kDigits[bytes[i] >> 4];
    hex += kDigits[bytes[i] & 15];
  }
  return hex;
}

std::string DTypeText(at::ScalarType type) {
  return std::string(DTypeName(*DTypeFromScalarType(type)));
}

// Python's manifest lines: "a/b/c <TAB> dtype <TAB> 2,3 <TAB> hex of the
// C-order bytes". Checks that `local` holds exactly those leaves (minus
// `skip`), bit for bit.
void ExpectMatchesManifest(const std::string& manifest, const LocalDict& local,
                           const std::set<std::string>& skip = {}) {
  std::istringstream lines(manifest);
  std::string line;
  size_t expected_leaves = 0;
  while (std::getline(lines, line)) {
    std::vector<std::string> fields;
    std::istringstream split(line);
    for (std::string field; std::getline(split, field, '\t');) fields.push_back(field);
    fields.resize(4);  // a trailing empty hex field (empty tensor) is dropped
    if (skip.count(fields[0]) != 0) continue;
    ++expected_leaves;
    std::vector<std::string> parts;
    std::istringstream path(fields[0]);
    for (std::string part; std::getline(path, part, '/');) parts.push_back(part);
    const Key key{parts};
    ASSERT_TRUE(local.contains(key)) << fields[0];
    const at::Tensor& value = local.at(key);
    EXPECT_EQ(DTypeText(value.scalar_type()), fields[1]) << fields[0];
    EXPECT_EQ(ShapeToCsv(value.sizes().vec()), fields[2]) << fields[0];
    EXPECT_EQ(Hex(value), fields[3]) << fields[0];
  }
  EXPECT_EQ(local.leaves.size(), expected_leaves);
}

// Python: `arrays` (path parts, array) written as mixed.safetensors by hand
// (struct + json, plus a bfloat16 tensor as raw bits), as mixed.npz and
// mixed_compressed.npz by NumPy, and described in manifest.txt.
constexpr char kWriteMixedFiles[] = R"(
import json, struct
rng = np.random.default_rng(11)
def ints(dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
arrays = [
    (['obs'], rng.standard_normal((4, 3)).astype(np.float32)),
    (['next', 'obs'], rng.standard_normal((4, 3)).astype(np.float32)),
    (['flags'], rng.integers(0, 2, 5).astype(np.bool_)),
    (['half'], np.array([1.5, -0.0, np.inf, np.nan, 65504, 6e-8], np.float16)),
    (['i8'], ints(np.int8, (7,))),
    (['u8'], ints(np.uint8, (3, 2))),
    (['i16'], ints(np.int16, (2, 2))),
    (['i32'], ints(np.int32, (3,))),
    (['i64'], ints(np.int64, (2, 1))),
    (['f64'], np.array([np.pi, -np.inf, 5e-324, np.nan])),
    (['scalar'], np.array(-2.25)),
    (['empty'], np.zeros((0, 3), np.float32)),
    (['empty_inner'], np.zeros((2, 0), np.int32)),
    (['deep', 'a', 'b', 'c'], ints(np.int64, (3,))),
    (['layer.0', 'w'], rng.standard_normal((2, 3)).astype(np.float32)),
]
ST = {'bool': 'BOOL', 'uint8': 'U8', 'int8': 'I8', 'int16': 'I16', 'int32': 'I32',
      'int64': 'I64', 'float16': 'F16', 'float32': 'F32', 'float64': 'F64'}
def st_name(parts):
    return '.'.join(p.replace('\\', '\\\\').replace('.', '\\.') for p in parts)
bf16 = np.array([0x3f80, 0xc000, 0x7fc1], np.uint16)  # 1, -2, a NaN, as bfloat16 bits
tensors = [(st_name(p), ST[a.dtype.name], a.shape, a.tobytes()) for p, a in arrays]
tensors.append(('bf16', 'BF16', (3,), bf16.tobytes()))

def write_safetensors(fn, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header['__metadata__'] = metadata
    for name, dtype, shape, data in tensors:
        header[name] = {'dtype': dtype, 'shape': list(shape),
                        'data_offsets': [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    with open(fn, 'wb') as f:
        f.write(struct.pack('<Q', len(text)))
        f.write(text)
        f.write(b''.join(blobs))

write_safetensors('mixed.safetensors', tensors)
npz = {'/'.join(p): a for p, a in arrays}
np.savez('mixed.npz', **npz)
np.savez_compressed('mixed_compressed.npz', **npz)
with open('manifest.txt', 'w') as f:
    for p, a in arrays:
        f.write('\t'.join(['/'.join(p), a.dtype.name, ','.join(map(str, a.shape)),
                           a.tobytes().hex()]) + '\n')
    f.write('bf16\tbfloat16\t3\t' + bf16.tobytes().hex() + '\n')
np.save('half_expected.npy', arrays[3][1])
# All tensors share leading dims [4]: the batch size when nothing says otherwise.
np.savez('batched.npz', a=np.zeros((4, 3), np.float32), b=np.arange(4))
)";

TEST_F(E2eCliData, ImportsFilesWrittenByPythonAndNumpy) {
  ASSERT_TRUE(HasNumpy()) << kNeedsNumpy;
  Python(kWriteMixedFiles);
  const std::string st = UniqueDictName(), plain = UniqueDictName(),
                    compressed = UniqueDictName(), batched = UniqueDictName(),
                    forced = UniqueDictName();
  const std::vector<CliResult> runs = RunAll({
      {"import", st, "mixed.safetensors"},
      {"import", plain, "mixed.npz"},
      {"import", compressed, "mixed_compressed.npz"},
      {"import", batched, "batched.npz"},
      {"import", forced, "batched.npz", "--batch-size=", "--rows-per-block", "3"},
  });
  for (const CliResult& r : runs) {
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "");  // stderr is no terminal: no progress bar
  }

  Client client(DaemonAddress());
  const std::string manifest = ReadFile(File("manifest.txt"));
  ExpectMatchesManifest(manifest, client.open(st).to_local());
  ExpectMatchesManifest(manifest, client.open(plain).to_local(), {"bf16"});
  ExpectMatchesManifest(manifest, client.open(compressed).to_local(), {"bf16"});
  // A 0-d tensor among them: no batch dims.
  EXPECT_TRUE(client.open(st).batch_size().empty());
  EXPECT_EQ(client.open(batched).batch_size(), std::vector<int64_t>{4});
  const DictInfo forced_info = client.open(forced).describe();
  EXPECT_TRUE(forced_info.batch_size.empty());
  EXPECT_EQ(forced_info.rows_per_block, 3);

  // And back out through `get`: NumPy's own .npy, byte for byte.
  CliResult r = Run({"get", compressed, "half", "-o", "half.npy"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(ReadFile(File("half.npy")), ReadFile(File("half_expected.npy")));

  // An existing name is refused and left alone.
  r = Run({"import", st, "batched.npz"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_EQ(r.err.rfind("tdstore: ALREADY_EXISTS: ", 0), 0u) << r.err;
  ExpectMatchesManifest(manifest, client.open(st).to_local());
}

// Leaves of every dtype; the .safetensors dict leaves out complex (the format
// has none), the .npz dict bfloat16 (NumPy has none).
struct TestLeaf {
  Key path;
  std::string safetensors_name;
  std::string npz_key;
  at::ScalarType type;
  std::vector<int64_t> element_shape;
};

std::vector<TestLeaf> EveryDTypeLeaves() {
  std::vector<TestLeaf> leaves;
  for (at::ScalarType type : AllDTypes()) {
    const std::string name = DTypeText(type);
    leaves.push_back({Key({"by_dtype", name}), "by_dtype." + name, "by_dtype/" + name, type, {5}});
  }
  leaves.push_back({Key({"layer.0", "w"}), "layer\\.0.w", "layer.0/w", at::kFloat, {2, 2}});
  leaves.push_back({Key(std::vector<std::string>{"a/b"}), "a/b", "a\\/b", at::kInt, {}});
  leaves.push_back({Key({"back\\slash"}), "back\\\\slash", "back\\\\slash", at::kShort, {1}});
  leaves.push_back({Key("empty"), "empty", "empty", at::kDouble, {0}});
  return leaves;
}

bool IsComplex(at::ScalarType type) {
  return type == at::kComplexFloat || type == at::kComplexDouble;
}

TEST_F(E2eCliData, ExportImportRoundTripIsBitExact) {
  ASSERT_TRUE(HasNumpy()) << kNeedsNumpy;
  Client client(DaemonAddress());
  const std::vector<int64_t> batch = {3, 2};
  Dict for_st = client.create(UniqueDictName(), batch);
  Dict for_npz = client.create(UniqueDictName(), batch);
  std::map<Key, at::Tensor> st_values, npz_values;
  std::ofstream manifest(File("manifest.txt"));
  uint32_t seed = 1;
  for (const TestLeaf& leaf : EveryDTypeLeaves()) {
    std::vector<int64_t> shape = batch;
    shape.insert(shape.end(), leaf.element_shape.begin(), leaf.element_shape.end());
    const at::Tensor value = RandomTensor(leaf.type, shape, seed++);
    if (!IsComplex(leaf.type)) st_values[leaf.path] = value;
    if (leaf.type != at::kBFloat16) npz_values[leaf.path] = value;
    manifest << leaf.safetensors_name << '\t' << leaf.npz_key << '\t' << DTypeText(leaf.type)
             << '\t' << ShapeToCsv(shape) << '\t' << Hex(value) << '\n';
  }
  manifest.close();
  for_st.update(st_values);
  for_npz.update(npz_values);

  std::vector<CliResult> runs = RunAll({
      {"export", for_st.name(), "out.safetensors"},
      {"export", for_npz.name(), "out.npz"},
      // What a format cannot hold fails before any file is made.
      {"export", for_npz.name(), "complex.safetensors"},
      {"export", for_st.name(), "bf16.npz"},
  });
  ASSERT_EQ(runs[0].status, 0) << runs[0].err;
  ASSERT_EQ(runs[1].status, 0) << runs[1].err;
  EXPECT_EQ(runs[0].err + runs[1].err, "");
  EXPECT_EQ(runs[2].status, 1);
  EXPECT_TRUE(IsOneLineError(runs[2]));
  EXPECT_NE(runs[2].err.find("complex"), std::string::npos) << runs[2].err;
  EXPECT_EQ(runs[3].status, 1);
  EXPECT_TRUE(IsOneLineError(runs[3]));
  EXPECT_NE(runs[3].err.find("bfloat16"), std::string::npos) << runs[3].err;
  for (const char* name : {"complex.safetensors", "bf16.npz", "complex.safetensors.tdstore-partial",
                           "bf16.npz.tdstore-partial"}) {
    EXPECT_FALSE(std::filesystem::exists(File(name))) << name;
  }

  // Other tools read the files: a hand-rolled safetensors parser with
  // np.frombuffer, and np.load / zipfile (which checks every CRC).
  Python(R"(
import json, struct, zipfile
rows = [l.rstrip('\n').split('\t') for l in open('manifest.txt')]
ST = {'bool': 'BOOL', 'uint8': 'U8', 'int8': 'I8', 'int16': 'I16', 'int32': 'I32',
      'int64': 'I64', 'float16': 'F16', 'bfloat16': 'BF16', 'float32': 'F32', 'float64': 'F64'}
def dims(csv):
    return [int(x) for x in csv.split(',') if x]

raw = open('out.safetensors', 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
assert n % 8 == 0, n
header = json.loads(raw[8:8 + n])
buf = raw[8 + n:]
assert header.pop('__metadata__')['tdstore.batch_size'] == '3,2'
st_rows = [r for r in rows if r[2] in ST]
assert sorted(header) == sorted(r[0] for r in st_rows), (sorted(header), [r[0] for r in st_rows])
assert sum(header[r[0]]['data_offsets'][1] - header[r[0]]['data_offsets'][0] for r in st_rows) == len(buf)
for name, key, dtype, shape, data in st_rows:
    t = header[name]
    assert t['dtype'] == ST[dtype] and t['shape'] == dims(shape), (name, t)
    begin, end = t['data_offsets']
    as_np = np.dtype('<u2') if dtype == 'bfloat16' else np.dtype(dtype)
    a = np.frombuffer(buf[begin:end], dtype=as_np).reshape(t['shape'])
    assert a.tobytes() == bytes.fromhex(data), name

with zipfile.ZipFile('out.npz') as z:
    assert z.testzip() is None
    assert z.comment == b'tdstore.batch_size=3,2', z.comment
npz_rows = [r for r in rows if r[2] != 'bfloat16']
with np.load('out.npz') as f:
    assert sorted(f.files) == sorted(r[1] for r in npz_rows), (sorted(f.files), [r[1] for r in npz_rows])
    for name, key, dtype, shape, data in npz_rows:
        a = f[key]
        assert a.dtype == np.dtype(dtype) and list(a.shape) == dims(shape), (key, a.dtype, a.shape)
        assert a.tobytes() == bytes.fromhex(data), key
)");

  // And back in: the same leaves, bit for bit, and the batch size the files
  // recorded.
  const std::string st_back = UniqueDictName(), npz_back = UniqueDictName();
  runs = RunAll({{"import", st_back, "out.safetensors"}, {"import", npz_back, "out.npz"}});
  ASSERT_EQ(runs[0].status, 0) << runs[0].err;
  ASSERT_EQ(runs[1].status, 0) << runs[1].err;
  for (const auto& [name, values] :
       {std::make_pair(st_back, st_values), std::make_pair(npz_back, npz_values)}) {
    Dict back = client.open(name);
    EXPECT_EQ(back.batch_size(), batch) << name;
    const LocalDict local = back.to_local();
    EXPECT_EQ(local.leaves.size(), values.size()) << name;
    for (const auto& [path, value] : values) {
      ASSERT_TRUE(local.contains(path)) << name << " " << path.str();
      EXPECT_TRUE(SameBytes(value, local.at(path))) << name << " " << path.str();
    }
  }
}

// A leaf's dtype, shape and bytes as the torch-free core reads them: the
// libtorch client (Debian's 1.13) has no uint16/32/64 and no float8.
struct RawLeaf {
  DType dtype = DType::kUnspecified;
  std::vector<int64_t> shape;
  std::string bytes;
};

std::map<std::string, RawLeaf> ReadRaw(const std::string& name) {
  class Sink : public core::ReadSink {
   public:
    std::map<std::string, RawLeaf> leaves;
    void Begin(const std::vector<int64_t>&, int64_t) override { leaves.clear(); }
    void* Leaf(const core::LeafMeta& leaf) override {
      RawLeaf& out = leaves[leaf.path.str()];
      out.dtype = leaf.dtype;
      out.shape = leaf.shape;
      out.bytes.assign(static_cast<size_t>(leaf.byte_size), '\0');
      return out.bytes.data();
    }
  } sink;
  core::Client(DaemonAddress()).open(name).read({}, sink);
  return std::move(sink.leaves);
}

std::string HexOf(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex += kDigits[c >> 4];
    hex += kDigits[c & 15];
  }
  return hex;
}

// The dtypes past the first twelve: .safetensors carries the unsigned ones
// and three float8 formats, .npz the unsigned ones; both bit-exact both ways,
// and a refusal (no file left) where a format has no such dtype.
TEST_F(E2eCliData, NewDTypesCrossSafetensorsAndNpzBitExact) {
  ASSERT_TRUE(HasNumpy()) << kNeedsNumpy;
  Python(R"(
import json, struct
rng = np.random.default_rng(23)
def raw(count, size):
    return rng.integers(0, 256, count * size, dtype=np.uint8).tobytes()
# (name, safetensors dtype, tdstore dtype, shape, bytes); batch dim 4 shared.
u64 = np.array([[2**64 - 1, 2**63 + 1], [0, 7], [1, 2], [3, 4]], np.uint64)
leaves = [
    ('u16', 'U16', 'uint16', (4, 3), raw(12, 2)),
    ('u32', 'U32', 'uint32', (4,), raw(4, 4)),
    ('u64', 'U64', 'uint64', (4, 2), u64.tobytes()),
    ('f8.e4m3', 'F8_E4M3', 'float8_e4m3fn', (4, 5), raw(20, 1)),
    ('f8.e5m2', 'F8_E5M2', 'float8_e5m2', (4, 1, 2), raw(8, 1)),
    ('f8.e8m0', 'F8_E8M0', 'float8_e8m0fnu', (4,), raw(4, 1)),
]
header, blobs, offset = {}, [], 0
for name, st, _, shape, data in leaves:
    header[name] = {'dtype': st, 'shape': list(shape), 'data_offsets': [offset, offset + len(data)]}
    blobs.append(data)
    offset += len(data)
text = json.dumps(header).encode()
with open('new.safetensors', 'wb') as f:
    f.write(struct.pack('<Q', len(text)) + text + b''.join(blobs))
ints = {'u16': np.uint16, 'u32': np.uint32, 'u64': np.uint64}
np.savez('new.npz', **{n: np.frombuffer(d, ints[n]).reshape(s) for n, _, _, s, d in leaves if n in ints})
with open('manifest.txt', 'w') as f:
    for name, st, dtype, shape, data in leaves:
        f.write('\t'.join([name.replace('.', '/'), dtype, ','.join(map(str, shape)), data.hex(), st]) + '\n')
)");
  const std::string st = UniqueDictName(), npz = UniqueDictName();
  std::vector<CliResult> runs =
      RunAll({{"import", st, "new.safetensors"}, {"import", npz, "new.npz"}});
  ASSERT_EQ(runs[0].status, 0) << runs[0].err;
  ASSERT_EQ(runs[1].status, 0) << runs[1].err;

  const std::map<std::string, RawLeaf> from_st = ReadRaw(st), from_npz = ReadRaw(npz);
  std::istringstream lines(ReadFile(File("manifest.txt")));
  size_t count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    std::vector<std::string> f;
    std::istringstream split(line);
    for (std::string field; std::getline(split, field, '\t');) f.push_back(field);
    ASSERT_EQ(f.size(), 5u) << line;
    ASSERT_EQ(from_st.count(f[0]), 1u) << f[0];
    const RawLeaf& leaf = from_st.at(f[0]);
    EXPECT_EQ(DTypeName(leaf.dtype), f[1]) << f[0];
    EXPECT_EQ(ShapeToCsv(leaf.shape), f[2]) << f[0];
    EXPECT_EQ(HexOf(leaf.bytes), f[3]) << f[0];
    if (f[0][0] == 'u') {
      ASSERT_EQ(from_npz.count(f[0]), 1u) << f[0];
      EXPECT_EQ(DTypeName(from_npz.at(f[0]).dtype), f[1]) << f[0];
      EXPECT_EQ(HexOf(from_npz.at(f[0]).bytes), f[3]) << f[0];
    }
  }
  EXPECT_EQ(count, 6u);
  EXPECT_EQ(from_st.size(), 6u);
  EXPECT_EQ(from_npz.size(), 3u);

  // Out again: .safetensors names every dtype as the source did; .npz has
  // no float8 and refuses the dict before it makes a file.
  runs = RunAll({{"export", st, "out.safetensors"}, {"export", npz, "out.npz"},
                 {"export", st, "f8.npz"}});
  ASSERT_EQ(runs[0].status, 0) << runs[0].err;
  ASSERT_EQ(runs[1].status, 0) << runs[1].err;
  EXPECT_EQ(runs[2].status, 1);
  EXPECT_TRUE(IsOneLineError(runs[2])) << runs[2].err;
  EXPECT_NE(runs[2].err.find("float8_e"), std::string::npos) << runs[2].err;
  EXPECT_FALSE(std::filesystem::exists(File("f8.npz")));
  EXPECT_FALSE(std::filesystem::exists(File("f8.npz.tdstore-partial")));
  Python(R"(
import json, struct
rows = [l.rstrip('\n').split('\t') for l in open('manifest.txt')]
raw = open('out.safetensors', 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
header = json.loads(raw[8:8 + n])
header.pop('__metadata__')
buf = raw[8 + n:]
assert len(header) == len(rows), header
for path, dtype, shape, data, st in rows:
    t = header[path.replace('/', '.')]
    assert t['dtype'] == st, (path, t)
    assert t['shape'] == [int(x) for x in shape.split(',')], (path, t)
    begin, end = t['data_offsets']
    assert buf[begin:end] == bytes.fromhex(data), path
with np.load('out.npz') as f:
    assert sorted(f.files) == ['u16', 'u32', 'u64'], f.files
    assert f['u64'].dtype == np.uint64 and int(f['u64'][0, 0]) == 2**64 - 1
    for path, dtype, shape, data, st in rows:
        if path in f.files:
            assert f[path].dtype == np.dtype(dtype) and f[path].tobytes() == bytes.fromhex(data), path
)");

  // fill: exact past 2^53 for uint64; float8 is refused, not guessed.
  runs = RunAll({{"fill", st, "u64", "18446744073709551614"}, {"fill", st, "f8/e4m3", "1.5"},
                 {"fill", st, "u16", "65536"}});
  EXPECT_EQ(runs[0].status, 0) << runs[0].err;
  EXPECT_EQ(runs[1].status, 1);
  EXPECT_NE(runs[1].err.find("float8_e4m3fn"), std::string::npos) << runs[1].err;
  EXPECT_EQ(runs[2].status, 1);
  EXPECT_NE(runs[2].err.find("out of range for uint16"), std::string::npos) << runs[2].err;
  const std::map<std::string, RawLeaf> filled = ReadRaw(st);
  std::string want_u64;
  for (int i = 0; i < 8; ++i) want_u64 += std::string("\xfe\xff\xff\xff\xff\xff\xff\xff", 8);
  EXPECT_EQ(filled.at("u64").bytes, want_u64);
  EXPECT_EQ(filled.at("f8/e4m3").bytes, from_st.at("f8/e4m3").bytes);
  EXPECT_EQ(filled.at("u16").bytes, from_st.at("u16").bytes);

  // The libtorch client names the dtype its torch cannot hold.
  try {
    Client(DaemonAddress()).open(st).get(Key("u16"));
    ADD_FAILURE() << "read a uint16 leaf into libtorch 1.13";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("uint16"), std::string::npos) << e.what();
  }
}

TEST_F(E2eCliData, CopiesADictBitExactly) {
  Client client(DaemonAddress());
  CreateOptions options;
  options.rows_per_block = 2;
  options.part_bytes = 100;
  Dict source = client.create(UniqueDictName(), {5}, options);
  std::map<Key, at::Tensor> values;
  uint32_t seed = 40;
  for (at::ScalarType type : AllDTypes()) {
    values[Key({"all", DTypeText(type)})] = RandomTensor(type, {5, 7}, seed++);
  }
  values[Key("big")] = RandomTensor(at::kFloat, {5, 1000}, seed++);
  values[Key("empty")] = RandomTensor(at::kLong, {5, 0}, seed++);
  source.update(values);

  const std::string target_name = UniqueDictName();
  CliResult r = Run({"cp", source.name(), target_name});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out + r.err, "");
  Dict target = client.open(target_name);
  const DictInfo info = target.describe();
  EXPECT_EQ(info.batch_size, std::vector<int64_t>{5});
  EXPECT_EQ(info.rows_per_block, 2);
  EXPECT_EQ(info.part_bytes, 100);
  const LocalDict local = target.to_local();
  EXPECT_EQ(local.leaves.size(), values.size());
  for (const auto& [path, value] : values) {
    ASSERT_TRUE(local.contains(path)) << path.str();
    EXPECT_TRUE(SameBytes(value, local.at(path))) << path.str();
  }

  // An existing target is refused and left as it is; so is a missing source.
  Dict other = client.create(UniqueDictName(), {2});
  other.set("x", at::arange(2));
  const std::vector<CliResult> runs =
      RunAll({{"cp", source.name(), other.name()}, {"cp", UniqueDictName(), UniqueDictName()}});
  EXPECT_EQ(runs[0].status, 1);
  EXPECT_TRUE(IsOneLineError(runs[0]));
  EXPECT_EQ(runs[0].err.rfind("tdstore: ALREADY_EXISTS: ", 0), 0u) << runs[0].err;
  EXPECT_EQ(other.keys(), std::vector<Key>{Key("x")});
  EXPECT_TRUE(at::equal(other.get("x"), at::arange(2)));
  EXPECT_EQ(runs[1].status, 1);
  EXPECT_EQ(runs[1].err.rfind("tdstore: NOT_FOUND: ", 0), 0u) << runs[1].err;
}

// A .safetensors file: u64 header length, header, data.
std::string Safetensors(const std::string& header, const std::string& data,
                        std::optional<uint64_t> length = std::nullopt) {
  uint64_t n = length.value_or(header.size());
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return bytes + header + data;
}

class E2eCliDataMalformed : public E2eCliData {
 protected:
  void SetUp() override {
    E2eCliData::SetUp();
    ASSERT_TRUE(HasNumpy()) << kNeedsNumpy;
    const std::string two = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"I32","shape":[2],"data_offsets":[8,16]}})";
    const std::string data16(16, '\x01');
    WriteBytes("truncated.safetensors", Safetensors(two, data16.substr(0, 12)));
    WriteBytes("huge_header.safetensors", Safetensors(two, data16, uint64_t{1} << 40));
    WriteBytes("header_past_end.safetensors", Safetensors(two, data16, two.size() + 17));
    WriteBytes("short.safetensors", "\x05");
    WriteBytes("overlap.safetensors",
               Safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"I32","shape":[2],"data_offsets":[4,12]}})",
                           data16.substr(0, 12)));
    WriteBytes("gap.safetensors",
               Safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                           data16.substr(0, 12)));
    WriteBytes("trailing.safetensors", Safetensors(two, data16 + "junk"));
    WriteBytes("unknown_dtype.safetensors",
               Safetensors(R"({"a":{"dtype":"X7","shape":[2],"data_offsets":[0,8]}})",
                           data16.substr(0, 8)));
    WriteBytes("f6.safetensors",
               Safetensors(R"({"a":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,8]}})",
                           data16.substr(0, 8)));
    WriteBytes("size_mismatch.safetensors",
               Safetensors(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                           data16.substr(0, 8)));
    WriteBytes("bad_json.safetensors", Safetensors(R"({"a":{"dtype":"F32",}})", ""));
    WriteBytes("duplicate_key.safetensors",
               Safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                           data16));
    WriteBytes("bad_escape.safetensors",
               Safetensors(R"({"a\\x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                           data16.substr(0, 8)));
    WriteBytes("leaf_and_parent.safetensors",
               Safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("a.b":{"dtype":"I32","shape":[2],"data_offsets":[8,16]}})",
                           data16));
    WriteBytes("not_batch.safetensors",
               Safetensors(R"({"__metadata__":{"tdstore.batch_size":"3"},)"
                           R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                           data16.substr(0, 8)));
    WriteBytes("garbage.npz", "PK\x03\x04 this is no zip archive at all");
    WriteBytes("file.txt", "whatever");
    Python(R"(
import struct, zipfile
a = np.arange(6, dtype=np.float32)
b = np.arange(100, 110, dtype=np.int64)
np.savez('good.npz', a=a, b=b)
raw = open('good.npz', 'rb').read()
at = raw.find(b.tobytes())  # in the second member
assert at > 0
open('bad_crc.npz', 'wb').write(raw[:at] + bytes([raw[at] ^ 1]) + raw[at + 1:])
open('truncated.npz', 'wb').write(raw[:-10])

np.savez_compressed('good_compressed.npz', a=a, b=np.arange(1000, dtype=np.int64))
raw = bytearray(open('good_compressed.npz', 'rb').read())
with zipfile.ZipFile('good_compressed.npz') as z:
    info = z.getinfo('b.npy')
name_len, extra_len = struct.unpack('<HH', raw[info.header_offset + 26:info.header_offset + 30])
start = info.header_offset + 30 + name_len + extra_len
for i in range(start + 4, start + info.compress_size - 4):
    raw[i] ^= 0x55
open('corrupt_deflate.npz', 'wb').write(raw)

with zipfile.ZipFile('not_npy.npz', 'w') as z:
    z.writestr('notes.txt', 'hello')
)");
  }
};

// Each broken file as the CLI's readers see it: opened (which checks the
// layout) and every tensor loaded (which checks the data), in process.
TEST_F(E2eCliDataMalformed, BrokenFilesAreRefusedWithAClearMessage) {
  // file -> what the error must say
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated.safetensors", "truncated"},
      {"huge_header.safetensors", "100 MB"},
      {"header_past_end.safetensors", "runs past the end"},
      {"short.safetensors", "too short"},
      {"overlap.safetensors", "overlaps"},
      {"gap.safetensors", "gap"},
      {"trailing.safetensors", "trailing garbage"},
      {"unknown_dtype.safetensors", "unknown dtype 'X7'"},
      {"f6.safetensors", "F6_E2M3 has no tdstore equivalent"},
      {"size_mismatch.safetensors", "need 12"},
      {"bad_json.safetensors", "invalid JSON"},
      {"duplicate_key.safetensors", "duplicate key"},
      {"bad_escape.safetensors", "backslash"},
      {"bad_crc.npz", "member 'b.npy': CRC-32 mismatch"},
      {"truncated.npz", "truncated"},
      {"corrupt_deflate.npz", "member 'b.npy'"},
      {"not_npy.npz", "not a .npy file"},
      {"garbage.npz", "not a zip archive"},
      {"file.txt", "must end in .safetensors or .npz"},
      {"missing.npz", "cannot open"},
  };
  for (const auto& [file, message] : cases) {
    try {
      std::unique_ptr<cli::TensorFileReader> reader = cli::OpenTensorFile(File(file));
      for (size_t i = 0; i < reader->entries().size(); ++i) reader->Load(i);
      ADD_FAILURE() << file << " was accepted";
    } catch (const cli::CliError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << file << ": " << e.what();
    }
  }
  // The good ones they were made from are fine.
  for (const char* file : {"good.npz", "good_compressed.npz"}) {
    std::unique_ptr<cli::TensorFileReader> reader = cli::OpenTensorFile(File(file));
    ASSERT_EQ(reader->entries().size(), 2u);
    for (size_t i = 0; i < 2; ++i) EXPECT_NO_THROW(reader->Load(i)) << file;
  }
}

// Through the CLI: exit status 1, one line saying what is wrong, and no dict
// left behind -- also when the data turns out corrupt only after the dict
// was created.
TEST_F(E2eCliDataMalformed, FailedImportsLeaveNoDict) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated.safetensors", "truncated"},
      {"leaf_and_parent.safetensors", "cannot both be leaves"},
      {"not_batch.safetensors", "does not start with the batch size [3]"},
      {"bad_crc.npz", "CRC-32 mismatch"},
  };
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> commands;
  for (const auto& [file, message] : cases) {
    names.push_back(UniqueDictName());
    commands.push_back({"import", names.back(), file});
  }
  const std::vector<CliResult> runs = RunAll(commands);
  for (size_t i = 0; i < cases.size(); ++i) {
    const CliResult& r = runs[i];
    EXPECT_EQ(r.status, 1) << cases[i].first << ": " << r.err;
    EXPECT_TRUE(IsOneLineError(r)) << cases[i].first;
    EXPECT_NE(r.err.find(cases[i].second), std::string::npos) << cases[i].first << ": " << r.err;
  }
  const std::vector<std::string> listed = Client(DaemonAddress()).list();
  for (const std::string& name : names) {
    EXPECT_EQ(std::count(listed.begin(), listed.end(), name), 0) << name;
  }
}

TEST_F(E2eCliData, StatsShowsDictsLeavesBytesAndBlocks) {
  Client client(DaemonAddress());
  CreateOptions options;
  options.rows_per_block = 4;
  options.part_bytes = 20;
  Dict td = client.create(UniqueDictName(), {10}, options);
  td.update({{Key({"x", "y"}), at::zeros({10, 3}, at::kFloat)},  // 12-byte rows
             {Key("z"), at::zeros({10}, at::kChar)}});
  const std::vector<CliResult> runs = RunAll({{"stats", td.name()}, {"stats"}});
  ASSERT_EQ(runs[0].status, 0) << runs[0].err;
  const std::string& one = runs[0].out;
  EXPECT_NE(one.find("batch size      [10]\n"), std::string::npos) << one;
  EXPECT_NE(one.find("leaves          2\n"), std::string::npos) << one;
  EXPECT_NE(one.find("bytes           130\n"), std::string::npos) << one;
  // Blocks of 4, 4 and 2 rows; x/y's 48, 48 and 24 bytes in parts of <= 20
  // bytes (3 + 3 + 2 values), z's 4, 4 and 2 bytes in one each.
  EXPECT_NE(one.find("blocks          3\n"), std::string::npos) << one;
  EXPECT_NE(one.find("redis values    11\n"), std::string::npos) << one;
  EXPECT_NE(one.find("x/y   float32  [10, 3]  120    3       8\n"), std::string::npos) << one;
  EXPECT_NE(one.find("z     int8     [10]     10     3       3\n"), std::string::npos) << one;
  EXPECT_NE(one.find("version         "), std::string::npos) << one;

  ASSERT_EQ(runs[1].status, 0) << runs[1].err;
  const std::string& all = runs[1].out;
  EXPECT_NE(all.find("backend        "), std::string::npos) << all;
  EXPECT_NE(all.find("dicts          "), std::string::npos) << all;
  std::istringstream lines(all);
  bool found = false;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string name, leaves, bytes;
    words >> name >> leaves >> bytes;
    if (name == td.name()) found = leaves == "2" && bytes == "130";
  }
  EXPECT_TRUE(found) << all;
}

TEST(E2eCliDataProgress, FormatsBytesRateAndEta) {
  using cli::FormatBytes;
  using cli::FormatProgress;
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(int64_t{4} << 30), "4.0 GiB");
  EXPECT_EQ(FormatProgress(0, 1 << 20, 0.0),
            "[....................]    0%  0 B / 1.0 MiB  -- B/s  ETA --:--");
  // A quarter in 2 s: 128 KiB/s, 6 s to go.
  EXPECT_EQ(FormatProgress(256 << 10, 1 << 20, 2.0),
            "[#####...............]   25%  256.0 KiB / 1.0 MiB  128.0 KiB/s  ETA 0:06");
  EXPECT_EQ(FormatProgress(1 << 20, 1 << 20, 4.0),
            "[####################]  100%  1.0 MiB / 1.0 MiB  256.0 KiB/s  ETA 0:00");
  // Hours; nothing to move counts as done.
  EXPECT_EQ(FormatProgress(1, 10001, 1.0),
            "[....................]    0%  1 B / 9.8 KiB  1 B/s  ETA 2:46:40");
  EXPECT_EQ(FormatProgress(0, 0, 0.5), "[####################]  100%  0 B / 0 B  -- B/s  ETA --:--");
}

// The bar follows the core's per-chunk callbacks: a call's bytes on top of
// the finished steps, a retry starting its share again from 0, and cp's two
// passes (read, then write) each half the bar.
TEST(E2eCliDataProgress, TrackerFollowsChunks) {
  cli::Progress progress(1000, /*enabled=*/false);
  core::Progress first = progress.Tracker();
  first(100, -1);
  EXPECT_EQ(progress.done(), 100);
  first(300, 400);
  EXPECT_EQ(progress.done(), 300);
  first(50, 400);  // retried from the start
  EXPECT_EQ(progress.done(), 50);
  progress.Add(400);
  EXPECT_EQ(progress.done(), 400);

  core::Progress read = progress.Tracker(0, 2);
  core::Progress write = progress.Tracker(600, 2);
  read(600, -1);
  EXPECT_EQ(progress.done(), 700);
  write(300, 600);
  EXPECT_EQ(progress.done(), 850);
  progress.Add(600);
  EXPECT_EQ(progress.done(), 1000);
}

// The bar is drawn only on a terminal: `script` runs the CLI on a
// pseudo-terminal, where --quiet turns it off. (Every other test checks
// that runs with stderr in a file print nothing to it.)
TEST_F(E2eCliData, ProgressBarOnlyOnATerminal) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {4});
  td.set("x", at::ones({4, 256}, at::kFloat));
  const std::string command = Quote(TDSTORE_CLI_BIN) + " --addr " + Quote(DaemonAddress()) +
                              " export " + Quote(td.name()) + " tty.npz";
  const std::string script = "cd " + Quote(dir_) + " && script -qec " + Quote(command) +
                             " /dev/null > tty.out 2>&1 </dev/null";
  ASSERT_EQ(ExitStatus(std::system(script.c_str())), 0) << ReadFile(File("tty.out"));
  const std::string shown = ReadFile(File("tty.out"));
  EXPECT_NE(shown.find("\r[####################]  100%  4.0 KiB / 4.0 KiB"), std::string::npos)
      << shown;
  EXPECT_TRUE(std::filesystem::exists(File("tty.npz")));

  // --quiet on a terminal too.
  const std::string quiet = "cd " + Quote(dir_) + " && script -qec " +
                            Quote(command + " -q") + " /dev/null > quiet.out 2>&1 </dev/null";
  ASSERT_EQ(ExitStatus(std::system(quiet.c_str())), 0) << ReadFile(File("quiet.out"));
  EXPECT_EQ(ReadFile(File("quiet.out")), "");
}

// The zip writer's zip64 records (written for members and offsets past
// 4 GiB, here forced on a small archive) as Python's zipfile and our own
// reader see them.
TEST_F(E2eCliData, Zip64ArchivesReadBackEverywhere) {
  ASSERT_TRUE(HasNumpy()) << kNeedsNumpy;
  const std::string path = File("zip64.npz");
  {
    cli::OutputFile out(path);
    cli::ZipWriter zip(&out, /*zip64_from=*/0);
    Python("np.save('x.npy', np.arange(5, dtype=np.int16))\n");
    const std::string npy = ReadFile(File("x.npy"));
    zip.AddStored("x.npy", {npy.substr(0, 10), npy.substr(10)});
    zip.AddStored("dir/y.npy", {npy});
    zip.Finish("tdstore.batch_size=5");
    out.Commit();
  }
  Python(R"(
import zipfile
with zipfile.ZipFile('zip64.npz') as z:
    assert z.testzip() is None
    assert z.comment == b'tdstore.batch_size=5'
with np.load('zip64.npz') as f:
    assert sorted(f.files) == ['dir/y', 'x'], f.files
    assert (f['x'] == np.arange(5)).all() and f['x'].dtype == np.int16
    assert f['dir/y'].tobytes() == f['x'].tobytes()
)");
  cli::MappedFile file(path);
  cli::ZipReader zip(file);
  ASSERT_EQ(zip.members().size(), 2u);
  EXPECT_EQ(zip.members()[1].name, "dir/y.npy");
  EXPECT_EQ(zip.comment(), "tdstore.batch_size=5");
  std::string extracted;
  zip.Extract(zip.members()[1], [&](const char* data, size_t size) { extracted.append(data, size); });
  EXPECT_EQ(extracted, ReadFile(File("x.npy")));
}

}  // namespace
}  // namespace tdstore::testing
