"""Same-run comparison of kdsl with PyTorch eager and torch.compile on the GPU at hand.

Reads the JSON records that kdsl's benchmarks wrote (kdsl_bench_norm, kdsl_bench_scan) in this
run, times the same operations at the same shapes through PyTorch eager and torch.compile
(median of CUDA-event timings with the L2 flushed, triton.testing.do_bench, as
../shared/peers/peers.py does), measures the 1 GiB device-to-device copy the same way, and writes:

  OUT/h200.json   one record per kernel, dtype and shape: kdsl's time, GB/s and ratio to copy,
                  the peers' times, and kdsl's speedup over the best peer
  OUT/norm_gbps.png  GB/s against N (bf16, M x N = 64M or 128M elements) for kdsl and the peers

Usage: python3 bench/peers_compare.py [--peers PEERS_JSON [--same-run]] OUT_DIR KDSL_JSON[@COMMIT] ...
       python3 bench/peers_compare.py --plot H200_JSON PNG   (the plot of a finished run again)
(@COMMIT: the commit the file was measured at, copied into its records)

With --peers, the peers' times come from a file that ../shared/peers/peers.py wrote (same method)
instead of being measured here; PyTorch is then not needed, and the Triton linear-recurrence
forward it times (lru_fwd_triton) is the peer of linear_recurrence. --same-run says that file was
written in the same command as kdsl's JSON, on the same GPU (scripts/device/final_bench.sh with
KDSL_PEERS=run), so every kdsl / peer ratio is same-run; without it the file is a recorded run
from another machine or day, and only the ratios to copy are same-run.
"""
import json
import os
import sys

torch = F = triton = None  # imported only when the peers are timed here

DT_NAMES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3  # us


def norm_fn(op, n):
    if op == "rmsnorm":
        return lambda x, w, b: F.rms_norm(x, (n,), w, 1e-6)
    if op == "layernorm":
        return lambda x, w, b: F.layer_norm(x, (n,), w, b, 1e-5)
    return lambda x, w, b: torch.softmax(x, -1)


def time_norm(op, dtype, m, n, mode):
    """Forward and backward times (us) of one normalization through PyTorch."""
    dt = getattr(torch, DT_NAMES[dtype])
    x = torch.randn(m, n, dtype=dt, device="cuda", requires_grad=True)
    w = torch.randn(n, dtype=dt, device="cuda", requires_grad=True)
    b = torch.randn(n, dtype=dt, device="cuda", requires_grad=True)
    dy = torch.randn(m, n, dtype=dt, device="cuda")
    f = norm_fn(op, n)
    g = f if mode == "eager" else torch.compile(f, dynamic=False)
    args = (x, w, b) if op == "layernorm" else ((x, w) if op == "rmsnorm" else (x,))
    call = (lambda: g(x, w, b))
    fwd = bench(call)
    y = call()
    bwd = bench(lambda: torch.autograd.grad(y, args, dy, retain_graph=True))
    return fwd, bwd


def time_cumsum(dtype, shape, dim, mode):
    x = torch.randn(*shape, dtype=getattr(torch, DT_NAMES[dtype]), device="cuda")
    f = lambda x: torch.cumsum(x, dim)
    g = f if mode == "eager" else torch.compile(f, dynamic=False)
    return bench(lambda: g(x))


def recorded_peers(path):
    """(norm, cumsum, copy GB/s) lookups from a peers.py JSON file."""
    with open(path) as f:
        data = json.load(f)
    norm, cumsum, copy_gbps = {}, {}, None
    for r in data["rows"]:
        if r["op"] == "copy":
            copy_gbps = r["GBps"]
        elif r["op"] in ("rmsnorm", "layernorm", "softmax"):
            norm[(r["op"], r["dtype"], r["M"], r["N"], r["mode"])] = (r["fwd_us"], r["bwd_us"])
        elif r["op"] == "cumsum":
            cumsum[(r["dtype"], tuple(r["shape"]), r["dim"], r["mode"])] = r["us"]
        elif r["op"] == "lru_fwd_triton":  # a Triton chunked linear-recurrence forward
            cumsum[("lru", r["dtype"], tuple(r["shape"]))] = r["us"]
    return data, norm, cumsum, copy_gbps


