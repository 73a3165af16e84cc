// Grammar of one logical line of kdsl (SPEC section 3), as PEGTL 3.2.7 rules.
//
// The layout pass (layout.h) has already joined the physical lines, removed comments and
// indentation and worked out the block structure, so these rules see one statement or one block
// header at a time. The rules are types only, with no state; the actions that build the AST live
// in line_parser.cpp and line_builder.cpp. Conventions:
//  - A rule never consumes the whitespace after itself: sequences put `ws` between tokens, so the
//    text an action sees ends exactly at its last token.
//  - Every must<> target (and every raise<> tag) is a named rule with its own message<>; the
//    control in line_parser.cpp checks at compile time that the message exists. In a message,
//    "{token}" stands for a description of the text found where the error is.
//  - Where a token is required, a reserved word (SPEC section 2) or an operator from other
//    languages (`&&`, `!`, `&`, ...) found instead raises its own, targeted message.
//  - An error at a non-ASCII byte is non_ascii's (SPEC section 2), whatever rule failed there,
//    except in the contents of a string (see non_ascii_overrides).
//  - Expressions recurse only through nested<>, which limits the nesting to max_nesting levels,
//    so that parsing never overflows the stack.
//  - The grammar never backtracks over a rule with an action: a rule either fails on its first
//    token, or commits to it through must<>. The one exception is the trailing comma of an
//    exprlist, matched once more right after being given back; its action is idempotent.
#pragma once

#include <cstddef>
#include <iterator>
#include <string_view>
#include <utility>

#include <tao/pegtl.hpp>

