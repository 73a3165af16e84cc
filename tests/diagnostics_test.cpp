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

// What is not well-formed UTF-8 is escaped byte by byte: a lead byte beyond F4, an overlong
// form, a surrogate, a truncated sequence. Code points that reorder or hide text (a
// right-to-left override, a zero-width space, a byte-order mark) are shown as \u{...}. The
// underline spans the columns the reported bytes take on screen.
TEST(Diagnostics, EscapesMalformedUtf8AndHiddenCodePoints) {
  auto shown = [](const std::string& line, uint32_t offset, uint32_t length) {
    SourceFile f("k.kdsl", line + "\n");
    Diagnostics diags;
    diags.error(SourceLoc::at(&f, offset), "e", length);
    const std::string out = diags.render();
    return out.substr(out.find('\n') + 1);  // the line and the caret
  };
  EXPECT_EQ(shown("# \xff\x80\x80 x", 6, 1), "# \\xff\\x80\\x80 x\n               ^\n");
  EXPECT_EQ(shown("# \xe0\x80\x80 x", 6, 1), "# \\xe0\\x80\\x80 x\n               ^\n");
  EXPECT_EQ(shown("# \xed\xa0\x80 x", 6, 1), "# \\xed\\xa0\\x80 x\n               ^\n");
  EXPECT_EQ(shown("# \xe2\x80 x", 5, 1), "# \\xe2\\x80 x\n           ^\n");
  EXPECT_EQ(shown("a\xe2\x80\xae = b", 5, 1), "a\\u{202e} = b\n          ^\n");
  EXPECT_EQ(shown("\xef\xbb\xbfx = \xe2\x80\x8by", 3, 1), "\\u{feff}x = \\u{200b}y\n        ^\n");
  // A two-byte character is one column, an emoji two; the underline counts columns.
  EXPECT_EQ(shown("s = \"\xf0\x9f\x99\x82\xc3\xa9\" + 1", 4, 8),
            "s = \"\xf0\x9f\x99\x82\xc3\xa9\" + 1\n    ^~~~~\n");
}

// The column of file:line:col is the 1-based byte column (as in Clang; docs/cli.md), and the
// caret goes under the character at that byte, after the terminal columns the characters before
// it take: a multi-byte character in a string before the error is one column, a wide one (CJK,
// emoji) two (counted as one, the caret stood a column left of the error), a combining mark none
// (the widths are utf8proc's).
TEST(Diagnostics, ByteColumnAndCaretAgreeAfterNonAsciiCharacters) {
  auto render = [](const std::string& line, uint32_t offset) {
    SourceFile f("k.kdsl", line + "\n");
    Diagnostics diags;
    diags.error(SourceLoc::at(&f, offset), "unknown name 'zz'", 2);
    return diags.render();
  };
  // X = "\u00e9" + zz: the e-acute is bytes 6 and 7, zz starts at byte 12.
  EXPECT_EQ(render("X = \"\xc3\xa9\" + zz", 11),
            "k.kdsl:1:12: error: unknown name 'zz'\n"
            "X = \"\xc3\xa9\" + zz\n"
            "          ^~\n");
  // A CJK character (3 bytes) and an emoji (4 bytes), each two columns wide on a terminal.
  EXPECT_EQ(render("X = \"\xe4\xb8\xad\xf0\x9f\x99\x82\" + zz", 16),
            "k.kdsl:1:17: error: unknown name 'zz'\n"
            "X = \"\xe4\xb8\xad\xf0\x9f\x99\x82\" + zz\n"
            "             ^~\n");
  // e followed by a combining acute accent (U+0301): one column for the two.
  EXPECT_EQ(render("X = \"e\xcc\x81\" + zz", 12),
            "k.kdsl:1:13: error: unknown name 'zz'\n"
            "X = \"e\xcc\x81\" + zz\n"
            "          ^~\n");
  // Widths from the Unicode character database (utf8proc), beyond the common blocks: two rockets
  // (U+1F680, two columns each) and Devanagari ka with the vowel sign u (U+0915 U+0941: the sign
  // is a nonspacing mark, no column of its own).
  EXPECT_EQ(render("X = \"\xf0\x9f\x9a\x80\xf0\x9f\x9a\x80\xe0\xa4\x95\xe0\xa5\x81\" + zz", 23),
            "k.kdsl:1:24: error: unknown name 'zz'\n"
            "X = \"\xf0\x9f\x9a\x80\xf0\x9f\x9a\x80\xe0\xa4\x95\xe0\xa5\x81\" + zz\n"
            "              ^~\n");
}

// A window never starts inside a character.
TEST(Diagnostics, AWindowStartsOnACharacter) {
  std::string line = "y = ";
  for (int i = 0; i < 300; ++i) line += "\xc3\xa9";  // 300 x U+00E9, 2 bytes each
  line += " + zz";
  SourceFile f("k.kdsl", line + "\n");
  Diagnostics diags;
  diags.error(SourceLoc::at(&f, static_cast<uint32_t>(line.size() - 2)), "unknown name 'zz'", 2);
  const std::string out = diags.render();
  std::string expect_line = "...";
  for (int i = 0; i < 77; ++i) expect_line += "\xc3\xa9";
  expect_line += " + zz";
  EXPECT_EQ(out.substr(out.find('\n') + 1), expect_line + "\n" + std::string(83, ' ') + "^~\n");
}

TEST(Diagnostics, ClosestNameFindsTyposOnly) {
  EXPECT_EQ(closest_name("rsqrtt", {"rsqrt", "sqrt", "exp"}), "rsqrt");
  EXPECT_EQ(closest_name("banana", {"rsqrt", "sqrt", "exp"}), "");
  // Two swapped neighbours are one edit.
  EXPECT_EQ(closest_name("maen", {"mean", "max", "min"}), "mean");
  EXPECT_EQ(closest_name("sqrt", {"rsqrt"}), "rsqrt");
  EXPECT_EQ(closest_name("smu", {"sum", "min"}), "sum");
}

}  // namespace
}  // namespace kdsl
