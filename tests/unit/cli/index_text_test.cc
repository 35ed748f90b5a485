// The CLI's index text (client/cli/index_text.h): what each form parses to,
// and every syntax error. What the parsed index selects is the planner's
// (tests/unit/index_test.cc).
#include "client/cli/index_text.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/shape.h"
#include "gtest/gtest.h"

namespace tdstore::cli {
namespace {

using plan::IndexSpec;
using Kind = plan::IndexTerm::Kind;
using absl::StatusCode;

constexpr auto kAll = std::nullopt;

IndexSpec Parse(std::string_view text) {
  absl::StatusOr<IndexSpec> spec = ParseIndexText(text);
  EXPECT_TRUE(spec.ok()) << text << ": " << spec.status();
  return spec.ok() ? *spec : IndexSpec{};
}

TEST(ParseIndexTextTest, Ints) {
  for (auto [text, value] :
       std::vector<std::pair<std::string, int64_t>>{{"3", 3},
                                                    {"-1", -1},
                                                    {" +2 ", 2},
                                                    {"0", 0},
                                                    {"-9223372036854775808", INT64_MIN},
                                                    {"9223372036854775807", INT64_MAX}}) {
    IndexSpec spec = Parse(text);
    ASSERT_EQ(spec.size(), 1u) << text;
    EXPECT_EQ(spec[0].kind, Kind::kInt) << text;
    EXPECT_EQ(spec[0].value, value) << text;
  }
}

TEST(ParseIndexTextTest, Slices) {
  struct Case {
    std::string text;
    std::optional<int64_t> start, stop;
    int64_t step;
  };
  for (const Case& c : std::vector<Case>{{":", kAll, kAll, 1},
                                         {"::", kAll, kAll, 1},
                                         {"3:10:2", 3, 10, 2},
                                         {"::3", kAll, kAll, 3},
                                         {"1:", 1, kAll, 1},
                                         {"1::", 1, kAll, 1},
                                         {":-1", kAll, -1, 1},
                                         {" -5 : -1 : 2 ", -5, -1, 2},
                                         {"::-1", kAll, kAll, -1},
                                         {"::0", kAll, kAll, 0}}) {
    IndexSpec spec = Parse(c.text);
    ASSERT_EQ(spec.size(), 1u) << c.text;
    EXPECT_EQ(spec[0].kind, Kind::kSlice) << c.text;
    EXPECT_EQ(spec[0].start, c.start) << c.text;
    EXPECT_EQ(spec[0].stop, c.stop) << c.text;
    EXPECT_EQ(spec[0].step, c.step) << c.text;
  }
}

TEST(ParseIndexTextTest, ListsAndMasks) {
  IndexSpec spec = Parse("[1,5,9]");
  ASSERT_EQ(spec.size(), 1u);
  EXPECT_EQ(spec[0].kind, Kind::kPositions);
  EXPECT_EQ(spec[0].positions, (std::vector<int64_t>{1, 5, 9}));
  EXPECT_EQ(spec[0].positions_shape, Shape{3});

  spec = Parse(" [ [0, 1] , [2,-3], ] ");
  ASSERT_EQ(spec.size(), 1u);
  EXPECT_EQ(spec[0].positions, (std::vector<int64_t>{0, 1, 2, -3}));
  EXPECT_EQ(spec[0].positions_shape, (Shape{2, 2}));

  spec = Parse("[[[7]]]");
  EXPECT_EQ(spec[0].positions_shape, (Shape{1, 1, 1}));
  spec = Parse("[]");
  EXPECT_EQ(spec[0].kind, Kind::kPositions);
  EXPECT_EQ(spec[0].positions_shape, Shape{0});
  spec = Parse("[[], []]");
  EXPECT_EQ(spec[0].positions_shape, (Shape{2, 0}));

  spec = Parse("[True,False, True]");
  ASSERT_EQ(spec.size(), 1u);
  EXPECT_EQ(spec[0].kind, Kind::kMask);
  EXPECT_EQ(spec[0].mask, (std::vector<bool>{true, false, true}));
}

TEST(ParseIndexTextTest, Tuples) {
  IndexSpec spec = Parse("2,1:5");
  ASSERT_EQ(spec.size(), 2u);
  EXPECT_EQ(spec[0].kind, Kind::kInt);
  EXPECT_EQ(spec[1].kind, Kind::kSlice);
  EXPECT_EQ(spec[1].start, 1);
  EXPECT_EQ(spec[1].stop, 5);

  spec = Parse(" ... , [0, 1] ,:, -2 ");
  ASSERT_EQ(spec.size(), 4u);
  EXPECT_EQ(spec[0].kind, Kind::kEllipsis);
  EXPECT_EQ(spec[1].kind, Kind::kPositions);
  EXPECT_EQ(spec[1].positions, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(spec[2].kind, Kind::kSlice);
  EXPECT_EQ(spec[3].value, -2);

  spec = Parse("3,");  // a one-item tuple, as in Python
  ASSERT_EQ(spec.size(), 1u);
  EXPECT_EQ(spec[0].value, 3);
  EXPECT_EQ(Parse("...")[0].kind, Kind::kEllipsis);
  EXPECT_EQ(Parse("...,...").size(), 2u);  // parses; ResolveIndex rejects it
}

TEST(ParseIndexTextTest, Rejects) {
  for (const std::string& text : std::vector<std::string>{
           "", "   ", "1.5", "1.", "1e3", "0x10", "abc", "True", "None", "(1,2)", "1 2", "1:2:3:4",
           ",", "3,,4", ",3", "99999999999999999999", "-9223372036854775809", "-", "+", "1:2.5",
           ".", "..", "[1", "[1,,2]", "[,]", "[1;2]", "[1 2]", "[1,[2]]", "[[1],2]", "[[1],[2,3]]",
           "[[], [1]]", "[1,True]", "[True,1]", "[[True],[False]]", "[Truex]", "[true]", "[1.5]",
           "[1]]",
           // nested deeper than a shape may be
           std::string(kMaxRank + 1, '[') + "0" + std::string(kMaxRank + 1, ']')}) {
    absl::StatusOr<IndexSpec> spec = ParseIndexText(text);
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument) << "\"" << text << "\"";
  }
  EXPECT_EQ(Parse(std::string(kMaxRank, '[') + "0" + std::string(kMaxRank, ']'))[0].positions_shape,
            Shape(kMaxRank, 1));
  const absl::Status s = ParseIndexText("2, 1.5").status();
  EXPECT_NE(s.message().find("column 5"), std::string::npos) << s;
}

}  // namespace
}  // namespace tdstore::cli
