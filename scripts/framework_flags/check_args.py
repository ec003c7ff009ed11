#!/usr/bin/env python3
"""Check an emitted argv file against a flag table made by extract_argparse.py.

usage: check_args.py TABLE.json ARGS.txt [ARGS.txt ...]

An args file holds one argv entry per line: a flag line (``--foo``, or
``--foo=value``) followed by its value line(s), if it takes any.  Entries that
start with ``--`` are always flags; a single-dash entry is a flag unless it
looks like a negative number (argparse's rule).

One line per problem is printed as ``FILE:LINE: FLAG: reason`` and the exit
status is 1 when there is any.  Problems:

* the flag is not in the table (argparse would abort: "unrecognized arguments");
* a flag that takes no value (store_true, store_false, ...) is given one;
* a valued flag has no value, or a count that its nargs does not allow;
* a value does not parse as the declared int/float type;
* a value is not among the declared choices (enum types: member names);
* the same destination is set twice (repeated flag, or two aliases/opposites),
  except for append/count actions;
* two flags of one mutually exclusive group are both given;
* an entry is a value with no flag before it.

Flags whose type is a custom function (e.g. moe_freq_type) are checked for
presence and value count only; "dynamic" choices are not checked.  Flags the
table marks with a "condition" (only registered when some optional package is
importable, ...) are accepted, with a note on stderr.

When every file passes, it prints ``ok: N flags checked against REPO@COMMIT``
(one line per file, suffixed `` (FILE)`` when several files are given) and
exits 0.  Python 3.11 standard library only.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import sys
from typing import Any

NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
REPEATABLE_ACTIONS = {"append", "append_const", "count", "extend"}


def is_flag(entry: str) -> bool:
    if entry.startswith("--"):
        return True
    return entry.startswith("-") and len(entry) > 1 and not NEGATIVE_NUMBER.match(entry)


def value_range(rec: dict[str, Any]) -> tuple[int, float]:
    if not rec.get("takes_value", True):
        return 0, 0
    nargs = rec.get("nargs")
    if nargs is None:
        return 1, 1
    if isinstance(nargs, int):
        return nargs, nargs
    return {"?": (0, 1), "*": (0, math.inf), "+": (1, math.inf),
            "...": (0, math.inf), "A...": (1, math.inf)}.get(nargs, (0, math.inf))


def describe_range(lo: int, hi: float) -> str:
    if lo == hi:
        return f"exactly {lo} value{'s' if lo != 1 else ''}"
    if hi == math.inf:
        return f"at least {lo} value{'s' if lo != 1 else ''}"
    return f"{lo} to {int(hi)} values"


def convert(value: str, type_name: str | None):
    """(ok, converted) for the types the checker understands; None = not checked."""
    if type_name == "int":
        try:
            return True, int(value)
        except ValueError:
            return False, None
    if type_name == "float":
        try:
            return True, float(value)
        except ValueError:
            return False, None
    if type_name in (None, "str") or (type_name or "").startswith("enum:"):
        return True, value
    return None, None  # custom type: presence only


def split_entries(lines: list[str]):
    """[(lineno, flag or None, inline value or None, [(lineno, value), ...])]."""
    groups: list[list[Any]] = []
    for lineno, raw in enumerate(lines, 1):
        entry = raw.rstrip("\r\n")
        if entry.strip() == "":
            continue
        if is_flag(entry):
            flag, inline = entry, None
            if entry.startswith("--") and "=" in entry:
                flag, inline = entry.split("=", 1)
            groups.append([lineno, flag, inline, []])
        elif groups and groups[-1][1] is not None:
            groups[-1][3].append((lineno, entry))
        else:
            groups.append([lineno, None, None, [(lineno, entry)]])
    return groups


def check_file(path: str, table: dict[str, Any], notes: list[str]) -> tuple[int, list[str]]:
    flags = table["flags"]
    problems: list[str] = []
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.readlines()
    except OSError as err:
        return 0, [f"{path}: cannot read: {err}"]
    seen_dest: dict[str, tuple[str, int]] = {}
    seen_mutex: dict[str, tuple[str, int]] = {}
    count = 0
    for lineno, flag, inline, values in split_entries(lines):
        where = f"{path}:{lineno}"
        if flag is None:
            for vline, value in values:
                problems.append(f"{path}:{vline}: {value}: value with no flag before it")
            continue
        count += 1
        rec = flags.get(flag)
        if rec is None:
            hint = ""
            try:
                float(flag)
                hint = ("; argparse treats it as an option, because it does not match "
                        "argparse's negative-number pattern. Write it inline: --flag=VALUE")
            except ValueError:
                close = difflib.get_close_matches(flag, list(flags), n=1, cutoff=0.85)
                if close:
                    hint = f"; did you mean {close[0]}?"
            problems.append(f"{where}: {flag}: not a {table['repo']} flag "
                            f"(argparse would abort with 'unrecognized arguments'){hint}")
            continue
        for cond in rec.get("condition", []):
            notes.append(f"{where}: {flag}: note: only registered when {cond}")
        # value count ----------------------------------------------------------
        given = [v for _, v in values]
        lo, hi = value_range(rec)
        if inline is not None:
            if hi == 0:
                problems.append(f"{where}: {flag}: takes no value ({rec['action']}) "
                                f"but is given '={inline}'")
                continue
            if given:
                problems.append(f"{where}: {flag}: value given inline ('={inline}') and "
                                f"{len(given)} more line(s) follow: {given!r}")
            given = [inline]
            if lo > 1:
                problems.append(f"{where}: {flag}: expects {describe_range(lo, hi)}; "
                                "an inline '=value' supplies one")
                continue
        elif hi == 0 and given:
            problems.append(f"{where}: {flag}: takes no value ({rec['action']}) but is "
                            f"followed by {given!r}")
            continue
        elif not lo <= len(given) <= hi:
            if not given:
                problems.append(f"{where}: {flag}: expects {describe_range(lo, hi)}, "
                                "got none")
            else:
                problems.append(f"{where}: {flag}: expects {describe_range(lo, hi)}, "
                                f"got {len(given)}: {given!r}")
            continue
        # types and choices ----------------------------------------------------
        type_name = rec.get("type")
        choices = rec.get("choices")
        for value in given:
            ok, converted = convert(value, type_name)
            if ok is False:
                problems.append(f"{where}: {flag}: value '{value}' is not a valid "
                                f"{type_name}")
                continue
            if ok is None or not isinstance(choices, list):
                continue
            if converted not in choices:
                shown = ", ".join(str(c) for c in choices)
                problems.append(f"{where}: {flag}: value '{value}' is not one of "
                                f"the choices [{shown}]")
        # repeats, aliases, mutually exclusive groups ---------------------------
        dest = rec.get("dest") or rec.get("dest_expr")
        if rec.get("action") not in REPEATABLE_ACTIONS and dest:
            if dest in seen_dest:
                other, other_line = seen_dest[dest]
                problems.append(f"{where}: {flag}: sets '{dest}' already set by {other} "
                                f"at line {other_line}")
            else:
                seen_dest[dest] = (flag, lineno)
        group = rec.get("mutually_exclusive_group")
        if group:
            if group in seen_mutex and seen_mutex[group][0] != flag:
                other, other_line = seen_mutex[group]
                problems.append(f"{where}: {flag}: not allowed with {other} (line "
                                f"{other_line}; mutually exclusive group at {group})")
            else:
                seen_mutex.setdefault(group, (flag, lineno))
    return count, problems


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    table_path, files = argv[0], argv[1:]
    try:
        with open(table_path, encoding="utf-8") as fh:
            table = json.load(fh)
        table["flags"]
    except (OSError, ValueError, KeyError) as err:
        print(f"{table_path}: not a flag table: {err}", file=sys.stderr)
        return 2
    label = f"{table['repo']}@{table['commit']}"
    failed = False
    ok_lines = []
    for path in files:
        notes: list[str] = []
        count, problems = check_file(path, table, notes)
        for note in notes:
            print(note, file=sys.stderr)
        for problem in problems:
            print(problem)
        if problems:
            failed = True
        else:
            suffix = f" ({path})" if len(files) > 1 else ""
            ok_lines.append(f"ok: {count} flags checked against {label}{suffix}")
    for line in ok_lines:
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
