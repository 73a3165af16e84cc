#include "dsl/parser.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <tao/pegtl/contrib/analyze.hpp>

#include "dsl/grammar.h"

namespace kdsl {
namespace {

using Strings = std::vector<std::string>;

/// A module parsed from `text`, with its diagnostics.
struct Parsed {
  explicit Parsed(std::string text) : module(parse_source("t.kdsl", std::move(text), diags)) {}

  /// Every diagnostic as "line:col: message".
  Strings errors() const {
    Strings out;
    for (const auto& d : diags.all()) {
      out.push_back(std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": " +
                    d.message);
    }
    return out;
  }

  Diagnostics diags;
  std::unique_ptr<ast::Module> module;
};

/// The printed form of expression `src` (parsed as the constant `X = src`).
std::string expr(const std::string& src) {
  Parsed p("X = " + src + "\n");
  EXPECT_EQ(p.errors(), Strings{}) << src;
  if (p.module->constants.size() != 1) return "<no constant>";
  return ast::print(*p.module->constants[0].value);
}

/// The first diagnostic for `text`, as "line:col: message" ("" when there is none).
std::string first_error(const std::string& text) {
  Parsed p(text);
  return p.errors().empty() ? "" : p.errors().front();
}

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

const char* const spec_example = R"(@kernel
def rms_norm[T: (f32, f16, bf16)](x: Tensor[T, (M, N)], w: Tensor[T, (N,)], eps: f32 = 1e-6,
                                  *, y: Out[T, (M, N)], rstd: Out[f32, (M,)]):
    """RMSNorm (Zhang & Sennrich, 2019): y = x / sqrt(mean(x^2) + eps) * w over the last axis."""
    for m in parallel(M):          # independent rows
        xf = f32(x[m, :])          # one row as an f32 vector of length N
        r = rsqrt(mean(xf * xf) + eps)
        y[m, :] = T(xf * r * f32(w))
        rstd[m] = r
)";

TEST(Parser, SpecExampleKernel) {
  Parsed p(spec_example);
  ASSERT_EQ(p.errors(), Strings{});
  EXPECT_EQ(ast::print(*p.module),
            "module\n"
            "  @kernel\n"
            "  def rms_norm[T: (f32, f16, bf16)](x: Tensor[T, (M, N)], w: Tensor[T, (N,)], "
            "eps: f32 = 1e-06, *, y: Out[T, (M, N)], rstd: Out[f32, (M,)]):\n"
            "    doc \"RMSNorm (Zhang & Sennrich, 2019): y = x / sqrt(mean(x^2) + eps) * w over "
            "the last axis.\"\n"
            "    for m in parallel(M):\n"
            "      xf = f32(x[m, :])\n"
            "      r = rsqrt((mean((xf * xf)) + eps))\n"
            "      y[m, :] = T(((xf * r) * f32(w)))\n"
            "      rstd[m] = r\n");
  const ast::FunctionDef* k = p.module->find_function("rms_norm");
  ASSERT_NE(k, nullptr);
  EXPECT_TRUE(k->is_kernel());
  EXPECT_EQ(p.module->find_function("other"), nullptr);
  EXPECT_EQ(k->loc.line, 2u);
  EXPECT_EQ(k->loc.col, 5u);
  EXPECT_EQ(k->docstring_loc.line, 4u);
  std::vector<bool> keyword_only;
  for (const auto& param : k->params) keyword_only.push_back(param.keyword_only);
  EXPECT_EQ(keyword_only, (std::vector<bool>{false, false, false, true, true}));
  EXPECT_EQ(k->params[3].loc.line, 3u);
  EXPECT_EQ(k->params[3].loc.col, 38u);
}

TEST(Parser, EmptyModule) {
  Parsed p("# nothing but a comment\n\n");
  EXPECT_EQ(p.errors(), Strings{});
  EXPECT_EQ(ast::print(*p.module), "module\n");
  EXPECT_EQ(p.module->file->path(), "t.kdsl");
}

TEST(Parser, DiagnosticsUnderlineTheOffendingToken) {
  Parsed p("def f(x):\n    return f(x bcd)\n");
  EXPECT_EQ(p.diags.render(),
            "t.kdsl:2:16: error: expected ')' to close '('\n"
            "    return f(x bcd)\n"
            "               ^~~\n");
  Parsed q("X = (a + b) * c\nY = X(1 2)\nf(a) = 1\n");
  EXPECT_EQ(q.diags.all().at(1).length, 4u);  // the target `f(a)`
}

// A NUL byte (a binary or UTF-16 file) is one error at its position, not a parse of the bytes.
TEST(Parser, ANulByteIsNotText) {
  Parsed p(std::string("def f(x):\n    return x\0\x01 ((\n", 27));
  EXPECT_EQ(p.errors(), Strings{"2:13: a NUL byte: this is not a text file"});
  EXPECT_EQ(p.diags.all().at(0).hint,
            ".kdsl files are UTF-8 text (is this a binary or a UTF-16 file?)");
  EXPECT_TRUE(p.module->functions.empty());
}

TEST(Parser, Precedence) {
  EXPECT_EQ(expr("-x**2"), "(-(x ** 2))");
  EXPECT_EQ(expr("-a ** -b"), "(-(a ** (-b)))");
  EXPECT_EQ(expr("a ** b ** c"), "(a ** (b ** c))");
  EXPECT_EQ(expr("a + b * c"), "(a + (b * c))");
  EXPECT_EQ(expr("a - b - c"), "((a - b) - c)");
  EXPECT_EQ(expr("a / b // c % d * e"), "((((a / b) // c) % d) * e)");
  EXPECT_EQ(expr("(a + b) * c"), "((a + b) * c)");
  EXPECT_EQ(expr("a if c else b"), "(a if c else b)");
  EXPECT_EQ(expr("x if a else y if b else z"), "(x if a else (y if b else z))");
  EXPECT_EQ(expr("a or b if c or d else e"), "((a or b) if (c or d) else e)");
  EXPECT_EQ(expr("not a and b"), "((not a) and b)");
  EXPECT_EQ(expr("a or b and c or d"), "((a or (b and c)) or d)");
  EXPECT_EQ(expr("not a < b"), "(not (a < b))");
  EXPECT_EQ(expr("not not a"), "(not (not a))");
  EXPECT_EQ(expr("a < b + 1"), "(a < (b + 1))");
  EXPECT_EQ(expr("a + 1 >= -b"), "((a + 1) >= (-b))");
  EXPECT_EQ(expr("+a - -b"), "((+a) - (-b))");
  EXPECT_EQ(expr("f(a)(b)[c] ** 2"), "(f(a)(b)[c] ** 2)");
  EXPECT_EQ(expr("2 ** -1"), "(2 ** (-1))");
}

TEST(Parser, ComparisonOperators) {
  EXPECT_EQ(expr("a<b"), "(a < b)");
  EXPECT_EQ(expr("a<=b"), "(a <= b)");
  EXPECT_EQ(expr("a>b"), "(a > b)");
  EXPECT_EQ(expr("a>=b"), "(a >= b)");
  EXPECT_EQ(expr("a==b"), "(a == b)");
  EXPECT_EQ(expr("a!=b"), "(a != b)");
}

TEST(Parser, Tuples) {
  EXPECT_EQ(expr("a, b"), "(a, b)");
  EXPECT_EQ(expr("a,"), "(a,)");
  EXPECT_EQ(expr("a, b,"), "(a, b)");
  EXPECT_EQ(expr("(a,)"), "(a,)");
  EXPECT_EQ(expr("()"), "()");
  EXPECT_EQ(expr("(a)"), "a");
  EXPECT_EQ(expr("((a))"), "a");
  EXPECT_EQ(expr("(a, b,)"), "(a, b)");
  EXPECT_EQ(expr("((a, b), c)"), "((a, b), c)");
  EXPECT_EQ(expr("(M, N)"), "(M, N)");
}

TEST(Parser, CallsAndKeywordArguments) {
  EXPECT_EQ(expr("f()"), "f()");
  EXPECT_EQ(expr("f(a,)"), "f(a)");
  EXPECT_EQ(expr("f(a, k=1, j=g(x=2))"), "f(a, k=1, j=g(x=2))");
  EXPECT_EQ(expr("f(k = 1)"), "f(k=1)");
  EXPECT_EQ(expr("f(a == b)"), "f((a == b))");
  EXPECT_EQ(expr("f (a) (b)"), "f(a)(b)");
  Parsed p("X = f(a, k=2)\n");
  const ast::Expr& call = *p.module->constants[0].value;
  ASSERT_EQ(call.kind, ast::ExprKind::call);
  ASSERT_EQ(call.args.size(), 2u);
  ASSERT_EQ(call.keywords.size(), 1u);
  EXPECT_EQ(call.keywords[0].name, "k");
  EXPECT_EQ(call.keywords[0].loc.col, 10u);
  EXPECT_EQ(call.keywords[0].value->int_value, 2);
}

TEST(Parser, Subscripts) {
  EXPECT_EQ(expr("x[m, :]"), "x[m, :]");
  EXPECT_EQ(expr("x[b, :, d]"), "x[b, :, d]");
  EXPECT_EQ(expr("w[:]"), "w[:]");
  EXPECT_EQ(expr("w[ : ]"), "w[:]");
  EXPECT_EQ(expr("x[i][j]"), "x[i][j]");
  EXPECT_EQ(expr("x[a,]"), "x[a]");
  EXPECT_EQ(expr("Tensor[T, (M, 2)]"), "Tensor[T, (M, 2)]");
  Parsed p("X = x[m, :]\n");
  const ast::Expr& sub = *p.module->constants[0].value;
  ASSERT_EQ(sub.args.size(), 3u);
  EXPECT_EQ(sub.args[2]->kind, ast::ExprKind::slice);
  EXPECT_EQ(sub.args[2]->loc.col, 10u);
}

TEST(Parser, Literals) {
  auto value = [](const std::string& src) {
    Parsed p("X = " + src + "\n");
    EXPECT_EQ(p.errors(), Strings{}) << src;
    return std::move(p.module->constants.at(0).value);
  };
  EXPECT_EQ(value("0")->int_value, 0);
  EXPECT_EQ(value("0_0")->int_value, 0);
  EXPECT_EQ(value("007.5")->float_value, 7.5);
  EXPECT_EQ(value("0e0")->float_value, 0.0);
  EXPECT_EQ(value("1_000")->int_value, 1000);
  EXPECT_EQ(value("9223372036854775807")->int_value, INT64_MAX);
  EXPECT_EQ(value("1e-6")->float_value, 1e-6);
  EXPECT_EQ(value("1e-6")->kind, ast::ExprKind::float_lit);
  EXPECT_EQ(value(".5")->float_value, 0.5);
  EXPECT_EQ(value("3.")->float_value, 3.0);
  EXPECT_EQ(value("2.5E+3")->float_value, 2500.0);
  EXPECT_EQ(value("1_0.2_5")->float_value, 10.25);
  EXPECT_EQ(value("1e-400")->float_value, 0.0);
  EXPECT_TRUE(value("True")->bool_value);
  EXPECT_EQ(value("False")->kind, ast::ExprKind::bool_lit);
  EXPECT_EQ(value(R"("a\"b\n\t\\")")->name, "a\"b\n\t\\");
  EXPECT_EQ(value(R"('it\'s')")->name, "it's");
  EXPECT_EQ(value(R"("\sqrt{x}")")->name, "\\sqrt{x}");
  EXPECT_EQ(value("\"\"\"two\n  lines \"quoted\" \"\"\"")->name, "two\n  lines \"quoted\" ");
  EXPECT_EQ(value("''")->name, "");
  EXPECT_EQ(expr("1e-6"), "1e-06");
  EXPECT_EQ(expr("2.0"), "2.0");
  EXPECT_EQ(expr("'a\"b'"), "\"a\\\"b\"");
}

TEST(Parser, ExpressionLocations) {
  Parsed p("def f():\n    y = a + (b * c)\n    z = g(a,\n          b)\n");
  ASSERT_EQ(p.errors(), Strings{});
  const auto& body = p.module->functions.at(0).body;
  const ast::Stmt& y = *body.at(0);
  EXPECT_EQ(y.loc.line, 2u);
  EXPECT_EQ(y.loc.col, 5u);
  EXPECT_EQ(y.end, 28u);  // past ')' at offset 27
  const ast::Expr& sum = *y.value;
  EXPECT_EQ(sum.loc.col, 9u);
  EXPECT_EQ(sum.span(), 11u);
  const ast::Expr& product = *sum.args[1];  // its span takes the parentheses
  EXPECT_EQ(product.loc.col, 13u);
  EXPECT_EQ(product.span(), 7u);
  EXPECT_EQ(product.args[0]->loc.col, 14u);
  EXPECT_EQ(product.args[0]->span(), 1u);
  const ast::Expr& call = *body.at(1)->value;
  EXPECT_EQ(call.loc.line, 3u);
  EXPECT_EQ(call.loc.col, 9u);
  EXPECT_EQ(call.args[2]->loc.line, 4u);
  EXPECT_EQ(call.args[2]->loc.col, 11u);
  EXPECT_EQ(call.end, p.module->file->text().rfind(')') + 1);
}

TEST(Parser, StatementLocations) {
  Parsed p("def f(x):\n    if x:\n        return 1\n    else:\n        pass\n");
  ASSERT_EQ(p.errors(), Strings{});
  const ast::Stmt& s = *p.module->functions.at(0).body.at(0);
  EXPECT_EQ(s.kind, ast::StmtKind::if_);
  EXPECT_EQ(s.loc.col, 5u);
  EXPECT_EQ(s.end - s.loc.offset, 5u);  // "if x:"
  EXPECT_EQ(s.else_loc.line, 4u);
  EXPECT_EQ(s.body.at(0)->loc.col, 9u);
  EXPECT_EQ(s.body.at(0)->end - s.body.at(0)->loc.offset, 8u);  // "return 1"
}

TEST(Parser, Decorators) {
  Parsed p(
      "@kernel(block=256)\n@other\ndef k():\n    pass\n\n@helper\ndef h(): \n    return 1\n"
      "@kernel\ndef plain(): \n    pass\n");
  ASSERT_EQ(p.errors(), Strings{});
  EXPECT_EQ(ast::print(*p.module),
            "module\n"
            "  @kernel(block=256)\n"
            "  @other\n"
            "  def k():\n"
            "    pass\n"
            "  @helper\n"
            "  def h():\n"
            "    return 1\n"
            "  @kernel\n"
            "  def plain():\n"
            "    pass\n");
  EXPECT_TRUE(p.module->functions[0].is_kernel());
  EXPECT_FALSE(p.module->functions[1].is_kernel());
  EXPECT_TRUE(p.module->functions[2].is_kernel());
}

TEST(Parser, GenericsParametersDefaults) {
  Parsed p(
      "def k[T, U: float, V: (f32, f16),](a, b: f32, c: T = 1.0, *, d: Out[T, (N,)], e=2,) "
      "-> T:\n    pass\n");
  ASSERT_EQ(p.errors(), Strings{});
  EXPECT_EQ(ast::print(*p.module),
            "module\n"
            "  def k[T, U: float, V: (f32, f16)](a, b: f32, c: T = 1.0, *, d: Out[T, (N,)], "
            "e = 2) -> T:\n"
            "    pass\n");
  const ast::FunctionDef& f = p.module->functions[0];
  ASSERT_EQ(f.generics.size(), 3u);
  EXPECT_EQ(f.generics[0].constraint, nullptr);
  EXPECT_EQ(f.generics[1].loc.col, 10u);
  ASSERT_EQ(f.params.size(), 5u);
  EXPECT_FALSE(f.params[2].keyword_only);
  EXPECT_TRUE(f.params[3].keyword_only);
  EXPECT_TRUE(f.params[4].keyword_only);
  EXPECT_EQ(f.params[0].annotation, nullptr);
  EXPECT_EQ(f.params[4].default_value->int_value, 2);
  EXPECT_FALSE(f.is_kernel());
}

TEST(Parser, Docstrings) {
  Parsed p(
      "'''The module.'''\n"
      "EPS: f32 = 1e-6\n"
      "N = 4\n"
      "def f(x):\n"
      "\n"
      "    \"\"\"Doubles x.\n\n    Really.\"\"\"\n"
      "    y = 2 * x\n"
      "    'not a docstring'\n"
      "    return y\n");
  ASSERT_EQ(p.errors(), Strings{});
  EXPECT_EQ(ast::print(*p.module),
            "module\n"
            "  doc \"The module.\"\n"
            "  const EPS: f32 = 1e-06\n"
            "  const N = 4\n"
            "  def f(x):\n"
            "    doc \"Doubles x.\\n\\n    Really.\"\n"
            "    y = (2 * x)\n"
            "    \"not a docstring\"\n"
            "    return y\n");
  EXPECT_EQ(p.module->functions[0].docstring_loc.line, 6u);
  EXPECT_EQ(p.module->constants[0].loc.line, 2u);
}

TEST(Parser, ElifChainsNestInOrelse) {
  Parsed p(
      "def f(x):\n"
      "    if x < 0:\n"
      "        y = 1\n"
      "    elif x == 0:\n"
      "        y = 2\n"
      "    elif x > 5:\n"
      "        y = 3\n"
      "    else:\n"
      "        y = 4\n"
      "    return y\n");
  ASSERT_EQ(p.errors(), Strings{});
  EXPECT_EQ(ast::print(*p.module),
            "module\n"
            "  def f(x):\n"
            "    if (x < 0):\n"
            "      y = 1\n"
            "    else:\n"
            "      if (x == 0):\n"
            "        y = 2\n"
            "      else:\n"
            "        if (x > 5):\n"
            "          y = 3\n"
            "        else:\n"
            "          y = 4\n"
            "    return y\n");
  const ast::Stmt& s1 = *p.module->functions[0].body[0];
  const ast::Stmt& s2 = *s1.orelse.at(0);
  const ast::Stmt& s3 = *s2.orelse.at(0);
  EXPECT_EQ(s1.else_loc.line, 4u);
  EXPECT_EQ(s2.loc.line, 4u);
  EXPECT_EQ(s2.loc.col, 5u);
  EXPECT_EQ(s2.else_loc.line, 6u);
  EXPECT_EQ(s3.else_loc.line, 8u);
  EXPECT_EQ(s3.orelse.size(), 1u);
  EXPECT_FALSE(s3.orelse[0]->else_loc.valid());
}

TEST(Parser, AssignmentsAndReturns) {
  Parsed p(
      "def f(v, x):\n"
      "    acc = 0\n"
      "    acc += v\n"
      "    acc -= v\n"
      "    acc *= 2\n"
      "    acc /= 2\n"
      "    x[0, :] += v\n"
      "    a, b = b, a\n"
      "    (c, d), e = t\n"
      "    f(a)\n"
      "    return a, b\n"
      "def g():\n"
      "    return\n");
  ASSERT_EQ(p.errors(), Strings{});
  EXPECT_EQ(ast::print(*p.module),
            "module\n"
            "  def f(v, x):\n"
            "    acc = 0\n"
            "    acc += v\n"
            "    acc -= v\n"
            "    acc *= 2\n"
            "    acc /= 2\n"
            "    x[0, :] += v\n"
            "    (a, b) = (b, a)\n"
            "    ((c, d), e) = t\n"
            "    f(a)\n"
            "    return (a, b)\n"
            "  def g():\n"
            "    return\n");
  const auto& body = p.module->functions[0].body;
  EXPECT_EQ(body[1]->aug_op, ast::BinaryOp::add);
  EXPECT_EQ(body[2]->aug_op, ast::BinaryOp::sub);
  EXPECT_EQ(body[3]->aug_op, ast::BinaryOp::mul);
  EXPECT_EQ(body[4]->aug_op, ast::BinaryOp::div);
  EXPECT_EQ(body[5]->kind, ast::StmtKind::aug_assign);
  EXPECT_EQ(body[8]->kind, ast::StmtKind::expr);
  EXPECT_EQ(p.module->functions[1].body[0]->value, nullptr);
}

TEST(Parser, ForLoops) {
  Parsed p("def k(x):\n    for b, d in parallel(B, D):\n        pass\n");
  ASSERT_EQ(p.errors(), Strings{});
  const ast::Stmt& s = *p.module->functions[0].body.at(0);
  EXPECT_EQ(s.kind, ast::StmtKind::for_);
  ASSERT_EQ(s.targets.size(), 2u);
  EXPECT_EQ(s.targets[1]->name, "d");
  EXPECT_EQ(ast::print(*s.value), "parallel(B, D)");
  EXPECT_EQ(s.body.size(), 1u);
}

TEST(Parser, KeywordsAndReservedWordsAreNotNames) {
  for (const auto& r : grammar::reserved_words) {
    EXPECT_EQ(first_error("X = " + std::string(r.word) + "\n"), "1:5: " + std::string(r.message));
    EXPECT_EQ(first_error(std::string(r.word) + "_ok = 1\n"), "");
  }
  for (std::string_view k : grammar::keywords) {
    EXPECT_NE(first_error(std::string(k) + " = 1\n"), "") << k;
    EXPECT_EQ(first_error(std::string(k) + "x = 1\n"), "") << k;
  }
}

TEST(Parser, GrammarHasNoAnalyzeIssues) {
  EXPECT_EQ(tao::pegtl::analyze<grammar::line>(), 0u);
}

TEST(Parser, SyntaxErrorMessages) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"X = f(a b)\n", "1:9: expected ')' to close '('"},
      {"X = (a b)\n", "1:8: expected ')' to close '('"},
      {"X = x[a b]\n", "1:9: expected ']' to close '['"},
      {"X = x[]\n", "1:7: expected an index after '['"},
      {"X = x[a,,]\n", "1:9: expected an index or ']' after ','"},
      {"X = x[1:3]\n",
       "1:8: slices with bounds are not supported; a subscript takes ':' for a "
       "whole axis"},
      {"X = x[:3]\n",
       "1:8: slices with bounds are not supported; a subscript takes ':' for a "
       "whole axis"},
      {"X = f(,)\n", "1:7: expected an argument or ')' after '('"},
      {"X = f(a,,)\n", "1:9: expected an argument or ')' after ','"},
      {"X = f(k=)\n", "1:9: expected an expression after '='"},
      {"X = (,)\n", "1:6: expected an expression or ')' after '('"},
      {"X = (a,,)\n", "1:8: expected an expression or ')' after ','"},
      {"X = a < b < c\n", "1:11: chained comparisons are not supported; write (a < b) and (b < c)"},
      {"X = a.b\n", "1:6: attribute access (a.b) is not part of kdsl"},
      {"X = [1, 2]\n", "1:5: lists are not part of kdsl; write a tuple such as (a, b)"},
      {"X = {1: 2}\n", "1:5: dicts and sets are not part of kdsl"},
      {"X = 1 if a\n", "1:11: expected 'else' in the conditional expression"},
      {"X = a if\n", "1:9: expected a condition after 'if'"},
      {"X = a if b else\n", "1:16: expected an expression after 'else'"},
      {"X = not\n", "1:8: expected an expression after 'not'"},
      {"X = a and\n", "1:10: expected an expression after 'and'"},
      {"X = a or\n", "1:9: expected an expression after 'or'"},
      {"X = 1 +\n", "1:8: expected an expression after '+'"},
      {"X = 1 - \n", "1:8: expected an expression after '-'"},
      {"X = a *\n", "1:8: expected an expression after '*'"},
      {"X = a /\n", "1:8: expected an expression after '/'"},
      {"X = a //\n", "1:9: expected an expression after '//'"},
      {"X = a %\n", "1:8: expected an expression after '%'"},
      {"X = a **\n", "1:9: expected an expression after '**'"},
      {"X = -\n", "1:6: expected an expression after '-'"},
      {"X = +\n", "1:6: expected an expression after '+'"},
      {"X = a <\n", "1:8: expected an expression after '<'"},
      {"X = a <=\n", "1:9: expected an expression after '<='"},
      {"X = a >\n", "1:8: expected an expression after '>'"},
      {"X = a >=\n", "1:9: expected an expression after '>='"},
      {"X = a ==\n", "1:9: expected an expression after '=='"},
      {"X = a !=\n", "1:9: expected an expression after '!='"},
      {"X = 1 2\n", "1:7: unexpected '2'"},
      {"X = a -> b\n", "1:7: unexpected '->'"},
      {"X = 'a' 'b'\n", "1:9: unexpected string literal"},
      {"X = 1e\n", "1:7: expected digits in the exponent of a number"},
      {"X = 12abc\n", "1:7: invalid number literal"},
      {"X = 1__0\n", "1:6: invalid number literal"},
      {"X = 0x10\n", "1:6: invalid number literal"},
      {"X = 010\n", "1:6: an integer literal cannot have leading zeros"},
      {"X = 1.5.2\n", "1:8: invalid number literal"},
      {"X = 9223372036854775808\n", "1:5: integer literal too large"},
      {"X = 1e999\n", "1:5: float literal too large"},
      {"X = a is b\n", "1:7: 'is' is not part of kdsl; compare values with == or !="},
      {"X = None\n", "1:5: None is not part of kdsl; every value is a number, a bool or a tuple"},
      {"X = lambda: 1\n", "1:5: lambda is not part of kdsl; define a helper function with def"},
      {"import math\n", "1:1: import is not part of kdsl; a .kdsl module is self-contained"},
      {"from a import b\n",
       "1:1: from-import is not part of kdsl; a .kdsl module is "
       "self-contained"},
      {"class A:\n    pass\n",
       "1:1: classes are not part of kdsl; write helper functions and "
       "kernels"},
      {"while x:\n    pass\n",
       "1:1: while loops are not part of kdsl; use a scan (SPEC section "
       "10)"},
      {"if a is None:\n    pass\n", "1:6: 'is' is not part of kdsl; compare values with == or !="},
      {"X = a && b\n", "1:7: '&&' is not part of kdsl; use 'and'"},
      {"X = a || b\n", "1:7: '||' is not part of kdsl; use 'or'"},
      {"X = !a\n", "1:5: '!' is not part of kdsl; use 'not'"},
      {"X = a & b\n", "1:7: bitwise operators are not part of kdsl"},
      {"X = a << 2\n", "1:7: bitwise operators are not part of kdsl"},
      {"X = f(a ^ b)\n", "1:9: bitwise operators are not part of kdsl"},
      {"X = a = b\n",
       "1:7: chained assignment (a = b = c) is not supported; write one "
       "assignment per line"},
      {"X +=\n", "1:5: expected an expression after '+='"},
      {"X -= \n", "1:5: expected an expression after '-='"},
      {"X *=\n", "1:5: expected an expression after '*='"},
      {"X /=\n", "1:5: expected an expression after '/='"},
      {"X =\n", "1:4: expected an expression after '='"},
      {"f(a) = 1\n", "1:1: cannot assign to a function call"},
      {"1 = x\n", "1:1: cannot assign to a literal"},
      {"a + b = 1\n", "1:1: cannot assign to an expression"},
      {"a, f(b) = 1, 2\n", "1:4: cannot assign to a function call"},
      {"() = x\n", "1:1: cannot assign to ()"},
      {"X = f(a=1, b)\n", "1:12: positional argument follows keyword argument"},
      {"X = f(a=1, a=2)\n", "1:12: keyword argument 'a' repeated"},
      {"X: = 1\n", "1:4: expected a type after ':'"},
      {"X: f32\n", "1:7: expected '=' and a value after the annotation"},
      {"X: f32 =\n", "1:9: expected an expression after '='"},
      {"a, b: f32 = 1\n", "1:1: only a name can be annotated"},
      {"a, b += 1\n", "1:1: an augmented assignment needs a name or a subscript on its left"},
      {"def (x):\n    pass\n", "1:5: expected a function name after 'def'"},
      {"def f:\n    pass\n", "1:6: expected '(' after the function name"},
      {"def f(x) y:\n    pass\n", "1:10: expected ':' at the end of the 'def' line"},
      {"def f(x)\n    pass\n", "1:9: expected ':' at the end of the 'def' line"},
      {"def f(1):\n    pass\n", "1:7: expected a parameter name"},
      {"def f(x, 1):\n    pass\n", "1:10: expected a parameter name or ')' after ','"},
      {"def f(x y):\n    pass\n", "1:9: expected ')' to close '('"},
      {"def f(*args):\n    pass\n",
       "1:7: *args and **kwargs are not part of kdsl; a lone '*' "
       "marks the keyword-only parameters"},
      {"def f(**kw):\n    pass\n",
       "1:7: *args and **kwargs are not part of kdsl; a lone '*' "
       "marks the keyword-only parameters"},
      {"def f(*, *, a):\n    pass\n", "1:10: only one '*' may appear in a parameter list"},
      {"def f(a, *):\n    pass\n", "1:10: '*' must be followed by a parameter"},
      {"def f[](x):\n    pass\n", "1:7: expected a generic parameter name after '['"},
      {"def f[T x](y):\n    pass\n", "1:9: expected ']' to close '['"},
      {"def f[T,,](y):\n    pass\n", "1:9: expected a generic parameter name or ']' after ','"},
      {"def f[T:](y):\n    pass\n", "1:9: expected a dtype or a tuple of dtypes after ':'"},
      {"def f(x) -> :\n    pass\n", "1:13: expected a type after '->'"},
      {"def f(x = ):\n    pass\n", "1:11: expected a default value after '='"},
      {"def f(x: ):\n    pass\n", "1:10: expected a type after ':'"},
      {"def f(): return 1\n",
       "1:10: unexpected 'return' after ':'; the block starts on the "
       "next line, indented"},
      {"for in x:\n    pass\n", "1:5: expected a loop variable name after 'for'"},
      {"for a, in x:\n    pass\n", "1:8: expected a loop variable name after ','"},
      {"for a b in x:\n    pass\n", "1:7: expected 'in' after the loop variables"},
      {"for a in :\n    pass\n", "1:10: expected an expression after 'in'"},
      {"for a in x\n    pass\n", "1:11: expected ':' at the end of the 'for' line"},
      {"if x = 1:\n    pass\n", "1:6: '=' assigns; compare with '=='"},
      {"if x\n    pass\n", "1:5: expected ':' at the end of the 'if' line"},
      {"if :\n    pass\n", "1:4: expected a condition after 'if'"},
      {"elif x y:\n    pass\n", "1:8: expected ':' at the end of the 'elif' line"},
      {"elif:\n    pass\n", "1:5: expected a condition after 'elif'"},
      {"else x:\n    pass\n", "1:6: expected ':' after 'else'"},
      {"@\ndef f():\n    pass\n", "1:2: expected a decorator name after '@'"},
      {"@kernel extra\ndef f():\n    pass\n", "1:9: unexpected 'extra'"},
      {"*x = 1\n", "1:1: unexpected '*' at the start of a statement"},
      {"$ = 1\n", "1:1: unexpected '$' at the start of a statement"},
      {"X = 1 \x01\n", "1:7: unexpected character 0x01"},
      {"X = \\ 1\n", "1:5: expected an expression after '='"},
      {"pass 1\n", "1:6: unexpected '1'"},
      {"return 1\n",
       "1:1: only constants, helper functions and kernels may appear at module "
       "level"},
  };
  for (const auto& [text, message] : cases) EXPECT_EQ(first_error(text), message) << text;
}