def main():
    global torch, F, triton
    args = sys.argv[1:]
    peers_file, same_run = None, False
    if "--same-run" in args:
        same_run = True
        args.remove("--same-run")
    if args and args[0] == "--peers" and len(args) > 1:
        peers_file, args = args[1], args[2:]
    if not args or args[0].startswith("-") or (same_run and not peers_file):
        sys.exit(__doc__)
    out_dir = args[0]
    records = []
    for arg in args[1:]:  # PATH or PATH@COMMIT (the commit is copied into each record)
        path, _, commit = arg.partition("@")
        with open(path) as f:
            rows = json.load(f)
        for r in rows:
            if commit:
                r["commit"] = commit
        records += rows
    os.makedirs(out_dir, exist_ok=True)
    if peers_file:
        data, norm, cumsum, copy_gbps = recorded_peers(peers_file)
        data["same_run"] = same_run
        measure_and_write(records, out_dir, data, norm, cumsum, copy_gbps)
        return
    import torch as torch_
    import torch.nn.functional as F_
    import triton as triton_
    torch, F, triton = torch_, F_, triton_
    measure_and_write(records, out_dir, None, {}, {}, None)


def measure_and_write(records, out_dir, recorded, norm_cache, cumsum_cache, copy_gbps):
    """Fills in the peers' times (recorded ones first, else timed now) and writes the outputs."""
    if copy_gbps is not None:
        how = "timed in this run" if recorded.get("same_run") else "recorded on another run"
        print(f"peers {how} (peers.py): {recorded['device']}, torch {recorded['torch']}; their copy {copy_gbps:.0f} GB/s",
              flush=True)
        for r in recorded["rows"]:  # the JIT and launch anchors (issue 6), as peers.py measured them
            if r.get("op") == "jit" and "launch_us" in r:
                print(f"peer jit {r['system']:<7} {r['cache']:<9} first call {r['first_call_ms']:8.1f} ms, "
                      f"launch {r['launch_us']:6.2f} us", flush=True)
        return finish(records, out_dir, recorded, norm_cache, cumsum_cache, copy_gbps)
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    c = torch.empty_like(a)
    copy_us = bench(lambda: c.copy_(a))
    copy_gbps = 2 * n / copy_us / 1e3
    del a, c
    print(f"torch copy (1 GiB): {copy_us:.1f} us, {copy_gbps:.0f} GB/s", flush=True)
    return finish(records, out_dir, None, norm_cache, cumsum_cache, copy_gbps)


