// Dict-level calls against a real tdstored: keys, contains/erase, describe,
// list/rename/drop, handles and second clients, concurrent use.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>

#include "tdstore/client.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/tensor_testing.h"

namespace tdstore::testing {
namespace {

std::vector<std::string> Sorted(const std::vector<Key>& keys) {
  std::vector<std::string> out;
  for (const Key& key : keys) out.push_back(key.str());
  std::sort(out.begin(), out.end());
  return out;
}

using Strings = std::vector<std::string>;

TEST(E2eDict, KeysInAllFourModes) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {2});
  td.set("a", at::zeros({2}));
  td.set({"b", "c"}, at::zeros({2}));
  td.set({"b", "d", "e"}, at::zeros({2}));

  EXPECT_EQ(Sorted(td.keys(false, false)), (Strings{"a", "b"}));
  EXPECT_EQ(Sorted(td.keys(false, true)), (Strings{"a"}));
  EXPECT_EQ(Sorted(td.keys(true, false)), (Strings{"a", "b", "b/c", "b/d", "b/d/e"}));
  EXPECT_EQ(Sorted(td.keys(true, true)), (Strings{"a", "b/c", "b/d/e"}));
  // The defaults are TensorDict's: top level, nested dicts included.
  EXPECT_EQ(Sorted(td.keys()), (Strings{"a", "b"}));
}

TEST(E2eDict, ContainsAndErase) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {2});
  td.set("a", at::zeros({2}));
  td.set({"b", "c"}, at::zeros({2}));
  td.set({"b", "d", "e"}, at::zeros({2}));

  EXPECT_TRUE(td.contains("a"));
  EXPECT_TRUE(td.contains("b"));  // a nested dict
  EXPECT_TRUE(td.contains({"b", "d", "e"}));
  EXPECT_FALSE(td.contains("z"));
  EXPECT_FALSE(td.contains({"a", "x"}));  // below a leaf

  td.erase("b");  // the whole subtree
  EXPECT_FALSE(td.contains("b"));
  EXPECT_FALSE(td.contains({"b", "c"}));
  EXPECT_FALSE(td.contains({"b", "d", "e"}));
  EXPECT_TRUE(td.contains("a"));
  EXPECT_EQ(Sorted(td.keys(true, false)), (Strings{"a"}));

  try {
    td.erase("b");
    FAIL() << "erasing an absent path succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kNotFound) << e.what();
  }
  td.erase("a");
  EXPECT_TRUE(td.keys(true, false).empty());
  EXPECT_TRUE(td.to_local().leaves.empty());
}

TEST(E2eDict, DescribeShapesDTypesAndBytes) {
  Client client(DaemonAddress());
  const std::string name = UniqueDictName();
  CreateOptions layout;
  layout.rows_per_block = 5;
  Dict td = client.create(name, {10, 2}, layout);
  td.set("f", at::zeros({10, 2, 3}, at::kFloat));
  td.set({"n", "i"}, at::zeros({10, 2}, at::kChar));
  td.set({"n", "c"}, at::zeros({10, 2, 1}, at::kComplexDouble));

  DictInfo info = td.describe();
  EXPECT_EQ(info.name, name);
  EXPECT_FALSE(info.id.empty());
  EXPECT_EQ(info.batch_size, (std::vector<int64_t>{10, 2}));
  EXPECT_EQ(info.rows_per_block, 5);
  EXPECT_GT(info.part_bytes, 0);
  EXPECT_GT(info.version, 0);
  EXPECT_EQ(td.batch_size(), (std::vector<int64_t>{10, 2}));

  std::map<std::string, LeafInfo> leaves;
  for (const LeafInfo& leaf : info.leaves) leaves.emplace(leaf.path.str(), leaf);
  ASSERT_EQ(leaves.size(), 3u);
  EXPECT_EQ(leaves.at("f").dtype, at::kFloat);
  EXPECT_EQ(leaves.at("f").shape, (std::vector<int64_t>{10, 2, 3}));
  EXPECT_EQ(leaves.at("f").byte_size, 240);
  EXPECT_EQ(leaves.at("n/i").dtype, at::kChar);
  EXPECT_EQ(leaves.at("n/i").byte_size, 20);
  EXPECT_EQ(leaves.at("n/c").dtype, at::kComplexDouble);
  EXPECT_EQ(leaves.at("n/c").shape, (std::vector<int64_t>{10, 2, 1}));
  EXPECT_EQ(leaves.at("n/c").byte_size, 320);
  EXPECT_EQ(leaves.at("n/c").path, Key({"n", "c"}));
}

TEST(E2eDict, ListRenameDrop) {
  Client client(DaemonAddress());
  const std::string name = UniqueDictName();
  const std::string renamed = name + ".renamed";
  client.create(name, {1}).set("x", at::ones({1}));

  std::vector<std::string> names = client.list();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_NE(std::find(names.begin(), names.end(), name), names.end());

  client.rename(name, renamed);
  EXPECT_TRUE(at::equal(client.open(renamed).get("x"), at::ones({1})));
  try {
    client.open(name);
    FAIL() << "the old name still opens";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kNotFound) << e.what();
  }

  client.drop(renamed);
  names = client.list();
  EXPECT_EQ(std::find(names.begin(), names.end(), renamed), names.end());
}

