#!/usr/bin/env python3
"""Check a torchtitan job config against a table made by extract_torchtitan.py.

    check_torchtitan.py TABLE.json CONFIG.toml
    check_torchtitan.py TABLE.json CONFIG.py [--config FUNCTION] [--module-name PKG.MOD]

Exit 0 and one "ok: ..." line when nothing is wrong; otherwise exit 1 with one
line per problem (``FILE:LINE: ...``). Exit 2 on usage errors.

TOML (refs whose table has config_format "toml", i.e. v0.1.0 .. v0.2.x, read
by ``-m torchtitan.train --job.config_file``):
  * every top-level table must be a section, every key a field of it
    (nested dataclasses are sub-tables, e.g. [quantize.linear.float8]);
    a JobConfig extension shipped in the repo and named by the extension key
    (experimental.custom_args_module / job.custom_config_module) is merged;
  * values must match the annotated type; Literal values must be a choice;
  * [model] name must be registered (models only registered through
    experimental.custom_import need that key), flavor (or the default flavor)
    must be one of that model's flavors; every model.converters entry must be
    a registered converter name;
  * parallelism.pipeline_parallel_schedule must be a schedule name torch's
    get_schedule_class accepts (case-insensitive).
  Against a "python" table (main since 2026-02-23) a TOML file is itself a
  problem: such refs have no --job.config_file. Its keys are still checked as
  the --section.field CLI flags they would become, so the report says which
  of them still exist.

Python (tables with config_format "python"): the file is parsed with ast, not
imported. Names imported from torchtitan are resolved through the table's
symbols/classes/functions. Checked:
  * ``X.Config(kw=...)`` / ``TrainingConfig(kw=...)``: every keyword names a
    field of that dataclass (init fields only), positional arguments are not
    passed to kw_only dataclasses, required fields are given, constant values
    match the field type / Literal choices, nested config values are of an
    accepted class (e.g. activation_checkpoint=FullAC.Config());
  * calls of table functions (model_registry, default_adamw, config_registry
    functions): keyword names; model_registry's flavor must be a flavor of
    that model; converters=[...] must be ModelConfigConverter configs;
  * ``config.section.field = value`` / ``config.field = value`` where the
    type of ``config`` is known (annotation, Trainer.Config(...) or a call of
    a function returning a config): the attribute must be a field of the
    declared class or of one of its subclasses, constants must fit;
  * --config FUNCTION must be a top-level function of the file.
Unresolvable names (experiments, user helpers) are not guessed at: they are
counted as unchecked.
Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import re
import sys
import tomllib


# --------------------------------------------------------------------------
# table helpers
# --------------------------------------------------------------------------


def rec_kind(rec: dict) -> dict:
    return rec.get("kind") or {"t": rec["type"]}


def kind_text(k: dict) -> str:
    t = k.get("t")
    if t == "literal":
        return "Literal[" + ", ".join(repr(c) for c in k["choices"]) + "]"
    if t == "list":
        return f"list[{kind_text(k['of'])}]"
    if t == "tuple":
        return "tuple[" + ", ".join(kind_text(x) for x in k["of"]) + "]"
    if t == "union":
        return " | ".join(kind_text(x) for x in k["of"])
    if t == "class":
        return k["class"].rsplit(".", 2)[-2] + "." + k["class"].rsplit(".", 1)[-1] if k["class"].endswith(".Config") else k["class"].rsplit(".", 1)[-1]
    if t == "dict":
        return "dict"
    if t == "other":
        return k.get("name", "?")
    return t or "?"


def value_matches(k: dict, v) -> bool | None:
    """True/False for a Python/TOML value against a kind; None when the kind can't be checked."""
    t = k.get("t")
    if t == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "float":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "str":
        return isinstance(v, str)
    if t == "bool":
        return isinstance(v, bool)
    if t == "bytes":
        return isinstance(v, bytes)
    if t == "none":
        return v is None
    if t == "literal":
        return any(type(v) is type(c) and v == c for c in k["choices"])
    if t == "list":
        if not isinstance(v, (list, tuple)):
            return False
        res = [value_matches(k["of"], x) for x in v]
        if any(r is False for r in res):
            return False
        return True
    if t == "tuple":
        return isinstance(v, (list, tuple))
    if t == "dict":
        return isinstance(v, dict)
    if t == "class":
        return isinstance(v, dict) or None
    if t == "union":
        res = [value_matches(p, v) for p in k["of"]]
        if any(r is True for r in res):
            return True
        if any(r is None for r in res):
            return None
        return False
    return None  # any / other


