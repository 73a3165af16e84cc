#!/usr/bin/env bash
# compute-sanitizer (memcheck, racecheck, synccheck) on the staged row schedules and their
# neighbours, one shape each, on the GPU machine after stage.sh (carry .device): rows staged in
# shared memory with cp.async (16-bit backward kernels, long softmax rows), per-row scalars
# loaded a row ahead into registers (since the eighteenth session), column accumulators in
# registers, the finalize kernel's slices, clusters staged with the accumulators in registers
# (bf16 N = 32768, since the nineteenth session), the row groups of a CTA adding their column
# partials in shared memory (N = 1000, 1024, and 7 with 32 row groups per CTA; since the
# twenty-second session). scripts/device/sanitize.sh covers every stdlib kernel
# in f32, where staging is not the default. Prints one line per case and tool; exits 1 on any
# error. ONLY=REGEX runs only the cases whose "KERNEL DTYPE SHAPE" matches.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}" KDSL_SOURCE_DIR="$PWD"
cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
fail=0
while read -r file kernel dtype shape hint; do
  [ -n "$file" ] || continue
  [[ -z "${ONLY:-}" || "$kernel $dtype $shape" =~ $ONLY ]] || continue
  args=(stdlib/$file -k "$kernel" --dtype "$dtype" --shape "$shape")
  [ "$hint" = - ] || args+=(--schedule "$hint")
  .device/bin/kdsl run "${args[@]}" >/dev/null 2>&1  # compile outside the sanitizer
  sched=$(.device/bin/kdsl emit "${args[@]}" --explain 2>/dev/null | sed -n 's/.*schedule \(rows\.[a-z]*\).*/\1/p' | head -1)
  for tool in memcheck racecheck synccheck; do
    out=$(timeout 120 "$cs" --tool "$tool" --error-exitcode 9 .device/bin/kdsl run "${args[@]}" 2>&1)
    rc=$?
    summary=$(echo "$out" | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | tail -1)
    printf '%-18s %-5s %-16s %-24s %-10s %-10s rc=%d %s\n' "$kernel" "$dtype" "$shape" "$hint" \
      "$sched" "$tool" $rc "$summary"
    [ $rc -eq 0 ] || { fail=1; echo "$out" | grep -v "^=========     " | tail -8; }
  done
done <<'CASES'
rms_norm.kdsl rms_norm_bwd bf16 M=300,N=8192 -
rms_norm.kdsl rms_norm_bwd bf16 M=70000,N=1024 -
rms_norm.kdsl add_rms_norm_bwd bf16 M=300,N=1000 -
rms_norm.kdsl rms_norm_bwd bf16 M=37,N=1000 stage=3
rms_norm.kdsl rms_norm_bwd f32 M=300,N=10240 -
layer_norm.kdsl layer_norm_bwd bf16 M=300,N=8192 -
layer_norm.kdsl layer_norm_bwd bf16 M=300,N=4096 -
layer_norm.kdsl layer_norm_bwd bf16 M=70000,N=1024 -
layer_norm.kdsl layer_norm_bwd bf16 M=37,N=1000 -
layer_norm.kdsl layer_norm_bwd bf16 M=300,N=7 -
layer_norm.kdsl layer_norm_bwd bf16 M=300,N=32768 -
rms_norm.kdsl rms_norm_bwd bf16 M=300,N=32768 -
rms_norm.kdsl add_rms_norm_bwd bf16 M=37,N=32760 -
softmax.kdsl softmax bf16 M=300,N=32768 -
softmax.kdsl log_softmax bf16 M=37,N=32776 -
CASES
exit $fail
