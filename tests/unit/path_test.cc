#include "common/path.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace tdstore {
namespace {

// Components are drawn mostly from a small alphabet full of the characters
// the encoding must handle, so random paths often share prefixes and escapes.
std::string RandomComponent(std::mt19937_64& rng, size_t max_len) {
  static const std::string kInteresting[] = {
      "/", "%", "%2F", "%25", "a", "b", "obs", ".", "..", " ", "\xc3\xa9", "\xe2\x82\xac",
      "\xf0\x9f\x98\x80", "\xff", "\x01", ":", "{", "}", "*"};
  const size_t len = 1 + rng() % max_len;
  std::string out;
  while (out.size() < len) {
    if (rng() % 4 == 0) {
      out += static_cast<char>(1 + rng() % 255);  // any byte but NUL
    } else {
      out += kInteresting[rng() % std::size(kInteresting)];
    }
  }
  out.resize(len);  // may cut a UTF-8 sequence: paths are bytes, not text
  return out;
}

LeafPath RandomPath(std::mt19937_64& rng, size_t max_components, size_t max_len) {
  LeafPath path(1 + rng() % max_components);
  for (std::string& component : path) component = RandomComponent(rng, max_len);
  return path;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

TEST(PathTest, EncodeExamples) {
  EXPECT_EQ(EncodePath({"next", "obs"}), "next/obs");
  EXPECT_EQ(EncodePath({"obs"}), "obs");
  EXPECT_EQ(EncodePath({"a/b", "c%d"}), "a%2Fb/c%25d");
  EXPECT_EQ(EncodePath({"%2F"}), "%252F");
  EXPECT_EQ(EncodePath({"/"}), "%2F");
}

TEST(PathTest, DecodeExamples) {
  EXPECT_EQ(*DecodePath("next/obs"), (LeafPath{"next", "obs"}));
  EXPECT_EQ(*DecodePath("a%2Fb/c%25d"), (LeafPath{"a/b", "c%d"}));
  EXPECT_EQ(*DecodePath("%252F"), LeafPath{"%2F"});
  EXPECT_EQ(*DecodePath("%2F%2F"), LeafPath{"//"});
}

TEST(PathTest, RandomRoundTrip) {
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 5000; ++trial) {
    const LeafPath path = RandomPath(rng, trial % 10 == 0 ? kMaxPathComponents : 4,
                                     trial % 10 == 1 ? kMaxComponentBytes : 12);
    ASSERT_TRUE(ValidatePath(path).ok());
    const std::string encoded = EncodePath(path);
    // Every '/' in the encoding is a separator.
    EXPECT_EQ(static_cast<size_t>(std::count(encoded.begin(), encoded.end(), '/')),
              path.size() - 1);
    const absl::StatusOr<LeafPath> back = DecodePath(encoded);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, path);
  }
}

TEST(PathTest, EncodingIsInjective) {
  std::mt19937_64 rng(2);
  std::map<std::string, LeafPath> seen;
  for (int trial = 0; trial < 20000; ++trial) {
    // Tiny components so collisions of distinct paths would be likely if the
    // encoding were not injective.
    const LeafPath path = RandomPath(rng, 3, 3);
    auto [it, inserted] = seen.emplace(EncodePath(path), path);
    if (!inserted) {
      EXPECT_EQ(it->second, path) << it->first;
    }
  }
}

TEST(PathTest, DecodeRejectsMalformed) {
  for (const char* encoded :
       {"", "/", "a/", "/a", "a//b", "%", "a%", "%2", "%2f", "%41", "%%", "%25%", "a/%2",
        "%zz", "%3F"}) {
    EXPECT_EQ(DecodePath(encoded).status().code(), absl::StatusCode::kInvalidArgument)
        << "'" << encoded << "'";
  }
  // NUL bytes, too long, too many components.
  EXPECT_FALSE(DecodePath(std::string_view("a\0b", 3)).ok());
  EXPECT_FALSE(DecodePath(std::string(kMaxComponentBytes + 1, 'x')).ok());
  EXPECT_TRUE(DecodePath(std::string(kMaxComponentBytes, 'x')).ok());
  std::string many = "a";
  for (size_t i = 1; i < kMaxPathComponents; ++i) many += "/a";
  EXPECT_TRUE(DecodePath(many).ok());
  EXPECT_FALSE(DecodePath(many + "/a").ok());
}

TEST(PathTest, DecodeAcceptsOnlyWhatEncodeProduces) {
  // Every accepted string must re-encode to itself.
  std::mt19937_64 rng(3);
  const char kAlphabet[] = {'a', '/', '%', '2', '5', 'F', 'f'};
  int accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string s(1 + rng() % 8, ' ');
    for (char& c : s) c = kAlphabet[rng() % std::size(kAlphabet)];
    const absl::StatusOr<LeafPath> path = DecodePath(s);
    if (!path.ok()) continue;
    ++accepted;
    EXPECT_EQ(EncodePath(*path), s);
  }
  EXPECT_GT(accepted, 100);
}