def literal_of(k: dict) -> list | None:
    if k.get("t") == "literal":
        return k["choices"]
    if k.get("t") == "union":
        for p in k["of"]:
            if p.get("t") == "literal":
                return p["choices"]
    return None


def short(table: dict) -> str:
    return f"torchtitan {table['ref']} ({table['commit'][:12]})"


def suggest(name: str, options) -> str:
    close = difflib.get_close_matches(name, list(options), n=2, cutoff=0.75)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


class Report:
    def __init__(self, path: str):
        self.path = path
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.checked = 0
        self.unchecked = 0

    def problem(self, line: int | None, msg: str) -> None:
        loc = f"{self.path}:{line}" if line else self.path
        self.problems.append(f"{loc}: {msg}")


# --------------------------------------------------------------------------
# TOML
# --------------------------------------------------------------------------


def toml_lines(text: str) -> dict:
    """(table, key) -> line number, best effort; ('', '[sec]') for headers."""
    where = {}
    table = ""
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        m = re.match(r"^\[\[?\s*([^\]]+?)\s*\]\]?", s)
        if m:
            table = m.group(1).replace('"', "").replace(" ", "")
            where.setdefault(("", table), i)
            continue
        m = re.match(r'^("?)([A-Za-z0-9_\-.]+)\1\s*=', s)
        if m:
            key = m.group(2)
            full = f"{table}.{key}" if table else key
            tbl, _, k = full.rpartition(".")
            where.setdefault((tbl, k), i)
    return where


def merged_sections(table: dict, ext_module: str | None, rep: Report) -> dict:
    sections = {name: {"fields": dict(sec["fields"]), **{k: v for k, v in sec.items() if k != "fields"}}
                for name, sec in table["sections"].items()}
    if not ext_module:
        return sections
    ext = table.get("extensions", {}).get(ext_module)
    if ext is None:
        rep.notes.append(f"custom config module {ext_module!r} is not in the table; its fields are not known here")
        return sections
    for name, sec in ext["sections"].items():
        if name in sections:
            sections[name]["fields"].update(sec["fields"])
        else:
            sections[name] = {"fields": dict(sec["fields"]), "class": sec.get("class"), "defined_in": sec.get("defined_in")}
        # parent gets a field pointing at a new sub-section
        parent, _, leaf = name.rpartition(".")
        if parent and parent in sections and leaf not in sections[parent]["fields"]:
            sections[parent]["fields"][leaf] = {"type": "section", "section": name}
        elif not parent and name not in sections:
            pass
    return sections


