#include "tests/e2e/cli_testing.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/e2e/e2e_env.h"

namespace tdstore::testing {

std::string Quote(const std::string& arg) {
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int ExitStatus(int system_result) {
  return WIFEXITED(system_result) ? WEXITSTATUS(system_result) : 128 + WTERMSIG(system_result);
}

bool HasNumpy() {
  static const bool has = std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
  return has;
}

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

::testing::AssertionResult IsOneLineError(const CliResult& r) {
  if (r.err.rfind("tdstore: ", 0) != 0 || std::count(r.err.begin(), r.err.end(), '\n') != 1 ||
      r.err.back() != '\n') {
    return ::testing::AssertionFailure() << "stderr is not one 'tdstore: ' line: [" << r.err
                                         << "]";
  }
  return ::testing::AssertionSuccess();
}

void CliTest::SetUp() {
  std::string pattern = (std::filesystem::temp_directory_path() / "tdstore-cli-XXXXXX").string();
  ASSERT_NE(mkdtemp(pattern.data()), nullptr);
  dir_ = pattern;
}

void CliTest::TearDown() { std::filesystem::remove_all(dir_); }

CliResult CliTest::RunRaw(const std::vector<std::string>& args, const std::string& env) const {
  std::string command =
      // Tests run many CLIs at once on a loaded machine: each may wait for
      // tdstored longer than a person at a terminal would (a test that
      // wants the failure sooner passes TDSTORE_RETRY_FOR in `env`).
      "cd " + Quote(dir_) + " && env -u TDSTORE_ADDR TDSTORE_RETRY_FOR=120 " + env + " " +
      Quote(TDSTORE_CLI_BIN);
  for (const std::string& arg : args) command += " " + Quote(arg);
  // Own output files per call, so calls may run from several threads.
  static std::atomic<int> calls{0};
  const std::string out = File("stdout." + std::to_string(calls++));
  const std::string err = out + ".err";
  command += " </dev/null >" + Quote(out) + " 2>" + Quote(err);
  CliResult result;
  result.status = ExitStatus(std::system(command.c_str()));
  result.out = ReadFile(out);
  result.err = ReadFile(err);
  return result;
}

CliResult CliTest::Run(std::vector<std::string> args) const {
  args.insert(args.begin(), {"--addr", DaemonAddress()});
  return RunRaw(args);
}

void CliTest::Python(const std::string& script) const {
  std::ofstream(File("script.py")) << "import numpy as np\n" << script;
  const std::string command = "cd " + Quote(dir_) + " && /usr/bin/python3 script.py";
  ASSERT_EQ(std::system(command.c_str()), 0) << script;
}

}  // namespace tdstore::testing
