#!/usr/bin/env bash
# Thirty-eighth session, on the GPU machine after scripts/device/stage.sh (carry .device).
# The device tool lends H100s whatever kind is named (no H200 since the thirtieth session), and
# its rules say to use what comes and rerun the baseline in the same call, so every mode here
# runs on any GPU and times old against new in the same call. Predictions written before the run:
#   s38.sh sass   The SASS of rg_lru_bwd bf16 and f32 and cumsum_mid bf16 at (1, 32768, 2048),
#                 to count instructions by section on the CPU machine (no cuobjdump there), and
#                 the three rows timed once (today's machine). Expected: rg_lru_bwd bf16 about
#                 480-495 us on an H100 (AT1: 482.5), f32 about 1000, cumsum_mid bf16 about 106.
#   s38.sh rgvar  rg_lru_bwd bf16 (1, 32768, 2048) under KDSL_SCAN_SCHEDULE layouts that keep more
#                 tiles in flight per SM (AP2: issue 0.57 per cycle, 39% of the stall cycles on the
#                 look-back barrier and the tile's loads, with 2 CTAs of 8 warps per SM): 4 CTAs of
#                 4 warps (tiles of 32 positions; ptxas here: 128 registers, 4 bytes spilled), the
#                 same rescanned (no spill), 8 CTAs of 2 warps, and the default rescanned (4 bytes
#                 spilled instead of 12). Two rounds, --verify in round 1. Prediction: 4 CTAs of 4
#                 warps within -5% to +10% of the default (a look-back stalls 4 warps, not 8, but
#                 the chunks double: AP2's `wp=4` on 2 CTAs was +11%); rescan alone +2 to +6%
#                 (phase B evaluates sigmoid and exp again: about 8 more instructions per element);
#                 per-row-tile tickets with 4-step tiles on 3 CTAs (AP2: t=4,ctas=3 +21% with a
#                 tile's row values computed per tile) within -3% to +15%.
#   s38.sh ab     rg_lru_bwd from stdlib/rg_lru.kdsl against bench/experiments/rg_lru_s38.kdsl
#                 (sqrt(u) as u * rsqrt(max(u, 1e-30)), sharing the rsqrt with the bounded
#                 derivative's min(rsqrt, 2000); x (1 - i) and base (1 - r) as one fma each), bf16
#                 and f32 at (1, 32768, 2048), same binary, three rounds alternating, --verify in
#                 round 1. SASS here (ptxas): bf16 4744 -> 4648 instructions (both access paths,
#                 about 4 fewer per element), f32 2640 -> 2472 (about 7 fewer per element: no
#                 sqrtf). Prediction: bf16 1-2% faster, f32 2-4% faster.
#   s38.sh rowtk  KDSL_SCAN_SCHEDULE rowtk=1 (a ticket counter per row tile: a CTA keeps its row
#                 tile, so the rows' indices and per-row scalars are computed once per row tile,
#                 not per tile: no 64-bit division and, for RG-LRU, no softplus(-Lambda) per tile)
#                 against the default, same binary, on rg_lru_bwd bf16 and f32, cumsum_mid,
#                 linear_recurrence and linear_recurrence_bwd bf16 at (1, 32768, 2048), two
#                 rounds alternating, --verify in round 1. The PTX of rg_lru_bwd bf16 spends about
#                 210 of its 2600 instructions per thread and tile before the loads (two 64-bit
#                 divisions with their 32-bit bypass, log1pf twice, the offsets); about 130 SASS
#                 of them go. Prediction: rg_lru_bwd bf16 2-4% faster, f32 1-3%; the
#                 memory-bound scans within 1% (their prologue is small against their loads).
#   (Run at 1d1a145 on an H100, AU1: `ab` bf16 +1.7% and f32 -1.6%; `rowtk` slower on every
#   kernel, 6-26%, and removed from the code since; `rgvar` every layout slower.)
#   s38.sh ab2    The old binary (.device/bin/kdsl_old, b13947a's scan code) against the new one,
#                 where the ticket's thread splits the ticket into chunk and row tile once for the
#                 CTA (SASS of rg_lru_bwd bf16 from AU1: the 64-bit division of the ticket, about
#                 40-50 instructions per warp and tile, in every warp), on rg_lru_bwd bf16 and f32,
#                 cumsum_mid, linear_recurrence and its backward bf16 at (1, 32768, 2048) and the
#                 last-axis cumsum bf16 2048 x 32768, three rounds alternating, --verify on the new
#                 one in round 1; then compute-sanitizer memcheck and racecheck on rg_lru_bwd and
#                 cumsum_mid bf16 (2, 4097, 258) with --verify, and cli_gpu_test (the source
#                 loader's check of the file type). Prediction: rg_lru_bwd bf16 0.5-2% faster
#                 (7 of 8 warps skip the division: about 1.5% of its instructions), f32 0-1%;
#                 the memory-bound scans within 1%; sanitizers clean, tests pass.
#   s38.sh run    On an H200 (none lent since the thirtieth session): the full benchmark with the
#                 peers (final_bench.sh, KDSL_PEERS=run, KDSL_PRECOMPILE=0; prediction as s37.sh's),
#                 then `ab`. On any other GPU: `sass`, `ab`, then `rgvar` once.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s35.sh lib  # (s18.sh lib, and `ab FILE`)
out="${OUT:-/tmp}"
sass() {
  local f kn dt
  for c in "rg_lru rg_lru_bwd bf16" "rg_lru rg_lru_bwd f32" "scan cumsum_mid bf16"; do
    set -- $c
    timeout 90 ${k} emit "stdlib/$1.kdsl" -k "$2" --dtype "$3" --shape B=1,L=32768,D=2048 --sass \
      > "$out/$2_$3.sass" 2>&1
    wc -l "$out/$2_$3.sass"
  done
}
rg_variants=(
  ""
  "t=8,vr=2,lp=1,wp=4,ctas=4"
  "t=8,vr=2,lp=1,wp=4,ctas=4,rescan=1"
  "rescan=1"
  "rowtk=1,t=4,vr=2,lp=1,wp=8,ctas=3"
)
rgvar() {
  local round v extra
  for round in $(seq "${1:-2}"); do
    for v in "${rg_variants[@]}"; do
      extra=(); [ "$round" = 1 ] && [ -n "$v" ] && extra=(--verify)
      printf '%s %-40s ' "$round" "${v:-default}"
      KDSL_SCAN_SCHEDULE="$v" timeout 90 ${k} run stdlib/rg_lru.kdsl -k rg_lru_bwd --dtype bf16 \
        --shape B=1,L=32768,D=2048 --bench --reps 40 "${extra[@]}" 2>&1 |
        grep -oE "bench: [0-9.]+ us|verify [a-z_]+: [a-zA-Z]+|error:.*" | tr '\n' ' '
      echo
    done
  done
}
rowtk_cases=("rg_lru rg_lru_bwd bf16" "rg_lru rg_lru_bwd f32" "scan cumsum_mid bf16"
  "linear_recurrence linear_recurrence bf16" "linear_recurrence linear_recurrence_bwd bf16")