// SPEC section 2: outside strings and comments any non-ASCII byte is an `unexpected non-ASCII
// character`, wherever it stands (where an expression, a name or a token was expected, the
// message was that expectation's, e.g. "expected an expression after '='"), with a hint.
TEST(Parser, NonAsciiOutsideStringsAndCommentsIsNamedAsSuch) {
  const std::pair<std::string, std::string> cases[] = {
      {"\xce\xb1 = 1\n", "1:1"},  // α = 1
      {"X = \xce\xb1 + 1\n", "1:5"},
      {"X = a + \xce\xb2\n", "1:9"},
      {"X = -\xce\xb2\n", "1:6"},
      {"X = caf\xc3\xa9\n", "1:8"},
      {"X = f(a, \xce\xb1)\n", "1:10"},
      {"X = x[\xce\xb1]\n", "1:7"},
      {"X = (a \xce\xb1)\n", "1:8"},
      {"X = 1 \xe2\x80\x94 2\n", "1:7"},  // an em dash
      {"X = \xff\n", "1:5"},              // not UTF-8 either
      {"X: \xce\xb1 = 1\n", "1:4"},
      {"@\xce\xb1\ndef f():\n    pass\n", "1:2"},
      {"def \xce\xb1():\n    pass\n", "1:5"},
      {"def f(\xce\xb1):\n    pass\n", "1:7"},
      {"def f[\xce\xb1](x):\n    pass\n", "1:7"},
      {"def f(x) -> \xce\xb1:\n    pass\n", "1:13"},
      {"def f(): \xce\xb1\n", "1:10"},
      {"def f(x):\n    for \xce\xb1 in x:\n        pass\n", "2:9"},
      {"def f(x):\n    if x \xe2\x89\xa4 1:\n        pass\n", "2:10"},  // ≤
      {"def f(x):\n    return x \xc3\x97 2\n", "2:14"},                 // ×
  };
  for (const auto& [text, at] : cases) {
    Parsed p(text);
    EXPECT_EQ(p.errors(), Strings{at + ": unexpected non-ASCII character"}) << text;
    if (p.diags.all().empty()) continue;
    EXPECT_EQ(p.diags.all()[0].hint,
              "identifiers and operators are ASCII; other text may appear only in strings and "
              "comments")
        << text;
  }
  // Non-ASCII text in strings and comments is no error; an unterminated string is that error.
  EXPECT_EQ(first_error("def f():\n    \"\"\"\xce\xb1\"\"\"  # \xce\xb2\n    return '\xce\xb3'\n"),
            "");
  EXPECT_EQ(first_error("X = '\xce\xb1\n"), "1:5: unterminated string literal");
  // As shown: the location, the line, a caret under the character.
  Parsed p("def f(x):\n    return x * \xce\xb1\n");
  EXPECT_EQ(p.diags.render(),
            "t.kdsl:2:16: error: unexpected non-ASCII character\n"
            "    return x * \xce\xb1\n"
            "               ^\n"
            "hint: identifiers and operators are ASCII; other text may appear only in strings "
            "and comments\n");
}

