// kdsl check, kdsl list.
#include <fmt/format.h>

#include <iostream>

#include "cli.h"
#include "dsl/parser.h"

namespace kdsl::cli {

Command register_check(CLI::App& app) {
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* sub = app.add_subcommand("check", "Parse and type-check .kdsl files; print every error");
  sub->add_option("files", *files, "The .kdsl files")->required();
  sub->footer("Example: kdsl check stdlib/*.kdsl\nExit code 1 when any file has an error.");
  return {sub, [files]() {
            int code = kOk;
            for (const std::string& path : *files) {
              Diagnostics diags;
              auto file = SourceFile::read(path);
              auto m = parse_module(file, diags);
              if (!diags.has_errors()) check_module(*m, diags);
              std::cerr << diags.render(stderr_is_tty());
              if (diags.has_errors()) {
                std::cerr << fmt::format("{}: {} error{}\n", path, diags.error_count(),
                                         diags.error_count() == 1 ? "" : "s");
                code = kUserError;
              } else {
                size_t kernels = 0;
                for (const auto& f : m->functions) kernels += f.is_kernel();
                std::cout << fmt::format("{}: ok ({} kernel{})\n", path, kernels, kernels == 1 ? "" : "s");
              }
            }
            return code;
          }};
}

namespace {

std::string format_default(double v) { return fmt::format("{}", v); }

std::string signature_line(const KernelSignature& sig) {
  std::string s = sig.name;
  if (!sig.generics.empty()) {
    s += "[";
    for (size_t g = 0; g < sig.generics.size(); ++g) {
      std::string dom;
      for (DType t : sig.generics[g].domain) dom += (dom.empty() ? "" : " | ") + std::string(dtype_name(t));
      s += fmt::format("{}{}: {}", g ? ", " : "", sig.generics[g].name, dom);
    }
    s += "]";
  }
  s += "(";
  bool star = false;
  for (size_t i = 0; i < sig.params.size(); ++i) {
    const SignatureParam& p = sig.params[i];
    if (i) s += ", ";
    if (p.keyword_only && !star) {
      s += "*, ";
      star = true;
    }
    std::string dt = p.generic >= 0 ? sig.generics[p.generic].name : std::string(dtype_name(p.dtype));
    if (!p.is_tensor) {
      s += fmt::format("{}: {}", p.name, dt);
      if (p.default_value) s += " = " + format_default(*p.default_value);
      continue;
    }
    const char* kind = p.role == ir::Role::in ? "Tensor" : p.role == ir::Role::out ? "Out" : "InOut";
    std::string shape;
    for (size_t a = 0; a < p.shape.size(); ++a) {
      const ir::Extent& e = p.shape[a];
      shape += (a ? ", " : "") + (e.symbol >= 0 ? sig.symbols[e.symbol].name : std::to_string(e.constant));
    }
    s += fmt::format("{}: {}[{}, ({}{})]", p.name, kind, dt, shape, p.shape.size() == 1 ? "," : "");
  }
  return s + ")";
}

}  // namespace

Command register_list(CLI::App& app) {
  auto file = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("list", "List the kernels of a .kdsl file with their signatures");
  sub->add_option("file", *file, "The .kdsl file")->required();
  sub->footer("Example: kdsl list stdlib/rms_norm.kdsl");
  return {sub, [file]() {
            auto fe = run_front_end(SourceFile::read(*file));
            for (const KernelSignature& sig : fe->kernels) {
              std::cout << signature_line(sig) << "\n";
              std::string doc = sig.docstring.substr(0, sig.docstring.find('\n'));
              if (!doc.empty()) std::cout << "    " << doc << "\n";
              std::string spec, dyn;
              for (const ir::Symbol& s : sig.symbols) {
                (s.specialized ? spec : dyn) += ((s.specialized ? spec : dyn).empty() ? "" : ", ") + s.name;
              }
              std::cout << fmt::format("    specialized (compile-time): {}; run-time: {}\n",
                                       spec.empty() ? "none" : spec, dyn.empty() ? "none" : dyn);
            }
            return kOk;
          }};
}

}  // namespace kdsl::cli
