// Running a kernel's generated CUDA on the CPU emulation (cuda_emu.h) with a Problem's tensors, as
// the runtime would launch it: workspaces sized from the launch plan (zeroed ones cleared, the
// others filled with garbage), the parameter block packed from the plan's slots, the follow-up
// kernels after the main one.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "cuda_emu.h"
#include "src/harness.h"
#include "src/verify.h"

namespace kdsl::emu {

/// The generated kernel of `p` compiled for the emulation (cached by source text).
inline const Library& library_for(const GeneratedKernel& gen) {
  static std::mutex mu;
  static std::map<size_t, std::unique_ptr<Library>> cache;
  std::lock_guard<std::mutex> lock(mu);
  size_t key = std::hash<std::string>{}(gen.source);
  auto& lib = cache[key];
  if (!lib) {
    std::vector<std::string> symbols = {gen.plan.symbol};
    for (const FollowUp& f : gen.plan.follow_ups) symbols.push_back(f.symbol);
    lib = std::make_unique<Library>(emulated_source(gen.source, symbols),
                                    fmt::format("{}_{:x}", gen.plan.symbol, key), symbols.size());
  }
  return *lib;
}

/// Runs `p` on the emulation; returns every tensor afterwards. At most `grid_cap` CTAs, of which
/// `concurrent` run at once; `hint` overrides the row schedule's choices.
inline std::vector<HostTensor> run_emulated(const Problem& p, unsigned grid_cap = 8,
                                            unsigned concurrent = 4,
                                            const ScheduleHint& hint = {}) {
  GeneratedKernel gen = generate(p.ir, p.spec, DeviceTarget{}, hint);
  const LaunchPlan& plan = gen.plan;
  const Library& lib = library_for(gen);
  std::vector<HostTensor> t = p.tensors;
  int64_t rows = 1;
  for (const ir::LoopVar& l : p.ir.loop) rows *= p.symbols[l.extent];
  uint64_t groups =
      static_cast<uint64_t>((rows + plan.rows_per_cta - 1) / plan.rows_per_cta) * plan.row_splits;
  // A persistent grid loops over the rows, so fewer CTAs than rows exercise that loop; any other
  // schedule needs one CTA per group of rows.
  // (In whole clusters when a row spans a thread-block cluster.)
  auto grid = static_cast<unsigned>(
      plan.persistent ? std::max<uint64_t>(std::min<uint64_t>(groups, grid_cap) / plan.cluster, 1) *
                            plan.cluster
                      : groups);
  std::vector<std::vector<unsigned char>> ws;
  for (const WorkspaceSpec& w : plan.workspaces) {
    uint64_t bytes = w.bytes_per_cta * std::max(grid, 1u) +
                     w.bytes_per_row * static_cast<uint64_t>(rows) + w.bytes_fixed + 256;
    ws.emplace_back(bytes, w.zeroed ? 0 : 0xab);
  }
  std::vector<unsigned char> block(plan.param_bytes + 16, 0);
  auto put = [&](uint32_t off, const void* v, size_t n) { std::memcpy(block.data() + off, v, n); };
  for (const ParamSlot& s : plan.slots) {
    switch (s.kind) {
      case ParamSlot::Kind::tensor_ptr: {
        void* ptr = t[s.index].bytes.data();
        put(s.offset, &ptr, 8);
        break;
      }
      case ParamSlot::Kind::stride: {
        int64_t st = t[s.index].strides()[s.axis];
        put(s.offset, &st, 8);
        break;
      }
      case ParamSlot::Kind::symbol:
        put(s.offset, &p.symbols[s.index], 8);
        break;
      case ParamSlot::Kind::rows:
        put(s.offset, &rows, 8);
        break;
      case ParamSlot::Kind::partials: {
        int64_t parts = plan.partials(grid);
        put(s.offset, &parts, 8);
        break;
      }
      case ParamSlot::Kind::workspace: {
        void* ptr = ws[s.index].data();
        put(s.offset, &ptr, 8);
        break;
      }
      case ParamSlot::Kind::scalar: {
        double v = p.scalars[s.index];
        if (s.dtype == DType::f64) {
          put(s.offset, &v, 8);
        } else if (s.dtype == DType::i64) {
          auto x = static_cast<int64_t>(v);
          put(s.offset, &x, 8);
        } else if (s.dtype == DType::i32) {
          auto x = static_cast<int32_t>(v);
          put(s.offset, &x, 4);
        } else {
          auto x = static_cast<float>(v);
          put(s.offset, &x, 4);
        }
        break;
      }
    }
  }
  if (grid > 0) lib.launch(0, block.data(), grid, plan.block_threads, concurrent, plan.cluster);
  for (size_t f = 0; f < plan.follow_ups.size(); ++f) {
    const FollowUp& fu = plan.follow_ups[f];  // the runtime's grid: one thread per element
    auto fgrid =
        static_cast<unsigned>((fu.grid_elements + fu.block_threads - 1) / fu.block_threads);
    lib.launch(f + 1, block.data(), std::max(fgrid, 1u), fu.block_threads, 2);
  }
  return t;
}

/// Compares every output of the emulated run with the interpreter, with `kdsl run --verify`'s
/// tolerance (output_tolerance): the absolute tolerance follows the output's root-mean-square
/// value (scans of random inputs cancel, so a purely relative bound is meaningless where a
/// running sum crosses zero).
inline void expect_emulated_matches_reference(const Problem& p, const std::string& label,
                                              unsigned grid_cap = 8, unsigned concurrent = 4,
                                              const ScheduleHint& hint = {}) {
  std::vector<HostTensor> ref = run_reference(p);
  std::vector<HostTensor> got = run_emulated(p, grid_cap, concurrent, hint);
  for (size_t t = 0; t < got.size(); ++t) {
    const ir::TensorParam& tp = p.ir.tensors[t];
    if (tp.role == ir::Role::in) continue;
    Tolerance tol = output_tolerance(p, t, ref[t]);
    Comparison c = compare(got[t], ref[t], tol);
    EXPECT_TRUE(c.ok) << label << " output " << tp.name << ": " << c.mismatches << " of "
                      << c.checked << " values off; worst " << describe_worst(got[t], c);
  }
}

}  // namespace kdsl::emu
