#!/usr/bin/env python3
"""Boundary values in every numeric field (issue #21): each integer or float of a set of zoo
models, hardware profiles and cluster files is replaced, one at a time, by 0, -1, 2^31, 2^32,
2^63-1, 1e300, .nan and .inf; `dtplan check` must exit 0 (a valid input) or 2 (a located
refusal: the file name in the message) -- never a crash, a hang, "internal error" or a sanitizer
report.

    boundary_values.py DTPLAN_BINARY REPO [--sample K]

The runs go to as many workers as the host has cores. With --sample K (the sanitizer build,
whose runs are slower) a line gets the values whose index is congruent to its line number
modulo K: every line and every value is still tested, on a K-th of the pairs.
"""
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

VALUES = ["0", "-1", "2147483648", "4294967296", "9223372036854775807", "1e300", ".nan", ".inf"]
# A number as a whole YAML value: `key: 123` or `key: 1.5e-3` (comments after it allowed).
NUMBER = re.compile(r"^(\s*(?:- )?[A-Za-z_][A-Za-z0-9_]*:\s+)(-?[0-9][0-9_.eE+-]*)(\s*(?:#.*)?)$")


def variants(text, sample=1):
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = NUMBER.match(line)
        if not m:
            continue
        for j, v in enumerate(VALUES):
            if (i + j) % sample:
                continue
            out = list(lines)
            out[i] = m.group(1) + v + m.group(3)
            yield i + 1, v, "\n".join(out)


def main():
    binary, repo = sys.argv[1], sys.argv[2]
    sample = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--sample" else 1
    env = dict(os.environ, DTPLAN_DATA_DIR=repo)
    inputs = [
        ("model", f"{repo}/models/{m}.yaml")
        for m in ("gpt3-175b", "llama3.1-405b", "mixtral-8x7b", "deepseek-v3", "qwen3-235b-a22b")
    ] + [("profile", f"{repo}/hardware_profiles/{p}.yaml") for p in ("dgx-h100", "gb200-nvl72")]
    inputs += [("cluster", f"{repo}/examples/clusters/{c}") for c in
               sorted(os.listdir(f"{repo}/examples/clusters")) if c.endswith(".yaml")][:2]

    def check(job):
        kind, f, base, line, value = job
        if kind == "model":
            args = ["check", "--model", f, "--cluster", "dgx-h100", "--gpus", "64"]
        elif kind == "profile":
            args = ["check", "--model", "llama3-8b", "--cluster", f, "--gpus", "8"]
        else:
            args = ["check", "--model", "llama3-8b", "--cluster", f]
        try:
            p = subprocess.run([binary] + args, env=env, capture_output=True, text=True,
                               timeout=30)
        except subprocess.TimeoutExpired:
            return False, False, f"FAIL {base}:{line} = {value}: no answer in 30 s"
        err = p.stderr
        ok = (p.returncode == 0 or (p.returncode == 2 and base in err)) and \
            "internal error" not in err and "Sanitizer" not in err and \
            "runtime error" not in err
        msg = "" if ok else f"FAIL {base}:{line} = {value}: exit {p.returncode}: {err.strip()[-300:]}"
        return ok, p.returncode == 0, msg

    runs = failures = accepted = 0
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for n, (kind, path) in enumerate(inputs):
            base = os.path.basename(path)
            for k, (line, value, text) in enumerate(variants(open(path).read(), sample)):
                # Each variant in its own directory, under the input's own file name (the
                # refusal must name it).
                d = os.path.join(tmp, f"{n}-{k}")
                os.mkdir(d)
                f = os.path.join(d, base)
                with open(f, "w") as out:
                    out.write(text)
                jobs.append((kind, f, base, line, value))
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            for ok, zero, msg in pool.map(check, jobs):
                runs += 1
                accepted += zero
                if not ok:
                    failures += 1
                    print(msg)
    print(f"{runs} inputs checked (1 in {sample} of the value-line pairs): {accepted} accepted "
          f"(exit 0), {runs - accepted - failures} refused at their file (exit 2), "
          f"{failures} failed")
    print(f"{runs - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
