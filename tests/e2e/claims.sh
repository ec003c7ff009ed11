#!/usr/bin/env bash
# `dtplan check --claims` as scripts use it: exit 3 when a statement is refuted, 0 when all
# agree, 2 for bad input; the JSON fields of the interface (issue #16: consistent, refuted[]
# with the arithmetic, missing[]).
# usage: claims.sh DTPLAN_BINARY SOURCE_DIR
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # description, condition result
  if [[ $2 -ne 0 ]]; then
    echo "FAIL $1"
    fail=1
  else
    echo "ok   $1"
  fi
}

"$bin" check --claims "$src/examples/claims/seed.yaml" >"$tmp/seed.txt"
check "seed: exit 3" $(($? != 3))
grep -q "45% MFU gives 251 days; 14 days needs ≥ 4,593 GPUs at that MFU, or an MFU of 807%" "$tmp/seed.txt"
check "seed: the arithmetic in the text" $?

"$bin" check --claims "$src/examples/claims/seed.yaml" --json >"$tmp/seed.json"
check "seed --json: exit 3" $(($? != 3))
python3 - "$tmp/seed.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
c = j["claims"][0]
assert j["consistent"] is False and c["consistent"] is False, j
assert any("251 days" in f["message"] for f in c["refuted"]), c["refuted"]
assert "dtplan's model: needs model" in c["missing"], c["missing"]
PY
check "seed --json: consistent false, refuted[] with the arithmetic, missing[]" $?

cat >"$tmp/ok.yaml" <<'Y'
params: 65.2e9
cluster: dgx-a100-80g
gpus: 2048
tokens_per_s_per_gpu: 380
train_tokens: 1.4e12
days: 21
Y
"$bin" check --claims "$tmp/ok.yaml" --json >"$tmp/ok.json"
check "consistent claim: exit 0" $?
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['consistent'] and j['claims'][0]['checks']>=2, j" "$tmp/ok.json"
check "consistent claim --json" $?

printf 'params: 7e9\nmfu: 0.4\n' >"$tmp/under.yaml"
"$bin" check --claims "$tmp/under.yaml" >"$tmp/under.txt"
check "under-specified: exit 0" $?
grep -q "nothing to check" "$tmp/under.txt" && grep -q "missing     mfu: needs gpus" "$tmp/under.txt"
check "under-specified: says what is missing" $?

exit $fail