TEST(Parser, ModuleStructureErrors) {
  EXPECT_EQ(Parsed("def f():\n    def g():\n        pass\n    return 1\n").errors(),
            Strings{"2:5: nested functions are not supported"});
  EXPECT_EQ(Parsed("def f():\n    @kernel\n    def g():\n        pass\n").errors(),
            Strings{"3:5: nested functions are not supported"});
  EXPECT_EQ(Parsed("@kernel\nX = 1\n").errors(),
            Strings{"1:1: a decorator must be followed by a def"});
  EXPECT_EQ(Parsed("@kernel\n@other\n").errors(),
            Strings{"2:1: a decorator must be followed by a def"});
  EXPECT_EQ(Parsed("def f():\n    @kernel\n    return 1\n").errors(),
            Strings{"2:5: a decorator must be followed by a def"});
  EXPECT_EQ(Parsed("def f():\n    else:\n        pass\n").errors(),
            Strings{"2:5: 'else' without a matching 'if'"});
  EXPECT_EQ(Parsed("elif x:\n    pass\n").errors(), Strings{"1:1: 'elif' without a matching 'if'"});
  EXPECT_EQ(Parsed("def f(x):\n    for i in x:\n        pass\n    else:\n        pass\n").errors(),
            Strings{"4:5: 'else' without a matching 'if'"});
  EXPECT_EQ(Parsed("def f(x):\n    if x:\n        pass\n    else:\n        pass\n    else:\n"
                   "        pass\n")
                .errors(),
            Strings{"6:5: 'else' without a matching 'if'"});
  EXPECT_EQ(Parsed("def f():\n    x: f32 = 1\n").errors(),
            Strings{"2:8: only module-level constants can be annotated"});
  EXPECT_EQ(Parsed("if x:\n    y = 1 +\nelse:\n    pass\nX = 1\n").errors(),
            (Strings{"1:1: only constants, helper functions and kernels may appear at module "
                     "level",
                     "2:12: expected an expression after '+'"}));
  EXPECT_EQ(Parsed("'doc'\n'second'\n").errors(),
            Strings{"2:1: only constants, helper functions and kernels may appear at module "
                    "level"});
  EXPECT_EQ(Parsed("x[0] = 1\na, b = 1, 2\nX += 1\n").errors().size(), 3u);
}