def check_toml(table: dict, path: str, text: str, rep: Report) -> None:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        rep.problem(None, f"not valid TOML: {e}")
        return
    lines = toml_lines(text)
    python_era = table.get("config_format") == "python"
    if python_era:
        launch = table.get("launch", {})
        rep.problem(None, f"{short(table)} does not read TOML job configs (no --job.config_file); "
                          f"a run is a Python function: {launch.get('command', '-m torchtitan.train --module M --config F')}"
                          "; checking the keys below as --section.field CLI flags")

    ext_key = table.get("extension_key")
    ext_module = None
    if ext_key:
        sec, _, fld = ext_key.partition(".")
        v = data.get(sec, {}).get(fld) if isinstance(data.get(sec), dict) else None
        if isinstance(v, str) and v:
            ext_module = v
    sections = merged_sections(table, ext_module, rep)
    top_sections = {n for n in sections if "." not in n}
    root_fields = table.get("root_fields", {})
    all_fields = {}
    for sname, sec in sections.items():
        for f in sec["fields"]:
            all_fields.setdefault(f, []).append(sname)

    def flag(sname, key):
        return f"--{sname}.{key}" if python_era else f"[{sname}] {key}"

    def check_value(sname, key, rec, value, line):
        k = rec_kind(rec)
        ok = value_matches(k, value)
        rep.checked += 1
        if ok is False:
            choices = literal_of(k)
            if choices is not None and (isinstance(value, str) or not isinstance(value, (dict, list))):
                rep.problem(line, f"{flag(sname, key)} = {value!r}: not one of {choices}")
            else:
                rep.problem(line, f"{flag(sname, key)} = {value!r}: expected {rec.get('type') or kind_text(k)}")

    def walk_section(sname, tbl):
        sec = sections[sname]
        fields = dict(sec["fields"])
        for sub in sec.get("subclasses", []):
            pass  # subclass fields are not TOML/CLI-addressable by the declared type
        for key, value in tbl.items():
            line = lines.get((sname, key)) or lines.get(("", f"{sname}.{key}"))
            rec = fields.get(key)
            if rec is None:
                elsewhere = [s for s in all_fields.get(key, []) if s != sname]
                if sec.get("variants"):
                    hint = (f"; {sname} is chosen by config class at this ref (subcommands: "
                            f"{', '.join(sec['variants'])}), not by a field")
                elif elsewhere:
                    hint = f"; a field of that name is in [{'], ['.join(elsewhere)}]"
                else:
                    hint = suggest(key, fields)
                rep.problem(line, f"{flag(sname, key)}: unknown field (section {sname} is {sec.get('class')}, "
                                  f"{sec.get('defined_in')}){hint}")
                continue
            if rec.get("cli") is False and python_era:
                rep.problem(line, f"{flag(sname, key)}: not settable from the CLI at this ref")
                continue
            if "section" in rec:
                if isinstance(value, dict):
                    walk_section(rec["section"], value)
                else:
                    rep.problem(line, f"{flag(sname, key)}: is a section ([{rec['section']}]), not a value")
                continue
            if isinstance(value, dict):
                rep.problem(line, f"[{sname}.{key}]: {key} is a field of type {rec.get('type')}, not a section")
                continue
            check_value(sname, key, rec, value, line)

    for key, value in data.items():
        if isinstance(value, dict):
            if key not in top_sections:
                line = lines.get(("", key)) or next(
                    (l for (t, k2), l in sorted(lines.items(), key=lambda x: x[1])
                     if (t or k2).split(".")[0] == key), None)
                hint = suggest(key, top_sections)
                if python_era and key in root_fields:
                    hint = f"; {key} is a plain field at this ref"
                inner = []
                for k2 in value:
                    homes = all_fields.get(k2, []) + (["<top level>"] if k2 in root_fields else [])
                    inner.append(f"{k2} (in: {', '.join(homes)})" if homes else f"{k2} (no such field anywhere)")
                if inner:
                    hint += f"; keys: {', '.join(inner)}"
                rep.problem(line, f"[{key}]: unknown section{hint}" + ("" if python_era else f" (sections of {short(table)}: {', '.join(sorted(top_sections))})"))
                continue
            walk_section(key, value)
        else:
            line = lines.get(("", key))
            if key in root_fields:
                check_value("", key, root_fields[key], value, line)
            else:
                rep.problem(line, f"{key} = {value!r}: top-level keys must be inside a [section]")

    if python_era:
        return

    # --- model name / flavor / converters ---------------------------------
    model_sec = sections.get("model", {}).get("fields", {})
    model_tbl = data.get("model") if isinstance(data.get("model"), dict) else {}
    custom_import = ""
    exp = data.get("experimental")
    if isinstance(exp, dict) and isinstance(exp.get("custom_import"), str):
        custom_import = exp["custom_import"]
    models = table.get("models", {})
    details = table.get("model_details", {})

    def available(det: dict) -> bool:
        reg = det.get("registration", "")
        if reg == "experimental.custom_import":
            mod = det.get("module", "")
            return bool(custom_import) and (mod == custom_import or mod.startswith(custom_import + ".")
                                            or custom_import.startswith(mod + "."))
        return True

    name_given = "name" in model_tbl
    if not model_tbl:
        rep.notes.append("no [model] table: torchtitan uses the defaults "
                         f"name={model_sec.get('name', {}).get('default')!r}, "
                         f"flavor={model_sec.get('flavor', {}).get('default')!r}")
    name = model_tbl.get("name", model_sec.get("name", {}).get("default"))
    flavor_given = "flavor" in model_tbl
    flavor = model_tbl.get("flavor", model_sec.get("flavor", {}).get("default"))
    nline = lines.get(("model", "name")) if name_given else lines.get(("", "model"))
    fline = lines.get(("model", "flavor")) if flavor_given else lines.get(("", "model"))
    if isinstance(name, str):
        rep.checked += 1
        label = "[model] name" if name_given else "[model] name (not set; default)"
        if name not in models:
            rep.problem(nline, f"{label} = {name!r}: not a registered model of {short(table)} "
                               f"(registered: {', '.join(sorted(models))}){suggest(name, models)}")
        else:
            det = details.get(name, {})
            if not available(det):
                rep.problem(nline, f"{label} = {name!r}: -m torchtitan.train registers it only with experimental.custom_import = "
                                   f"{det.get('module')!r} ({det.get('registered_at')})")
            flavors = models.get(name)
            if isinstance(flavor, str) and flavors is not None:
                rep.checked += 1
                if flavor not in flavors:
                    flabel = "[model] flavor" if flavor_given else "[model] flavor (not set; default)"
                    rep.problem(fline, f"{flabel} = {flavor!r}: not a flavor of {name} "
                                       f"(flavors: {', '.join(flavors)}; {det.get('flavors_from')}){suggest(flavor, flavors)}")
            elif flavors is None:
                rep.notes.append(f"flavors of {name} could not be extracted ({det.get('flavors_from')})")
    converters = model_tbl.get("converters", [])
    if isinstance(converters, list):
        cdet = table.get("converter_details", {})
        cline = lines.get(("model", "converters"))
        for c in converters:
            if not isinstance(c, str):
                continue
            rep.checked += 1
            if c not in table.get("converters", []):
                rep.problem(cline, f"[model] converters: {c!r} is not a registered converter of {short(table)} "
                                   f"(registered: {', '.join(table.get('converters', []))}){suggest(c, table.get('converters', []))}")
            elif not available(cdet.get(c, {})):
                rep.problem(cline, f"[model] converters: {c!r}: -m torchtitan.train registers it only with experimental.custom_import = "
                                   f"{cdet[c].get('module')!r}")

    # --- pipeline schedule ---------------------------------------------------
    par = data.get("parallelism") if isinstance(data.get("parallelism"), dict) else {}
    sched = par.get("pipeline_parallel_schedule")
    if isinstance(sched, str) and not par.get("pipeline_parallel_schedule_csv"):
        names = table.get("pipeline_schedules", {}).get("names", [])
        rep.checked += 1
        if names and sched.lower() not in {n.lower() for n in names}:
            rep.problem(lines.get(("parallelism", "pipeline_parallel_schedule")),
                        f"[parallelism] pipeline_parallel_schedule = {sched!r}: not a schedule name of "
                        f"get_schedule_class ({', '.join(names)}; {table['pipeline_schedules'].get('source')})")