TEST(PathTest, PrefixPropertyOnRandomPaths) {
  std::mt19937_64 rng(4);
  int strict_prefixes = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    LeafPath a = RandomPath(rng, 3, 3);
    LeafPath b;
    switch (rng() % 4) {
      case 0:  // b extends a: a is a strict prefix
        b = a;
        for (size_t n = 1 + rng() % 3; n > 0; --n) b.push_back(RandomComponent(rng, 3));
        break;
      case 1:  // b's last component is a's plus "/...": a naive encoding
               // would make b look like a child of a
        b = a;
        b.back() += "/" + RandomComponent(rng, 2);
        break;
      case 2:  // b shares a's leading components
        b = LeafPath(a.begin(), a.begin() + static_cast<long>(rng() % a.size()));
        for (size_t n = 1 + rng() % 3; n > 0; --n) b.push_back(RandomComponent(rng, 3));
        break;
      default:
        b = RandomPath(rng, 4, 3);
    }
    const bool strict = a.size() < b.size() && IsPathPrefix(a, b);
    strict_prefixes += strict ? 1 : 0;
    EXPECT_EQ(StartsWith(EncodePath(b), EncodePath(a) + "/"), strict)
        << PathToDisplay(a) << " vs " << PathToDisplay(b);
  }
  EXPECT_GT(strict_prefixes, 3000);
}

TEST(PathTest, IsPathPrefix) {
  EXPECT_TRUE(IsPathPrefix({"a"}, {"a"}));
  EXPECT_TRUE(IsPathPrefix({"a"}, {"a", "b"}));
  EXPECT_TRUE(IsPathPrefix({}, {"a"}));
  EXPECT_FALSE(IsPathPrefix({"a", "b"}, {"a"}));
  EXPECT_FALSE(IsPathPrefix({"a"}, {"ab"}));
  EXPECT_FALSE(IsPathPrefix({"a"}, {"a/b"}));
  EXPECT_FALSE(IsPathPrefix({"b"}, {"a", "b"}));
}

TEST(PathTest, Display) {
  EXPECT_EQ(PathToDisplay({"next", "obs"}), "next/obs");
  EXPECT_EQ(PathToDisplay({"a/b"}), "a/b");
}

TEST(PathTest, ValidatePathEdgeCases) {
  EXPECT_TRUE(ValidatePath({"a"}).ok());
  EXPECT_TRUE(ValidatePath({"/", "%", "\xff"}).ok());
  EXPECT_TRUE(ValidatePath({std::string(kMaxComponentBytes, 'x')}).ok());
  EXPECT_TRUE(ValidatePath(LeafPath(kMaxPathComponents, "a")).ok());

  EXPECT_EQ(ValidatePath({}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidatePath({""}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidatePath({"a", ""}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidatePath({std::string(kMaxComponentBytes + 1, 'x')}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidatePath(LeafPath(kMaxPathComponents + 1, "a")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidatePath({"a", std::string("b\0c", 3)}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PathTest, ValidatePathSaysWhichComponent) {
  const absl::Status s = ValidatePath({"ok", "fine", ""});
  EXPECT_NE(s.message().find("component 2"), absl::string_view::npos) << s;
  const absl::Status nul = ValidatePath({"ok", std::string("\0", 1)});
  EXPECT_NE(nul.message().find("component 1"), absl::string_view::npos) << nul;
}

TEST(PathTest, ValidateDictName) {
  for (const char* name : {"a", "Z", "0", "my-dict", "runs/2024/ppo", "ns:thing", "a.b_c",
                           "a/", "trailing/", "..", "-x", ".hidden", ":x"}) {
    EXPECT_TRUE(ValidateDictName(name).ok()) << name;
  }
  EXPECT_TRUE(ValidateDictName(std::string(kMaxDictNameBytes, 'n')).ok());

  for (const char* name : {"", "/", "/abs", "a b", "a*", "a{b}", "tab\t", "é", "a\\b", "a%",
                           "a,b", "a;b", "a\n", "a'b", "a\"b", "~x", "a?", "a+b"}) {
    EXPECT_EQ(ValidateDictName(name).code(), absl::StatusCode::kInvalidArgument)
        << "'" << name << "'";
  }
  EXPECT_FALSE(ValidateDictName(std::string(kMaxDictNameBytes + 1, 'n')).ok());
  EXPECT_FALSE(ValidateDictName(std::string_view("a\0b", 3)).ok());
}

}  // namespace
}  // namespace tdstore
