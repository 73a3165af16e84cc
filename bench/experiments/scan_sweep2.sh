#!/usr/bin/env bash
# Second scan-schedule sweep (2026-11-29, third session): the staged cp.async pipeline
# (pipeline=2), register caps (ctas=N) and longer tiles, at (1, 32768, 2048). GPU machine, after
# scripts/device/stage.sh; carry .device.
set -uo pipefail
cd "$(dirname "$0")/../.."
shape=B=1,L=32768,D=2048
sw() { bash scripts/device/sweep.sh "$@"; }
nvidia-smi -L; cat .device/COMMIT
lr=stdlib/linear_recurrence.kdsl
sw $lr linear_recurrence f32 $shape "" scan:t=16 scan:pipeline=2 scan:pipeline=2,ctas=4 \
  scan:pipeline=2,ctas=3 scan:t=16,pipeline=2,ctas=3 scan:t=16,ctas=3 scan:vr=4,t=4,pipeline=2 \
  scan:vr=4,t=4,pipeline=2,ctas=3 scan:vr=2,lp=2,t=8,pipeline=2 scan:t=16,pipeline=2 \
  scan:wp=4,pipeline=2 scan:t=32
sw $lr linear_recurrence bf16 $shape "" scan:vr=8,lp=4,t=4 scan:vr=8,lp=4,t=4,pipeline=2 \
  scan:vr=8,lp=4,t=4,pipeline=2,ctas=3 scan:vr=4,lp=2,t=4,pipeline=2 scan:vr=2,lp=1,t=8,pipeline=2 \
  scan:vr=2,lp=1,t=8,pipeline=2,ctas=3 scan:vr=8,lp=4,t=2,pipeline=2 scan:t=16
sw $lr linear_recurrence_bwd f32 $shape "" scan:t=16 scan:pipeline=2 scan:pipeline=2,ctas=4 \
  scan:t=16,pipeline=2,ctas=3 scan:vr=4,t=4,pipeline=2
sw $lr linear_recurrence_bwd bf16 $shape "" scan:vr=8,lp=4,t=4 scan:vr=8,lp=4,t=4,pipeline=2 \
  scan:vr=2,lp=1,t=8,pipeline=2
sw stdlib/scan.kdsl cumsum_mid f32 $shape "" scan:t=16 scan:pipeline=2 scan:pipeline=2,ctas=4 \
  scan:t=16,pipeline=2
sw stdlib/rg_lru.kdsl rg_lru_bwd f32 $shape "" scan:t=16 scan:pipeline=2 scan:pipeline=2,ctas=3
sw stdlib/scan.kdsl cumsum f32 M=2048,N=32768 "" scan:pipeline=2