TEST(Parser, ASyntaxErrorOnADecoratedDefIsTheOnlyError) {
  // The def line's error alone: the decorator is not also reported as missing its def.
  EXPECT_EQ(Parsed("@kernel\ndef k(x)\n    pass\n").errors(),
            Strings{"2:9: expected ':' at the end of the 'def' line"});
  EXPECT_EQ(
      Parsed("@kernel\ndef k(x: Tensor[f32, (M, 99999999999999999999)]):\n    pass\n").errors(),
      Strings{"2:26: integer literal too large"});
  EXPECT_EQ(Parsed("@kernel\ndef k(x, 3x):\n    pass\n").errors(),
            Strings{"2:10: expected a parameter name or ')' after ','"});
  EXPECT_EQ(Parsed("@kernel\n@other(\ndef k(x):\n    pass\n").errors(),
            Strings{"2:7: '(' was never closed"});
  EXPECT_EQ(Parsed("def f():\n    @kernel\n    def g(x)\n        pass\n").errors(),
            Strings{"3:13: expected ':' at the end of the 'def' line"});
  // A decorator followed by a line with an error of its own: both, in source order.
  EXPECT_EQ(Parsed("@kernel\nX = 1 +\n").errors(),
            (Strings{"1:1: a decorator must be followed by a def",
                     "2:8: expected an expression after '+'"}));
  EXPECT_EQ(Parsed("def f():\n    @kernel\n    y = 1 +\n").errors(),
            (Strings{"2:5: a decorator must be followed by a def",
                     "3:12: expected an expression after '+'"}));
}

