#include "dsl/diagnostics.h"

#include <gtest/gtest.h>

#include <string>

namespace kdsl {
namespace {

TEST(Diagnostics, RendersLocationLineCaretAndHint) {
  SourceFile f("k.kdsl", "def f():\n    y = xx + 1\n");
  Diagnostics diags;
  auto& d = diags.error(SourceLoc::at(&f, 17), "unknown name 'xx'", 2);
  d.hint = "did you mean 'x'?";
  EXPECT_EQ(diags.render(),
            "k.kdsl:2:9: error: unknown name 'xx'\n"
            "    y = xx + 1\n"
            "        ^~\n"
            "hint: did you mean 'x'?\n");
  EXPECT_TRUE(diags.has_errors());
}

// Control bytes and bytes that are not UTF-8 are shown as \xHH (never sent to the terminal),
// valid UTF-8 as written; the caret stays under the reported column.
TEST(Diagnostics, EscapesControlBytesAndKeepsTheCaretAligned) {
  SourceFile f("k.kdsl", std::string("y = \x1b[31m\xff\xc3\xa9 + zz\n", 17));
  Diagnostics diags;
  diags.error(SourceLoc::at(&f, 15), "unknown name 'zz'", 2);
  EXPECT_EQ(diags.render(),
            "k.kdsl:1:16: error: unknown name 'zz'\n"
            "y = \\x1b[31m\\xff\xc3\xa9 + zz\n"
            "                    ^~\n");
}

// A long line is shown as a window around the column, cut with "...".
TEST(Diagnostics, ShowsAWindowOfALongLine) {
  const std::string line = "y = " + std::string(300, 'a') + " + zz + " + std::string(300, 'b');
  SourceFile f("k.kdsl", line + "\n");
  Diagnostics diags;
  diags.error(SourceLoc::at(&f, 307), "unknown name 'zz'", 2);
  const std::string out = diags.render();
  const std::string shown =
      "..." + std::string(77, 'a') + " + zz + " + std::string(75, 'b') + "...";
  EXPECT_EQ(out, "k.kdsl:1:308: error: unknown name 'zz'\n" + shown + "\n" + std::string(83, ' ') +
                     "^~\n");
}

TEST(Diagnostics, ClosestNameFindsTyposOnly) {
  EXPECT_EQ(closest_name("rsqrtt", {"rsqrt", "sqrt", "exp"}), "rsqrt");
  EXPECT_EQ(closest_name("banana", {"rsqrt", "sqrt", "exp"}), "");
}

}  // namespace
}  // namespace kdsl
