#include "dsl/layout.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace kdsl {
namespace {

/// Runs the layout pass on `text`; keeps the file alive for the diagnostics.
struct Layout {
  explicit Layout(std::string text)
      : file(std::make_unique<SourceFile>("t.kdsl", std::move(text))),
        lines(layout(*file, diags)) {}

  /// Every diagnostic as "line:col: message".
  std::vector<std::string> errors() const {
    std::vector<std::string> out;
    for (const auto& d : diags.all()) {
      out.push_back(std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": " +
                    d.message);
    }
    return out;
  }

  /// The texts of the logical lines.
  std::vector<std::string> texts() const {
    std::vector<std::string> out;
    for (const auto& l : lines) out.push_back(l.text);
    return out;
  }

  std::vector<uint32_t> depths() const {
    std::vector<uint32_t> out;
    for (const auto& l : lines) out.push_back(l.depth);
    return out;
  }

  /// "line:col" of text position `i` of logical line `n`.
  std::string where(size_t n, size_t i) const {
    SourceLoc loc = SourceLoc::at(file.get(), lines[n].offset_at(i));
    return std::to_string(loc.line) + ":" + std::to_string(loc.col);
  }

  std::unique_ptr<SourceFile> file;
  Diagnostics diags;
  std::vector<LogicalLine> lines;
};

using Strings = std::vector<std::string>;

TEST(Layout, EmptyFileAndCommentsOnlyGiveNoLines) {
  EXPECT_TRUE(Layout("").lines.empty());
  Layout l("# a comment\n\n   \n\t\n   # indented comment\n");
  EXPECT_TRUE(l.lines.empty());
  EXPECT_TRUE(l.errors().empty());
}

TEST(Layout, SplitsLinesAndStripsCommentsAndBlanks) {
  Layout l("a = 1   # one\n\n# comment\nb = '# not a comment'  \n");
  EXPECT_EQ(l.texts(), (Strings{"a = 1", "b = '# not a comment'"}));
  EXPECT_EQ(l.where(1, 0), "4:1");
  EXPECT_TRUE(l.errors().empty());
}

TEST(Layout, FileWithoutTrailingNewline) {
  Layout l("a = 1\nb = 2");
  EXPECT_EQ(l.texts(), (Strings{"a = 1", "b = 2"}));
  EXPECT_EQ(l.lines[1].offsets.back(), 11u);
}

TEST(Layout, ByteOrderMarkIsSkipped) {
  Layout l("\xEF\xBB\xBFx = 1\n");
  EXPECT_EQ(l.texts(), (Strings{"x = 1"}));
  EXPECT_EQ(l.where(0, 0), "1:4");
  EXPECT_TRUE(l.errors().empty());
}

TEST(Layout, CrlfLineEndings) {
  Layout l("def f():\r\n    x = (1,\r\n         2)\r\n");
  EXPECT_EQ(l.texts(), (Strings{"def f():", "x = (1," + std::string(10, ' ') + "2)"}));
  EXPECT_EQ(l.depths(), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(l.where(1, l.lines[1].text.find('2')), "3:10");
  EXPECT_TRUE(l.errors().empty());
}

TEST(Layout, JoinsLinesInsideBracketsWithOffsets) {
  Layout l("x = f(a,  # first\n      [b,\n       c])\ny = 2\n");
  ASSERT_EQ(l.lines.size(), 2u);
  const LogicalLine& x = l.lines[0];
  EXPECT_EQ(x.text, "x = f(a," + std::string(9, ' ') + "[b," + std::string(8, ' ') + "c])");
  EXPECT_EQ(x.offsets.size(), x.text.size() + 1);
  EXPECT_EQ(l.where(0, x.text.find('b')), "2:8");
  EXPECT_EQ(l.where(0, x.text.find('c')), "3:8");
  EXPECT_EQ(x.offset_after(x.text.size()), x.offsets.back());
  EXPECT_EQ(l.where(1, 0), "4:1");
  for (size_t i = 1; i < x.offsets.size(); ++i) EXPECT_LT(x.offsets[i - 1], x.offsets[i]);
}

TEST(Layout, JoinsLinesAfterBackslash) {
  Layout l("x = 1 + \\\n    2\ny = 3\n");
  EXPECT_EQ(l.texts(), (Strings{"x = 1 +" + std::string(6, ' ') + "2", "y = 3"}));
  EXPECT_EQ(l.where(0, l.lines[0].text.find('2')), "2:5");
  EXPECT_TRUE(l.errors().empty());
}

TEST(Layout, TripleQuotedStringSpansLines) {
  Layout l("def f():\n    \"\"\"one\r\n    # two\n    \"\"\"  # end\n    return 1\n");
  EXPECT_EQ(l.texts(), (Strings{"def f():", "\"\"\"one\n    # two\n    \"\"\"", "return 1"}));
  EXPECT_EQ(l.depths(), (std::vector<uint32_t>{0, 1, 1}));
  EXPECT_EQ(l.where(1, l.lines[1].text.find('#')), "3:5");
  EXPECT_TRUE(l.errors().empty());
}

TEST(Layout, EscapedQuotesDoNotEndStrings) {
  Layout l("a = 'it\\'s # x'\nb = \"\"\"q\\\"\"\"\"  # c\n");
  EXPECT_EQ(l.texts(), (Strings{"a = 'it\\'s # x'", "b = \"\"\"q\\\"\"\"\""}));
  EXPECT_TRUE(l.errors().empty());
}

TEST(Layout, DepthsFollowIndentation) {
  Layout l(
      "def f(x):\n"
      "    if x:\n"
      "        for i in y:\n"
      "            pass\n"
      "    else:\n"
      "      pass\n"
      "c = 1\n");
  EXPECT_EQ(l.depths(), (std::vector<uint32_t>{0, 1, 2, 3, 1, 2, 0}));
  EXPECT_TRUE(l.lines[0].opens_block);
  EXPECT_FALSE(l.lines[3].opens_block);
  EXPECT_TRUE(l.errors().empty());
}

TEST(Layout, TabInIndentation) {
  Layout l("def f():\n\tx = 1\n  \ty = 2\n");
  EXPECT_EQ(l.errors(), (Strings{"2:1: tab in indentation; kdsl indents with spaces only",
                                 "3:3: tab in indentation; kdsl indents with spaces only"}));
  EXPECT_EQ(l.depths(), (std::vector<uint32_t>{0, 1, 1}));  // a tab counts to column 8
}

TEST(Layout, TabBetweenTokensIsWhitespace) {
  Layout l("x\t=\t1\n");
  EXPECT_EQ(l.texts(), (Strings{"x\t=\t1"}));
  EXPECT_TRUE(l.errors().empty());
}

TEST(Layout, UnexpectedIndentIsReportedOnce) {
  Layout l("x = 1\n    y = 2\n    z = 3\nw = 4\n");
  EXPECT_EQ(l.errors(), (Strings{"2:5: unexpected indent"}));
  EXPECT_EQ(l.depths(), (std::vector<uint32_t>{0, 0, 0, 0}));
  EXPECT_EQ(Layout("  x = 1\n").errors(), (Strings{"1:3: unexpected indent"}));
}

TEST(Layout, UnindentMustMatchAnOuterLevel) {
  Layout l("def f():\n        x = 1\n    y = 2\n    return y\nz = 3\n");
  EXPECT_EQ(l.errors(), (Strings{"3:5: unindent does not match any outer indentation level"}));
  EXPECT_EQ(l.depths(), (std::vector<uint32_t>{0, 1, 1, 1, 0}));  // y joins f's block
}

TEST(Layout, LinesAfterAMismatchedUnindentContinueTheBlockItClosed) {
  // The block it closed is at 8; the mis-indented line (at 7) rejoins it, and the lines after
  // it, at 8 or at 7, are no further error.
  Layout l(
      "def f():\n    for m in x:\n        v = 1\n       s = 2\n        y = 3\n"
      "       z = 4\n    w = 5\n");
  EXPECT_EQ(l.errors(), (Strings{"4:8: unindent does not match any outer indentation level"}));
  EXPECT_EQ(l.depths(), (std::vector<uint32_t>{0, 1, 2, 2, 2, 2, 1}));
}

TEST(Layout, AHeaderOnAMismatchedUnindentLineKeepsItsBlock) {
  // The header at 6 rejoins the block at 8 it closed; its body, at 8, is deeper than the header
  // and is its block (once reported as "expected an indented block" as well).
  Layout l(
      "def f():\n    for m in x:\n        if c:\n            v = 1\n      for n in y:\n"
      "        w = 2\n        u = 3\n    z = 4\n");
  EXPECT_EQ(l.errors(), (Strings{"5:7: unindent does not match any outer indentation level"}));
  EXPECT_EQ(l.depths(), (std::vector<uint32_t>{0, 1, 2, 3, 2, 3, 3, 1}));
}

TEST(Layout, CommentsAndStringsMustBeUtf8) {
  EXPECT_EQ(Layout("x = 1  # caf\xe9\n").errors(),
            (Strings{"1:13: invalid UTF-8 byte \\xe9 in a comment"}));
  EXPECT_EQ(Layout("# \xff\nx = 1\n").errors(),
            (Strings{"1:3: invalid UTF-8 byte \\xff in a comment"}));
  EXPECT_EQ(Layout("def f():\n    \"\"\"doc\n    \xc3(\"\"\"\n    pass\n").errors(),
            (Strings{"3:5: invalid UTF-8 byte \\xc3 in a string"}));
  EXPECT_EQ(Layout("x = '\xed\xa0\x80'  # \xfe\n").errors(),  // a surrogate; once per file
            (Strings{"1:6: invalid UTF-8 byte \\xed in a string"}));
  Layout ok("x = 'caf\xc3\xa9'  # \xe2\x82\xac, \xf0\x9f\x98\x80\n");  // well-formed UTF-8
  EXPECT_TRUE(ok.errors().empty());
}

TEST(Layout, HeaderNeedsAnIndentedBlock) {
  EXPECT_EQ(Layout("def f():\nx = 1\n").errors(),
            (Strings{"2:1: expected an indented block after 'def'"}));
  EXPECT_EQ(Layout("def f():\n    if x:\n    y = 1\n").errors(),
            (Strings{"3:5: expected an indented block after 'if'"}));
  EXPECT_EQ(Layout("if a:\n    pass\nelse:  # nothing\n").errors(),
            (Strings{"3:6: expected an indented block after 'else'"}));
  EXPECT_EQ(Layout("for i in x:").errors(),
            (Strings{"1:12: expected an indented block after 'for'"}));
  EXPECT_EQ(Layout("if a:\n  pass\nelif b:\nc = 1\n").errors(),
            (Strings{"4:1: expected an indented block after 'elif'"}));
}

TEST(Layout, OtherLinesEndingInColonOpenBlocksSilently) {
  Layout l("while x:\n    y = 1\nz = 2:\n");
  EXPECT_TRUE(l.errors().empty());  // the grammar reports these lines
  EXPECT_EQ(l.depths(), (std::vector<uint32_t>{0, 1, 0}));
}

TEST(Layout, HeaderWithoutColonKeepsItsBlock) {
  Layout l("def f():\n    for i in x\n        y = 1\n    return y\n");
  EXPECT_TRUE(l.errors().empty());  // the grammar reports the missing ':'
  EXPECT_EQ(l.depths(), (std::vector<uint32_t>{0, 1, 2, 1}));
}

TEST(Layout, BracketErrors) {
  Layout never("x = f(a, [b,\n\ny = 2\n");
  EXPECT_EQ(never.errors(), (Strings{"1:10: '[' was never closed"}));
  ASSERT_EQ(never.lines.size(), 1u);
  EXPECT_TRUE(never.lines[0].broken);

  Layout unmatched("x = a)\ny = (1]\nz = {2)\n");
  EXPECT_EQ(unmatched.errors(),
            (Strings{"1:6: unmatched ')'", "2:7: closing ']' does not match '('",
                     "3:7: closing ')' does not match '{'"}));
  EXPECT_EQ(unmatched.lines.size(), 3u);
  for (const auto& line : unmatched.lines) EXPECT_TRUE(line.broken);
}

TEST(Layout, UnterminatedStrings) {
  Layout short_string("x = f('abc\ny = 1\n");
  EXPECT_EQ(short_string.errors(), (Strings{"1:7: unterminated string literal"}));
  EXPECT_EQ(short_string.texts(), (Strings{"x = f('abc", "y = 1"}));
  EXPECT_TRUE(short_string.lines[0].broken);
  EXPECT_FALSE(short_string.lines[1].broken);

  Layout backslash("x = 'abc\\\ny = 1\n");
  EXPECT_EQ(backslash.errors(), (Strings{"1:5: unterminated string literal"}));

  Layout triple("def f():\n    '''doc\n\n    return 1\n");
  EXPECT_EQ(triple.errors(), (Strings{"2:5: unterminated string literal"}));
  EXPECT_EQ(triple.diags.all()[0].length, 3u);
}

TEST(Layout, BrokenLineKeepsItsBlockWithoutMoreErrors) {
  Layout l("if x == 'a:\n    y = 1\nz = 2\n");
  EXPECT_EQ(l.errors(), (Strings{"1:9: unterminated string literal"}));
  EXPECT_EQ(l.depths(), (std::vector<uint32_t>{0, 1, 0}));
}

TEST(Layout, TooManyIndentationLevels) {
  std::string text;
  for (uint32_t i = 0; i <= max_block_depth; ++i) text += std::string(i, ' ') + "if x:\n";
  text += std::string(max_block_depth + 1, ' ') + "pass\n";
  text += std::string(max_block_depth + 1, ' ') + "pass\n";
  Layout l(text);
  EXPECT_EQ(l.errors(), (Strings{"102:102: too many levels of indentation (limit 100)"}));
  EXPECT_FALSE(l.lines[100].broken);
  EXPECT_TRUE(l.lines[101].broken);
  EXPECT_TRUE(l.lines[102].broken);
}

TEST(Layout, MegabyteLineIsLinear) {
  std::string text = "x = (";
  while (text.size() < (1u << 20)) text += "1, 'a', [b], ";
  text += ")\n";
  const auto start = std::chrono::steady_clock::now();
  Layout l(text);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(l.lines.size(), 1u);
  EXPECT_EQ(l.lines[0].text.size(), text.size() - 1);
  EXPECT_TRUE(l.errors().empty());
  std::printf("layout of a 1 MB line: %.1f ms\n", ms);
}

TEST(Layout, DeepBracketsNeedNoRecursion) {
  Layout l("x = " + std::string(10000, '(') + "\n");
  EXPECT_EQ(l.errors(), (Strings{"1:10004: '(' was never closed"}));
}

}  // namespace
}  // namespace kdsl
