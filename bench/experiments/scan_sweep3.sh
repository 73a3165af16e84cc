#!/usr/bin/env bash
# Third scan-schedule sweep (2026-11-29, third session): the packed look-back (default) against
# the fenced per-tile flags (packed=0), at several tile lengths (t), at (1, 32768, 2048).
# GPU machine, after scripts/device/stage.sh; carry .device.
set -uo pipefail
cd "$(dirname "$0")/../.."
shape=B=1,L=32768,D=2048
sw() { bash scripts/device/sweep.sh "$@"; }
nvidia-smi -L; cat .device/COMMIT
lr=stdlib/linear_recurrence.kdsl
for d in f32 bf16; do
  sw $lr linear_recurrence $d $shape "" scan:packed=0 scan:t=4 scan:t=16 scan:t=32
  sw $lr linear_recurrence_bwd $d $shape "" scan:packed=0 scan:t=8 scan:t=16 scan:t=32
  sw stdlib/scan.kdsl cumsum_mid $d $shape "" scan:packed=0 scan:t=8 scan:t=32
  sw stdlib/rg_lru.kdsl rg_lru_bwd $d $shape "" scan:packed=0 scan:t=4 scan:t=8
  sw stdlib/rg_lru.kdsl rg_lru $d $shape "" scan:packed=0 scan:t=8 scan:t=16
done
sw $lr linear_recurrence c64 $shape "" scan:packed=0 scan:t=8
sw $lr complex_linear_recurrence_bwd c64 $shape "" scan:t=8
sw stdlib/scan.kdsl cumsum f32 M=2048,N=32768 "" scan:packed=0
sw stdlib/scan.kdsl cumsum bf16 M=2048,N=32768 "" scan:packed=0
