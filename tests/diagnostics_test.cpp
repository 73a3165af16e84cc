#include "dsl/diagnostics.h"

#include <gtest/gtest.h>

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

TEST(Diagnostics, ClosestNameFindsTyposOnly) {
  EXPECT_EQ(closest_name("rsqrtt", {"rsqrt", "sqrt", "exp"}), "rsqrt");
  EXPECT_EQ(closest_name("banana", {"rsqrt", "sqrt", "exp"}), "");
}

}  // namespace
}  // namespace kdsl
