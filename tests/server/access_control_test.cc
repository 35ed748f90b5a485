// Bearer tokens: parsing the tokens file and the decisions it leads to.
// (The e2e security tests check the same through real gRPC calls.)
#include "server/service/access_control.h"

#include <gtest/gtest.h>

namespace tdstore::service {
namespace {

constexpr char kFile[] =
    "# token                          rights prefixes\n"
    "team-a-token-0123456789abcdef    rw     team-a/,shared/\n"
    "\n"
    "reader-token-0123456789abcdef    ro     *\n";

TEST(AccessControl, ParsesGrants) {
  auto ac = AccessControl::Parse(kFile);
  ASSERT_TRUE(ac.ok()) << ac.status();
  EXPECT_TRUE(ac->enabled());
  EXPECT_FALSE(AccessControl().enabled());
}

TEST(AccessControl, PrefixesAndRights) {
  Grant team{"t", true, {"team-a/", "shared/"}};
  Grant reader{"r", false, {""}};
  EXPECT_TRUE(AccessControl::Authorize(&team, "team-a/x", Access::kWrite).ok());
  EXPECT_TRUE(AccessControl::Authorize(&team, "shared/y", Access::kRead).ok());
  absl::Status s = AccessControl::Authorize(&team, "team-b/x", Access::kRead);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(AccessControl::Authorize(&team, "team-a", Access::kRead).code(),
            absl::StatusCode::kPermissionDenied);  // a prefix, not a folder name
  EXPECT_TRUE(AccessControl::Authorize(&reader, "anything", Access::kRead).ok());
  s = AccessControl::Authorize(&reader, "anything", Access::kWrite);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(std::string(s.message()).find("read-only"), std::string::npos);
  // No tokens configured: everything is allowed.
  EXPECT_TRUE(AccessControl::Authorize(nullptr, "x", Access::kWrite).ok());
  EXPECT_TRUE(AccessControl::CanSee(&team, "team-a/x"));
  EXPECT_FALSE(AccessControl::CanSee(&team, "team-b/x"));
}

TEST(AccessControl, MalformedFilesNameTheLineNotTheToken) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"short-token rw *\n", "line 1"},
      {"# c\nlong-enough-token-0123 rx *\n", "line 2"},
      {"long-enough-token-0123 rw\n", "line 1"},
      {"long-enough-token-0123 rw a/\nlong-enough-token-0123 ro b/\n", "line 2"},
      {"long-enough-token-0123 rw ,\n", "line 1"},
  };
  // A file with no token would turn access control off: refused.
  EXPECT_EQ(AccessControl::Parse("# nothing yet\n\n").status().code(),
            absl::StatusCode::kInvalidArgument);
  for (const auto& [text, line] : cases) {
    auto ac = AccessControl::Parse(text);
    ASSERT_FALSE(ac.ok()) << text;
    const std::string message(ac.status().message());
    EXPECT_NE(message.find(line), std::string::npos) << message;
    EXPECT_EQ(message.find("long-enough-token"), std::string::npos) << message;
    EXPECT_EQ(message.find("short-token"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace tdstore::service
