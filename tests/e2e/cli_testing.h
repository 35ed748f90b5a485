// Running the `tdstore` binary from e2e tests: a fixture with a private
// working directory, helpers to run the CLI and Python (with NumPy), and the
// CLI's one-line error contract.
#ifndef TDSTORE_TESTS_E2E_CLI_TESTING_H_
#define TDSTORE_TESTS_E2E_CLI_TESTING_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tdstore::testing {

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
};

// 'arg' quoted for /bin/sh.
std::string Quote(const std::string& arg);
std::string ReadFile(const std::string& path);
// The exit status of a std::system() result (128 + signal if killed).
int ExitStatus(int system_result);
// /usr/bin/python3 can import numpy.
bool HasNumpy();
std::string Lower(std::string text);

// One line, "tdstore: ...", as the CLI promises for every failure.
::testing::AssertionResult IsOneLineError(const CliResult& r);

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  std::string File(const std::string& name) const { return dir_ + "/" + name; }

  // Runs tdstore with `args` exactly, from the test's directory, with
  // TDSTORE_ADDR unset unless `env` sets it ("TDSTORE_ADDR=..."). Safe to
  // call from several threads.
  CliResult RunRaw(const std::vector<std::string>& args, const std::string& env = "") const;
  // Against the shared daemon.
  CliResult Run(std::vector<std::string> args) const;
  // Runs a Python script (with NumPy as np) in the test's directory.
  void Python(const std::string& script) const;

  std::string dir_;
};

}  // namespace tdstore::testing

#endif  // TDSTORE_TESTS_E2E_CLI_TESTING_H_