def finish(records, out_dir, recorded, norm_cache, cumsum_cache, copy_gbps):
    out = []
    for r in records:
        if r.get("op") == "copy":
            continue
        peers = {}
        if r.get("op") in ("rmsnorm", "layernorm", "softmax"):
            for mode in ("eager", "compile"):
                key = (r["op"], r["dtype"], r["M"], r["N"], mode)
                if key not in norm_cache and recorded is not None:
                    norm_cache[key] = (None, None)
                if key not in norm_cache:
                    try:
                        norm_cache[key] = time_norm(r["op"], r["dtype"], r["M"], r["N"], mode)
                    except Exception as e:  # report, keep going
                        print(f"peer {key} failed: {e!r}"[:300], flush=True)
                        norm_cache[key] = (None, None)
                fwd, bwd = norm_cache[key]
                peers[mode] = bwd if r["pass"] == "bwd" else fwd
        elif r.get("op") == "cumsum":
            for mode in ("eager", "compile"):
                key = (r["dtype"], tuple(r["shape"]), r["dim"], mode)
                if recorded is not None:
                    peers[mode] = cumsum_cache.get(key)
                    continue
                try:
                    peers[mode] = time_cumsum(r["dtype"], r["shape"], r["dim"], mode)
                except Exception as e:
                    print(f"peer cumsum {mode} failed: {e!r}"[:300], flush=True)
        elif r.get("kernel") == "linear_recurrence" and r["dtype"] in ("bf16", "f32") and recorded is not None:
            peers["triton_lru"] = cumsum_cache.get(("lru", r["dtype"], (r["B"], r["L"], r["D"])))
        times = [t for t in peers.values() if t]
        best = min(times) if times else None
        rec = dict(r)
        rec["peer_us"] = peers
        rec["best_peer_us"] = best
        rec["speedup_vs_best_peer"] = (best / r["us"]) if best else None
        rec["peer_best_ratio_to_copy"] = (r["bytes"] / best / 1e3 / copy_gbps) if best else None
        out.append(rec)
        shape = r.get("shape") or ([r["B"], r["L"], r["D"]] if "B" in r else f"{r.get('M')}x{r.get('N')}")
        print(f"{r['kernel']:<22} {r['dtype']:<5} {str(shape):>16}  kdsl {r['us']:9.2f} us ({r['ratio_to_copy']:.3f} of copy)"
              f"  eager {peers.get('eager') or float('nan'):9.2f}  compile {peers.get('compile') or float('nan'):9.2f}"
              f"  kdsl/best speedup {rec['speedup_vs_best_peer'] or float('nan'):.2f}x", flush=True)
    if recorded is not None:
        how = ("timed in the same run by ../shared/peers/peers.py" if recorded.get("same_run")
               else "recorded by ../shared/peers/peers.py on another run")
        result = {"device": recorded["device"], "torch": recorded["torch"], "triton": recorded["triton"],
                  "peers": how, "peers_same_run": bool(recorded.get("same_run")), "torch_copy_GBps": copy_gbps,
                  "records": out}
    else:
        result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                  "peers": "timed in the same run by bench/peers_compare.py", "peers_same_run": True,
                  "torch_copy_GBps": copy_gbps, "records": out}
    with open(os.path.join(out_dir, "h200.json"), "w") as f:
        json.dump(result, f, indent=1)
    plot(out, os.path.join(out_dir, "norm_gbps.png"))


def plot(records, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:
        print(f"no plot: {e!r}")
        return
    kernels = ["rms_norm", "rms_norm_bwd", "layer_norm", "layer_norm_bwd", "softmax", "softmax_bwd"]
    fig, axes = plt.subplots(2, 3, figsize=(14, 8))
    for ax, k in zip(axes.flat, kernels):
        # The large bf16 shapes (64M or 128M elements: 65536 x 1024, 32768 x 4096, 8192 x 8192,
        # 4096 x 32768); GB/s counts minimal bytes, so the two sizes share an axis.
        rows = sorted((r for r in records if r.get("kernel") == k and r["dtype"] == "bf16" and r["M"] * r["N"] >= 1 << 26),
                      key=lambda r: r["N"])
        if not rows:
            continue
        ns = [r["N"] for r in rows]
        ax.plot(ns, [r["GBps"] for r in rows], "o-", label="kdsl")
        for mode in ("eager", "compile"):
            ys = [r["bytes"] / r["peer_us"][mode] / 1e3 if r["peer_us"].get(mode) else float("nan") for r in rows]
            ax.plot(ns, ys, "s--", label=f"torch {mode}")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{k} bf16, M x N = 64M or 128M")
        ax.set_xlabel("N")
        ax.set_ylabel("GB/s (minimal bytes)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--plot"]:  # --plot H200_JSON PNG: the plot of a finished run again
        if len(sys.argv) != 4:
            sys.exit(__doc__)
        with open(sys.argv[2]) as f:
            plot(json.load(f)["records"], sys.argv[3])
    else:
        main()
