#!/usr/bin/env python3
"""Fit the performance model's free parameters of one GPU family to measured step times.

The documented, re-runnable procedure behind the `efficiency:` sections of the hardware
profiles (docs/accuracy.md). A profile describes one cluster and its software stack, so its
parameters are fitted on the cases measured on it. Every such case counts alike: the objective
is the mean of the absolute percentage errors of `dtplan accuracy` over them, each clipped at
20% (a robust loss); no case, group or source gets its own parameter or weight.

    python3 scripts/fit_efficiency.py --cases ../shared/groundtruth/dev.yaml \
        --profiles dgx-a100-80g hgx-a100-80g-4nic dgx-a100-40g hgx-a800 [--write]
    python3 scripts/fit_efficiency.py --cases ../shared/groundtruth/cases.yaml \
        --profiles dgx-h100 h100-96g-500w hgx-h800 dgx-h200 \
        --params host_dispatch_us collective_overhead_us memory_bw_fraction \
                 nvlink_bw_fraction network_bw_fraction --lofo

`--params` fits only the named parameters (the others stay at their datasheet or
microbenchmark values). `--lofo` reports leave-one-family-out cross-validation: for every
family (the groups of shared/tools/accuracy-families) among the fitted cases, the parameters
are fitted on the other families' cases and the held-out family is predicted with them; that
figure, not the in-sample one, says how the profile does on runs it has never seen. A family
that is the only one on its profiles is predicted with the starting values.

Needs only the Python standard library and a built `build/cli/dtplan`. Nelder-Mead over the
parameters in a bounded (logit / log) space; deterministic.
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import datetime

CLIP_PCT = 20.0

# name: (lower, upper, kind) -- kind "frac" uses a logit map onto (lower, upper), "log" a log map.
PARAMS = {
    "gemm_max_fraction": (0.30, 0.98, "frac"),
    "gemm_half_saturation_gflop": (0.01, 100.0, "log"),
    "gemm_max_fraction_fp8": (0.30, 0.98, "frac"),
    "gemm_max_fraction_mxfp8": (0.30, 0.98, "frac"),
    "sustained_compute_fraction": (0.40, 1.0, "frac"),
    "memory_bw_fraction": (0.20, 0.98, "frac"),
    # nccl-tests reach 80-95% of NVLink and InfiniBand line rate at large sizes; below 60%
    # a fit would be absorbing something else (a framework's inefficiency) into the network.
    "nvlink_bw_fraction": (0.60, 0.98, "frac"),
    "network_bw_fraction": (0.60, 0.98, "frac"),
    "host_dispatch_us": (0.5, 500.0, "log"),
    "collective_overhead_us": (0.5, 2000.0, "log"),
}
# A framework profile's parameters (--framework NAME, --framework-params): frameworks/NAME.yaml
# compute.efficiency and compute.attention_efficiency (default: the first alone).
FRAMEWORK_PARAMS = {"compute_efficiency": (0.30, 1.0, "frac"),
                    "attention_efficiency": (0.30, 1.0, "frac")}


def base(name):
    """A hardware parameter may be scoped to some profiles: NAME@PROFILE+PROFILE."""
    return name.split("@")[0]


def bounds(name):
    name = base(name)
    return PARAMS[name] if name in PARAMS else FRAMEWORK_PARAMS[name]


def to_unbounded(name, v):
    lo, hi, kind = bounds(name)
    if kind == "log":
        return math.log(v)
    x = (v - lo) / (hi - lo)
    x = min(max(x, 1e-6), 1 - 1e-6)
    return math.log(x / (1 - x))


def to_bounded(name, u):
    lo, hi, kind = bounds(name)
    if kind == "log":
        return min(max(math.exp(u), lo), hi)
    return lo + (hi - lo) / (1 + math.exp(-u))


def family(group):
    """The families of shared/tools/accuracy-families (same rules)."""
    for p in ("korthikanti", "narayanan", "bloom_tr11", "vtrain_multi", "vtrain_single", "nemo2407"):
        if group.startswith(p):
            return p
    if group.startswith("bridge"):
        for gpu in ("GB200", "H100"):
            if f"_{gpu}_" in group:
                return "bridge_" + gpu
    if group.startswith("llmfoundry"):
        return "foundry_" + group.split("_")[1]
    return group.split("_")[0]


def read_efficiency(path, names=PARAMS):
    text = open(path).read()
    vals = {}
    for name in names:
        m = re.search(r"^  %s: ([0-9.eE+-]+)" % name, text, re.M)
        if not m:
            sys.exit(f"{path}: efficiency.{name} not found")
        vals[name] = float(m.group(1))
    return vals


def read_framework(path, name="compute_efficiency"):
    key = "efficiency" if name == "compute_efficiency" else name
    m = re.search(r"^compute:\n(?:  .*\n)*?  %s: ([0-9.eE+-]+)" % key, open(path).read(), re.M)
    if not m and name != "compute_efficiency":
        return 1.0  # an optional key absent: its default
    if not m:
        sys.exit(f"{path}: compute.{key} not found")
    return float(m.group(1))


def write_framework(path, vals, source):
    """Writes the compute section's fitted keys (a missing one after `efficiency`) and its
    source."""
    text = open(path).read()
    for name, v in vals.items():
        key = "efficiency" if name == "compute_efficiency" else name
        pat = r"^(compute:\n(?:  .*\n)*?  %s: )[0-9.eE+-]+" % key
        if re.search(pat, text, re.M):
            text = re.sub(pat, lambda m: m.group(1) + f"{v:.4g}", text, count=1, flags=re.M)
        else:
            text = re.sub(r"^(compute:\n  efficiency: .*\n)", lambda m: m.group(1) + f"  {key}: {v:.4g}\n",
                          text, count=1, flags=re.M)
    text = re.sub(r'^(compute:\n(?:  .*\n)*?  source: ).*$', lambda m: m.group(1) + json.dumps(source), text,
                  count=1, flags=re.M)
    open(path, "w").write(text)


def write_efficiency(path, vals, source):
    text = open(path).read()
    for name, v in vals.items():
        text = re.sub(r"^(  %s: )[0-9.eE+-]+" % name, lambda m: m.group(1) + f"{v:.4g}", text, flags=re.M)
    # The source line of the efficiency section is the last `  source:` after `efficiency:`.
    head, sep, tail = text.partition("\nefficiency:\n")
    tail = re.sub(r'^  source: .*$', '  source: ' + json.dumps(source), tail, count=1, flags=re.M)
    open(path, "w").write(head + sep + tail)


def nelder_mead(x0, f, iterations, label):
    """Nelder-Mead (standard coefficients), initial simplex: +0.5 in each unbounded coordinate."""
    simplex = [x0] + [[x + (0.5 if i == j else 0.0) for j, x in enumerate(x0)] for i in range(len(x0))]
    scores = [f(x) for x in simplex]
    print(f"{label}start: objective {scores[0]:.3f}%", flush=True)
    n = len(x0)
    for it in range(iterations):
        order = sorted(range(len(simplex)), key=lambda i: scores[i])
        simplex = [simplex[i] for i in order]
        scores = [scores[i] for i in order]
        centroid = [sum(simplex[i][d] for i in range(n)) / n for d in range(n)]
        def along(t):
            return [c + t * (w - c) for c, w in zip(centroid, simplex[-1])]
        xr = along(-1.0); fr = f(xr)
        if fr < scores[0]:
            xe = along(-2.0); fe = f(xe)
            simplex[-1], scores[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < scores[-2]:
            simplex[-1], scores[-1] = xr, fr
        else:
            xc = along(0.5 if fr >= scores[-1] else -0.5); fc = f(xc)
            if fc < min(fr, scores[-1]):
                simplex[-1], scores[-1] = xc, fc
            else:
                for i in range(1, len(simplex)):
                    simplex[i] = [simplex[0][d] + 0.5 * (simplex[i][d] - simplex[0][d]) for d in range(n)]
                    scores[i] = f(simplex[i])
        if it % 10 == 0:
            print(f"{label}iteration {it}: best objective {min(scores):.3f}%", flush=True)
        if max(scores) - min(scores) < 1e-3:
            break
    return simplex[scores.index(min(scores))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--profiles", nargs="+", required=True,
                    help="profiles fitted together, on the cases that run on them")
    ap.add_argument("--params", nargs="*", default=None,
                    help="the hardware parameters fitted (default: all; none with --framework): "
                    f"{', '.join(PARAMS)}; NAME@PROFILE+PROFILE fits one only on those profiles")
    ap.add_argument("--framework", help="also fit this framework profile's compute section")
    ap.add_argument("--framework-params", nargs="+", default=["compute_efficiency"],
                    choices=list(FRAMEWORK_PARAMS), help="the framework parameters fitted")
    ap.add_argument("--group", default="", help="only the cases whose group starts with one of these comma-separated prefixes (dtplan accuracy --group)")
    ap.add_argument("--lofo", action="store_true", help="leave-one-family-out cross-validation")
    ap.add_argument("--dtplan", default="build/cli/dtplan")
    ap.add_argument("--iterations", type=int, default=250)
    ap.add_argument("--restarts", action="store_true",
                    help="also start from the middle of every parameter's range (best end wins)")
    ap.add_argument("--write", action="store_true", help="write the fitted values into the profiles")
    args = ap.parse_args()

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tmp = tempfile.mkdtemp(prefix="dtplan-fit-")
    shutil.copytree(os.path.join(root, "models"), os.path.join(tmp, "models"))
    shutil.copytree(os.path.join(root, "hardware_profiles"), os.path.join(tmp, "hardware_profiles"))
    if os.path.isdir(os.path.join(root, "frameworks")):
        shutil.copytree(os.path.join(root, "frameworks"), os.path.join(tmp, "frameworks"))
    paths = [os.path.join(tmp, "hardware_profiles", p + ".yaml") for p in args.profiles]
    hw_names = list(args.params) if args.params is not None else ([] if args.framework else list(PARAMS))
    for n in hw_names:
        if base(n) not in PARAMS:
            sys.exit(f"--params: unknown parameter '{base(n)}'; known: {', '.join(PARAMS)}")
        for prof in (n.split("@")[1].split("+") if "@" in n else []):
            if prof not in args.profiles:
                sys.exit(f"--params {n}: {prof} is not among --profiles")

    def targets(n):
        """The profiles a hardware parameter is fitted on."""
        return n.split("@")[1].split("+") if "@" in n else list(args.profiles)
    fw_names = list(args.framework_params) if args.framework else []
    names = hw_names + fw_names
    fw_path = os.path.join(tmp, "frameworks", (args.framework or "") + ".yaml")
    start = {n: read_efficiency(os.path.join(tmp, "hardware_profiles", targets(n)[0] + ".yaml"),
                                [base(n)])[base(n)] for n in hw_names}
    for n in fw_names:
        start[n] = read_framework(fw_path, n)
    env = dict(os.environ, DTPLAN_DATA_DIR=tmp)
    cache = {}

    def run(u):
        """Every case of the profiles predicted with parameters u: the accuracy JSON."""
        key = tuple(round(x, 6) for x in u)
        if key in cache:
            return cache[key]
        vals = {n: to_bounded(n, x) for n, x in zip(names, u)}
        for prof, p in zip(args.profiles, paths):
            mine = {base(n): vals[n] for n in hw_names if prof in targets(n)}
            if mine:
                write_efficiency(p, mine, "fit in progress")
        if fw_names:
            write_framework(fw_path, {n: vals[n] for n in fw_names}, "fit in progress")
        cmd = [args.dtplan, "accuracy", "--cases", args.cases, "--json", "--profile", *args.profiles]
        if args.group:
            cmd += ["--group", args.group]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(out.stderr)
        cache[key] = json.loads(out.stdout)
        return cache[key]

    def objective(u, held_out=None):
        """Robust objective: mean absolute percentage error clipped at CLIP_PCT, so that the few
        cases the model cannot represent (another cluster than the profile, an implementation's
        inefficiency) do not drag every other prediction toward them; over the predicted cases
        outside the held-out family. A skipped case (coverage lost) rules the point out."""
        j = run(u)
        cases = [c for c in j["cases"] if held_out is None or family(c["group"]) != held_out]
        if j["summary"]["cases_predicted"] < run(x0)["summary"]["cases_predicted"]:
            return 1e9
        errs = [abs(c["error_pct"]) for c in cases if c["skipped"] is None]
        return sum(min(e, CLIP_PCT) for e in errs) / max(1, len(errs))

    def family_mape(u, fam):
        es = [abs(c["error_pct"]) for c in run(u)["cases"] if c["skipped"] is None and family(c["group"]) == fam]
        return sum(es) / len(es) if es else float("nan"), len(es)

    # A start on a bound (a framework's 1.0 "not fitted") moves 2% inside it, where the
    # simplex can leave it.
    x0 = [to_unbounded(n, min(max(start[n], bounds(n)[0] + 0.02 * (bounds(n)[1] - bounds(n)[0])),
                              bounds(n)[1] - 0.02 * (bounds(n)[1] - bounds(n)[0])))
          if bounds(n)[2] == "frac" else to_unbounded(n, start[n]) for n in names]
    # Starts: the profiles' values, and (--restarts) the middle of every parameter's range; the
    # best end point wins. Nelder-Mead stops in the first valley it finds, and a value that
    # starts near its bound (a framework's 1.0) can leave the simplex there.
    mid = [to_unbounded(n, (bounds(n)[0] + bounds(n)[1]) / 2) if bounds(n)[2] == "frac"
           else to_unbounded(n, math.sqrt(bounds(n)[0] * bounds(n)[1])) for n in names]
    starts = [x0] + ([mid] if args.restarts else [])

    def fit(obj, label):
        ends = [nelder_mead(x, obj, args.iterations, f"{label}[start {k}] ") for k, x in enumerate(starts)]
        return min(ends, key=obj)

    best = fit(objective, "")
    summary = run(best)["summary"]
    obj = objective(best)
    vals = {n: to_bounded(n, x) for n, x in zip(names, best)}
    families = sorted({family(c["group"]) for c in run(best)["cases"]})
    result = {"fitted": {k: float(f"{v:.4g}") for k, v in vals.items()}, "objective_pct": obj,
              "summary": summary,
              "in_sample_family_mape_pct": {f: family_mape(best, f)[0] for f in families},
              "start_family_mape_pct": {f: family_mape(x0, f)[0] for f in families}}
    if args.lofo:
        lofo = {}
        for fam in families:
            rest = [f for f in families if f != fam]
            if not rest:
                m, k = family_mape(x0, fam)
                lofo[fam] = {"mape_pct": m, "cases": k, "fitted_on": "nothing (the only family): starting values"}
                continue
            xf = fit(lambda u, fam=fam: objective(u, fam), f"[without {fam}] ")
            m, k = family_mape(xf, fam)
            lofo[fam] = {"mape_pct": m, "cases": k, "fitted_on": rest,
                         "fitted": {n: float(f"{to_bounded(n, x):.4g}") for n, x in zip(names, xf)}}
        result["leave_one_family_out"] = lofo
        allk = sum(v["cases"] for v in lofo.values())
        result["leave_one_family_out_mape_pct"] = sum(v["mape_pct"] * v["cases"] for v in lofo.values()) / allk
    print(json.dumps(result, indent=2))
    if args.write:
        lofo_txt = (f"; leave-one-family-out MAPE {result['leave_one_family_out_mape_pct']:.2f}%"
                    if args.lofo else "")
        source = (f"fitted {datetime.date.today()} by scripts/fit_efficiency.py (Nelder-Mead over "
                  f"{', '.join(names)}; objective: mean |error| clipped at {CLIP_PCT:.0f}% over the "
                  f"{summary['cases_total']} step-time cases of {os.path.basename(args.cases)} on "
                  f"{' + '.join(args.profiles)}, every case weighted alike) -> objective {obj:.2f}%, "
                  f"MAPE {summary['mape_pct']:.2f}%{lofo_txt}")
        if args.framework:
            write_framework(os.path.join(root, "frameworks", args.framework + ".yaml"),
                            {n: vals[n] for n in fw_names}, source)
        for p in args.profiles:
            hw_vals = {base(n): vals[n] for n in hw_names if p in targets(n)}
            if not hw_vals:
                continue
            path = os.path.join(root, "hardware_profiles", p + ".yaml")
            prev = re.search(r'\nefficiency:\n(?:.*\n)*?  source: (".*")', open(path).read())
            keep = json.loads(prev.group(1)) if prev else ""
            # The values not fitted keep their stated sources (datasheets, microbenchmarks).
            kept = "; ".join(x for x in keep.split("; ") if not x.startswith(("initial values", "fitted ")))
            write_efficiency(path, hw_vals, source + ("; " + kept if kept else ""))
        print("wrote", ", ".join(([args.framework] if args.framework else []) +
                                 [p for p in args.profiles if any(p in targets(n) for n in hw_names)]))
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