TEST(Parser, ReportsEverySyntaxErrorOfAFile) {
  Parsed p(
      "X = 1 +\n"
      "def f(x):\n"
      "    y = x +* 2\n"
      "    for i in range(3)\n"
      "        z = 1\n"
      "    return y y\n"
      "def g(, x):\n"
      "    pass\n"
      "Y = while\n"
      "def h(x):\n"
      "    if x:\n"
      "        a = (1,\n"
      "             2]\n"
      "    elif x y:\n"
      "        pass\n"
      "    else:\n"
      "        b = 'open\n"
      "    return a\n");
  EXPECT_EQ(
      p.errors(),
      (Strings{"1:8: expected an expression after '+'", "3:12: expected an expression after '+'",
               "4:22: expected ':' at the end of the 'for' line", "6:14: unexpected 'y'",
               "7:7: expected a parameter name",
               "9:5: while loops are not part of kdsl; use a scan (SPEC section 10)",
               "13:15: closing ']' does not match '('",
               "14:12: expected ':' at the end of the 'elif' line",
               "17:13: unterminated string literal"}));  // in source order
  ASSERT_EQ(p.module->functions.size(), 2u);             // f and h parsed, g skipped
  EXPECT_EQ(ast::print(*p.module),
            "module\n"
            "  def f(x):\n"
            "  def h(x):\n"
            "    if x:\n"
            "    return a\n");
}

