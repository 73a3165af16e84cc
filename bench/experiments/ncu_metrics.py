"""Reads `ncu --csv --print-units base --metrics ...` on stdin and prints each metric of the
profiled launch on its own line, warp stall reasons shortened to "stall REASON". Used by
bench/experiments/s14.sh and s17.sh (their ncu modes)."""
import csv
import sys

rows = list(csv.reader(line for line in sys.stdin if line.startswith('"')))
if not rows:
    sys.exit("  no ncu rows")
head = rows[0]
name_col, value_col = head.index("Metric Name"), head.index("Metric Value")
for r in rows[1:]:
    name = r[name_col].replace("smsp__average_warps_issue_stalled_", "stall ")
    name = name.replace("_per_issue_active.ratio", "")
    print(f"  {name:58} {r[value_col]}")