namespace kdsl::grammar {

using tao::pegtl::any;
using tao::pegtl::at;
using tao::pegtl::digit;
using tao::pegtl::eof;
using tao::pegtl::failure;
using tao::pegtl::identifier;
using tao::pegtl::identifier_first;
using tao::pegtl::identifier_other;
using tao::pegtl::must;
using tao::pegtl::not_at;
using tao::pegtl::not_one;
using tao::pegtl::one;
using tao::pegtl::opt;
using tao::pegtl::raise;
using tao::pegtl::seq;
using tao::pegtl::sor;
using tao::pegtl::star;
using tao::pegtl::string;
using tao::pegtl::two;
using tao::pegtl::until;

/// The error raised when the must<> target (or raise<> tag) `Rule` fails; nullptr for rules that
/// are neither.
template <typename Rule>
inline constexpr const char* message = nullptr;

/// Outside strings and comments (which the layout pass removed) a byte >= 0x80 is an error of its
/// own: the control reports it, with non_ascii_hint, in place of the message of any rule that
/// fails at such a byte.
struct non_ascii : failure {};
template <>
inline constexpr const char* message<non_ascii> = "unexpected non-ASCII character";
inline constexpr const char* non_ascii_hint =
    "identifiers and operators are ASCII; other text may appear only in strings and comments";
/// Whether the error of Rule at a non-ASCII byte is non_ascii's: for every rule but those whose
/// error stands at the first byte of a string's contents (an unterminated string).
template <typename Rule>
inline constexpr bool non_ascii_overrides = true;
/// True when p (before end) is at a byte >= 0x80.
inline bool at_non_ascii(const char* p, const char* end) {
  return p < end && static_cast<unsigned char>(*p) >= 0x80;
}

/// Deepest nesting of brackets, unary operators, `not`, `**` operands and conditional
/// expressions within one expression.
inline constexpr std::size_t max_nesting = 200;

struct too_deep : failure {};
template <>  // the limit is max_nesting
inline constexpr const char* message<too_deep> = "expression nested too deeply (limit 200)";

/// Head, then Body... one nesting level deeper (counted in the input's private_depth, which
/// PEGTL provides for this purpose). Past max_nesting levels, raises too_deep at Head.
/// Analysed like seq<Head, Body...>.
template <typename Head, typename... Body>
struct nested : seq<Head, Body...> {
  template <tao::pegtl::apply_mode A, tao::pegtl::rewind_mode M,
            template <typename...> class Action, template <typename...> class Control,
            typename ParseInput, typename... States>
  [[nodiscard]] static bool match(ParseInput& in, States&&... st) {
    using tao::pegtl::rewind_mode;
    auto m = in.template mark<rewind_mode::required>();
    if (!Control<Head>::template match<A, rewind_mode::active, Action, Control>(in, st...)) {
      return m(false);
    }
    if (in.private_depth >= max_nesting) {
      in.iterator() = m.iterator();
      Control<too_deep>::raise(static_cast<const ParseInput&>(in), st...);
    }
    ++in.private_depth;
    const bool ok =
        (Control<Body>::template match<A, rewind_mode::active, Action, Control>(in, st...) && ...);
    --in.private_depth;
    return m(ok);
  }
};

// ---------------------------------------------------------------------------------------------
// Tokens

struct ws : star<one<' ', '\t'>> {};
struct comma : one<','> {};
struct colon : one<':'> {};
struct assign_tok : seq<one<'='>, not_at<one<'='>>> {};

struct kw_and : TAO_PEGTL_KEYWORD("and") {};
struct kw_def : TAO_PEGTL_KEYWORD("def") {};
struct kw_elif : TAO_PEGTL_KEYWORD("elif") {};
struct kw_else : TAO_PEGTL_KEYWORD("else") {};
struct kw_false : TAO_PEGTL_KEYWORD("False") {};
struct kw_for : TAO_PEGTL_KEYWORD("for") {};
struct kw_if : TAO_PEGTL_KEYWORD("if") {};
struct kw_in : TAO_PEGTL_KEYWORD("in") {};
struct kw_not : TAO_PEGTL_KEYWORD("not") {};
struct kw_or : TAO_PEGTL_KEYWORD("or") {};
struct kw_pass : TAO_PEGTL_KEYWORD("pass") {};
struct kw_return : TAO_PEGTL_KEYWORD("return") {};
struct kw_true : TAO_PEGTL_KEYWORD("True") {};

// Reserved words (SPEC section 2): Python words that are not kdsl. Each raises its own message
// wherever it appears in place of an expression or of a required token.
struct reserved_entry {
  std::string_view word;
  const char* message;
};
inline constexpr reserved_entry reserved_words[] = {
    {"while", "while loops are not part of kdsl; use a scan (SPEC section 10)"},
    {"import", "import is not part of kdsl; a .kdsl module is self-contained"},
    {"from", "from-import is not part of kdsl; a .kdsl module is self-contained"},
    {"class", "classes are not part of kdsl; write helper functions and kernels"},
    {"lambda", "lambda is not part of kdsl; define a helper function with def"},
    {"break", "break is not part of kdsl; a loop always runs to completion"},
    {"continue", "continue is not part of kdsl; use if/else or where()"},
    {"with", "with is not part of kdsl"},
    {"try", "try is not part of kdsl; kernels do not raise exceptions"},
    {"except", "except is not part of kdsl; kernels do not raise exceptions"},
    {"finally", "finally is not part of kdsl; kernels do not raise exceptions"},
    {"raise", "raise is not part of kdsl; kernels do not raise exceptions"},
    {"global", "global is not part of kdsl; module-level names are constants"},
    {"nonlocal", "nonlocal is not part of kdsl; functions do not nest"},
    {"yield", "yield is not part of kdsl; a helper returns its results with return"},
    {"async", "async is not part of kdsl; kernels are launched by the runtime"},
    {"await", "await is not part of kdsl; kernels are launched by the runtime"},
    {"del", "del is not part of kdsl"},
    {"assert", "assert is not part of kdsl; kernels do not raise exceptions"},
    {"is", "'is' is not part of kdsl; compare values with == or !="},
    {"None", "None is not part of kdsl; every value is a number, a bool or a tuple"},
};
/// The keywords of SPEC section 2 (each also has its kw_ rule above).
inline constexpr std::string_view keywords[] = {"and", "def", "elif", "else", "False",  "for", "if",
                                                "in",  "not", "or",   "pass", "return", "True"};

/// The identifier at the start of [p, end) (empty if there is none).
inline std::string_view identifier_at(const char* p, const char* end) {
  const char* q = p;
  auto word_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  if (q < end && word_char(*q) && !(*q >= '0' && *q <= '9')) {
    while (q < end && word_char(*q)) ++q;
  }
  return {p, static_cast<std::size_t>(q - p)};
}

/// The index of `word` in reserved_words, or -1.
constexpr int reserved_index(std::string_view word) {
  for (std::size_t i = 0; i < std::size(reserved_words); ++i) {
    if (reserved_words[i].word == word) return static_cast<int>(i);
  }
  return -1;
}

constexpr bool is_keyword(std::string_view word) {
  for (std::string_view k : keywords) {
    if (k == word) return true;
  }
  return false;
}

/// Matches an identifier that is a keyword or a reserved word (one table lookup, where a sor<>
/// of keyword rules would compare every word in turn). Analysed as an identifier.
struct keyword_or_reserved : identifier {
  template <tao::pegtl::apply_mode A, tao::pegtl::rewind_mode M,
            template <typename...> class Action, template <typename...> class Control,
            typename ParseInput, typename... States>
  [[nodiscard]] static bool match(ParseInput& in, States&&...) {
    const std::string_view word = identifier_at(in.current(), in.end());
    if (word.empty() || (!is_keyword(word) && reserved_index(word) < 0)) return false;
    in.bump(word.size());
    return true;
  }
};

/// The error tag of reserved_words[I].
template <std::size_t I>
struct reserved_word : failure {};
template <std::size_t I>
inline constexpr const char* message<reserved_word<I>> = reserved_words[I].message;

/// Raises reserved_word<I> for I == index.
template <template <typename...> class Control, typename ParseInput, typename... States,
          std::size_t... I>
void raise_reserved(std::size_t index, std::index_sequence<I...>, const ParseInput& in,
                    States&&... st) {
  ((index == I ? Control<reserved_word<I>>::raise(in, st...) : void()), ...);
}

/// At a reserved word, raises its message; otherwise fails. Analysed as failure.
struct reserved_use : failure {
  template <tao::pegtl::apply_mode A, tao::pegtl::rewind_mode M,
            template <typename...> class Action, template <typename...> class Control,
            typename ParseInput, typename... States>
  [[nodiscard]] static bool match(ParseInput& in, States&&... st) {
    const int index = reserved_index(identifier_at(in.current(), in.end()));
    if (index >= 0) {
      raise_reserved<Control>(static_cast<std::size_t>(index),
                              std::make_index_sequence<std::size(reserved_words)>(),
                              static_cast<const ParseInput&>(in), st...);
    }
    return false;
  }
};

// Operators of other languages, rejected with a hint.
struct op_and_and : string<'&', '&'> {};
struct op_or_or : string<'|', '|'> {};
struct op_bang : seq<one<'!'>, not_at<one<'='>>> {};
struct op_bitwise : sor<one<'&', '|', '^', '~'>, string<'<', '<'>, string<'>', '>'>> {};
template <typename Op>
struct reject : seq<at<Op>, raise<Op>> {};
struct foreign_use
    : seq<at<one<'&', '|', '!', '^', '~', '<', '>'>>,
          sor<reject<op_and_and>, reject<op_or_or>, reject<op_bang>, reject<op_bitwise>>> {};

/// A required Token; a reserved word or foreign operator in its place raises its own message.
template <typename Token>
struct expect : sor<Token, reserved_use, foreign_use> {};

/// An identifier that is not a keyword or a reserved word.
struct name : seq<not_at<keyword_or_reserved>, identifier> {};

// Numbers: `42`, `1_000`, `1.0`, `.5`, `3.`, `1e-6`.
struct digits : seq<digit, star<opt<one<'_'>>, digit>> {};
struct exponent_digits : seq<digits> {};
struct exponent : seq<one<'e', 'E'>, opt<one<'+', '-'>>, must<exponent_digits>> {};
struct float_lit : sor<seq<digits, one<'.'>, opt<digits>, opt<exponent>>,
                       seq<one<'.'>, digits, opt<exponent>>, seq<digits, exponent>> {};
struct int_lit : sor<seq<one<'0'>, star<opt<one<'_'>>, one<'0'>>>,
                     seq<tao::pegtl::range<'1', '9'>, star<opt<one<'_'>>, digit>>> {};
struct leading_zeros : failure {};
struct number_end : not_at<sor<identifier_other, one<'.'>>> {};
struct number
    : seq<sor<float_lit, int_lit>, opt<at<digit>, raise<leading_zeros>>, must<number_end>> {};

// Strings: "...", '...', """...""", '''...'''. A backslash escapes the next character.
struct escape : seq<one<'\\'>, any> {};
template <char Q>
struct short_string_rest : seq<star<sor<escape, not_one<Q, '\\', '\n'>>>, one<Q>> {};
template <char Q>
struct long_string_rest : until<string<Q, Q, Q>, sor<escape, any>> {};
template <char Q>
struct short_string : seq<one<Q>, must<short_string_rest<Q>>> {};
template <char Q>
struct long_string : seq<string<Q, Q, Q>, must<long_string_rest<Q>>> {};
struct string_lit
    : sor<long_string<'"'>, long_string<'\''>, short_string<'"'>, short_string<'\''>> {};
template <char Q>
inline constexpr bool non_ascii_overrides<short_string_rest<Q>> = false;
template <char Q>
inline constexpr bool non_ascii_overrides<long_string_rest<Q>> = false;

// ---------------------------------------------------------------------------------------------
// Lists in brackets

/// After a list's first item: ("," Next)* [","] Close. Next is required after a comma that is
/// not followed by Close.
template <typename Next, typename Close>
struct list_rest : seq<ws, star<comma, ws, sor<at<Close>, must<Next>>, ws>, must<Close>> {};
/// A possibly empty list up to and including Close.
template <typename First, typename Next, typename Close>
struct list0 : sor<Close, seq<must<First>, list_rest<Next, Close>>> {};
/// A non-empty list up to and including Close.
template <typename First, typename Next, typename Close>
struct list1 : seq<must<First>, list_rest<Next, Close>> {};

// ---------------------------------------------------------------------------------------------
// Expressions

struct expr;

/// The required right operand of operator Op; its message is Op::after.
template <typename Op, typename Operand>
struct operand : seq<Operand> {};
template <typename Op, typename Operand>
inline constexpr const char* message<operand<Op, Operand>> = Op::after;

/// A binary operator and its right operand.
template <typename Op, typename Operand>
struct binary_tail : seq<Op, ws, must<operand<Op, Operand>>> {};

// Atoms
struct name_atom : name {};
struct true_lit : kw_true {};
struct false_lit : kw_false {};
struct paren_open : one<'('> {};
struct paren_close : expect<one<')'>> {};
struct paren_first : seq<expr> {};
struct paren_next : seq<expr> {};
struct paren_atom : nested<paren_open, ws, list0<paren_first, paren_next, paren_close>> {};
struct list_display : failure {};
struct brace_display : failure {};
struct atom
    : sor<paren_atom, number, string_lit, true_lit, false_lit, name_atom, reserved_use, foreign_use,
          seq<at<one<'['>>, raise<list_display>>, seq<at<one<'{'>>, raise<brace_display>>> {};

// Calls: f(a, k=v)
struct call_open : one<'('> {};
struct call_close : expect<one<')'>> {};
struct kwarg_name : seq<name, ws, assign_tok> {};
struct kwarg_value : seq<expr> {};
struct kwarg : seq<kwarg_name, ws, must<kwarg_value>> {};
struct argument : sor<kwarg, expr> {};
struct arg_first : seq<argument> {};
struct arg_next : seq<argument> {};
struct call_trailer : nested<call_open, ws, list0<arg_first, arg_next, call_close>> {};

// Subscripts: x[m, :]
struct subscript_open : one<'['> {};
struct subscript_close : expect<one<']'>> {};
struct slice_colon : colon {};
struct slice_bounds : failure {};
struct index : sor<seq<slice_colon, opt<ws, not_at<one<',', ']'>>, raise<slice_bounds>>>,
                   seq<expr, opt<ws, at<colon>, raise<slice_bounds>>>> {};
struct index_first : seq<index> {};
struct index_next : seq<index> {};
struct subscript_trailer
    : nested<subscript_open, ws, list1<index_first, index_next, subscript_close>> {};

struct attribute : failure {};
struct trailer : sor<call_trailer, subscript_trailer, seq<at<one<'.'>>, raise<attribute>>> {};
struct primary : seq<atom, star<ws, trailer>> {};

// Operators, each with the message for its missing right operand.
struct pow_op : seq<two<'*'>, not_at<one<'='>>> {
  static constexpr const char* after = "expected an expression after '**'";
};
struct neg_op : one<'-'> {
  static constexpr const char* after = "expected an expression after '-'";
};
struct pos_op : one<'+'> {
  static constexpr const char* after = "expected an expression after '+'";
};
struct mul_op : seq<one<'*'>, not_at<one<'*', '='>>> {
  static constexpr const char* after = "expected an expression after '*'";
};
struct div_op : seq<one<'/'>, not_at<one<'/', '='>>> {
  static constexpr const char* after = "expected an expression after '/'";
};
struct floordiv_op : seq<two<'/'>, not_at<one<'='>>> {
  static constexpr const char* after = "expected an expression after '//'";
};
struct mod_op : seq<one<'%'>, not_at<one<'='>>> {
  static constexpr const char* after = "expected an expression after '%'";
};
struct add_op : seq<one<'+'>, not_at<one<'='>>> {
  static constexpr const char* after = "expected an expression after '+'";
};
struct sub_op : seq<one<'-'>, not_at<one<'=', '>'>>> {
  static constexpr const char* after = "expected an expression after '-'";
};
struct lt_op : seq<one<'<'>, not_at<one<'<', '='>>> {
  static constexpr const char* after = "expected an expression after '<'";
};
struct le_op : string<'<', '='> {
  static constexpr const char* after = "expected an expression after '<='";
};
struct gt_op : seq<one<'>'>, not_at<one<'>', '='>>> {
  static constexpr const char* after = "expected an expression after '>'";
};
struct ge_op : string<'>', '='> {
  static constexpr const char* after = "expected an expression after '>='";
};
struct eq_op : string<'=', '='> {
  static constexpr const char* after = "expected an expression after '=='";
};
struct ne_op : string<'!', '='> {
  static constexpr const char* after = "expected an expression after '!='";
};
struct not_op : kw_not {
  static constexpr const char* after = "expected an expression after 'not'";
};
struct and_op : kw_and {
  static constexpr const char* after = "expected an expression after 'and'";
};
struct or_op : kw_or {
  static constexpr const char* after = "expected an expression after 'or'";
};

// Precedence, tightest first: power, unary, term, arith, comparison, not, and, or, conditional.
struct factor;
struct pow_tail : nested<pow_op, ws, must<operand<pow_op, factor>>> {};
struct power : seq<primary, opt<ws, pow_tail>> {};
struct neg : nested<neg_op, ws, must<operand<neg_op, factor>>> {};
struct pos : nested<pos_op, ws, must<operand<pos_op, factor>>> {};
struct factor : sor<neg, pos, power> {};

struct term
    : seq<factor, star<ws, sor<binary_tail<mul_op, factor>, binary_tail<div_op, factor>,
                               binary_tail<floordiv_op, factor>, binary_tail<mod_op, factor>>>> {};
struct arith : seq<term, star<ws, sor<binary_tail<add_op, term>, binary_tail<sub_op, term>>>> {};

struct comp_op : sor<le_op, lt_op, ge_op, gt_op, eq_op, ne_op> {};
struct chained_comparison : failure {};
struct comparison
    : seq<arith,
          opt<ws,
              sor<binary_tail<le_op, arith>, binary_tail<lt_op, arith>, binary_tail<ge_op, arith>,
                  binary_tail<gt_op, arith>, binary_tail<eq_op, arith>, binary_tail<ne_op, arith>>,
              opt<ws, at<comp_op>, raise<chained_comparison>>>> {};

struct not_expr;
struct not_prefix : nested<not_op, ws, must<operand<not_op, not_expr>>> {};
struct not_expr : sor<not_prefix, comparison> {};
struct and_expr : seq<not_expr, star<ws, binary_tail<and_op, not_expr>>> {};
struct or_expr : seq<and_expr, star<ws, binary_tail<or_op, and_expr>>> {};

struct ternary_if : kw_if {};
struct ternary_cond : seq<or_expr> {};
struct ternary_else : expect<kw_else> {};
struct ternary_orelse : seq<expr> {};
struct ternary_tail
    : nested<ternary_if, ws, must<ternary_cond>, ws, must<ternary_else>, ws, must<ternary_orelse>> {
};
struct expr : seq<or_expr, opt<ws, ternary_tail>> {};

/// expr ("," expr)* [","]: a comma makes a tuple.
struct exprlist : seq<expr, star<ws, comma, ws, expr>, opt<ws, comma>> {};

// ---------------------------------------------------------------------------------------------
// Block headers

struct decorator_at : one<'@'> {};
struct decorator_name : seq<name_atom> {};
struct decorator : seq<decorator_at, ws, must<decorator_name>, opt<ws, call_trailer>> {};

struct def_kw : kw_def {};
struct def_name : seq<name> {};
struct generic_name : name {};
struct generic_constraint_expr : seq<expr> {};
struct generic_constraint : seq<colon, ws, must<generic_constraint_expr>> {};
struct generic : seq<generic_name, opt<ws, generic_constraint>> {};
struct generic_first : seq<generic> {};
struct generic_next : seq<generic> {};
struct generics_close : expect<one<']'>> {};
struct generics : seq<one<'['>, ws, list1<generic_first, generic_next, generics_close>> {};

struct varargs : failure {};
struct star_param
    : sor<seq<at<one<'*'>, ws, sor<one<'*'>, identifier_first>>, raise<varargs>>, one<'*'>> {};
struct param_name : name {};
struct param_annotation_expr : seq<expr> {};
struct param_annotation : seq<colon, ws, must<param_annotation_expr>> {};
struct param_default_expr : seq<expr> {};
struct param_default : seq<assign_tok, ws, must<param_default_expr>> {};
struct param : sor<star_param, seq<param_name, opt<ws, param_annotation>, opt<ws, param_default>>> {
};
struct param_first : seq<param> {};
struct param_next : seq<param> {};
struct params_close : expect<one<')'>> {};
struct params : seq<one<'('>, ws, list0<param_first, param_next, params_close>> {};

struct return_annotation : seq<expr> {};
struct returns : seq<string<'-', '>'>, ws, must<return_annotation>> {};
struct def_colon : expect<colon> {};
struct def_header : seq<def_kw, ws, must<def_name>, opt<ws, generics>, ws, must<params>,
                        opt<ws, returns>, ws, must<def_colon>> {};

struct for_kw : kw_for {};
struct for_var : name {};
struct for_first : seq<for_var> {};
struct for_next : seq<for_var> {};
struct for_in : expect<kw_in> {};
struct for_iter : seq<expr> {};
struct for_colon : expect<colon> {};
struct for_header : seq<for_kw, ws, must<for_first>, star<ws, comma, ws, must<for_next>>, ws,
                        must<for_in>, ws, must<for_iter>, ws, must<for_colon>> {};

struct assign_in_condition : failure {};
/// The ':' after a condition; `=` there raises a hint about `==`.
struct condition_colon : sor<expect<colon>, seq<at<assign_tok>, raise<assign_in_condition>>> {};
struct if_kw : kw_if {};
struct if_cond : seq<expr> {};
struct if_colon : condition_colon {};
struct if_header : seq<if_kw, ws, must<if_cond>, ws, must<if_colon>> {};
struct elif_kw : kw_elif {};
struct elif_cond : seq<expr> {};
struct elif_colon : condition_colon {};
struct elif_header : seq<elif_kw, ws, must<elif_cond>, ws, must<elif_colon>> {};
struct else_kw : kw_else {};
struct else_colon : expect<colon> {};
struct else_header : seq<else_kw, ws, must<else_colon>> {};

// ---------------------------------------------------------------------------------------------
// Simple statements

struct pass_stmt : kw_pass {};
struct return_kw : kw_return {};
struct return_stmt : seq<return_kw, opt<ws, exprlist>> {};

struct assign_op : assign_tok {};
struct assign_value : seq<exprlist> {};
struct chained_assignment : failure {};
struct assign_tail
    : seq<assign_op, ws, must<assign_value>, opt<ws, at<assign_tok>, raise<chained_assignment>>> {};

struct iadd_op : string<'+', '='> {
  static constexpr const char* after = "expected an expression after '+='";
};
struct isub_op : string<'-', '='> {
  static constexpr const char* after = "expected an expression after '-='";
};
struct imul_op : string<'*', '='> {
  static constexpr const char* after = "expected an expression after '*='";
};
struct idiv_op : string<'/', '='> {
  static constexpr const char* after = "expected an expression after '/='";
};
template <typename Op>
struct aug_tail : seq<Op, ws, must<operand<Op, expr>>> {};

struct annotation_expr : seq<expr> {};
struct annotation_assign : expect<assign_tok> {};
struct annotation_value : seq<expr> {};
struct annotation_tail : seq<colon, ws, must<annotation_expr>, ws, must<annotation_assign>, ws,
                             must<annotation_value>> {};

struct simple_stmt
    : seq<exprlist, opt<ws, sor<assign_tail, aug_tail<iadd_op>, aug_tail<isub_op>,
                                aug_tail<imul_op>, aug_tail<idiv_op>, annotation_tail>>> {};

// ---------------------------------------------------------------------------------------------
// Lines

struct stmt_end : expect<eof> {};
struct header_end : eof {};
struct decorator_line : seq<decorator, ws, must<stmt_end>> {};
struct def_line : seq<def_header, ws, must<header_end>> {};
struct for_line : seq<for_header, ws, must<header_end>> {};
struct if_line : seq<if_header, ws, must<header_end>> {};
struct elif_line : seq<elif_header, ws, must<header_end>> {};
struct else_line : seq<else_header, ws, must<header_end>> {};
struct pass_line : seq<pass_stmt, ws, must<stmt_end>> {};
struct return_line : seq<return_stmt, ws, must<stmt_end>> {};
struct simple_line : seq<simple_stmt, ws, must<stmt_end>> {};
struct statement : sor<decorator_line, def_line, for_line, if_line, elif_line, else_line, pass_line,
                       return_line, simple_line> {};

/// One logical line: the grammar's entry point.
struct line : seq<ws, must<statement>> {};

// ---------------------------------------------------------------------------------------------
// Messages

// clang-format off
template <> inline constexpr const char* message<op_and_and> = "'&&' is not part of kdsl; use 'and'";
template <> inline constexpr const char* message<op_or_or> = "'||' is not part of kdsl; use 'or'";
template <> inline constexpr const char* message<op_bang> = "'!' is not part of kdsl; use 'not'";
template <> inline constexpr const char* message<op_bitwise> = "bitwise operators are not part of kdsl";

template <> inline constexpr const char* message<exponent_digits> = "expected digits in the exponent of a number";
template <> inline constexpr const char* message<number_end> = "invalid number literal";
template <> inline constexpr const char* message<leading_zeros> = "an integer literal cannot have leading zeros";
template <char Q> inline constexpr const char* message<short_string_rest<Q>> = "unterminated string literal";
template <char Q> inline constexpr const char* message<long_string_rest<Q>> = "unterminated string literal";

template <> inline constexpr const char* message<paren_close> = "expected ')' to close '('";
template <> inline constexpr const char* message<paren_first> = "expected an expression or ')' after '('";
template <> inline constexpr const char* message<paren_next> = "expected an expression or ')' after ','";
template <> inline constexpr const char* message<list_display> = "lists are not part of kdsl; write a tuple such as (a, b)";
template <> inline constexpr const char* message<brace_display> = "dicts and sets are not part of kdsl";
template <> inline constexpr const char* message<call_close> = "expected ')' to close '('";
template <> inline constexpr const char* message<kwarg_value> = "expected an expression after '='";
template <> inline constexpr const char* message<arg_first> = "expected an argument or ')' after '('";
template <> inline constexpr const char* message<arg_next> = "expected an argument or ')' after ','";
template <> inline constexpr const char* message<subscript_close> = "expected ']' to close '['";
template <> inline constexpr const char* message<slice_bounds> = "slices with bounds are not supported; a subscript takes ':' for a whole axis";
template <> inline constexpr const char* message<index_first> = "expected an index after '['";
template <> inline constexpr const char* message<index_next> = "expected an index or ']' after ','";
template <> inline constexpr const char* message<attribute> = "attribute access (a.b) is not part of kdsl";
template <> inline constexpr const char* message<chained_comparison> = "chained comparisons are not supported; write (a < b) and (b < c)";
template <> inline constexpr const char* message<ternary_cond> = "expected a condition after 'if'";
template <> inline constexpr const char* message<ternary_else> = "expected 'else' in the conditional expression";
template <> inline constexpr const char* message<ternary_orelse> = "expected an expression after 'else'";

template <> inline constexpr const char* message<decorator_name> = "expected a decorator name after '@'";
template <> inline constexpr const char* message<def_name> = "expected a function name after 'def'";
template <> inline constexpr const char* message<generic_constraint_expr> = "expected a dtype or a tuple of dtypes after ':'";
template <> inline constexpr const char* message<generic_first> = "expected a generic parameter name after '['";
template <> inline constexpr const char* message<generic_next> = "expected a generic parameter name or ']' after ','";
template <> inline constexpr const char* message<generics_close> = "expected ']' to close '['";
template <> inline constexpr const char* message<varargs> = "*args and **kwargs are not part of kdsl; a lone '*' marks the keyword-only parameters";
template <> inline constexpr const char* message<param_annotation_expr> = "expected a type after ':'";
template <> inline constexpr const char* message<param_default_expr> = "expected a default value after '='";
template <> inline constexpr const char* message<param_first> = "expected a parameter name";
template <> inline constexpr const char* message<param_next> = "expected a parameter name or ')' after ','";
template <> inline constexpr const char* message<params_close> = "expected ')' to close '('";
template <> inline constexpr const char* message<params> = "expected '(' after the function name";
template <> inline constexpr const char* message<return_annotation> = "expected a type after '->'";
template <> inline constexpr const char* message<def_colon> = "expected ':' at the end of the 'def' line";
template <> inline constexpr const char* message<for_first> = "expected a loop variable name after 'for'";
template <> inline constexpr const char* message<for_next> = "expected a loop variable name after ','";
template <> inline constexpr const char* message<for_in> = "expected 'in' after the loop variables";
template <> inline constexpr const char* message<for_iter> = "expected an expression after 'in'";
template <> inline constexpr const char* message<for_colon> = "expected ':' at the end of the 'for' line";
template <> inline constexpr const char* message<assign_in_condition> = "'=' assigns; compare with '=='";
template <> inline constexpr const char* message<if_cond> = "expected a condition after 'if'";
template <> inline constexpr const char* message<if_colon> = "expected ':' at the end of the 'if' line";
template <> inline constexpr const char* message<elif_cond> = "expected a condition after 'elif'";
template <> inline constexpr const char* message<elif_colon> = "expected ':' at the end of the 'elif' line";
template <> inline constexpr const char* message<else_colon> = "expected ':' after 'else'";

template <> inline constexpr const char* message<assign_value> = "expected an expression after '='";
template <> inline constexpr const char* message<chained_assignment> = "chained assignment (a = b = c) is not supported; write one assignment per line";
template <> inline constexpr const char* message<annotation_expr> = "expected a type after ':'";
template <> inline constexpr const char* message<annotation_assign> = "expected '=' and a value after the annotation";
template <> inline constexpr const char* message<annotation_value> = "expected an expression after '='";

template <> inline constexpr const char* message<stmt_end> = "unexpected {token}";
template <> inline constexpr const char* message<header_end> = "unexpected {token} after ':'; the block starts on the next line, indented";
template <> inline constexpr const char* message<statement> = "unexpected {token} at the start of a statement";
// clang-format on

}  // namespace kdsl::grammar
