#!/usr/bin/env bash
# Runs every case of bad_inputs/cases.txt against the dtplan binary and checks that each one
# fails cleanly: exit code 2, the expected text (file:line:col or the flag, and the reason) on
# stderr, and no sanitizer report. Expectations come from the input itself: the line and
# column are where the defect was put in the file.
#
# usage: run_bad_inputs.sh DTPLAN_BINARY CORPUS_DIR
# cases.txt lines:  id ;; arguments ;; expected substring      (# starts a comment)
# An expectation "A ... B" wants A, then B later in the message; "A !! C" wants A and no C.
set -u

# True when every " ... "-separated part of $2 occurs in $1, each after the one before.
contains_in_order() {
  local msg=$1 want=$2 part
  while :; do
    part=${want%% ... *}
    [[ "$msg" == *"$part"* ]] || return 1
    msg=${msg#*"$part"}
    [[ "$want" == *" ... "* ]] || return 0
    want=${want#*" ... "}
  done
}

bin=$(realpath "$1")
dir=$2
cd "$dir" || exit 1
pass=0
fail=0
while IFS= read -r line; do
  [[ -z "${line// }" || "$line" =~ ^[[:space:]]*# ]] && continue
  id=$(awk -F' ;; ' '{print $1}' <<<"$line")
  args=$(awk -F' ;; ' '{print $2}' <<<"$line")
  want=$(awk -F' ;; ' '{print $3}' <<<"$line")
  absent=""
  if [[ "$want" == *" !! "* ]]; then
    absent=${want#*" !! "}
    want=${want%%" !! "*}
  fi
  # A hang is a failure too (60 s each, far above any case's time on a busy machine).
  err=$(eval "timeout 60 \"$bin\" $args" 2>&1 >/dev/null)
  rc=$?
  problem=""
  [[ $rc -eq 124 ]] && problem="hung (no answer in 60 s)"
  [[ -z "$problem" && $rc -ne 2 ]] && problem="exit code $rc, expected 2"
  [[ -z "$problem" ]] && ! contains_in_order "$err" "$want" && problem="message does not contain: $want"
  [[ -z "$problem" && -n "$absent" && "$err" == *"$absent"* ]] && problem="message contains: $absent"
  [[ -z "$problem" && "$err" == *"Sanitizer"* ]] && problem="sanitizer report"
  [[ -z "$problem" && "$err" == *"internal error"* ]] && problem="internal error"
  if [[ -n "$problem" ]]; then
    fail=$((fail + 1))
    echo "FAIL $id: $problem"
    echo "     stderr: $err"
  else
    pass=$((pass + 1))
  fi
done < cases.txt
echo "$pass passed, $fail failed"
[[ $fail -eq 0 && $pass -ge 40 ]]