TEST(Parser, DeepNestingIsAnErrorNotACrash) {
  const std::string deep = "expression nested too deeply (limit 200)";
  const std::string parens = std::string(10000, '(') + "1" + std::string(10000, ')');
  EXPECT_EQ(first_error("X = " + parens + "\n"), "1:205: " + deep);
  EXPECT_EQ(first_error("X = " + std::string(200, '(') + "1" + std::string(200, ')') + "\n"), "");
  EXPECT_EQ(first_error("X = " + std::string(10000, '-') + "1\n"), "1:205: " + deep);
  std::string nots, calls, subscripts, powers, ternaries;
  for (int i = 0; i < 10000; ++i) {
    nots += "not ";
    calls += "f(";
    subscripts += "x[";
    powers += "a ** ";
    ternaries += "a if b else ";
  }
  EXPECT_EQ(first_error("X = " + nots + "a\n"), "1:805: " + deep);
  EXPECT_EQ(first_error("X = " + calls + "1" + std::string(10000, ')') + "\n"), "1:406: " + deep);
  EXPECT_EQ(first_error("X = " + subscripts + "1" + std::string(10000, ']') + "\n"),
            "1:406: " + deep);
  EXPECT_EQ(first_error("X = " + powers + "a\n"), "1:1007: " + deep);
  EXPECT_EQ(first_error("X = " + ternaries + "a\n"), "1:2407: " + deep);
  EXPECT_EQ(first_error("def f(x: " + parens + "):\n    pass\n"), "1:210: " + deep);
}