# --------------------------------------------------------------------------
# Python config (main)
# --------------------------------------------------------------------------


class PyChecker:
    def __init__(self, table: dict, path: str, tree: ast.Module, module_name: str | None, rep: Report):
        self.t = table
        self.classes = table.get("classes", {})
        self.functions = table.get("functions", {})
        self.symbols = table.get("symbols", {})
        self.owners = set(table.get("owners", []))
        self.converters = set(table.get("converters", []))
        self.path = path
        self.tree = tree
        self.module_name = module_name
        self.rep = rep
        self.imports: dict[str, str] = {}
        self.local_funcs: dict[str, ast.FunctionDef] = {}
        self.module_env: dict[str, set] = {}

    # -- names ------------------------------------------------------------
    def canon(self, dotted: str) -> str:
        seen = 0
        while dotted in self.symbols and seen < 10:
            dotted = self.symbols[dotted]
            seen += 1
        if dotted in self.classes or dotted in self.functions:
            return dotted
        parts = dotted.split(".")
        for i in range(len(parts) - 1, 0, -1):
            pre = ".".join(parts[:i])
            if pre in self.symbols:
                return self.canon(self.symbols[pre] + "." + ".".join(parts[i:]))
        return dotted

    def collect_imports(self):
        pkg = None
        if self.module_name:
            is_pkg = os.path.basename(self.path) == "__init__.py"
            pkg = self.module_name if is_pkg else self.module_name.rpartition(".")[0]
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.imports[a.asname] = a.name
                    else:
                        self.imports[a.name.split(".")[0]] = a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    if pkg is None:
                        continue
                    base = pkg.split(".")
                    if node.level > 1:
                        base = base[: len(base) - (node.level - 1)]
                    src = ".".join(base) + (f".{node.module}" if node.module else "")
                else:
                    src = node.module or ""
                for a in node.names:
                    if a.name != "*":
                        self.imports[a.asname or a.name] = f"{src}.{a.name}"
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.local_funcs[node.name] = node

    def dotted_of(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            if node.id in self.imports:
                return self.imports[node.id]
            return None
        if isinstance(node, ast.Attribute):
            base = self.dotted_of(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    # -- classes ----------------------------------------------------------
    def ancestors(self, c: str) -> set:
        out = set()
        todo = [c]
        while todo:
            x = todo.pop()
            for b in self.classes.get(x, {}).get("bases", []):
                if b not in out:
                    out.add(b)
                    todo.append(b)
        return out

    def fields_of(self, classes: set) -> dict:
        """field name -> (record, holder class) over classes and their subclasses."""
        out = {}
        for c in sorted(classes):
            for f, rec in self.classes.get(c, {}).get("fields", {}).items():
                out.setdefault(f, (rec, c, True))
        for c in sorted(classes):
            for sub in self.classes.get(c, {}).get("subclasses", []):
                for f, rec in self.classes.get(sub, {}).get("fields", {}).items():
                    out.setdefault(f, (rec, sub, False))
        return out

    def short_cls(self, c: str) -> str:
        parts = c.split(".")
        if parts[-1] == "Config" and len(parts) > 1:
            return ".".join(parts[-2:])
        return parts[-1]

    # -- expression types -------------------------------------------------
    def kind_classes(self, k: dict) -> set:
        t = k.get("t")
        if t == "class":
            return {k["class"]}
        if t == "union":
            out = set()
            for p in k["of"]:
                out |= self.kind_classes(p)
            return out
        return set()

    def etype(self, node: ast.AST, env: dict) -> set | None:
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in self.module_env:
                return self.module_env[node.id]
            return None
        if isinstance(node, ast.Call):
            fname = ast.unparse(node.func)
            if fname in ("copy.deepcopy", "deepcopy", "copy.copy", "dataclasses.replace", "replace") and node.args:
                return self.etype(node.args[0], env)
            if isinstance(node.func, ast.Name) and node.func.id in self.local_funcs and node.func.id not in self.imports:
                fn = self.local_funcs[node.func.id]
                if fn.returns is not None:
                    return self.annotation_type(fn.returns)
                return None
            d = self.dotted_of(node.func)
            if d is None:
                return None
            c = self.canon(d)
            if c in self.classes:
                return {c}
            f = self.functions.get(c)
            if f:
                r = f.get("returns")
                if isinstance(r, str) and r in self.classes:
                    return {r}
                if isinstance(r, list):
                    return {x for x in r if x in self.classes} or None
            return None
        if isinstance(node, ast.Attribute):
            base = self.etype(node.value, env)
            if not base:
                return None
            fields = self.fields_of(base)
            if node.attr not in fields:
                return None
            k = rec_kind(fields[node.attr][0])
            cl = {c for c in self.kind_classes(k) if c in self.classes}
            return cl or None
        return None

    def annotation_type(self, ann: ast.AST) -> set | None:
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                ann = ast.parse(ann.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(ann, ast.BinOp):
            a = self.annotation_type(ann.left) or set()
            b = self.annotation_type(ann.right) or set()
            return (a | b) or None
        d = self.dotted_of(ann)
        if d:
            c = self.canon(d)
            if c in self.classes:
                return {c}
        return None

    # -- value checks -----------------------------------------------------
    def const(self, node: ast.AST):
        try:
            return True, ast.literal_eval(node)
        except (ValueError, SyntaxError, TypeError):
            return False, None

    def check_value(self, where: str, rec: dict, value: ast.AST, env: dict, line: int) -> None:
        k = rec_kind(rec)
        ok, v = self.const(value)
        if ok:
            m = value_matches(k, v)
            self.rep.checked += 1
            if m is False:
                choices = literal_of(k)
                if choices is not None and not isinstance(v, (list, dict, tuple)) and v is not None:
                    self.rep.problem(line, f"{where} = {v!r}: not one of {choices}")
                else:
                    self.rep.problem(line, f"{where} = {v!r}: expected {rec.get('type')}")
            return
        self.check_structured(where, k, rec.get("type"), value, env, line)

    def check_structured(self, where: str, k: dict, type_text, value: ast.AST, env: dict, line: int) -> None:
        if isinstance(value, (ast.List, ast.Tuple)):
            lk = None
            for p in ([k] if k.get("t") != "union" else k["of"]):
                if p.get("t") == "list":
                    lk = p["of"]
            if lk is not None:
                for i, el in enumerate(value.elts):
                    self.check_structured(f"{where}[{i}]", lk, kind_text(lk), el, env, getattr(el, "lineno", line))
            return
        want = {c for c in self.kind_classes(k) if c in self.classes}
        if not want:
            return
        got = self.etype(value, env)
        if not got:
            return
        self.rep.checked += 1
        for g in got:
            if g in want or self.ancestors(g) & want:
                return
        self.rep.problem(line, f"{where}: {', '.join(self.short_cls(g) for g in sorted(got))} is not a "
                               f"{' | '.join(self.short_cls(w) for w in sorted(want))} ({type_text})")

    # -- statements -------------------------------------------------------
    def check_call(self, node: ast.Call, env: dict) -> None:
        d = self.dotted_of(node.func)
        if d is None:
            return
        c = self.canon(d)
        line = node.lineno
        if c in self.classes:
            crec = self.classes[c]
            fields = crec.get("fields", {})
            name = self.short_cls(c)
            has_star = any(kw.arg is None for kw in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args)
            if node.args and crec.get("kw_only"):
                self.rep.problem(line, f"{name}(...): positional arguments, but {name} is kw_only")
            given = set()
            for kw in node.keywords:
                if kw.arg is None:
                    continue
                given.add(kw.arg)
                rec = fields.get(kw.arg)
                self.rep.checked += 1
                if rec is None or rec.get("init") is False:
                    why = "is init=False" if rec is not None else f"no such field (fields: {', '.join(fields) or 'none'})"
                    self.rep.problem(kw.value.lineno, f"{name}({kw.arg}=...): {why}{suggest(kw.arg, fields) if rec is None else ''} "
                                                      f"[{crec.get('defined_in')}]")
                    continue
                self.check_value(f"{name}.{kw.arg}", rec, kw.value, env, kw.value.lineno)
            if not has_star and not node.args:
                missing = [f for f, r in fields.items() if r.get("required") and f not in given]
                if missing:
                    self.rep.problem(line, f"{name}(...): missing required field(s) {', '.join(missing)}")
            return
        f = self.functions.get(c)
        if f is not None:
            params = f.get("params", [])
            kinds = f.get("param_kinds", {})
            fname = c.rsplit(".", 1)[-1]
            for kw in node.keywords:
                if kw.arg is None:
                    continue
                self.rep.checked += 1
                if kw.arg not in params and not f.get("varkw"):
                    self.rep.problem(kw.value.lineno, f"{fname}({kw.arg}=...): no such parameter "
                                                      f"(parameters: {', '.join(params)}; {f.get('defined_in')})")
                elif kw.arg in kinds:
                    self.check_value(f"{fname}({kw.arg})", {"type": kind_text(kinds[kw.arg]), "kind": kinds[kw.arg]},
                                     kw.value, env, kw.value.lineno)
            if len(node.args) > len(params) and not f.get("varargs"):
                self.rep.problem(line, f"{fname}(...): {len(node.args)} positional arguments, takes {len(params)}")
            for i, a in enumerate(node.args[: len(params)]):
                p = params[i]
                if p in kinds and f.get("flavor_param") != p:
                    self.check_value(f"{fname}({p})", {"type": kind_text(kinds[p]), "kind": kinds[p]}, a, env, a.lineno)
            model = f.get("model")
            if model:
                fp = f.get("flavor_param") or (params[0] if params else None)
                fl = node.args[0] if node.args else next((kw.value for kw in node.keywords if kw.arg == fp), None)
                if fl is not None:
                    ok, v = self.const(fl)
                    flavors = self.t.get("models", {}).get(model)
                    if ok and isinstance(v, str) and flavors is not None:
                        self.rep.checked += 1
                        if v not in flavors:
                            det = self.t.get("model_details", {}).get(model, {})
                            self.rep.problem(fl.lineno, f"{fname}({v!r}): not a flavor of {model} "
                                                        f"(flavors: {', '.join(flavors)}; {det.get('flavors_from')})"
                                                        f"{suggest(v, flavors)}")
                    elif not ok:
                        self.rep.unchecked += 1
            return
        if c.startswith("torchtitan.") and not c.startswith("torchtitan.experiments.") and c.endswith(".Config"):
            self.rep.problem(line, f"{d}: no such config class in {short(self.t)}")
            return
        if c.startswith("torchtitan"):
            self.rep.unchecked += 1

    def check_assign_target(self, target: ast.AST, value: ast.AST, env: dict) -> None:
        if not isinstance(target, ast.Attribute):
            return
        base = self.etype(target.value, env)
        if not base:
            if isinstance(target.value, (ast.Name, ast.Attribute)):
                self.rep.unchecked += 1
            return
        fields = self.fields_of(base)
        where = f"{ast.unparse(target)}"
        self.rep.checked += 1
        if target.attr not in fields:
            names = sorted(self.short_cls(b) for b in base)
            all_names = set()
            for b in base:
                all_names |= set(self.classes.get(b, {}).get("fields", {}))
            self.rep.problem(target.lineno, f"{where}: {' | '.join(names)} has no field {target.attr!r}"
                                            f"{suggest(target.attr, all_names)}")
            return
        rec, holder, _ = fields[target.attr]
        self.check_value(where, rec, value, env, target.lineno)

    def run_body(self, body: list, env: dict) -> None:
        for stmt in body:
            self.run_stmt(stmt, env)

    def run_stmt(self, stmt: ast.stmt, env: dict) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fenv: dict = {}
            for a in stmt.args.posonlyargs + stmt.args.args + stmt.args.kwonlyargs:
                if a.annotation is not None:
                    t = self.annotation_type(a.annotation)
                    if t:
                        fenv[a.arg] = t
            self.scan_calls_in(stmt.args, fenv)
            self.run_body(stmt.body, fenv)
            return
        if isinstance(stmt, ast.ClassDef):
            self.run_body(stmt.body, {})
            return
        # calls inside this statement (not inside nested defs)
        self.scan_calls_in(stmt, env)
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                self.check_assign_target(t, stmt.value, env)
                if isinstance(t, ast.Name):
                    ty = self.etype(stmt.value, env)
                    if ty:
                        env[t.id] = ty
                    else:
                        env.pop(t.id, None)
        elif isinstance(stmt, ast.AnnAssign):
            if isinstance(stmt.target, ast.Name):
                ty = self.annotation_type(stmt.annotation) or (self.etype(stmt.value, env) if stmt.value else None)
                if ty:
                    env[stmt.target.id] = ty
            elif stmt.value is not None:
                self.check_assign_target(stmt.target, stmt.value, env)
        elif isinstance(stmt, ast.AugAssign):
            if isinstance(stmt.target, ast.Attribute):
                self.check_assign_target(stmt.target, stmt.value, env)
        for field in ("body", "orelse", "finalbody"):
            sub = getattr(stmt, field, None)
            if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt) and not isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
                self.run_body(sub, env)
        if isinstance(stmt, ast.Try):
            for h in stmt.handlers:
                self.run_body(h.body, env)
        if isinstance(stmt, ast.Match):
            for case in stmt.cases:
                self.run_body(case.body, env)

    def scan_calls_in(self, node: ast.AST, env: dict) -> None:
        """Check every call in node, not descending into nested statements' bodies."""
        todo = [node]
        while todo:
            n = todo.pop()
            for child in ast.iter_child_nodes(n):
                if isinstance(child, (ast.stmt, ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                if isinstance(child, ast.Call):
                    self.check_call(child, env)
                todo.append(child)

    def run(self, config_fn: str | None) -> None:
        self.collect_imports()
        self.run_body(self.tree.body, self.module_env)
        trainer = self.t.get("root", {}).get("class")
        configs = []
        for name, fn in self.local_funcs.items():
            if fn.returns is not None:
                ty = self.annotation_type(fn.returns) or set()
                if trainer in ty or any(trainer in self.ancestors(x) for x in ty):
                    configs.append(name)
        self.config_functions = configs
        if config_fn:
            if config_fn not in self.local_funcs:
                self.rep.problem(None, f"--config {config_fn}: no top-level function of that name "
                                       f"(functions returning {self.short_cls(trainer)}: {', '.join(configs) or 'none'})")
            elif self.local_funcs[config_fn].args.args and not self.local_funcs[config_fn].args.defaults:
                self.rep.problem(self.local_funcs[config_fn].lineno,
                                 f"--config {config_fn}: torchtitan calls it with no arguments")


def derive_module_name(path: str) -> str | None:
    parts = os.path.abspath(path)[:-3].split(os.sep)
    for i, p in enumerate(parts):
        if p in ("torchtitan", "torchtitan_recipes"):
            mod = ".".join(parts[i:])
            return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("table", help="table JSON from extract_torchtitan.py")
    ap.add_argument("config", help="CONFIG.toml, or CONFIG.py for Python-config refs")
    ap.add_argument("--config", dest="config_fn", default=None, help="(Python) the --config function to require")
    ap.add_argument("--module-name", default=None,
                    help="(Python) dotted module name of CONFIG.py, for relative imports "
                         "(default: derived from a torchtitan/ or torchtitan_recipes/ path)")
    args = ap.parse_args(argv)
    try:
        with open(args.table, encoding="utf-8") as f:
            table = json.load(f)
        with open(args.config, "rb") as f:
            raw = f.read()
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    text = raw.decode("utf-8", "replace")
    rep = Report(args.config)
    is_py = args.config.endswith(".py")
    if is_py:
        if table.get("config_format") != "python":
            rep.problem(None, f"{short(table)} reads TOML job configs ({table.get('launch', {}).get('command')}); "
                              "a Python config file is not accepted at this ref")
        else:
            try:
                tree = ast.parse(text, filename=args.config)
            except SyntaxError as e:
                rep.problem(e.lineno, f"not valid Python: {e.msg}")
            else:
                mod = args.module_name or derive_module_name(args.config)
                chk = PyChecker(table, args.config, tree, mod, rep)
                chk.run(args.config_fn)
    else:
        check_toml(table, args.config, text, rep)

    if rep.problems:
        for p in rep.problems:
            print(p)
        for n in rep.notes:
            print(f"{args.config}: note: {n}")
        return 1
    extra = ""
    if is_py:
        extra = f"; {rep.unchecked} torchtitan references not checked"
        fns = getattr(locals().get("chk"), "config_functions", None)
        if fns is not None:
            extra += f"; config functions: {', '.join(fns) if fns else 'none'}"
    print(f"ok: {args.config} fits {short(table)}: {rep.checked} values checked{extra}")
    for n in rep.notes:
        print(f"{args.config}: note: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
