#!/usr/bin/env bash
# Runs the front-end fuzzer (built here by scripts/fuzz.sh, staged by stage.sh into .device/bin)
# on the GPU machine's spare CPU cores, in the background, while the GPU work runs.
#   scripts/device/fuzz.sh start SECONDS WORKERS   starts WORKERS libFuzzer jobs for SECONDS
#   scripts/device/fuzz.sh wait                    waits for them and prints the total executions
# The corpus is .device/fuzz-corpus (copied from build-fuzz/fuzz-corpus by stage.sh). The work
# (logs, grown corpus) stays in /tmp/kdsl-fuzz; only the summary (fuzz_summary.txt) and any
# crash artifacts (fuzz-artifacts.tgz) go to $OUT, so few files travel back.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}"
out=/tmp/kdsl-fuzz
results="${OUT:-/tmp}"
bin="$PWD/.device/bin/kdsl_frontend_fuzz"
case "${1:-}" in
  start)
    seconds="${2:-300}"
    workers="${3:-8}"
    [ -x "$bin" ] || { echo "fuzz: $bin missing"; exit 2; }
    mkdir -p "$out/artifacts" "$out/new"
    cp -r .device/fuzz-corpus/. "$out/new/" 2>/dev/null || true
    # -jobs/-workers: independent processes sharing one corpus folder; each logs to fuzz-J.log.
    (cd "$out" && ASAN_OPTIONS=detect_leaks=1 nohup "$bin" "$out/new" -dict="$OLDPWD/fuzz/kdsl.dict" \
       -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len=20000 \
       -jobs="$workers" -workers="$workers" -artifact_prefix="$out/artifacts/" \
       -print_final_stats=1 >"$out/driver.log" 2>&1 &)
    echo "fuzz: $workers workers for $seconds s, logs in $out"
    ;;
  wait)
    while pgrep -f kdsl_frontend_fuzz >/dev/null; do sleep 2; done
    total=$(cat "$out"/fuzz-*.log 2>/dev/null |
            sed -n 's/^stat::number_of_executed_units: *//p' | awk '{s += $1} END {print s + 0}')
    crashes=$(ls "$out/artifacts" 2>/dev/null | wc -l)
    {
      echo "fuzz: $(ls "$out"/fuzz-*.log 2>/dev/null | wc -l) jobs, $total executions, $crashes artifacts"
      grep -h -E '^==[0-9]+==ERROR|runtime error|ALARM|DEADLY' "$out"/fuzz-*.log 2>/dev/null |
        sort | uniq -c | head -20
      grep -h -E '^#[0-9]+.*DONE' "$out"/fuzz-*.log 2>/dev/null | head -3
    } | tee "$results/fuzz_summary.txt"
    if [ "$crashes" -gt 0 ]; then tar czf "$results/fuzz-artifacts.tgz" -C "$out" artifacts; fi
    ;;
  *)
    echo "usage: $0 start SECONDS WORKERS | wait"
    exit 2
    ;;
esac
