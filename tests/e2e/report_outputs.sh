#!/usr/bin/env bash
# dtplan report and dtplan whatif as a user runs them: every output's structure (charts as SVG,
# no executable script, embedded JSON, size < 2 MB; Markdown without raw HTML and with
# well-formed tables), hostile names escaped, --from round trip, and clear errors for bad input.
set -euo pipefail
bin=$(realpath "$1")
root=$(realpath "$2")
check="python3 $root/tests/e2e/check_report.py"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
passed=0

# The checker itself must catch what it is there to catch (otherwise the checks below prove
# nothing): raw HTML in Markdown, a ragged table, an executable script, a missing chart.
printf '# t\n\n| a | b |\n| --- | ---: |\n| 1 | 2 |\n<script>x</script>\n' > bad1.md
printf '# t\n\n| a | b |\n| --- | ---: |\n| 1 | 2 | 3 |\n' > bad2.md
printf '<html><body><figure id="chart-whatif-step"><svg></svg></figure><script>alert(1)</script></body></html>' > bad.html
for f in bad1.md bad2.md; do $check md "$f" > /dev/null && fail "checker accepted $f"; done
$check html bad.html whatif > /dev/null && fail "checker accepted bad.html"
passed=$((passed + 1))

# GPT-3 175B on 256 A100 (the built-in example): HTML and Markdown.
"$bin" report --out report.html 2> report.err
grep -q "wrote report.html" report.err || fail "report.html not announced"
$check html report.html report
size=$(stat -c %s report.html)
[[ $size -lt 2000000 ]] || fail "report.html is $size bytes (limit 2 MB)"
"$bin" report --out report.md 2> /dev/null
$check md report.md
grep -q '^## How the numbers come about' report.md || fail "report.md lacks derivations"
grep -q '^## Alternatives' report.md || fail "report.md lacks alternatives"
passed=$((passed + 1))

# The framework whose rules were applied, with the warnings of the recommended plan (issue #14):
# none for a ZeRO-1 plan (the built-in example pinned to ZeRO 0/1); Megatron-FSDP for the
# unpinned example's ZeRO-2 plan (issue #17: Megatron-FSDP optim_grads) and Llama 3 8B's ZeRO-3.
grep -q '^Framework rules applied: megatron' report.md || fail "report.md: framework"
"$bin" report --zero 0,1 --no-alternatives --out zero1.md 2> /dev/null
grep -q '^Framework rules applied: megatron; no warnings.$' zero1.md || fail "zero1.md: framework"
grep -q '<p id="framework">Framework rules applied: megatron' report.html ||
  fail "report.html: framework"
"$bin" report --model llama3-8b --cluster dgx-h100 --gpus 64 --gbs 512 --no-alternatives \
  --out zero3.md 2> /dev/null
grep -q 'ZeRO-3 recompute' zero3.md || fail "zero3.md: the recommended plan is no longer ZeRO-3"
grep -q '^- `megatron-fsdp`: ZeRO-3 under Megatron-LM needs Megatron-FSDP' zero3.md ||
  fail "zero3.md: no megatron-fsdp warning"
$check md zero3.md
passed=$((passed + 1))

