// Test helpers: the tdstore::Error a call throws, and what its message says.
//
//   EXPECT_EQ(ErrorOf([&] { td.get("missing"); }).code(), StatusCode::kNotFound);
#ifndef TDSTORE_TESTS_E2E_EXPECT_ERROR_H_
#define TDSTORE_TESTS_E2E_EXPECT_ERROR_H_

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "tdstore/client.h"

namespace tdstore::testing {

// The Error `call` throws; a test failure (and a kOk Error) if none.
inline Error ErrorOf(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "call succeeded";
  return Error(StatusCode::kOk, "no error");
}

// Whether an error message (or any text) has `part` in it.
inline bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace tdstore::testing

#endif  // TDSTORE_TESTS_E2E_EXPECT_ERROR_H_
