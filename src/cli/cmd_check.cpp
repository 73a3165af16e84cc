// kdsl check, kdsl list.
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "dsl/diagnostics.h"
#include "dsl/ir.h"
#include "dsl/parser.h"
#include "src/log.h"

namespace kdsl::cli {

namespace {

// Checks one file, printing its diagnostics. Returns whether it is free of errors.
bool check_file(const std::string& path) {
  std::shared_ptr<const SourceFile> file;
  try {
    file = SourceFile::read(path);  // refuses a directory, a FIFO, a device
  } catch (const Error& e) {
    std::cerr << "kdsl: error: " << terminal_safe(e.what()) << "\n";
    return false;
  }
  Diagnostics diags;
  const auto t0 = std::chrono::steady_clock::now();
  auto m = parse_module(file, diags);
  if (!diags.has_errors()) check_module(*m, diags);
  // -v: the front end's time, as the other commands log it (docs/cli.md).
  log().info(
      "{}: parsed and checked in {:.1f} ms", terminal_safe_name(path),
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  std::cerr << diags.render(use_color());
  if (diags.has_errors()) {
    std::cerr << fmt::format("{}: {} error{}\n", terminal_safe_name(path), diags.error_count(),
                             diags.error_count() == 1 ? "" : "s");
    return false;
  }
  size_t kernels = 0;
  for (const auto& f : m->functions) kernels += f.is_kernel();
  std::cout << fmt::format("{}: ok ({} kernel{})\n", terminal_safe_name(path), kernels,
                           kernels == 1 ? "" : "s");
  return true;
}

}  // namespace

Command register_check(CLI::App& app) {
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* sub =
      app.add_subcommand("check", "Parse and type-check .kdsl files; print every error");
  sub->add_option("files", *files, "The .kdsl files")->required();
  sub->footer(
      "Prints every diagnostic (file:line:col, the source line, a caret, hints) on stderr and "
      "'FILE: ok (N kernels)' on stdout for each clean file.\n"
      "Exit code 1 when any file has an error or cannot be read.\n"
      "Example: kdsl check stdlib/*.kdsl");
  return {sub, [files]() {
            int code = kOk;
            for (const std::string& path : *files) {
              if (!check_file(path)) code = kUserError;
            }
            return code;
          }};
}

namespace {

// The same in --json: a bool, an integer or a number.
nlohmann::json default_json(double v, DType t) {
  if (t == DType::b8) return v != 0;
  if (is_int(t)) return static_cast<int64_t>(v);
  return v;
}

std::string signature_line(const KernelSignature& sig) {
  std::string s = sig.name;
  if (!sig.generics.empty()) {
    s += "[";
    for (size_t g = 0; g < sig.generics.size(); ++g) {
      std::string dom;
      for (DType t : sig.generics[g].domain)
        dom += (dom.empty() ? "" : " | ") + std::string(dtype_name(t));
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
    std::string dt =
        p.generic >= 0 ? sig.generics[p.generic].name : std::string(dtype_name(p.dtype));
    if (!p.is_tensor) {
      s += fmt::format("{}: {}", p.name, dt);
      if (p.default_value)
        s += " = " + ir::scalar_value_str(*p.default_value, p.generic >= 0 ? DType::f64 : p.dtype);
      continue;
    }
    const char* kind = p.role == ir::Role::in    ? "Tensor"
                       : p.role == ir::Role::out ? "Out"
                                                 : "InOut";
    std::string shape;
    for (size_t a = 0; a < p.shape.size(); ++a) {
      const ir::Extent& e = p.shape[a];
      shape += (a ? ", " : "") +
               (e.symbol >= 0 ? sig.symbols[e.symbol].name : std::to_string(e.constant));
    }
    s += fmt::format("{}: {}[{}, ({}{})]", p.name, kind, dt, shape, p.shape.size() == 1 ? "," : "");
  }
  return s + ")";
}

nlohmann::json signature_json(const KernelSignature& sig) {
  nlohmann::json j;
  j["name"] = sig.name;
  j["doc"] = sig.docstring.substr(0, sig.docstring.find('\n'));
  j["line"] = sig.loc.line;
  j["generics"] = nlohmann::json::array();
  for (const GenericInfo& g : sig.generics) {
    nlohmann::json dom = nlohmann::json::array();
    for (DType t : g.domain) dom.push_back(dtype_name(t));
    j["generics"].push_back({{"name", g.name}, {"dtypes", dom}});
  }
  j["params"] = nlohmann::json::array();
  for (const SignatureParam& p : sig.params) {
    nlohmann::json pj = {{"name", p.name}, {"keyword_only", p.keyword_only}};
    pj["dtype"] = p.generic >= 0 ? sig.generics[p.generic].name : std::string(dtype_name(p.dtype));
    if (p.is_tensor) {
      pj["kind"] = p.role == ir::Role::in ? "Tensor" : p.role == ir::Role::out ? "Out" : "InOut";
      nlohmann::json shape = nlohmann::json::array();
      for (const ir::Extent& e : p.shape) {
        if (e.symbol >= 0) {
          shape.push_back(sig.symbols[e.symbol].name);
        } else {
          shape.push_back(e.constant);
        }
      }
      pj["shape"] = shape;
    } else {
      pj["kind"] = "scalar";
      pj["default"] = p.default_value
                          ? default_json(*p.default_value, p.generic >= 0 ? DType::f64 : p.dtype)
                          : nlohmann::json(nullptr);
    }
    j["params"].push_back(pj);
  }
  j["symbols"] = nlohmann::json::array();
  for (const ir::Symbol& s : sig.symbols) {
    j["symbols"].push_back({{"name", s.name}, {"specialized", s.specialized}});
  }
  return j;
}

// Said on stderr when a file has no kernels, rather than printing nothing at all.
std::string no_kernels_note(const std::string& file) {
  return fmt::format("{} defines no kernels (a kernel is a function decorated with @kernel)",
                     terminal_safe_name(file));
}

}  // namespace

Command register_list(CLI::App& app) {
  struct Opts {
    std::string file;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub =
      app.add_subcommand("list", "List the kernels of a .kdsl file with their signatures");
  sub->add_option("file", o->file, "The .kdsl file")->required();
  sub->add_flag("--json", o->json, "Print the signatures as JSON");
  sub->footer(
      "For each kernel: its signature (generics with their allowed dtypes, tensors with roles, "
      "dtypes and shapes, scalars with defaults), the first line of its docstring, and which shape "
      "symbols are specialized (compile-time constants: each value is its own binary) or "
      "run-time. A file without kernels prints nothing on stdout (--json: []) and a note on "
      "stderr.\n"
      "Example: kdsl list stdlib/rms_norm.kdsl");
  return {sub, [o]() {
            auto fe = load_module(o->file);
            if (fe->kernels.empty()) print_note(no_kernels_note(o->file));
            if (o->json) {
              nlohmann::json all = nlohmann::json::array();
              for (const KernelSignature& sig : fe->kernels) all.push_back(signature_json(sig));
              std::cout << json_text(all) << "\n";
              return kOk;
            }
            for (const KernelSignature& sig : fe->kernels) {
              std::cout << signature_line(sig) << "\n";
              std::string doc = sig.docstring.substr(0, sig.docstring.find('\n'));
              if (!doc.empty()) std::cout << "    " << terminal_safe(doc) << "\n";
              std::string spec, dyn;
              for (const ir::Symbol& s : sig.symbols) {
                std::string& into = s.specialized ? spec : dyn;
                into += (into.empty() ? "" : ", ") + s.name;
              }
              std::cout << fmt::format("    specialized (compile-time): {}; run-time: {}\n",
                                       spec.empty() ? "none" : spec, dyn.empty() ? "none" : dyn);
            }
            return kOk;
          }};
}

}  // namespace kdsl::cli
