// Shared pieces of the CUDA C++ emitters (row and scan schedules): indented text, and the
// kernel's parameter block as a struct laid out as the launch plan's slots say.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <iterator>
#include <string>

#include "codegen_expr.h"
#include "dsl/ir.h"
#include "launch_plan.h"

namespace kdsl::codegen {

/// Indented text, one statement a line.
class Text {
 public:
  template <class... A>
  void line(fmt::format_string<A...> f, A&&... a) {
    out_.append(static_cast<size_t>(indent_) * 2, ' ');
    fmt::format_to(std::back_inserter(out_), f, std::forward<A>(a)...);
    out_ += '\n';
  }
  void raw(const std::string& s) { out_ += s; }
  void in() { ++indent_; }
  void out() { --indent_; }
  /// Ends the innermost block: one level out, then its closing brace.
  void close() {
    out();
    line("}}");
  }
  std::string str() const { return out_; }

 private:
  std::string out_;
  int indent_ = 0;
};

/// The launch plan's parameter slots, 8 bytes each: the constructor lays out those every kernel
/// has (each tensor's pointer and strides, the scalars in their register types, the shape
/// symbols, the row count); the emitter adds its own (partials, workspaces), then finish() sets
/// plan.param_bytes.
class SlotLayout {
 public:
  SlotLayout(const ir::Kernel& k, LaunchPlan& plan) : plan_(plan) {
    for (size_t t = 0; t < k.tensors.size(); ++t) {
      add(ParamSlot::Kind::tensor_ptr, static_cast<int32_t>(t), 0, 8, DType::i64);
      for (size_t ax = 0; ax < k.tensors[t].shape.size(); ++ax) {
        add(ParamSlot::Kind::stride, static_cast<int32_t>(t), static_cast<int32_t>(ax), 8,
            DType::i64);
      }
    }
    for (size_t i = 0; i < k.scalars.size(); ++i) {
      const DType dt = k.scalars[i].dtype;
      const DType reg = dt == DType::f16 || dt == DType::bf16 ? DType::f32
                        : dt == DType::b8                     ? DType::i32
                                                              : dt;
      add(ParamSlot::Kind::scalar, static_cast<int32_t>(i), 0,
          static_cast<uint32_t>(dtype_size(reg)), reg);
    }
    for (size_t i = 0; i < k.symbols.size(); ++i) {
      add(ParamSlot::Kind::symbol, static_cast<int32_t>(i), 0, 8, DType::i64);
    }
    add(ParamSlot::Kind::rows, 0, 0, 8, DType::i64);
  }
  void add(ParamSlot::Kind kind, int32_t index, int32_t axis, uint32_t size, DType dt) {
    plan_.slots.push_back({kind, index, axis, off_, size, dt});
    off_ += 8;
  }
  void finish() { plan_.param_bytes = off_; }

 private:
  LaunchPlan& plan_;
  uint32_t off_ = 0;
};

/// Emits `struct kdsl_params_<symbol>` with one field per slot of `plan` (in slot order, which is
/// offset order) and a static_assert of its size against plan.param_bytes. `workspace_type`
/// gives the pointer type of a workspace slot (e.g. "float*").
inline void emit_params_struct(Text& t, const ir::Kernel& k, const LaunchPlan& plan,
                               const std::string& symbol,
                               const std::function<std::string(const ParamSlot&)>& workspace_type) {
  t.line("struct kdsl_params_{} {{", symbol);
  t.in();
  for (const ParamSlot& s : plan.slots) {
    switch (s.kind) {
      case ParamSlot::Kind::tensor_ptr: {
        const ir::TensorParam& tp = k.tensors[s.index];
        t.line("{}{}* t{};  // {}", tp.role == ir::Role::in ? "const " : "",
               cuda::storage_type(tp.dtype), s.index, tp.name);
        break;
      }
      case ParamSlot::Kind::stride:
        t.line("long long st{}_{};", s.index, s.axis);
        break;
      case ParamSlot::Kind::scalar:
        t.line("{} sc{};  // {}", cuda::reg_type(s.dtype), s.index, k.scalars[s.index].name);
        if (s.size < 8) t.line("int pad_sc{};", s.index);
        break;
      case ParamSlot::Kind::symbol:
        t.line("long long sym{};  // {}", s.index, k.symbols[s.index].name);
        break;
      case ParamSlot::Kind::rows:
        t.line("long long rows;");
        break;
      case ParamSlot::Kind::partials:
        t.line("long long partials;");
        break;
      case ParamSlot::Kind::workspace:
        t.line("{} ws{};", workspace_type(s), s.index);
        break;
    }
  }
  t.out();
  t.line("}};");
  t.line("static_assert(sizeof(kdsl_params_{}) == {}, \"parameter block layout\");", symbol,
         plan.param_bytes);
  t.line("");
}

}  // namespace kdsl::codegen
