#!/usr/bin/env bash
# compute-sanitizer over every stdlib kernel (every stdlib/*.kdsl file, scans included once they
# exist) at shapes that reach every row schedule and tail: N in {1, 7, 33, 1000, 65537} and
# M in {1, 70000} under memcheck; one shape per schedule under racecheck and synccheck; a few
# under initcheck (tests/sanitize_cases.cpp lists them). Prints a table (kernel, shape, schedule,
# tool, errors) and exits 1 on any error, 2 when a tool could not run.
#
# Here (no GPU), once, after building:
#   bash scripts/device/stage.sh build && bash scripts/device/sanitize.sh --precompile build
#   (fills .device/cache with every sm_90 specialization, so the GPU machine runs no NVRTC)
# On the GPU machine (carry .device), in one call of about 5 minutes at most:
#   bash scripts/device/sanitize.sh [SECONDS]     (time budget, default 280; tools in priority
#                                                  order memcheck, racecheck, synccheck, initcheck;
#                                                  KDSL_SANITIZE_TOOLS="synccheck initcheck" runs
#                                                  only those)
# The table and the sanitizer logs go to $OUT (sanitize_summary.txt, sanitize_logs.txt) when set.
set -uo pipefail
cd "$(dirname "$0")/../.."

if [ "${1:-}" = "--precompile" ]; then
  build="${2:-build}"
  export KDSL_CACHE_DIR="$PWD/.device/cache" KDSL_SOURCE_DIR="$PWD"
  mkdir -p "$KDSL_CACHE_DIR"
  "$build/tests/kdsl_sanitize_cases" --precompile "$(nproc)" | tail -3
  exit "${PIPESTATUS[0]}"
fi

budget="${1:-280}"
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="$PWD/.device/cache" KDSL_SOURCE_DIR="$PWD" KDSL_LOG_LEVEL=error
bin=.device/bin/kdsl_sanitize_cases
cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
out="${OUT:-/tmp/kdsl-sanitize}"
mkdir -p "$out"
work="$(mktemp -d)"
[ -x "$cs" ] || { echo "sanitize: no compute-sanitizer (looked on PATH and in /usr/local/cuda/bin)"; exit 2; }
[ -x "$bin" ] || { echo "sanitize: $bin missing: run scripts/device/stage.sh here first"; exit 2; }
"$cs" --version | head -2
nvidia-smi -L 2>/dev/null | head -1
start=$(date +%s)

declare -A opts=(
  [memcheck]="--leak-check no"
  [racecheck]="--racecheck-report all"
  [synccheck]=""
  [initcheck]=""
)
status=0
tools="${KDSL_SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}"
for tool in $tools; do
  case "$tool" in memcheck|racecheck|synccheck|initcheck) ;; *) echo "sanitize: unknown tool $tool"; exit 2 ;; esac
  "$bin" --list "$tool" >"$work/$tool.cases" || { echo "sanitize: --list $tool failed"; exit 2; }
  for m in $(awk '{print $5}' "$work/$tool.cases" | sort -n -u); do
    first=0
    part=0
    while :; do
      if (( $(date +%s) - start > budget )); then
        echo "TIME $tool $m $first" >>"$work/skipped"
        break
      fi
      log="$work/$tool.m$m.part$part.log"
      # shellcheck disable=SC2086
      "$cs" --tool "$tool" ${opts[$tool]} --report-api-errors no --print-limit 50 \
        "$bin" --run "$tool" "$m" "$first" >"$log" 2>&1
      rc=$?
      failed=$(sed -n 's/^KDSL_FAILED \([0-9]*\) .*/\1/p' "$log" | tail -1)
      if [ -n "$failed" ]; then  # a sticky error ended the process: go on after that case
        first=$((failed + 1))
        part=$((part + 1))
        continue
      fi
      if [ $rc -ne 0 ] && ! grep -q '^KDSL_CASE' "$log"; then
        echo "sanitize: $tool did not run (status $rc):"
        tail -5 "$log"
        status=2
      fi
      break
    done
  done
done

