"""Reads `ncu --csv --print-units base --metrics ...` on stdin and prints one line per profiled
kernel launch: duration, DRAM bytes and throughput, launch shape, registers, achieved occupancy.
Used by bench/experiments/norm_ncu.sh."""
import csv
import sys

rows = list(csv.reader(line for line in sys.stdin if line.startswith('"')))
if not rows:
    sys.exit("  no ncu rows (see the command's output)")
head = rows[0]
col = {name: head.index(name) for name in ("ID", "Kernel Name", "Metric Name", "Metric Value")}
launches = {}
for r in rows[1:]:
    key = (int(r[col["ID"]]), r[col["Kernel Name"]])
    launches.setdefault(key, {})[r[col["Metric Name"]]] = r[col["Metric Value"]]


def value(d, name):
    try:
        return float(d.get(name, "nan").replace(",", ""))
    except ValueError:
        return float("nan")


for (_, name), d in sorted(launches.items()):
    us = value(d, "gpu__time_duration.sum") / 1e3
    rd = value(d, "dram__bytes_read.sum") / 1e6
    wr = value(d, "dram__bytes_write.sum") / 1e6
    pct = value(d, "dram__throughput.avg.pct_of_peak_sustained_elapsed")
    grid = value(d, "launch__grid_size")
    block = value(d, "launch__block_size")
    regs = value(d, "launch__registers_per_thread")
    warps = value(d, "sm__warps_active.avg.pct_of_peak_sustained_active")
    print(f"  {name[:46]:46} {us:9.2f} us  DRAM rd {rd:8.1f} MB wr {wr:8.1f} MB "
          f"({pct:5.1f}% of peak)  grid {grid:.0f} x {block:.0f}  regs {regs:.0f}  "
          f"active warps {warps:5.1f}%")