TEST(E2eDict, SecondClientOpensByNameHandleAndUnixSocket) {
  const at::Tensor value = RandomTensor(at::kDouble, {3, 4}, 7);
  std::string name;
  std::string handle;
  {
    Client writer(DaemonAddress());
    Dict td = writer.create(UniqueDictName(), {3});
    td.set({"p", "q"}, value);
    name = td.name();
    handle = td.handle();
  }
  EXPECT_EQ(handle.rfind("tdstore1|" + DaemonAddress() + "|" + name + "|", 0), 0u) << handle;

  // As another process would: a fresh channel, by name and by handle.
  Client reader(DaemonAddress());
  EXPECT_TRUE(SameBytes(value, reader.open(name).get({"p", "q"})));
  Dict by_handle = Client::open_handle(handle);
  EXPECT_EQ(by_handle.name(), name);
  EXPECT_TRUE(SameBytes(value, by_handle.get({"p", "q"})));
  EXPECT_EQ(by_handle.handle(), handle);

  Client over_unix(DaemonUnixAddress());
  Dict via_socket = over_unix.open(name);
  EXPECT_TRUE(SameBytes(value, via_socket.get({"p", "q"})));
  // A handle names the address it was made through.
  EXPECT_TRUE(SameBytes(value, Client::open_handle(via_socket.handle()).get({"p", "q"})));
}

TEST(E2eDict, HandleOfDeletedOrRecreatedDictIsNotFound) {
  Client client(DaemonAddress());
  const std::string name = UniqueDictName();
  const std::string handle = client.create(name, {1}).handle();

  client.drop(name);
  try {
    Client::open_handle(handle);
    FAIL() << "handle of a deleted dict opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kNotFound) << e.what();
  }

  client.create(name, {1});  // same name, another dict
  try {
    Client::open_handle(handle);
    FAIL() << "handle of a recreated dict opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kNotFound) << e.what();
  }

  for (const std::string& bad : {std::string("nonsense"), std::string("tdstore1|only|two"),
                                 std::string("tdstore2|a:1|n|i")}) {
    try {
      Client::open_handle(bad);
      FAIL() << "malformed handle accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << e.what();
    }
  }
}

// 8 threads, each writing and reading back its own leaf through one shared
// Client, while all of them also read a leaf nobody writes.
TEST(E2eDict, ConcurrentWritersAndReadersOnDifferentLeaves) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {16});
  const at::Tensor shared = RandomTensor(at::kFloat, {16, 64}, 99);
  td.set("shared", shared);

  constexpr int kThreads = 8;
  constexpr int kRounds = 10;
  std::atomic<int> failures{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        Dict mine = td;  // copies share the channel
        const Key leaf({"worker", std::to_string(t)});
        for (int round = 0; round < kRounds; ++round) {
          const at::Tensor value =
              RandomTensor(AllDTypes()[(t + round) % AllDTypes().size()], {16, 3 + t},
                           static_cast<uint32_t>(t * 1000 + round));
          mine.set(leaf, value);
          if (!SameBytes(value, mine.get(leaf))) throw std::runtime_error("own leaf differs");
          if (!SameBytes(shared, mine.get("shared"))) throw std::runtime_error("shared differs");
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
        ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Sorted(td.keys(true, true)).size(), kThreads + 1u);
}

// A leaf replaced again and again while others read it: every read returns
// one whole generation (all elements equal), never a mix. Reads may retry on
// ABORTED internally; an ABORTED that outlasts the retries is tolerated.
TEST(E2eDict, ReadersNeverSeeHalfAReplacedLeaf) {
  Client client(DaemonAddress());
  ClientOptions small_chunks;
  small_chunks.chunk_bytes = 64 << 10;
  Dict td = client.create(UniqueDictName(), {256});
  td.set("hot", at::full({256, 1024}, 0, at::kInt));  // 1 MiB

  std::atomic<bool> stop{false};
  std::atomic<int> mixed{0}, whole{0}, aborted{0}, other_errors{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      Client own(DaemonAddress(), small_chunks);
      Dict reader = own.open(td.name());
      while (!stop) {
        try {
          const at::Tensor value = reader.get("hot");
          const bool uniform = at::equal(value, at::full_like(value, value.flatten()[0].item()));
          (uniform ? whole : mixed)++;
        } catch (const Error& e) {
          (e.code() == StatusCode::kAborted ? aborted : other_errors)++;
        }
      }
    });
  }
  for (int generation = 1; generation <= 30; ++generation) {
    td.set("hot", at::full({256, 1024}, generation, at::kInt));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(mixed.load(), 0);
  EXPECT_EQ(other_errors.load(), 0);
  EXPECT_GT(whole.load(), 0);
  EXPECT_TRUE(at::equal(td.get("hot"), at::full({256, 1024}, 30, at::kInt)));
}

}  // namespace
}  // namespace tdstore::testing

namespace tdstore::testing {
namespace {

// GetServerInfo names the back end and how many masters it routes to.
TEST(E2eDict, ServerInfoNamesTheBackendAndItsMasters) {
  Client client(DaemonAddress());
  const Client::ServerInfo info = client.server_info();
  EXPECT_TRUE(info.redis_ok);
  EXPECT_FALSE(info.version.empty());
  if (SharedRedis().backend() == "cluster") {
    EXPECT_EQ(info.redis_masters, 3);
    EXPECT_NE(info.backend.find("cluster of 3 masters"), std::string::npos) << info.backend;
  } else {
    EXPECT_EQ(info.redis_masters, 1);
    EXPECT_NE(info.backend.find("standalone"), std::string::npos) << info.backend;
  }
  // The CLI shows the same.
  const std::string out = ::testing::TempDir() + "/server_info.txt";
  const std::string cmd = std::string(TDSTORE_CLI_BIN) + " --addr " + DaemonAddress() +
                          " server > " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(info.backend), std::string::npos) << text;
  EXPECT_NE(text.find("redis ok       yes"), std::string::npos) << text;
}

}  // namespace
}  // namespace tdstore::testing
