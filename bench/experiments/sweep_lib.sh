# Shared by the session experiment scripts (s13.sh, s14.sh), sourced after they set $k (the kdsl
# binary): sweep_cases compiles every "file kernel dtype shape hint" in the array $cases (16 at
# a time), then times each in two rounds, --verify in the first (a passing verify prints nothing;
# a run killed by the 60 s timeout leaves its line without a time). HINT "default" means none.
sweep_cases() {
  for c in "${cases[@]}"; do
    set -- $c
    h=(); [ "$5" = default ] || h=(--schedule "$5")
    $k compile stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 "${h[@]}" >/dev/null 2>&1 &
    [ "$(jobs -r | wc -l)" -ge 16 ] && wait -n
  done
  wait
  for round in 1 2; do
    for c in "${cases[@]}"; do
      set -- $c
      h=(); [ "$5" = default ] || h=(--schedule "$5")
      v=(); [ $round = 1 ] && v=(--verify)
      printf '%s %-16s %-5s %-15s %-52s ' "$round" "$2" "$3" "$4" "$5"
      timeout 60 $k run stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 "${h[@]}" "${v[@]}" --bench --reps 100 2>&1 |
        grep -oE "bench: [0-9.]+ us|[0-9.]+ of the same-run|error:.*|FAIL.*" | cut -c1-160 | tr '\n' ' '
      echo
    done
  done
}