rowtk() {
  local round c v extra
  for round in $(seq "${1:-2}"); do
    for c in "${rowtk_cases[@]}"; do
      for v in "" rowtk=1; do
        set -- $c
        extra=(); [ "$round" = 1 ] && [ -n "$v" ] && extra=(--verify)
        printf '%s %-24s %-5s %-8s ' "$round" "$2" "$3" "${v:-default}"
        KDSL_SCAN_SCHEDULE="$v" timeout 90 ${k} run "stdlib/$1.kdsl" -k "$2" --dtype "$3" \
          --shape B=1,L=32768,D=2048 --bench --reps 40 "${extra[@]}" 2>&1 |
          grep -oE "bench: [0-9.]+ us|verify [a-z_]+: [a-zA-Z]+|error:.*" | tr '\n' ' '
        echo
      done
    done
  done
}
ab2_cases=("rg_lru rg_lru_bwd bf16 B=1,L=32768,D=2048 default"
  "rg_lru rg_lru_bwd f32 B=1,L=32768,D=2048 default"
  "scan cumsum_mid bf16 B=1,L=32768,D=2048 default"
  "linear_recurrence linear_recurrence bf16 B=1,L=32768,D=2048 default"
  "linear_recurrence linear_recurrence_bwd bf16 B=1,L=32768,D=2048 default"
  "scan cumsum bf16 M=2048,N=32768 default")
