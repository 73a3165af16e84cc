#include "dsl/diagnostics.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
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

// The rendered error "unknown name 'zz'" at byte `offset` of a file `name` holding `text`.
std::string unknown_zz(const std::string& name, const std::string& text, uint32_t offset) {
  SourceFile f(name, text);
  Diagnostics diags;
  diags.error(SourceLoc::at(&f, offset), "unknown name 'zz'", 2);
  return diags.render();
}

// Control bytes and bytes that are not UTF-8 are shown as \xHH (never sent to the terminal),
// valid UTF-8 as written; the caret stays under the reported column.
TEST(Diagnostics, EscapesControlBytesAndKeepsTheCaretAligned) {
  EXPECT_EQ(unknown_zz("k.kdsl", std::string("y = \x1b[31m\xff\xc3\xa9 + zz\n", 17), 15),
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
  // X = "<text>" + zz, and the screen columns before zz.
  const struct {
    const char* text;
    size_t columns;
  } cases[] = {
      {"\xc3\xa9", 10},                      // e-acute (2 bytes): one column
      {"\xe4\xb8\xad\xf0\x9f\x99\x82", 13},  // a CJK character (3 bytes), an emoji (4): two each
      {"e\xcc\x81", 10},  // e and a combining acute accent (U+0301): one for the two
      // Widths from the Unicode character database (utf8proc), beyond the common blocks: two
      // rockets (U+1F680, two columns each) and Devanagari ka with the vowel sign u (U+0915
      // U+0941: the sign is a nonspacing mark, no column of its own).
      {"\xf0\x9f\x9a\x80\xf0\x9f\x9a\x80\xe0\xa4\x95\xe0\xa5\x81", 14},
  };
  for (const auto& c : cases) {
    const std::string line = fmt::format("X = \"{}\" + zz", c.text);
    const uint32_t at = static_cast<uint32_t>(line.size() - 2);  // zz's byte offset
    EXPECT_EQ(unknown_zz("k.kdsl", line + "\n", at),
              fmt::format("k.kdsl:1:{}: error: unknown name 'zz'\n{}\n{}^~\n", at + 1, line,
                          std::string(c.columns, ' ')));
  }
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

// The line and the caret of an error at byte `offset` of the one-line file `line`, `length` bytes
// long.
std::string line_and_caret(const std::string& line, uint32_t offset, uint32_t length) {
  SourceFile f("k.kdsl", line + "\n");
  Diagnostics diags;
  diags.error(SourceLoc::at(&f, offset), "e", length);
  const std::string out = diags.render();
  return out.substr(out.find('\n') + 1);
}

// Every format character (Unicode category Cf) is shown as \u{...}, not only the bidirectional
// controls and zero-width spaces: the word joiner U+2060 and the tag characters U+E0001 to
// U+E007F are invisible on a terminal too, and tags can spell out hidden text (found by a
// new-user test: they were printed as written).
TEST(Diagnostics, EscapesEveryFormatCharacter) {
  EXPECT_EQ(line_and_caret("# a\xe2\x81\xa0"
                           "b\xf3\xa0\x81\x81 x",
                           12, 1),
            "# a\\u{2060}b\\u{e0041} x\n" + std::string(22, ' ') + "^\n");
}

// A code point that utf8proc's Unicode version leaves unassigned, in a range set aside for wide
// characters, is two columns: an emoji of Unicode 16 (U+1FAE9) and an ideograph of CJK Extension
// I (U+2EBF0, Unicode 15.1) put the caret one column left each (found by a new-user test).
TEST(Diagnostics, NewerWideCharactersAreTwoColumns) {
  EXPECT_EQ(line_and_caret("X = \"\xf0\x9f\xab\xa9\xf0\xae\xaf\xb0\" + zz", 17, 2),
            "X = \"\xf0\x9f\xab\xa9\xf0\xae\xaf\xb0\" + zz\n             ^~\n");
}

// An error at a zero-width character (here a combining accent after a blank) shows it as
// \u{...}: written as is, it is drawn over the blank and the caret stands under nothing (found by
// a new-user test).
TEST(Diagnostics, AZeroWidthCharacterUnderTheCaretIsShownEscaped) {
  EXPECT_EQ(line_and_caret("x = 1 \xcc\x81", 6, 2), "x = 1 \\u{0301}\n      ^~~~~~~~\n");
}

// A window does not start on a combining mark cut from its letter, which would be drawn over the
// "..." (found by a new-user test).
TEST(Diagnostics, AWindowDoesNotStartOnACombiningMark) {
  std::string line = "x = g(\"";
  for (int i = 0; i < 300; ++i) line += "e\xcc\x81";  // e and a combining acute accent
  line += "\" zz)";
  const std::string out = line_and_caret(line, static_cast<uint32_t>(line.size() - 3), 2);
  ASSERT_EQ(out.substr(0, 4), "...e") << out;
  EXPECT_EQ(out.substr(out.find('\n') + 1), std::string(83, ' ') + "^~\n");
}

// Tabs count their columns (to the next multiple of 8) towards the window: 100 tabs before the
// error were shown whole, about 800 columns (found by a new-user test).
TEST(Diagnostics, TabsCountTheirColumnsInTheWindow) {
  const std::string line = "x = g(\"" + std::string(100, '\t') + "\" zz)";
  const std::string out = line_and_caret(line, 109, 2);
  const std::string shown = out.substr(0, out.find('\n'));
  EXPECT_EQ(shown.substr(0, 3), "...") << out;
  EXPECT_LE(std::count(shown.begin(), shown.end(), '\t'), 10) << out;
  EXPECT_EQ(out.substr(out.find('\n') + 1),
            "   " + std::string(std::count(shown.begin(), shown.end(), '\t'), '\t') + "  ^~\n");
}

// A diagnostic on a very long line costs what one on a short line does: only the bytes near the
// column are decoded. 50 errors on a line of 4 MB took seconds (every render split the whole
// line; 150 errors on a 3 MB line took 38 s on 2 cores; found by a new-user test).
TEST(Diagnostics, ErrorsOnAVeryLongLineRenderQuickly) {
  const std::string line = std::string(2 << 20, 'a') + " zz " + std::string(2 << 20, 'b');
  SourceFile f("k.kdsl", line + "\n");
  Diagnostics diags;
  for (int i = 0; i < 50; ++i) diags.error(SourceLoc::at(&f, (2 << 20) + 1), "e", 2);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string out = diags.render();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 2.0);
  const std::string one = "k.kdsl:1:2097154: error: e\n..." + std::string(79, 'a') + " zz " +
                          std::string(77, 'b') + "...\n" + std::string(83, ' ') + "^~\n";
  EXPECT_EQ(out.substr(0, one.size()), one);
}

// The shown line leaves out its line break only: a carriage return before "\r\n" is part of the
// line, and an error at it has it under the caret (all the carriage returns at the end of a line
// were left out, and the caret stood past the end; found by a new-user test).
TEST(Diagnostics, AStrayCarriageReturnBeforeTheLineBreakIsShown) {
  SourceFile f("k.kdsl", "x = 1\r\r\ny = 2\r\n");
  Diagnostics diags;
  diags.error(SourceLoc::at(&f, 5), "unexpected character 0x0d");
  diags.error(SourceLoc::at(&f, 12), "e");
  EXPECT_EQ(diags.render(),
            "k.kdsl:1:6: error: unexpected character 0x0d\n"
            "x = 1\\x0d\n"
            "     ^~~~\n"
            "k.kdsl:2:5: error: e\n"
            "y = 2\n"
            "    ^\n");
}

// A file name is shown on one line: a newline or a tab in it is escaped, so that the name cannot
// start a line that reads as another diagnostic (it was printed as written; found by a new-user
// test).
TEST(Diagnostics, AFileNameStaysOnOneLine) {
  EXPECT_EQ(unknown_zz("a\nb.kdsl:9:9: error: spoofed\t.kdsl", "x = zz\n", 4),
            "a\\x0ab.kdsl:9:9: error: spoofed\\x09.kdsl:1:5: error: unknown name 'zz'\n"
            "x = zz\n"
            "    ^~\n");
  EXPECT_EQ(terminal_safe_name("a\nb\tc\x1b"), "a\\x0ab\\x09c\\x1b");
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
