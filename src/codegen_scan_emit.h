// Internal to the scan codegen: the emitter, split over codegen_scan.cpp (declarations, main
// kernel, follow-up) and codegen_scan_tile.cpp (the tile: rows, loads, local scans, look-back,
// epilogue).
#pragma once

#include <fmt/format.h>

#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen_cuda.h"
#include "codegen_scan_plan.h"
#include "codegen_text.h"

namespace kdsl::scan_codegen {

using codegen::Text;

bool has_vector_axis(const ir::View& v);
int vector_axis(const ir::View& v);

class Emitter {
 public:
  Emitter(const ir::Kernel& k, const Specialization& spec, const ScanSchedule& s, const Plan& p);
  GeneratedKernel run();
  /// The bytes of the tile's static shared memory (emit_smem's struct, padding aside).
  uint64_t smem_bytes() const;

 private:
  // Declarations and kernels (codegen_scan.cpp).
  void plan_params();
  void emit_params_struct();
  void emit_states();
  void emit_smem();
  void emit_main();
  void emit_run();
  void emit_finalize();
  std::string fast_condition() const;
  std::string identity(const State& st, size_t c) const;
  std::string state_type(size_t i) const;
  std::string ws_name(int partial_ws) const;
  void split_loop(const ir::View& view, std::vector<int>* kept, std::vector<int>* omitted) const;
  std::string extent_product(const std::vector<int>& loops) const;
  bool warp_smem() const { return s_.wp > 1 || p_.lookback; }
  /// Look-back mode: the next tile's phase-A loads are issued during this tile's look-back.
  bool pipelined() const { return p_.lookback && s_.pipeline; }
  /// Pipelined with the next tile's phase-A loads copied by cp.async into shared memory (staging
  /// arrays stg<a>), read into registers when the tile starts.
  bool staged() const { return pipelined() && s_.async_copy; }
  // Phase B scans the thread's elements again from its prefix (ScanSchedule::rescan; the
  // scheduler keeps it only for scan.columns without pipelining).
  bool rescan() const { return s_.rescan; }
  /// Look-back with packed words (kdsl_sc_pk_*): every state component is 32 bits wide and
  /// together they take at most three words, the fourth being the status.
  bool packed() const;
  void emit_packed_lookback();
  void emit_warp_prefixes(size_t i);

  // The tile (codegen_scan_tile.cpp).
  void emit_tile();
  std::string q0_expr(const std::string& sfx, const std::string& j = "j") const;
  std::string q0_step() const;
  void emit_column_pointer(const std::string& ptr, const std::string& type, const std::string& base,
                           const std::string& offset, int delta, const std::string& sfx,
                           const std::string& vs);
  std::string column_step(const std::string& ptr) const;
  void emit_lane_scan(size_t i, const std::string& x);
  std::string element_state(size_t i, std::map<At, std::string>& memo);
  void emit_prefix_steps(size_t i);
  void emit_constants();
  std::vector<ir::ValueId> row_nodes() const;
  void emit_row_decls(const std::string& sfx);
  void emit_row_assign(const std::string& sfx, const std::string& tile);
  void emit_row_copy();
  void emit_uniforms();
  void emit_tile_body(const std::function<void()>& between);
  void emit_loads(bool phase_a, const std::string& sfx, bool declare);
  void emit_load(int a, const std::string& sfx, const std::string& array, bool declare);
  bool loaded_in_b(int a) const;
  int shift_source(int a) const;
  std::string array_of(int a) const;
  void emit_shift_copies();
  void emit_position(const std::string& q, int delta, const std::string& sfx, bool need_pp);
  void emit_vector_position(int delta, const std::string& sfx);
  void emit_position_loop(int delta, const std::string& sfx);
  void emit_stage_constants();
  void emit_staged_load(int a, const std::string& sfx);
  void emit_staged_loads(const std::string& sfx);
  void emit_stage_reads();
  void emit_phase_a();
  void emit_lookback_setup();
  void emit_state_loads(const std::string& w0);
  int lookback_window() const;
  void check_smem() const;
  void emit_lookback(const std::function<void()>& between);
  void emit_phase_b();
  void emit_step_stores();
  void emit_end(bool begin, std::map<At, std::string> memo);
  void emit_tile_partials();
  std::string offset(int32_t tensor, const ir::View& view, const std::string& suffix) const;
  void emit_row_functions();
  bool uses_fast(const ir::View& view) const;
  std::string vstride(int32_t tensor, const ir::View& view) const;
  std::string init_state(size_t i) const;
  std::string scalar(ir::ValueId id) const;
  std::string end_scalar(ir::ValueId id, std::map<At, std::string>& memo,
                         std::map<ir::ValueId, std::string>& scalars);
  std::string elem(ir::ValueId id, int delta, std::map<At, std::string>& memo);
  void row_index_code(const std::string& r, const std::string& prefix, const std::string& suffix);

  const ir::Kernel& k_;
  const Specialization& spec_;
  const ScanSchedule& s_;
  const Plan& p_;
  int64_t len_ = 1;
  std::string sym_;
  LaunchPlan plan_;
  Text t_;
  bool in_phase_b_ = false;
  // Phase A's transcendental results held for phase B (ScanSchedule::keep_math): (node, delta)
  // as phase A computes them, in the arrays K<index>[T][VR * VP].
  std::vector<At> kept_;
  bool keep_off_ = false;  // while computing a kept value at a step phase A did not cover
  void plan_kept();
  int kept_step(size_t i, int delta) const;
};

}  // namespace kdsl::scan_codegen