# Every what-if example, both formats.
for f in "$root"/examples/whatif/*.yaml; do
  name=$(basename "$f" .yaml)
  "$bin" whatif "$f" --out "$name.html" 2> /dev/null
  $check html "$name.html" whatif
  "$bin" whatif "$f" --out "$name.md" 2> /dev/null
  $check md "$name.md"
done
passed=$((passed + 1))

# Hostile names: a model and a scenario named like markup produce no markup.
sed -e 's|^name: .*|name: "<script>alert(1)</script>"|' \
    -e 's|^display_name: .*|display_name: "<script>alert(1)</script><img src=x onerror=alert(2)>"|' \
    "$root/models/gpt3-175b.yaml" > evil.yaml
"$bin" report --model evil.yaml --cluster dgx-a100-80g --gpus 256 --gbs 1536 --top 3 \
  --out evil.html 2> /dev/null
"$bin" report --model evil.yaml --cluster dgx-a100-80g --gpus 256 --gbs 1536 --top 3 \
  --out evil.md 2> /dev/null
$check html evil.html report
$check md evil.md
grep -q '<script>alert' evil.html && fail "evil.html carries the model's script"
grep -q '&lt;script&gt;alert(1)&lt;/script&gt;' evil.html || fail "evil.html lost the escaped name"
cat > evil-scenarios.yaml <<YAML
title: "<script>alert(3)</script>"
base:
  name: "<img src=x onerror=alert(4)>"
  model: $work/evil.yaml
  profile: dgx-a100-80g
  gpus: 64
  gbs: 512
  tp: 8
variations:
  - name: "</script><script>alert(5)</script>"
    gpus: 128
YAML
"$bin" whatif evil-scenarios.yaml --out evil-whatif.html 2> /dev/null
"$bin" whatif evil-scenarios.yaml --out evil-whatif.md 2> /dev/null
$check html evil-whatif.html whatif
$check md evil-whatif.md
grep -q 'alert(5)</script>' evil-whatif.html && fail "scenario name escaped the JSON block"
passed=$((passed + 1))

# --from: the report of a saved search shows the same recommended plan.
"$bin" search --model llama3-8b --cluster dgx-h100 --gpus 16 --gbs 128 --tp 1,2 --json > s.json
"$bin" report --from s.json --out from.md 2> from.err
grep -q "ranks differently" from.err && fail "--from re-ran a different search"
best=$(python3 -c 'import json;p=json.load(open("s.json"))["top"][0]["plan"];print("TP%d PP%d DP%d" % (p["tp"], p["pp"], p["dp"]))')
grep -A2 '^## Recommended plan' from.md | grep -q "\*\*$best" || fail "--from: recommended plan is not $best"
# A file from before searches recorded their flags: the whole space is searched again.
python3 -c 'import json;j=json.load(open("s.json"));del j["flags"];json.dump(j,open("old.json","w"))'
"$bin" report --from old.json --out old.md 2> /dev/null
grep -q '^## Recommended plan' old.md || fail "--from an older search file"
# whatif without --out: Markdown on stdout.
"$bin" whatif "$root/examples/whatif/gpu-generations.yaml" > stdout.md
$check md stdout.md
passed=$((passed + 1))

# Bad input: named flags and file:line:col.
set +e
"$bin" report --out report.pdf > out.txt 2>&1; rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q -- "--out" out.txt && grep -q ".md" out.txt || fail "--out .pdf: rc $rc: $(cat out.txt)"
printf 'base:\n  name: b\n  profile: dgx-h100\n  gpus: 64\n  tpp: 8\n' > typo.yaml
set +e
"$bin" whatif typo.yaml > out.txt 2>&1; rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "typo.yaml:5:3" out.txt && grep -q "tp" out.txt || fail "unknown key: rc $rc: $(cat out.txt)"
printf 'base:\n  profile: dgx-h100\n  gpus: 64\nvariations:\n  - name: v\n    collective_algorithm: rign\n' > algo.yaml
set +e
"$bin" whatif algo.yaml > out.txt 2>&1; rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "algo.yaml:6:27" out.txt && grep -q "ring" out.txt || fail "bad algorithm: rc $rc: $(cat out.txt)"
printf 'base:\n  model: no-such-model\n  profile: dgx-h100\n  gpus: 64\n' > model.yaml
set +e
"$bin" whatif model.yaml > out.txt 2>&1; rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "model.yaml:2:10" out.txt || fail "bad model: rc $rc: $(cat out.txt)"
passed=$((passed + 1))
# The search's checkpoint and failure flags travel with it: `report --from` prices the job as the
# search did (5,000 h per GPU on 16 GPUs: a job MTBF of 312.50 h), and one given beside --from
# wins (800 h: 50.00 h); the provenance table names the rate used and its source.
"$bin" search -m llama3-8b -c dgx-h100 -g 16 --gbs 64 --top 2 --mtbf-per-gpu-hours 5000 \
  --async-save --json > rs.json 2> /dev/null
"$bin" report --from rs.json --out rs.md 2> /dev/null
grep -q '^| job MTBF | MTBF per GPU / GPUs | 5000 h / 16 | 312.50 h |$' rs.md &&
  grep -q '^| checkpoint blocks training (asynchronous) |' rs.md &&
  grep -q '^| reliability | MTBF 5000 h per GPU | --mtbf-per-gpu-hours |$' rs.md ||
  fail "report --from lost the search's failure flags"
"$bin" report --from rs.json --mtbf-per-gpu-hours 800 --out rs2.md 2> /dev/null
grep -q '^| job MTBF | MTBF per GPU / GPUs | 800 h / 16 | 50.00 h |$' rs2.md ||
  fail "report --from: a failure flag given beside it"
passed=$((passed + 1))
echo "$passed passed, 0 failed"
