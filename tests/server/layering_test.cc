// The server's layers, checked from its sources' #include lines:
//
//   service/  ->  store/store.h  <-  redis_store/  ->  redis/
//       |              ^
//       |         memory store
//       v
//   shm/region_table.h  (regions same-host clients lend)
//
// The service reaches storage through one door, store/store.h, which
// pulls in nothing of Redis; store/ as a whole knows nothing of Redis or
// of the service. A newcomer reading the service never meets a Redis type.
// It reaches lent shared memory through one door too, and shm/ knows
// nothing of the other layers (but the logger).
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tdstore {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = TDSTORE_SOURCE_DIR;

struct Include {
  std::string path;
  bool quoted = false;
};

std::vector<Include> IncludesOf(const fs::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << file;
  static const std::regex kLine(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::vector<Include> out;
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, kLine)) out.push_back({m[2].str(), m[1].str() == "\""});
  }
  return out;
}

std::vector<fs::path> SourcesUnder(const std::string& folder) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(kRoot / folder)) {
    const std::string ext = entry.path().extension().string();
    if (ext == ".h" || ext == ".cc") files.push_back(entry.path());
  }
  EXPECT_FALSE(files.empty()) << folder;
  return files;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool IsRedisInclude(const Include& inc) {
  return StartsWith(inc.path, "server/redis/") || StartsWith(inc.path, "server/redis_store/") ||
         inc.path.find("hiredis") != std::string::npos;
}

// Every project header `header` reaches through quoted includes (itself
// included), as paths from the repository root.
std::set<std::string> Closure(const std::string& header) {
  std::set<std::string> seen;
  std::vector<std::string> todo{header};
  while (!todo.empty()) {
    const std::string h = todo.back();
    todo.pop_back();
    if (!seen.insert(h).second) continue;
    for (const Include& inc : IncludesOf(kRoot / h)) {
      // Only the project's own headers: the generated protos, absl and
      // gRPC live elsewhere.
      if (inc.quoted && fs::exists(kRoot / inc.path)) todo.push_back(inc.path);
    }
  }
  return seen;
}

TEST(LayeringTest, TheServiceIncludesOnlyStoreHOfTheStore) {
  for (const fs::path& file : SourcesUnder("server/service")) {
    for (const Include& inc : IncludesOf(file)) {
      if (!StartsWith(inc.path, "server/")) continue;
      EXPECT_TRUE(StartsWith(inc.path, "server/service/") || inc.path == "server/store/store.h" ||
                  inc.path == "server/shm/region_table.h")
          << fs::relative(file, kRoot) << " includes " << inc.path;
    }
  }
}

TEST(LayeringTest, SharedMemoryKnowsNoOtherLayer) {
  for (const fs::path& file : SourcesUnder("server/shm")) {
    for (const Include& inc : IncludesOf(file)) {
      if (!StartsWith(inc.path, "server/")) continue;
      EXPECT_TRUE(StartsWith(inc.path, "server/shm/") || inc.path == "server/log.h")
          << fs::relative(file, kRoot) << " includes " << inc.path;
    }
  }
}

TEST(LayeringTest, StoreHPullsInNoRedisHeader) {
  const std::set<std::string> closure = Closure("server/store/store.h");
  EXPECT_GT(closure.size(), 3u);  // the walk found the value types
  for (const std::string& header : closure) {
    for (const Include& inc : IncludesOf(kRoot / header)) {
      EXPECT_FALSE(IsRedisInclude(inc)) << header << " (reached from store.h) includes "
                                        << inc.path;
    }
  }
}

TEST(LayeringTest, TheStoreFolderKnowsNothingOfRedisOrTheService) {
  for (const fs::path& file : SourcesUnder("server/store")) {
    for (const Include& inc : IncludesOf(file)) {
      EXPECT_FALSE(IsRedisInclude(inc)) << fs::relative(file, kRoot) << " includes " << inc.path;
      EXPECT_FALSE(StartsWith(inc.path, "server/service/"))
          << fs::relative(file, kRoot) << " includes " << inc.path;
    }
  }
}

TEST(LayeringTest, TheRedisStoreNeverReachesUpIntoTheService) {
  for (const fs::path& file : SourcesUnder("server/redis_store")) {
    for (const Include& inc : IncludesOf(file)) {
      EXPECT_FALSE(StartsWith(inc.path, "server/service/"))
          << fs::relative(file, kRoot) << " includes " << inc.path;
    }
  }
}

// The scan itself can fail: a file that includes a Redis header is caught.
TEST(LayeringTest, TheScanSeesARedisInclude) {
  bool found = false;
  for (const Include& inc : IncludesOf(kRoot / "server/redis_store/dict_store.h")) {
    found = found || IsRedisInclude(inc);
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace tdstore