TEST(Parser, LongOperatorChainsAreLimited) {
  std::string ok = "X = 1", too_long = "X = 1";
  for (int i = 0; i < 199; ++i) ok += " + 1";
  for (int i = 0; i < 10000; ++i) too_long += " + 1";
  EXPECT_EQ(first_error(ok + "\n"), "");
  // The 200th '+' would make the tree 201 deep: 4 + 4 * 199 + 2 = 802.
  EXPECT_EQ(first_error(too_long + "\n"), "1:803: expression nested too deeply (limit 200)");
}

TEST(Parser, MegabyteLineIsFast) {
  std::string text = "X = (";
  size_t n = 0;
  while (text.size() < (1u << 20)) {
    text += "1, a, 'b', f(c, k=2), x[1, :], -d ** 2, ";
    n += 6;
  }
  text += ")\nS = '" + std::string(1u << 20, 's') + "'\n";
  const auto start = std::chrono::steady_clock::now();
  Parsed p(text);
  const double ms = elapsed_ms(start);
  ASSERT_EQ(p.errors(), Strings{});
  EXPECT_EQ(p.module->constants.at(0).value->args.size(), n);
  EXPECT_EQ(p.module->constants.at(1).value->name.size(), 1u << 20);
  std::printf("parse of two 1 MB lines: %.1f ms\n", ms);
}

