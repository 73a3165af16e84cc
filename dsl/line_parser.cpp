#include "line_parser.h"

#include <cstdint>

#include "grammar.h"
#include "kdsl/error.h"
#include "line_builder.h"

namespace kdsl {
namespace {

namespace g = grammar;
namespace pegtl = tao::pegtl;
using ast::BinaryOp;
using ast::CompareOp;
using ast::ExprKind;

/// Error reporting: every raise<> and failed must<> throws a SyntaxError with the rule's message,
/// or, at a non-ASCII byte, the message of g::non_ascii (SPEC section 2).
template <typename Rule>
struct Control : pegtl::normal<Rule> {
  template <typename ParseInput>
  [[noreturn]] static void raise(const ParseInput& in, LineBuilder& b) {
    static_assert(g::message<Rule> != nullptr,
                  "every must<> target and raise<> tag needs a message");
    if (g::non_ascii_overrides<Rule> && g::at_non_ascii(in.current(), in.end())) {
      b.fail(in.current(), g::message<g::non_ascii>, g::non_ascii_hint);
    }
    b.fail(in.current(), expand_message(g::message<Rule>, in.current(), in.end()));
  }
};

// ---------------------------------------------------------------------------------------------
// Actions: each calls the LineBuilder with the text its rule matched.

template <typename Rule>
struct Action : pegtl::nothing<Rule> {};

template <auto Method>
struct Call {
  template <typename Input>
  static void apply(const Input& in, LineBuilder& b) {
    (b.*Method)(in.begin(), in.end());
  }
};
template <auto Method>
struct CallAt {
  template <typename Input>
  static void apply(const Input& in, LineBuilder& b) {
    (b.*Method)(in.begin());
  }
};
template <auto Method>
struct Call0 {
  template <typename Input>
  static void apply(const Input&, LineBuilder& b) {
    (b.*Method)();
  }
};

// clang-format off
template <> struct Action<g::name_atom> : Call<&LineBuilder::name> {};
template <> struct Action<g::int_lit> : Call<&LineBuilder::int_literal> {};
template <> struct Action<g::float_lit> : Call<&LineBuilder::float_literal> {};
template <> struct Action<g::string_lit> : Call<&LineBuilder::string_literal> {};
template <> struct Action<g::slice_colon> : Call<&LineBuilder::slice> {};
template <> struct Action<g::paren_open> : Call0<&LineBuilder::open> {};
template <> struct Action<g::call_open> : Call0<&LineBuilder::open> {};
template <> struct Action<g::subscript_open> : Call0<&LineBuilder::open> {};
template <> struct Action<g::return_kw> : Call0<&LineBuilder::open> {};
template <> struct Action<g::assign_op> : Call0<&LineBuilder::open> {};
template <> struct Action<g::paren_atom> : Call<&LineBuilder::close_paren> {};
template <> struct Action<g::call_trailer> : Call<&LineBuilder::close_call> {};
template <> struct Action<g::subscript_trailer> : Call<&LineBuilder::close_subscript> {};
template <> struct Action<g::kwarg_name> : CallAt<&LineBuilder::keyword_name> {};
template <> struct Action<g::kwarg> : Call0<&LineBuilder::keyword_value> {};
template <> struct Action<g::exprlist> : Call0<&LineBuilder::tuple_if_comma> {};
template <> struct Action<g::ternary_tail> : CallAt<&LineBuilder::ternary> {};
template <> struct Action<g::decorator> : Call<&LineBuilder::decorator> {};
template <> struct Action<g::def_name> : Call<&LineBuilder::def_name> {};
template <> struct Action<g::generic_name> : Call<&LineBuilder::generic_name> {};
template <> struct Action<g::generic_constraint> : Call0<&LineBuilder::generic_constraint> {};
template <> struct Action<g::star_param> : CallAt<&LineBuilder::star_param> {};
template <> struct Action<g::param_name> : Call<&LineBuilder::param_name> {};
template <> struct Action<g::param_annotation> : Call0<&LineBuilder::param_annotation> {};
template <> struct Action<g::param_default> : Call0<&LineBuilder::param_default> {};
template <> struct Action<g::returns> : Call0<&LineBuilder::returns> {};
template <> struct Action<g::def_header> : Call<&LineBuilder::def_header> {};
template <> struct Action<g::for_var> : Call<&LineBuilder::name> {};
template <> struct Action<g::for_header> : Call<&LineBuilder::for_header> {};
template <> struct Action<g::else_header> : Call<&LineBuilder::else_header> {};
template <> struct Action<g::pass_stmt> : Call<&LineBuilder::pass> {};
template <> struct Action<g::return_stmt> : Call<&LineBuilder::return_stmt> {};
template <> struct Action<g::assign_tail> : Call0<&LineBuilder::assign> {};
template <> struct Action<g::annotation_tail> : Call0<&LineBuilder::annotated_assign> {};
template <> struct Action<g::simple_stmt> : Call0<&LineBuilder::simple_stmt> {};
// clang-format on

template <>
struct Action<g::comma> {
  template <typename Input>
  static void apply(const Input& in, LineBuilder& b) {
    b.comma(in.end());
  }
};

template <>
struct Action<g::true_lit> {
  template <typename Input>
  static void apply(const Input& in, LineBuilder& b) {
    b.bool_literal(in.begin(), in.end(), true);
  }
};

template <>
struct Action<g::false_lit> {
  template <typename Input>
  static void apply(const Input& in, LineBuilder& b) {
    b.bool_literal(in.begin(), in.end(), false);
  }
};

template <>
struct Action<g::if_header> {
  template <typename Input>
  static void apply(const Input& in, LineBuilder& b) {
    b.if_header(in.begin(), in.end(), LineKind::if_);
  }
};

template <>
struct Action<g::elif_header> {
  template <typename Input>
  static void apply(const Input& in, LineBuilder& b) {
    b.if_header(in.begin(), in.end(), LineKind::elif);
  }
};

/// The AST form of an operator rule: kind and op.
template <typename Op>
struct OpInfo;
template <ExprKind K, auto O>
struct OpIs {
  static constexpr ExprKind kind = K;
  static constexpr uint8_t op = static_cast<uint8_t>(O);
};
// clang-format off
template <> struct OpInfo<g::pow_op> : OpIs<ExprKind::binary, BinaryOp::pow> {};
template <> struct OpInfo<g::mul_op> : OpIs<ExprKind::binary, BinaryOp::mul> {};
template <> struct OpInfo<g::div_op> : OpIs<ExprKind::binary, BinaryOp::div> {};
template <> struct OpInfo<g::floordiv_op> : OpIs<ExprKind::binary, BinaryOp::floordiv> {};
template <> struct OpInfo<g::mod_op> : OpIs<ExprKind::binary, BinaryOp::mod> {};
template <> struct OpInfo<g::add_op> : OpIs<ExprKind::binary, BinaryOp::add> {};
template <> struct OpInfo<g::sub_op> : OpIs<ExprKind::binary, BinaryOp::sub> {};
template <> struct OpInfo<g::lt_op> : OpIs<ExprKind::compare, CompareOp::lt> {};
template <> struct OpInfo<g::le_op> : OpIs<ExprKind::compare, CompareOp::le> {};
template <> struct OpInfo<g::gt_op> : OpIs<ExprKind::compare, CompareOp::gt> {};
template <> struct OpInfo<g::ge_op> : OpIs<ExprKind::compare, CompareOp::ge> {};
template <> struct OpInfo<g::eq_op> : OpIs<ExprKind::compare, CompareOp::eq> {};
template <> struct OpInfo<g::ne_op> : OpIs<ExprKind::compare, CompareOp::ne> {};
template <> struct OpInfo<g::and_op> : OpIs<ExprKind::bool_op, ast::BoolOp::and_> {};
template <> struct OpInfo<g::or_op> : OpIs<ExprKind::bool_op, ast::BoolOp::or_> {};
template <> struct OpInfo<g::neg_op> : OpIs<ExprKind::unary, ast::UnaryOp::neg> {};
template <> struct OpInfo<g::pos_op> : OpIs<ExprKind::unary, ast::UnaryOp::pos> {};
template <> struct OpInfo<g::not_op> : OpIs<ExprKind::not_op, 0> {};
template <> struct OpInfo<g::iadd_op> : OpIs<ExprKind::binary, BinaryOp::add> {};
template <> struct OpInfo<g::isub_op> : OpIs<ExprKind::binary, BinaryOp::sub> {};
template <> struct OpInfo<g::imul_op> : OpIs<ExprKind::binary, BinaryOp::mul> {};
template <> struct OpInfo<g::idiv_op> : OpIs<ExprKind::binary, BinaryOp::div> {};
// clang-format on

template <typename Op, typename Operand>
struct Action<g::binary_tail<Op, Operand>> {
  template <typename Input>
  static void apply(const Input& in, LineBuilder& b) {
    b.binary(OpInfo<Op>::kind, OpInfo<Op>::op, in.begin());
  }
};

/// pow_tail, neg, pos, not_prefix: an operator applied to the operand on the stack.
template <typename Op, bool Binary>
struct OperatorAction {
  template <typename Input>
  static void apply(const Input& in, LineBuilder& b) {
    if constexpr (Binary) {
      b.binary(OpInfo<Op>::kind, OpInfo<Op>::op, in.begin());
    } else {
      b.unary(OpInfo<Op>::kind, OpInfo<Op>::op, in.begin());
    }
  }
};
template <>
struct Action<g::pow_tail> : OperatorAction<g::pow_op, true> {};
template <>
struct Action<g::neg> : OperatorAction<g::neg_op, false> {};
template <>
struct Action<g::pos> : OperatorAction<g::pos_op, false> {};
template <>
struct Action<g::not_prefix> : OperatorAction<g::not_op, false> {};

template <typename Op>
struct Action<g::aug_tail<Op>> {
  template <typename Input>
  static void apply(const Input&, LineBuilder& b) {
    b.aug_assign(static_cast<BinaryOp>(OpInfo<Op>::op));
  }
};

}  // namespace

std::optional<ParsedLine> parse_line(const LogicalLine& line, const SourceFile& file,
                                     Diagnostics& diags) {
  LineBuilder builder(line, file);
  pegtl::memory_input<pegtl::tracking_mode::lazy, pegtl::eol::lf_crlf, const char*> in(
      line.text.data(), line.text.data() + line.text.size(), file.path().c_str());
  try {
    if (!pegtl::parse<g::line, Action, Control>(in, builder)) {
      throw InternalError("kdsl parser: a line neither matched nor raised an error");
    }
  } catch (const SyntaxError& e) {
    diags.error(SourceLoc::at(&file, e.offset), e.message, e.length).hint = e.hint;
    return std::nullopt;
  }
  return builder.take();
}

}  // namespace kdsl
