// `tdstore lock / unlock / attr / counter / resize` against the shared daemon: what
// each prints, that the state is the store's (a C++ client sees it), and
// bad input exits 2 (usage) or 1 (refused) with one line and no change.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tdstore/client.h"
#include "tests/e2e/cli_testing.h"
#include "tests/e2e/e2e_env.h"

namespace tdstore::testing {
namespace {

class E2eCliState : public CliTest {};

TEST_F(E2eCliState, LockUnlockIsTheStoresLock) {
  const std::string name = UniqueDictName();
  Client client(DaemonAddress());
  Dict d = client.create(name, {2});
  d.set("x", at::zeros({2}));
  CliResult r = Run({"lock", name});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "locked\n");
  EXPECT_TRUE(client.open(name).is_locked());
  r = Run({"info", name});
  EXPECT_NE(r.out.find("locked:          yes"), std::string::npos) << r.out;
  // A locked dict refuses the CLI's structural changes too, in one line.
  r = Run({"rm", name, "x"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_NE(r.err.find("is locked"), std::string::npos) << r.err;
  EXPECT_TRUE(d.contains("x"));
  r = Run({"unlock", name});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "unlocked\n");
  EXPECT_FALSE(client.open(name).is_locked());
  EXPECT_EQ(Run({"rm", name, "x"}).status, 0);
  EXPECT_EQ(Run({"lock", "no-such-dict"}).status, 1);
}

TEST_F(E2eCliState, ResizeChangesDimZeroInPlace) {
  const std::string name = UniqueDictName();
  Client client(DaemonAddress());
  Dict d = client.create(name, {3, 2});
  const at::Tensor x = at::arange(12, at::kFloat).reshape({3, 2, 2});
  d.set("x", x);
  CliResult r = Run({"resize", name, "5"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "batch size [5, 2]\n");
  const at::Tensor grown = d.get("x");
  ASSERT_EQ(grown.sizes(), (at::IntArrayRef{5, 2, 2}));
  EXPECT_TRUE(grown.slice(0, 0, 3).equal(x));
  EXPECT_TRUE(grown.slice(0, 3).equal(at::zeros({2, 2, 2})));
  r = Run({"resize", name, "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(d.get("x").equal(x.slice(0, 0, 1)));
  // Malformed: exit 2; refused by tdstored: exit 1. One line, no change.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"resize", name}, {"resize", name, "-3"}, {"resize", name, "two"},
           {"resize", name, "1", "2"}}) {
    r = Run(args);
    EXPECT_EQ(r.status, 2) << args.size() << r.err;
    EXPECT_TRUE(IsOneLineError(r)) << r.err;
  }
  d.lock();
  r = Run({"resize", name, "4"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_NE(r.err.find("is locked"), std::string::npos) << r.err;
  EXPECT_EQ(Run({"resize", "no-such-dict", "4"}).status, 1);
  EXPECT_EQ(d.batch_size(), (std::vector<int64_t>{1, 2}));
}

TEST_F(E2eCliState, AttrSetGetListRemove) {
  const std::string name = UniqueDictName();
  Client client(DaemonAddress());
  client.create(name, {2});
  EXPECT_EQ(Run({"attr", name, "set", "device", "cuda:0"}).status, 0);
  EXPECT_EQ(Run({"attr", name, "set", "class", "pkg.Cls"}).status, 0);
  CliResult r = Run({"attr", name});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "class\tpkg.Cls\ndevice\tcuda:0\n");
  r = Run({"attr", name, "get", "device"});
  EXPECT_EQ(r.out, "cuda:0\n");
  EXPECT_EQ(client.open(name).attrs().at("class"), "pkg.Cls");
  EXPECT_EQ(Run({"attr", name, "rm", "device"}).status, 0);
  EXPECT_EQ(Run({"attr", name, "rm", "never-set"}).status, 0);
  r = Run({"attr", name, "get", "device"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  // Refused by tdstored: exit 1, one line, nothing changed.
  r = Run({"attr", name, "set", "big", std::string(4097, 'v')});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_EQ(client.open(name).attrs().size(), 1u);
  // Malformed: exit 2.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"attr", name, "frob"}, {"attr", name, "set", "k"}, {"attr", name, "get"},
           {"attr", name, "rm", "a", "b"}, {"attr"}}) {
    r = Run(args);
    EXPECT_EQ(r.status, 2) << args.size() << r.err;
    EXPECT_TRUE(IsOneLineError(r));
  }
}

TEST_F(E2eCliState, CounterGetAddCas) {
  const std::string name = UniqueDictName();
  Client client(DaemonAddress());
  Dict d = client.create(name, {1});
  EXPECT_EQ(Run({"counter", name, "cursor"}).out, "0\n");
  EXPECT_EQ(Run({"counter", name, "cursor", "add"}).out, "1\n");
  EXPECT_EQ(Run({"counter", name, "cursor", "add", "41"}).out, "42\n");
  EXPECT_EQ(Run({"counter", name, "cursor", "add", "-50"}).out, "-8\n");  // a negative operand
  EXPECT_EQ(Run({"counter", name, "cursor", "cas", "-8", "100"}).out, "swapped 100\n");
  EXPECT_EQ(Run({"counter", name, "cursor", "cas", "0", "5"}).out, "unchanged 100\n");
  EXPECT_EQ(d.counter_get("cursor"), 100);
  d.counter_add("cursor", 1);
  EXPECT_EQ(Run({"counter", name, "cursor"}).out, "101\n");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"counter", name, "cursor", "add", "x"},
           {"counter", name, "cursor", "add", "99999999999999999999"},
           {"counter", name, "cursor", "cas", "1"},
           {"counter", name, "cursor", "mul", "2"},
           {"counter", name}}) {
    CliResult r = Run(args);
    EXPECT_EQ(r.status, 2) << args.back() << r.err;
    EXPECT_TRUE(IsOneLineError(r));
  }
  EXPECT_EQ(d.counter_get("cursor"), 101);
}

TEST_F(E2eCliState, MoveRenamesOnTheServer) {
  const std::string name = UniqueDictName();
  Client client(DaemonAddress());
  Dict d = client.create(name, {2});
  const at::Tensor x = at::rand({2, 3});
  d.set({"n", "x"}, x);
  d.set("y", at::zeros({2}));
  CliResult r = Run({"mv", name, "n", "m"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(d.get({"m", "x"}).equal(x));
  r = Run({"mv", name, "m/x", "y"});  // exists: refused without --replace
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  EXPECT_TRUE(d.contains({"m", "x"}));
  ASSERT_EQ(Run({"mv", name, "m/x", "y", "--replace"}).status, 0);
  EXPECT_TRUE(d.get("y").equal(x));
  EXPECT_FALSE(d.contains("m"));
  EXPECT_EQ(Run({"mv", name, "nope", "z"}).status, 1);
  EXPECT_EQ(Run({"mv", name, "y"}).status, 2);
}

// The CLI casts the value itself (it links no torch): compared with
// torch's fill_ for every dtype, float16/bfloat16 rounding included.
TEST_F(E2eCliState, FillCastsAsTorchDoesForEveryDType) {
  const std::string name = UniqueDictName();
  Client client(DaemonAddress());
  Dict d = client.create(name, {5});
  const std::vector<at::ScalarType> types{at::kBool,  at::kByte,     at::kChar,  at::kShort,
                                          at::kInt,   at::kLong,     at::kHalf,  at::kBFloat16,
                                          at::kFloat, at::kDouble,   at::kComplexFloat,
                                          at::kComplexDouble};
  for (at::ScalarType type : types) {
    d.set(Key(std::vector<std::string>{"t", std::string(c10::toString(type))}),
          at::zeros({5, 2}, at::TensorOptions().dtype(type)));
  }
  // Whether torch's fill_ takes `number` for `type` (it refuses a finite
  // value out of the type's range).
  auto takes = [](at::ScalarType type, double number) {
    switch (type) {
      case at::kBool: return true;
      case at::kByte: return number > -1 && number < 256;
      case at::kChar: return number > -129 && number < 128;
      case at::kShort: return number > -32769 && number < 32768;
      case at::kInt: return number > -2147483649.0 && number < 2147483648.0;
      case at::kHalf: return std::fabs(number) <= 65504;
      default: return true;
    }
  };
  for (const std::string value : {"3", "-7", "0.1", "2.71828", "65504", "65520", "1e-6", "true",
                                  "1e-8", "-0.5", "12345.678", "300", "-1e10"}) {
    const double number = value == "true" ? 1.0 : std::stod(value);
    for (at::ScalarType type : types) {
      const std::string leaf = std::string("t/") + c10::toString(type);
      const Key path(std::vector<std::string>{"t", std::string(c10::toString(type))});
      const at::Tensor before = d.get(path);
      CliResult r = Run({"fill", name, leaf, value});
      if (!takes(type, number)) {
        EXPECT_EQ(r.status, 1) << value << " as " << leaf;
        EXPECT_NE(r.err.find("out of range"), std::string::npos) << r.err;
        EXPECT_TRUE(d.get(path).equal(before));
        continue;
      }
      ASSERT_EQ(r.status, 0) << value << " as " << leaf << ": " << r.err;
      at::Tensor want = at::zeros({5, 2}, at::TensorOptions().dtype(type));
      if (type == at::kBool) {
        want.fill_(number != 0);
      } else if (at::isIntegralType(type, false)) {
        want.fill_(static_cast<int64_t>(number));  // truncated toward zero, as a cast
      } else {
        want.fill_(number);
      }
      EXPECT_TRUE(d.get(path).equal(want)) << value << " as " << leaf << ": " << d.get(path);
    }
  }
  // Rows only, by index.
  ASSERT_EQ(Run({"fill", name, "t/Float", "9", "--index", "1:3"}).status, 0);
  EXPECT_EQ(d.get({"t", "Float"}).index({at::indexing::Slice(1, 3)}).eq(9).all().item<bool>(),
            true);
  // Bad values exit 1 (no number) or are refused; nothing changes.
  const at::Tensor before = d.get({"t", "Float"});
  CliResult r = Run({"fill", name, "t/Float", "abc"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(IsOneLineError(r));
  r = Run({"fill", name, "nope", "1"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(d.get({"t", "Float"}).equal(before));
}

}  // namespace
}  // namespace tdstore::testing