TEST(Parser, GeneratedFileOf2000Lines) {
  std::string text = "EPS = 1e-6\n";
  int count = 0;
  while (count < 2000) {
    const std::string k = std::to_string(count);
    text += "@kernel\ndef k" + k + "[T: (f32, f16)](x: Tensor[T, (M, N)], *, y: Out[T, (M, N)]):\n";
    text += "    \"\"\"Kernel " + k + ".\"\"\"\n    for m in parallel(M):\n";
    text += "        v = f32(x[m, :])\n        if N > 4:\n            v = v * 2 + EPS\n";
    text += "        else:\n            v = -v ** 2\n        y[m, :] = T(v / sum(v))\n\n";
    count += 11;
  }
  const auto start = std::chrono::steady_clock::now();
  Parsed p(text);
  const double ms = elapsed_ms(start);
  ASSERT_EQ(p.errors(), Strings{});
  EXPECT_EQ(p.module->functions.size(), 182u);
  std::printf("parse of a %d-line file: %.1f ms\n", count, ms);
}

/// Deleting or inserting one character anywhere in a valid kernel gives diagnostics (or a valid
/// module), never a crash or an exception.
TEST(Parser, MutatedSourcesNeverCrash) {
  const std::string base = spec_example;
  const std::string inserts = "()[]{}:,=\"'#\\\t\n x1.*@";
  size_t with_errors = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    std::string deleted = base;
    deleted.erase(i, 1);
    Diagnostics d1;
    EXPECT_NO_THROW(parse_source("t.kdsl", deleted, d1)) << deleted;
    for (char c : inserts) {
      std::string inserted = base;
      inserted.insert(i, 1, c);
      Diagnostics d2;
      EXPECT_NO_THROW(parse_source("t.kdsl", inserted, d2)) << inserted;
      with_errors += d2.has_errors();
    }
  }
  EXPECT_GT(with_errors, base.size());
}

TEST(Parser, RandomTokenSoupNeverCrashes) {
  const std::vector<std::string> tokens = {
      "def",   "for", "in", "if", "elif", "else",   "return", "pass",       "and", "or",
      "not",   "x",   "y",  "1",  "2.5",  "'s'",    "\"\"\"", "(",          ")",   "[",
      "]",     ":",   ",",  "=",  "+=",   "+",      "-",      "*",          "**",  "/",
      "//",    "%",   "<",  "==", "@",    "\n",     "\n    ", "\n        ", "#",   "\\\n",
      "while", "is",  " ",  "\t", "\r\n", "kernel", "*",      ";",          "."};
  std::mt19937 rng(12345);
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int j = 0; j < n; ++j) text += tokens[rng() % tokens.size()];
    Diagnostics d;
    EXPECT_NO_THROW(parse_source("t.kdsl", text, d)) << text;
  }
}

}  // namespace
}  // namespace kdsl
