#include "schedule.h"

#include <fmt/format.h>

#include <algorithm>

namespace kdsl {
namespace {

int pow2_ceil(int64_t v) {
  int p = 1;
  while (p < v && p < (1 << 30)) p <<= 1;
  return p;
}

bool has_vector_axis(const ir::View& v) {
  return std::any_of(v.begin(), v.end(), [](const ir::AxisIndex& a) {
    return a.kind == ir::AxisIndex::Kind::vector;
  });
}

bool has_loop_axis(const ir::View& v) {
  return std::any_of(v.begin(), v.end(), [](const ir::AxisIndex& a) {
    return a.kind == ir::AxisIndex::Kind::loop;
  });
}

// Registers (32-bit) one element of a value of dtype `t` takes.
int reg_words(DType t) { return dtype_size(accumulator_dtype(t)) == 8 || t == DType::f64 ? 2 : 1; }

struct Footprint {
  int row_words = 0;        // per element, summed over row-dependent vector loads
  int invariant_words = 0;  // per element, summed over loop-invariant vector loads
  int column_words = 0;     // per element, summed over column-reduction accumulators
};

Footprint footprint(const ir::Kernel& k) {
  Footprint f;
  for (const ir::Node& n : k.nodes) {
    if (n.op != ir::Op::load || n.type.form != ir::Form::vector) continue;
    (has_loop_axis(n.view) ? f.row_words : f.invariant_words) += reg_words(n.type.dtype);
  }
  for (const ir::Store& s : k.stores) {
    if (s.kind == ir::StoreKind::reduce && has_vector_axis(s.view)) {
      f.column_words += reg_words(k.node(s.value).type.dtype);
    }
  }
  return f;
}

}  // namespace

RowSchedule choose_row_schedule(const ir::Kernel& k, const Specialization& spec,
                                const DeviceTarget& target) {
  RowSchedule s;
  int64_t n = k.vector_symbol >= 0 ? *k.symbols[k.vector_symbol].value : 1;
  size_t min_size = 16;
  bool any_fast = false;
  for (size_t t = 0; t < k.tensors.size(); ++t) {
    bool vec_access = false;
    for (const ir::Node& node : k.nodes) {
      vec_access |= node.op == ir::Op::load && node.index == (int32_t)t && has_vector_axis(node.view);
    }
    for (const ir::Store& st : k.stores) vec_access |= st.tensor == (int32_t)t && has_vector_axis(st.view);
    if (!vec_access) continue;
    min_size = std::min(min_size, dtype_size(k.tensors[t].dtype));
    any_fast |= ((spec.aligned_mask & spec.contiguous_mask) >> t) & 1u;
  }
  s.vec = 1;
  if (any_fast) {
    for (int v : {8, 4, 2}) {
      if (static_cast<size_t>(v) * min_size <= 16 && n % v == 0) {
        s.vec = v;
        break;
      }
    }
  }
  int64_t vectors = (n + s.vec - 1) / s.vec;
  if (vectors <= 16) {
    s.name = "rows.subwarp";
    s.group = pow2_ceil(vectors);
    s.threads = 256;
  } else if (vectors <= 256) {
    s.name = "rows.warp";
    s.group = 32;
    s.threads = 256;
  } else {
    s.name = "rows.cta";
    s.group = std::clamp(pow2_ceil((vectors + 3) / 4), 64, 1024);
    s.threads = s.group;
  }
  s.rows_per_cta = s.threads / s.group;
  s.chunks = static_cast<int>((vectors + s.group - 1) / s.group);
  s.reasons.push_back(fmt::format(
      "N = {}: VEC = {} ({}-byte accesses), {} vectors per row -> {} ({} threads per row, {} "
      "rows per CTA, {} chunks per thread)",
      n, s.vec, s.vec * min_size, vectors, s.name, s.group, s.rows_per_cta, s.chunks));

  Footprint f = footprint(k);
  const int elems = s.chunks * s.vec;
  const int overhead = 40;
  int budget = std::min(255, target.regs_per_sm / s.threads) - overhead;
  int need = elems * (f.row_words + f.invariant_words + f.column_words);
  if (need > budget && f.invariant_words > 0) {
    s.cache_invariant = false;
    need -= elems * f.invariant_words;
    s.reasons.push_back("loop-invariant vectors are re-read per row (from L1/L2): the register "
                        "budget is too small to keep them");
  }
  if (need > budget) {
    s.cache_rows = false;
    need -= elems * f.row_words;
    s.reasons.push_back(fmt::format("streaming: {} registers per thread needed to hold the row, "
                                    "budget {}; each reduction phase re-reads the row",
                                    elems * f.row_words, budget));
  } else {
    s.reasons.push_back(fmt::format("register-resident: {} registers per thread hold the cached "
                                    "vectors (budget {}); each element is read once",
                                    need, budget));
  }
  // The grid is sized at launch from the driver's occupancy for the compiled kernel; this is an
  // upper bound (threads per SM), so that the generated source depends on the kernel, the
  // specialization and the architecture only.
  s.ctas_per_sm = std::max(1, std::min(target.max_threads_per_sm / s.threads, 32));
  return s;
}

}  // namespace kdsl