python3 - "$work" "$out" "$((  $(date +%s) - start ))" <<'PY'
import collections, glob, os, re, sys
work, out, seconds = sys.argv[1], sys.argv[2], sys.argv[3]
header = re.compile(r'^========= (Invalid|Uninitialized|Barrier|Error|Warning|Race|Program hit|'
                    r'Misaligned|Out-of-range|Malloc|Cuda|Hardware|Warp|Unspecified|Illegal)')
at = re.compile(r'^=========\s+(?:at|in)\s+(kdsl_[A-Za-z0-9_]+)')
rows, errors, ran, failed = {}, collections.Counter(), set(), {}
for tool in ("memcheck", "racecheck", "synccheck", "initcheck"):
    if not os.path.exists(os.path.join(work, tool + ".cases")):
        continue  # not among KDSL_SANITIZE_TOOLS
    for line in open(os.path.join(work, tool + ".cases")):
        i, f, k, b, m, n = line.split()
        rows[(tool, int(i))] = (k, b, int(m), int(n))
schedule, summary_total, unattributed = {}, collections.Counter(), collections.Counter()
for log in sorted(glob.glob(os.path.join(work, "*.log"))):
    tool = os.path.basename(log).split(".")[0]
    symbols, current, pending = {}, None, None
    for line in open(log, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("KDSL_CASE "):
            _, i, sym, sched = line.split(" ", 3)
            current = int(i); symbols[sym] = current; schedule[(tool, current)] = (sym, sched)
            ran.add((tool, current))
        elif line.startswith("KDSL_FAILED "):
            _, i, msg = line.split(" ", 2)
            failed[(tool, int(i))] = msg
        elif header.match(line):
            if pending is not None: errors[(tool, pending)] += 1
            pending = current if current is not None else -1
        elif pending is not None and at.match(line):
            name = at.match(line).group(1)
            best = max((s for s in symbols if name.startswith(s)), key=len, default=None)
            errors[(tool, symbols[best] if best else pending)] += 1
            pending = None
        m = re.search(r'ERROR SUMMARY: (\d+) error', line)
        if m: summary_total[tool] += int(m.group(1))
    if pending is not None: errors[(tool, pending)] += 1
lines = [f"{'kernel':<18} {'dtype':<7} {'M':>6} {'N':>6}  {'schedule':<26} {'tool':<10} errors"]
total = 0
for (tool, i), (k, b, m, n) in sorted(rows.items(), key=lambda r: (r[1][0], r[1][2], r[1][3], r[0][0])):
    if (tool, i) not in ran and (tool, i) not in failed:
        e = "not run"
    else:
        c = errors[(tool, i)]; total += c
        e = str(c) + (f" (failed: {failed[(tool, i)][:60]})" if (tool, i) in failed else "")
        if (tool, i) in failed: total += 1
    sched = schedule.get((tool, i), ("", ""))[1]
    lines.append(f"{k:<18} {b:<7} {m:>6} {n:>6}  {sched:<26} {tool:<10} {e}")
stray = sum(c for (t, i), c in errors.items() if i == -1)
total += stray
counted = collections.Counter()
for (t, i), c in errors.items(): counted[t] += c
for t, s in summary_total.items():
    if s > counted[t]:
        lines.append(f"{'(unattributed)':<18} {'':<7} {'':>6} {'':>6}  {'':<26} {t:<10} {s - counted[t]}")
        total += s - counted[t]
not_run = sum(1 for r in rows if r not in ran and r not in failed)
lines.append(f"\n{len(ran)} launches checked in {seconds} s, {not_run} not run, {total} errors "
             f"(compute-sanitizer ERROR SUMMARY totals: {dict(summary_total)})")
text = "\n".join(lines)
print(text)
open(os.path.join(out, "sanitize_summary.txt"), "w").write(text + "\n")
with open(os.path.join(out, "sanitize_logs.txt"), "w") as o:
    for log in sorted(glob.glob(os.path.join(work, "*.log"))):
        data = open(log, errors="replace").read()
        o.write(f"==== {os.path.basename(log)}\n{data[-200000:]}\n")
sys.exit(1 if total else 0)
PY
rc=$?
[ -f "$work/skipped" ] && { echo "not run for lack of time (tool M first-case):"; cat "$work/skipped"; }
rm -rf "$work"
if [ $status -ne 0 ]; then exit $status; fi
exit $rc