ab2() {
  cases=("${ab2_cases[@]}")
  # (AB2_QUICK=1, for a call with little device time left: three cases, rg_lru_bwd's sanitizers.)
  [ "${AB2_QUICK:-0}" = 1 ] && cases=("${ab2_cases[@]:0:3}")
  ab_rounds "${AB_ROUNDS:-3}"
  local cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)" tool c
  local san=("rg_lru rg_lru_bwd" "scan cumsum_mid")
  [ "${AB2_QUICK:-0}" = 1 ] && san=("rg_lru rg_lru_bwd")
  for c in "${san[@]}"; do
    set -- $c
    for tool in memcheck racecheck; do
      echo "== $tool $2 bf16 B=2,L=4097,D=258"
      timeout 120 "$cs" --tool $tool --error-exitcode 9 ${k} run "stdlib/$1.kdsl" -k "$2" \
        --dtype bf16 --shape B=2,L=4097,D=258 --verify 2>&1 |
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|verify|rror" | head -8
      echo "exit ${PIPESTATUS[0]}"
    done
  done
  [ "${AB2_QUICK:-0}" = 1 ] && return
  OUT="$out" KDSL_PRECOMPILE=0 KDSL_TEST_TIMEOUT=150 bash scripts/device/gpu_checks.sh cli_gpu_test \
    2>&1 | tail -8
}
case "${1:-}" in
  precompile2)  # here, both binaries: KDSL_CACHE_DIR=$PWD/.device/cache bash s38.sh precompile2
    for b in /tmp/kdsl_old build/kdsl; do
      for c in "${ab2_cases[@]}"; do
        set -- $c
        $b -q compile "stdlib/$1.kdsl" -k "$2" --dtype "$3" --shape "$4" --arch sm_90 &
      done
      for c in "rg_lru rg_lru_bwd" "scan cumsum_mid"; do
        set -- $c
        $b -q compile "stdlib/$1.kdsl" -k "$2" --dtype bf16 --shape L=4097 --arch sm_90 &
      done
      wait
    done
    ;;
  ab2)
    cat .device/COMMIT
    nvidia-smi -L
    # (On an H200, the full benchmark instead, as `run`: the issue's machine first.)
    if nvidia-smi -L | grep -q H200 && [ "${AB2_QUICK:-0}" != 1 ]; then
      OUT="$out" KDSL_PEERS=run KDSL_PRECOMPILE=0 bash scripts/device/final_bench.sh 2>&1 | tail -60
    else
      ab2
    fi
    echo "done at ${SECONDS} s"
    ;;
  precompile)  # here: k=build/kdsl KDSL_CACHE_DIR=$PWD/.device/cache bash s38.sh precompile
    for v in "${rg_variants[@]}"; do
      KDSL_SCAN_SCHEDULE="$v" ${k} -q compile stdlib/rg_lru.kdsl -k rg_lru_bwd --dtype bf16 \
        --shape B=1,L=32768,D=2048 --arch sm_90 &
    done
    for dt in bf16 f32; do
      ${k} -q compile bench/experiments/rg_lru_s38.kdsl -k rg_lru_bwd --dtype $dt \
        --shape B=1,L=32768,D=2048 --arch sm_90 &
    done
    for c in "${rowtk_cases[@]}"; do
      set -- $c
      KDSL_SCAN_SCHEDULE=rowtk=1 ${k} -q compile "stdlib/$1.kdsl" -k "$2" --dtype "$3" \
        --shape B=1,L=32768,D=2048 --arch sm_90 &
    done
    for c in "${rowtk_cases[@]}"; do
      set -- $c
      ${k} -q compile "stdlib/$1.kdsl" -k "$2" --dtype "$3" --shape B=1,L=32768,D=2048 --arch sm_90 &
    done
    wait
    ;;
  run)
    cat .device/COMMIT
    nvidia-smi -L
    if nvidia-smi -L | grep -q H200; then
      OUT="$out" KDSL_PEERS=run KDSL_PRECOMPILE=0 bash scripts/device/final_bench.sh 2>&1 | tail -60
      echo "== ab at ${SECONDS} s"
      ab bench/experiments/rg_lru_s38.kdsl
    else
      echo "== ab at ${SECONDS} s"
      ab bench/experiments/rg_lru_s38.kdsl
      echo "== rowtk at ${SECONDS} s"
      rowtk 2
      echo "== rgvar at ${SECONDS} s"
      rgvar 1
      echo "== sass at ${SECONDS} s"
      sass
    fi
    echo "done at ${SECONDS} s"
    ;;
  rowtk) nvidia-smi -L; rowtk "${2:-2}"; echo "done at ${SECONDS} s" ;;
  ab) nvidia-smi -L; ab bench/experiments/rg_lru_s38.kdsl; echo "done at ${SECONDS} s" ;;
  rgvar) nvidia-smi -L; rgvar "${2:-2}"; echo "done at ${SECONDS} s" ;;
  sass)
    nvidia-smi -L
    sass
    for c in "rg_lru rg_lru_bwd bf16" "rg_lru rg_lru_bwd f32" "scan cumsum_mid bf16"; do
      set -- $c
      bench "$1" "$2" "$3" B=1,L=32768,D=2048 default
    done
    echo "== ab at ${SECONDS} s"
    ab
    echo "== rgvar at ${SECONDS} s"
    rgvar 2
    echo "done at ${SECONDS} s"
    ;;
  *) echo "usage: s38.sh sass" >&2; exit 2 ;;
esac
