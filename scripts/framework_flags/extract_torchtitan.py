#!/usr/bin/env python3
"""Extract the configuration surface torchtitan accepts at one git revision.

Reads torchtitan's sources at REF straight out of a git directory (no checkout,
nothing imported or executed) and parses them with the Python ``ast`` module.

    extract_torchtitan.py --git-dir DIR --ref REF --out OUT.json

What is extracted:

* the root config class and its sections
    - TOML era (v0.1.0: ``torchtitan/config_manager.py``; v0.2.x:
      ``torchtitan/config/job_config.py``): ``JobConfig``; every dataclass field
      of it is a ``[section]``, nested dataclass fields are ``[section.sub]``.
    - Python era (main since 9810191, 2026-02-23): ``Trainer.Config`` in
      ``torchtitan/trainer.py``; a run is a Python function returning it.
  Each field: name, annotation as written, a normalized ``kind`` (int / float /
  str / bool / list / literal choices / union / nested config class), default.
* ``JobConfig`` extensions shipped in the repo (``custom_args_module`` /
  ``custom_config_module`` targets), merged by the checker when a config names
  one.
* models and their flavors: ``register_train_spec(TrainSpec(name=..,
  config=..))`` (v0.1.0), ``_supported_models`` / ``_supported_experiments`` +
  ``get_train_spec()`` -> ``TrainSpec(model_args=..)`` (v0.2.x),
  ``model_registry(flavor)`` -> ``<x>_configs[flavor]`` (main).
* model converters: ``register_model_converter(Cls, "name")`` (TOML era) or the
  ``ModelConfigConverter`` subclasses (main).
* pipeline schedule names (``get_schedule_class`` lives in torch, not
  torchtitan: a reference list is embedded, or read from ``--torch-schedules``).
* the launch command (entry module, config-file flags, ``run_train.sh`` line).
* Python era only: every dataclass (``classes``), public re-export aliases
  (``symbols``), config-returning functions (``functions``) and the
  ``--module``/``--config`` choices (``config_modules``), which
  ``check_torchtitan.py`` uses to check a Python config file.

Output is deterministic: same git objects in, same bytes out.
Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
from collections import OrderedDict

GENERATED_BY = "scripts/framework_flags/extract_torchtitan.py"
SCHEMA_VERSION = 1
REPO_NAME = "pytorch/torchtitan"

# torch.distributed.pipelining.schedules.get_schedule_class (case-insensitive
# lookup), read from pytorch/pytorch@00722e648b740f91d0e71494baa17891749fd291.
# torchtitan passes parallelism.pipeline_parallel_schedule straight to it, so
# the accepted names depend on the installed torch, not on torchtitan.
TORCH_SCHEDULES_REFERENCE = {
    "source": "pytorch/pytorch@00722e648b740f91d0e71494baa17891749fd291:"
    "torch/distributed/pipelining/schedules.py get_schedule_class",
    "names": [
        "1F1B",
        "Interleaved1F1B",
        "GPipe",
        "LoopedBFS",
        "InterleavedZeroBubble",
        "PipelineScheduleSingle",
        "PipelineScheduleMulti",
        "ZBVZeroBubble",
        "DualPipeV",
    ],
}


# --------------------------------------------------------------------------
# git access
# --------------------------------------------------------------------------


class GitTree:
    def __init__(self, git_dir: str, ref: str):
        self.git_dir = git_dir
        self.ref = ref
        self.sha = self._git("rev-parse", "--verify", "--end-of-options", ref + "^{commit}").strip()
        self.commit_date = self._git("show", "-s", "--format=%cI", self.sha).strip()
        self.subject = self._git("show", "-s", "--format=%s", self.sha).strip()
        out = self._git("ls-tree", "-r", "--name-only", "-z", self.sha)
        self.files = sorted(p for p in out.split("\0") if p)
        self.file_set = set(self.files)
        self._cache: dict[str, str | None] = {}
        self._batch = None

    def _git(self, *args: str) -> str:
        res = subprocess.run(
            ["git", "--git-dir", self.git_dir, *args],
            check=True,
            capture_output=True,
        )
        return res.stdout.decode("utf-8", "replace")

    def read(self, path: str) -> str | None:
        if path in self._cache:
            return self._cache[path]
        if path not in self.file_set:
            self._cache[path] = None
            return None
        if self._batch is None:
            self._batch = subprocess.Popen(
                ["git", "--git-dir", self.git_dir, "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        assert self._batch.stdin and self._batch.stdout
        self._batch.stdin.write(f"{self.sha}:{path}\n".encode())
        self._batch.stdin.flush()
        header = self._batch.stdout.readline().decode().split()
        if len(header) < 3 or header[1] != "blob":
            self._cache[path] = None
            return None
        size = int(header[2])
        data = self._batch.stdout.read(size)
        self._batch.stdout.read(1)  # trailing newline
        text = data.decode("utf-8", "replace")
        self._cache[path] = text
        return text

    def close(self) -> None:
        if self._batch is not None:
            assert self._batch.stdin
            self._batch.stdin.close()
            self._batch.wait()
            self._batch = None


# --------------------------------------------------------------------------
# module / class index
# --------------------------------------------------------------------------


class External:
    """A name that is not defined in the parsed sources (torch, typing, builtins)."""

    def __init__(self, dotted: str):
        self.dotted = dotted

    def __repr__(self):
        return f"External({self.dotted})"


class ModRef:
    def __init__(self, name: str):
        self.name = name


class FuncRef:
    def __init__(self, module: "Module", node: ast.FunctionDef, qualname: str):
        self.module = module
        self.node = node
        self.qualname = qualname

    @property
    def dotted(self) -> str:
        return f"{self.module.name}.{self.qualname}"


class ValueRef:
    def __init__(self, module: "Module", node: ast.AST, name: str, lineno: int):
        self.module = module
        self.node = node
        self.name = name
        self.lineno = lineno


class ClassInfo:
    def __init__(self, module: "Module", node: ast.ClassDef, qualname: str, parent: "ClassInfo | None"):
        self.module = module
        self.node = node
        self.qualname = qualname
        self.parent = parent
        self.nested: dict[str, ClassInfo] = {}
        self.attrs: dict[str, ast.AST] = {}
        self.is_dataclass = False
        self.kw_only = False
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            name = ast.unparse(target)
            if name in ("dataclass", "dataclasses.dataclass") or name.endswith(".dataclass"):
                self.is_dataclass = True
                if isinstance(dec, ast.Call):
                    for kw in dec.keywords:
                        if kw.arg == "kw_only" and isinstance(kw.value, ast.Constant):
                            self.kw_only = bool(kw.value.value)
        for stmt in node.body:
            if isinstance(stmt, ast.ClassDef):
                self.nested[stmt.name] = ClassInfo(module, stmt, f"{qualname}.{stmt.name}", self)
            elif isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        self.attrs[t.id] = stmt.value

    @property
    def dotted(self) -> str:
        return f"{self.module.name}.{self.qualname}"

    def walk(self):
        yield self
        for c in self.nested.values():
            yield from c.walk()


def _iter_toplevel(body):
    """Module-level statements, descending into if/try/with blocks."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from _iter_toplevel(stmt.body)
            yield from _iter_toplevel(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from _iter_toplevel(stmt.body)
            for h in stmt.handlers:
                yield from _iter_toplevel(h.body)
            yield from _iter_toplevel(stmt.orelse)
            yield from _iter_toplevel(stmt.finalbody)
        elif isinstance(stmt, ast.With):
            yield from _iter_toplevel(stmt.body)
        else:
            yield stmt


class Module:
    def __init__(self, name: str, path: str, source: str):
        self.name = name
        self.path = path
        self.is_pkg = path.endswith("__init__.py")
        self.tree = ast.parse(source, filename=path)
        self.names: dict[str, tuple] = {}
        self.imports: list[tuple[str, int]] = []  # (module name, lineno) imported at top level
        pkg = name if self.is_pkg else name.rpartition(".")[0]
        for stmt in _iter_toplevel(self.tree.body):
            if isinstance(stmt, ast.ClassDef):
                self.names[stmt.name] = ("class", ClassInfo(self, stmt, stmt.name, None))
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.names[stmt.name] = ("func", FuncRef(self, stmt, stmt.name))
            elif isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        self.names[t.id] = ("value", ValueRef(self, stmt.value, t.id, stmt.lineno))
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                self.names[stmt.target.id] = ("value", ValueRef(self, stmt.value, stmt.target.id, stmt.lineno))
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    self.imports.append((alias.name, stmt.lineno))
                    if alias.asname:
                        self.names[alias.asname] = ("module", alias.name)
                    else:
                        top = alias.name.split(".")[0]
                        self.names[top] = ("module", top)
            elif isinstance(stmt, ast.ImportFrom):
                if stmt.level:
                    base_parts = pkg.split(".")
                    if stmt.level > 1:
                        base_parts = base_parts[: len(base_parts) - (stmt.level - 1)]
                    base = ".".join(base_parts)
                    src = f"{base}.{stmt.module}" if stmt.module else base
                else:
                    src = stmt.module or ""
                self.imports.append((src, stmt.lineno))
                for alias in stmt.names:
                    if alias.name == "*":
                        continue
                    self.imports.append((f"{src}.{alias.name}", stmt.lineno))
                    self.names[alias.asname or alias.name] = ("from", src, alias.name)

    def classes(self):
        for kind, *rest in self.names.values():
            if kind == "class":
                yield from rest[0].walk()


class Index:
    def __init__(self, tree: GitTree, roots=("torchtitan", "torchtitan_recipes")):
        self.tree = tree
        self.mod_paths: dict[str, str] = {}
        for p in tree.files:
            if not p.endswith(".py"):
                continue
            top = p.split("/")[0]
            if top not in roots:
                continue
            mod = p[:-3].replace("/", ".")
            if mod.endswith(".__init__"):
                mod = mod[: -len(".__init__")]
            self.mod_paths[mod] = p
        self._modules: dict[str, Module | None] = {}
        self.parse_errors: list[str] = []

    def module(self, name: str) -> Module | None:
        if name in self._modules:
            return self._modules[name]
        path = self.mod_paths.get(name)
        mod = None
        if path is not None:
            src = self.tree.read(path)
            if src is not None:
                try:
                    mod = Module(name, path, src)
                except SyntaxError as e:
                    self.parse_errors.append(f"{path}: {e}")
        self._modules[name] = mod
        return mod

    def all_modules(self, prefix: str = "", exclude=()):
        for name in sorted(self.mod_paths):
            if prefix and not (name == prefix or name.startswith(prefix + ".")):
                continue
            if any(name == e or name.startswith(e + ".") for e in exclude):
                continue
            m = self.module(name)
            if m is not None:
                yield m

    # -- resolution -------------------------------------------------------

    def resolve_member(self, modname: str, attr: str, depth: int = 0):
        if depth > 30:
            return None
        m = self.module(modname)
        if m is not None and attr in m.names:
            return self.resolve_binding(m, attr, depth + 1)
        sub = f"{modname}.{attr}"
        if sub in self.mod_paths:
            return ModRef(sub)
        if m is None:
            return External(sub)
        return None

    def resolve_binding(self, m: Module, name: str, depth: int = 0):
        b = m.names.get(name)
        if b is None:
            return None
        kind = b[0]
        if kind in ("class", "func", "value"):
            return b[1]
        if kind == "module":
            target = b[1]
            if target in self.mod_paths:
                return ModRef(target)
            return External(target)
        if kind == "from":
            return self.resolve_member(b[1], b[2], depth)
        return None

    def resolve_expr(self, m: Module, node: ast.AST, scope: ClassInfo | None = None, local: dict | None = None):
        if isinstance(node, ast.Name):
            if local is not None and node.id in local:
                return local[node.id]
            if scope is not None and node.id in scope.nested:
                return scope.nested[node.id]
            r = self.resolve_binding(m, node.id)
            if r is None:
                return External(node.id)  # builtins / unresolved
            return r
        if isinstance(node, ast.Attribute):
            base = self.resolve_expr(m, node.value, scope, local)
            if isinstance(base, ModRef):
                r = self.resolve_member(base.name, node.attr)
                return r if r is not None else External(f"{base.name}.{node.attr}")
            if isinstance(base, ClassInfo):
                if node.attr in base.nested:
                    return base.nested[node.attr]
                # inherited nested class (e.g. Sub.Config where only Base defines Config)
                for b in self.class_bases(base):
                    if node.attr in b.nested:
                        return b.nested[node.attr]
                return None
            if isinstance(base, External):
                return External(f"{base.dotted}.{node.attr}")
            return None
        return None

    def class_bases(self, ci: ClassInfo, seen=None) -> list[ClassInfo]:
        """Resolved base classes, nearest first (depth-first; enough for these sources)."""
        seen = seen or set()
        out = []
        for b in ci.node.bases:
            r = self.resolve_expr(ci.module, b, ci.parent)
            if isinstance(r, ClassInfo) and r.dotted not in seen:
                seen.add(r.dotted)
                out.append(r)
                out.extend(self.class_bases(r, seen))
        return out

    def base_names(self, ci: ClassInfo) -> list[str]:
        out = []
        for b in ci.node.bases:
            r = self.resolve_expr(ci.module, b, ci.parent)
            if isinstance(r, ClassInfo):
                out.append(r.dotted)
            elif isinstance(r, External):
                out.append(r.dotted)
            else:
                out.append(ast.unparse(b))
        return out

    # -- dataclass fields ---------------------------------------------------

    def dc_fields(self, ci: ClassInfo, _seen=None) -> "OrderedDict[str, tuple[ClassInfo, ast.AnnAssign]]":
        _seen = _seen or set()
        if ci.dotted in _seen:
            return OrderedDict()
        _seen = _seen | {ci.dotted}
        result: OrderedDict = OrderedDict()
        bases = []
        for b in ci.node.bases:
            r = self.resolve_expr(ci.module, b, ci.parent)
            if isinstance(r, ClassInfo):
                bases.append(r)
        for b in reversed(bases):
            for k, v in self.dc_fields(b, _seen).items():
                result[k] = v
        if ci.is_dataclass:
            for stmt in ci.node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    if _is_classvar(stmt.annotation):
                        continue
                    result[stmt.target.id] = (ci, stmt)
        return result

    def is_config_class(self, ci: ClassInfo) -> bool:
        return ci.is_dataclass or any(b.is_dataclass for b in self.class_bases(ci))


def _is_classvar(ann: ast.AST) -> bool:
    node = ann
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return False
    if isinstance(node, ast.Subscript):
        node = node.value
    name = ast.unparse(node)
    return name in ("ClassVar", "typing.ClassVar")


# --------------------------------------------------------------------------
# types and defaults
# --------------------------------------------------------------------------

_SCALARS = {"int": "int", "float": "float", "str": "str", "bool": "bool", "bytes": "bytes"}


def _tail(r) -> str:
    if isinstance(r, External):
        return r.dotted.rsplit(".", 1)[-1]
    if isinstance(r, ClassInfo):
        return r.qualname.rsplit(".", 1)[-1]
    return ""


class TypeReader:
    def __init__(self, index: Index):
        self.index = index

    def kind(self, m: Module, node: ast.AST, scope: ClassInfo | None = None, depth: int = 0) -> dict:
        if depth > 12 or node is None:
            return {"t": "any"}
        if isinstance(node, ast.Constant):
            if node.value is None:
                return {"t": "none"}
            if isinstance(node.value, str):
                try:
                    inner = ast.parse(node.value, mode="eval").body
                except SyntaxError:
                    return {"t": "other", "name": node.value}
                return self.kind(m, inner, scope, depth + 1)
            if node.value is Ellipsis:
                return {"t": "any"}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return _union([self.kind(m, node.left, scope, depth + 1), self.kind(m, node.right, scope, depth + 1)])
        if isinstance(node, ast.Subscript):
            base = self.index.resolve_expr(m, node.value, scope)
            name = _tail(base)
            args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
            if name == "Literal":
                vals = []
                for a in args:
                    try:
                        vals.append(ast.literal_eval(a))
                    except ValueError:
                        vals.append(ast.unparse(a))
                return {"t": "literal", "choices": vals}
            if name == "Optional":
                return _union([self.kind(m, args[0], scope, depth + 1), {"t": "none"}])
            if name == "Union":
                return _union([self.kind(m, a, scope, depth + 1) for a in args])
            if name == "Annotated":
                inner = dict(self.kind(m, args[0], scope, depth + 1))
                for meta in args[1:]:
                    text = ast.unparse(meta)
                    if "Suppress" in text:
                        inner["cli_suppressed"] = True
                    if isinstance(meta, ast.Call) and ast.unparse(meta.func).endswith("subcommand"):
                        if meta.args and isinstance(meta.args[0], ast.Constant):
                            inner["subcommand"] = meta.args[0].value
                return inner
            if name in ("list", "List", "Sequence", "set", "Set", "frozenset", "FrozenSet", "Iterable"):
                return {"t": "list", "of": self.kind(m, args[0], scope, depth + 1)}
            if name in ("tuple", "Tuple"):
                return {"t": "tuple", "of": [self.kind(m, a, scope, depth + 1) for a in args]}
            if name in ("dict", "Dict", "Mapping", "MutableMapping"):
                if len(args) == 2:
                    return {
                        "t": "dict",
                        "key": self.kind(m, args[0], scope, depth + 1),
                        "value": self.kind(m, args[1], scope, depth + 1),
                    }
                return {"t": "dict"}
            return {"t": "other", "name": ast.unparse(node)}
        if isinstance(node, (ast.Name, ast.Attribute)):
            r = self.index.resolve_expr(m, node, scope)
            if isinstance(r, External):
                tail = r.dotted
                if tail in _SCALARS:
                    return {"t": _SCALARS[tail]}
                if tail in ("Any", "typing.Any", "object"):
                    return {"t": "any"}
                if tail in ("list", "tuple", "set"):
                    return {"t": "list", "of": {"t": "any"}}
                if tail == "dict":
                    return {"t": "dict"}
                if tail == "None":
                    return {"t": "none"}
                return {"t": "other", "name": r.dotted}
            if isinstance(r, ClassInfo):
                if self.index.is_config_class(r):
                    return {"t": "class", "class": r.dotted}
                return {"t": "other", "name": r.dotted}
            if isinstance(r, ValueRef):  # type alias
                return self.kind(r.module, r.node, None, depth + 1)
            return {"t": "other", "name": ast.unparse(node)}
        return {"t": "other", "name": ast.unparse(node)}


def _union(parts: list[dict]) -> dict:
    flat = []
    for p in parts:
        if p.get("t") == "union" and "subcommand" not in p:
            flat.extend(p["of"])
        else:
            flat.append(p)
    if len(flat) == 1:
        return flat[0]
    return {"t": "union", "of": flat}


def rec_kind(rec: dict) -> dict:
    return rec.get("kind") or {"t": rec["type"]}


def kind_classes(k: dict) -> list[str]:
    """Config classes a kind can hold directly (the field is a nested section)."""
    if k.get("t") == "class":
        return [k["class"]]
    if k.get("t") == "union":
        out = []
        for p in k["of"]:
            out.extend(kind_classes(p))
        return out
    return []


def kind_choices(k: dict) -> list | None:
    if k.get("t") == "literal":
        return list(k["choices"])
    if k.get("t") == "union":
        out = []
        for p in k["of"]:
            c = kind_choices(p)
            if c:
                out.extend(c)
        return out or None
    return None


_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Pow: lambda a, b: a**b,
}


def const_value(node: ast.AST):
    """Evaluate a literal (with +-*/ arithmetic). Raises ValueError otherwise."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (int, float, str, bool)) or node.value is None:
            return node.value
        raise ValueError
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [const_value(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise ValueError
            out[str(const_value(k))] = const_value(v)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = const_value(node.operand)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = const_value(node.left), const_value(node.right)
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b)):
            return _BINOPS[type(node.op)](a, b)
        if isinstance(node.op, ast.Add) and all(isinstance(x, str) for x in (a, b)):
            return a + b
        raise ValueError
    raise ValueError


def default_of(index: Index, m: Module, value: ast.AST | None, scope: ClassInfo | None):
    """(has_default, default-json)."""
    if value is None:
        return False, None
    if isinstance(value, ast.Call) and ast.unparse(value.func) in ("field", "dataclasses.field"):
        for kw in value.keywords:
            if kw.arg == "default":
                return True, _value_json(index, m, kw.value, scope)
            if kw.arg == "default_factory":
                f = kw.value
                if isinstance(f, ast.Name) and f.id in ("list", "dict", "set", "tuple"):
                    return True, {} if f.id == "dict" else []
                if isinstance(f, ast.Lambda):
                    return True, _value_json(index, m, f.body, scope)
                r = index.resolve_expr(m, f, scope)
                if isinstance(r, ClassInfo):
                    return True, {"factory": r.dotted}
                return True, {"factory": ast.unparse(f)}
        return False, None
    return True, _value_json(index, m, value, scope)


def _value_json(index: Index, m: Module, node: ast.AST, scope):
    try:
        v = const_value(node)
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            return {"expr": ast.unparse(node)}
        return v
    except (ValueError, TypeError, ZeroDivisionError, OverflowError):
        pass
    if isinstance(node, ast.Call):
        r = index.resolve_expr(m, node.func, scope)
        if isinstance(r, ClassInfo) and not node.args and not node.keywords:
            return {"factory": r.dotted}
    if isinstance(node, (ast.Name, ast.Attribute)):
        r = index.resolve_expr(m, node, scope)
        if isinstance(r, ValueRef):  # module-level constant
            try:
                return const_value(r.node)
            except (ValueError, TypeError, ZeroDivisionError, OverflowError):
                pass
    return {"expr": ast.unparse(node)}


def _docstring_after(ci: ClassInfo, stmt: ast.AST) -> str | None:
    body = ci.node.body
    for i, s in enumerate(body):
        if s is stmt and i + 1 < len(body):
            nxt = body[i + 1]
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                text = " ".join(nxt.value.value.split())
                return text[:300]
    return None


def field_record(index: Index, types: TypeReader, owner: ClassInfo, stmt: ast.AnnAssign, with_doc: bool = False) -> dict:
    k = types.kind(owner.module, stmt.annotation, owner)
    text = ast.unparse(stmt.annotation)
    rec = {"type": text}
    if k != {"t": text}:  # plain int/float/str/bool: the annotation says it all
        rec["kind"] = k
    ch = kind_choices(k)
    if ch is not None:
        rec["choices"] = ch
    has, dflt = default_of(index, owner.module, stmt.value, owner)
    if has:
        rec["default"] = dflt
    else:
        rec["required"] = True
    if k.get("cli_suppressed"):
        rec["cli"] = False
    if isinstance(stmt.value, ast.Call) and ast.unparse(stmt.value.func) in ("field", "dataclasses.field"):
        init = kwarg(stmt.value, "init")
        if isinstance(init, ast.Constant) and init.value is False:
            rec["init"] = False
            rec.pop("required", None)
    rec["defined_in"] = f"{owner.module.path}:{stmt.lineno}"
    if with_doc:
        doc = _docstring_after(owner, stmt)
        if doc:
            rec["doc"] = doc
    return rec


# --------------------------------------------------------------------------
# sections
# --------------------------------------------------------------------------


def class_by_dotted(index: Index, dotted: str) -> ClassInfo | None:
    # longest module prefix
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        mod = ".".join(parts[:i])
        if mod in index.mod_paths:
            m = index.module(mod)
            if m is None:
                return None
            b = m.names.get(parts[i])
            if not b or b[0] != "class":
                return None
            ci = b[1]
            for p in parts[i + 1 :]:
                ci = ci.nested.get(p)
                if ci is None:
                    return None
            return ci
    return None


def subclass_map(index: Index) -> dict[str, list[str]]:
    """dotted class -> dotted config subclasses (transitive), over non-experiment modules."""
    out: dict[str, set] = {}
    for m in index.all_modules("torchtitan", exclude=("torchtitan.experiments",)):
        for ci in m.classes():
            if not index.is_config_class(ci):
                continue
            for b in index.class_bases(ci):
                out.setdefault(b.dotted, set()).add(ci.dotted)
    return {k: sorted(v) for k, v in out.items()}


def build_sections(index: Index, types: TypeReader, root: ClassInfo, with_doc: bool = True, subclasses=None):
    """Flatten the config tree into dotted sections, as TOML tables / CLI prefixes see it."""
    sections: OrderedDict = OrderedDict()
    root_fields: OrderedDict = OrderedDict()
    subclasses = subclasses or {}

    def walk(classes: list[ClassInfo], prefix: str, stack: tuple, variants: dict | None, default_class: str | None):
        entry: OrderedDict = OrderedDict()
        sections[prefix[:-1]] = entry  # parent before its sub-sections
        entry["class"] = classes[0].dotted
        entry["defined_in"] = f"{classes[0].module.path}:{classes[0].node.lineno}"
        if variants:
            entry["variants"] = variants
        if default_class:
            entry["default_class"] = default_class
        subs = sorted({d for c in classes for d in subclasses.get(c.dotted, [])} - {c.dotted for c in classes})
        if subs:
            entry["subclasses"] = subs
        fields: OrderedDict = OrderedDict()
        per_class = []
        for ci in classes:
            per_class.append((ci, index.dc_fields(ci)))
        names = []
        for _, fs in per_class:
            for n in fs:
                if n not in names:
                    names.append(n)
        for n in names:
            holders = [ci for ci, fs in per_class if n in fs]
            owner, stmt = dict(per_class[[c for c, _ in per_class].index(holders[0])][1])[n]
            rec = field_record(index, types, owner, stmt, with_doc)
            if len(classes) > 1 and len(holders) < len(classes):
                rec["only_in"] = [h.dotted for h in holders]
            sub = _descend(rec, stack)
            if sub is not None:
                rec["section"] = prefix + n
            fields[n] = rec
            if sub is not None:
                sub_classes, sub_variants = sub
                walk(sub_classes, prefix + n + ".", stack + tuple(c.dotted for c in sub_classes), sub_variants,
                     _default_class(rec))
        entry["fields"] = fields

    def _descend(rec, stack):
        if rec.get("cli") is False:
            return None
        k = rec_kind(rec)
        dotted = kind_classes(k)
        if not dotted:
            return None
        cis = [class_by_dotted(index, d) for d in dotted]
        cis = [c for c in cis if c is not None]
        if not cis or any(c.dotted in stack for c in cis) or len(stack) > 8:
            return None
        variants = None
        if len(cis) > 1 or k.get("t") == "union":
            variants = OrderedDict()
            parts = k["of"] if k.get("t") == "union" else [k]
            for p in parts:
                label = p.get("subcommand") or (p.get("class") or p.get("t"))
                variants[label] = p.get("class") if p.get("t") == "class" else None
        return cis, variants

    def _default_class(rec):
        d = rec.get("default")
        if isinstance(d, dict) and "factory" in d:
            return d["factory"]
        return None

    for n, (owner, stmt) in index.dc_fields(root).items():
        rec = field_record(index, types, owner, stmt, with_doc)
        sub = _descend(rec, (root.dotted,))
        if sub is None:
            root_fields[n] = rec
            continue
        rec["section"] = n
        cis, variants = sub
        walk(cis, n + ".", (root.dotted,) + tuple(c.dotted for c in cis), variants, _default_class(rec))
    # order: as declared (walk appends children after parents' fields; re-sort by declaration)
    return root_fields, sections


# --------------------------------------------------------------------------
# helpers over sources
# --------------------------------------------------------------------------


def string_set(node: ast.AST) -> list[str] | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set", "list", "tuple"):
        if not node.args:
            return []
        node = node.args[0]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        out = []
        for e in node.elts:
            if isinstance(e, ast.Constant) and isinstance(e.value, str):
                out.append(e.value)
        return out
    return None


def iter_calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def call_name(node: ast.Call) -> str:
    f = node.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return ""


def kwarg(node: ast.Call, name: str):
    for kw in node.keywords:
        if kw.arg == name:
            return kw.value
    return None


def dict_keys(index: Index, m: Module, node: ast.AST, local: dict | None = None, depth: int = 0):
    """Keys of a flavor dict expression -> (keys, 'path:line') or (None, reason)."""
    if depth > 10 or node is None:
        return None, "unresolved"
    if isinstance(node, ast.Dict):
        keys = []
        for k, v in zip(node.keys, node.values):
            if k is None:
                sub, _ = dict_keys(index, m, v, local, depth + 1)
                if sub is None:
                    return None, f"unresolved ** in {m.path}:{node.lineno}"
                keys.extend(x for x in sub if x not in keys)
            elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                if k.value not in keys:
                    keys.append(k.value)
            else:
                return None, f"non-constant key in {m.path}:{node.lineno}"
        return keys, f"{m.path}:{node.lineno}"
    if isinstance(node, ast.Call):
        fname = ast.unparse(node.func)
        if fname in ("copy.deepcopy", "deepcopy", "dict", "copy.copy", "MappingProxyType", "types.MappingProxyType") and node.args:
            keys, where = dict_keys(index, m, node.args[0], local, depth + 1)
            if keys is not None and fname == "dict":
                keys = keys + [kw.arg for kw in node.keywords if kw.arg and kw.arg not in keys]
            return keys, where
        if fname == "dict" and node.keywords:
            return [kw.arg for kw in node.keywords if kw.arg], f"{m.path}:{node.lineno}"
        return None, f"computed by {fname}() at {m.path}:{node.lineno}"
    if isinstance(node, (ast.Name, ast.Attribute)):
        if isinstance(node, ast.Name) and local and node.id in local:
            return dict_keys(index, m, local[node.id], None, depth + 1)
        r = index.resolve_expr(m, node)
        if isinstance(r, ValueRef):
            return dict_keys(index, r.module, r.node, None, depth + 1)
        return None, f"unresolved name {ast.unparse(node)} in {m.path}"
    return None, f"unsupported expression in {m.path}:{getattr(node, 'lineno', 0)}"


def function_locals(fn: ast.FunctionDef) -> dict:
    local = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    local[t.id] = node.value
    return local


def import_closure(index: Index, starts: list[str]) -> set[str]:
    """torchtitan modules imported (at module level, transitively) by `starts`."""
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        name = todo.pop()
        # importing a.b.c imports a and a.b first
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            cand = ".".join(parts[:i])
            if cand in index.mod_paths and cand not in seen:
                seen.add(cand)
                m = index.module(cand)
                if m is not None:
                    for imp, _ in m.imports:
                        if imp.split(".")[0] in ("torchtitan", "torchtitan_recipes"):
                            todo.append(imp)
    return seen


def strings_in(node: ast.AST) -> list[str]:
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.append(n.value)
    return out


def find_function(m: Module, name: str) -> ast.FunctionDef | None:
    for node in ast.walk(m.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def module_has_main_guard(m: Module) -> bool:
    for stmt in m.tree.body:
        if isinstance(stmt, ast.If) and "__main__" in ast.unparse(stmt.test):
            return True
    return False


# --------------------------------------------------------------------------
# extraction
# --------------------------------------------------------------------------


ROOT_CANDIDATES = [
    # (module, qualname, format)
    ("torchtitan.config.job_config", "JobConfig", "toml"),
    ("torchtitan.config_manager", "JobConfig", "toml"),
    ("torchtitan.trainer", "Trainer.Config", "python"),
]


def find_root(index: Index, override: str | None):
    cands = ROOT_CANDIDATES
    if override:
        mod, _, qn = override.partition(":")
        fmt = "python" if "Trainer" in qn else "toml"
        cands = [(mod, qn, fmt)]
    for mod, qn, fmt in cands:
        ci = class_by_dotted(index, f"{mod}.{qn}")
        if ci is not None and ci.is_dataclass:
            return ci, fmt
    raise SystemExit("no root config class found; pass --root module:Qualname")


def extract_launch(index: Index, tree: GitTree, fmt: str) -> dict:
    launch: OrderedDict = OrderedDict()
    train = index.module("torchtitan.train")
    if train is not None and module_has_main_guard(train):
        launch["entry"] = "python -m torchtitan.train  (torchrun ... -m torchtitan.train)"
        launch["entry_defined_in"] = train.path
    flags = []
    for modname in ("torchtitan.config.manager", "torchtitan.config_manager"):
        m = index.module(modname)
        if m is None:
            continue
        for fnname in ("_maybe_load_toml", "_load_config", "_maybe_add_custom_config", "_maybe_add_custom_args"):
            fn = find_function(m, fnname)
            if fn is None:
                continue
            for s in strings_in(fn):
                if re.fullmatch(r"--[a-z_.\-]+", s) and s not in flags:
                    flags.append(s)
            launch.setdefault("parsed_by", []).append(f"{m.path}:{fn.lineno} {fnname}()")
    launch["config_flags"] = flags
    script = tree.read("run_train.sh")
    if script:
        lines = []
        for i, line in enumerate(script.splitlines(), 1):
            if "torchtitan.train" in line or re.search(r"-m \$\{?[A-Z_]+", line):
                lines.append(f"run_train.sh:{i}: {line.strip()}")
        launch["run_train_sh"] = lines
    if fmt == "toml":
        launch["config_file_format"] = "toml"
        launch["command"] = "torchrun --nproc_per_node N -m torchtitan.train --job.config_file CONFIG.toml [--section.field value ...]"
    else:
        launch["config_file_format"] = "python"
        launch["command"] = (
            "torchrun --nproc_per_node N -m torchtitan.train --module PKG.MODULE --config FUNCTION "
            "[--section.field value ...]   (FUNCTION() -> Trainer.Config; --module tries "
            "PKG.MODULE.config_registry first, then PKG.MODULE; shorthands from _supported_models/_supported_experiments)"
        )
    return launch


def toml_unknown_key_behavior(index: Index) -> str | None:
    for modname in ("torchtitan.config.manager", "torchtitan.config_manager"):
        m = index.module(modname)
        if m is None:
            continue
        fn = find_function(m, "_dict_to_dataclass")
        if fn is None:
            continue
        raises = any(isinstance(n, ast.Raise) for n in ast.walk(fn))
        return ("error" if raises else "ignored") + f" ({m.path}:{fn.lineno} _dict_to_dataclass)"
    return None


def extension_key(index: Index) -> str | None:
    for modname in ("torchtitan.config.manager", "torchtitan.config_manager"):
        m = index.module(modname)
        if m is None:
            continue
        for fnname in ("_maybe_add_custom_config", "_maybe_add_custom_args"):
            fn = find_function(m, fnname)
            if fn is None:
                continue
            for s in strings_in(fn):
                if re.fullmatch(r"--[a-z_]+\.[a-z_]+", s):
                    return s[2:]
    return None


def extract_extensions(index: Index, types: TypeReader, root: ClassInfo) -> dict:
    out: OrderedDict = OrderedDict()
    built: dict[str, dict] = {}
    for m in index.all_modules("torchtitan"):
        if "JobConfig" not in m.names:
            continue
        ci = index.resolve_binding(m, "JobConfig")  # also packages re-exporting one
        if not isinstance(ci, ClassInfo) or ci.dotted == root.dotted or not ci.is_dataclass:
            continue
        if ci.dotted not in built:
            built[ci.dotted] = build_sections(index, types, ci, with_doc=False)[1]
        rec = {"defined_in": f"{ci.module.path}:{ci.node.lineno}"}
        if ci.module is not m:
            rec["re_exported_from"] = ci.module.name
        rec["sections"] = built[ci.dotted]
        out[m.name] = rec
    return out


def extract_models_toml(index: Index, auto: set[str]) -> tuple[dict, dict]:
    models: dict = {}
    details: dict = {}

    def add(name, keys, where, info):
        models[name] = keys
        details[name] = info | {"flavors_from": where}

    # explicit register_train_spec(...) calls (v0.1.0 style; also user-defined in v0.2.x)
    for m in index.all_modules("torchtitan"):
        if m.name.startswith("torchtitan.tests"):
            continue
        for call in iter_calls(m.tree):
            if call_name(call) != "register_train_spec" or not call.args and not call.keywords:
                continue
            if m.name == "torchtitan.protocols.train_spec":
                continue
            name = None
            spec = None
            if len(call.args) == 2:  # register_train_spec(name, spec)
                if isinstance(call.args[0], ast.Constant):
                    name = call.args[0].value
                spec = call.args[1]
            elif call.args:
                spec = call.args[0]
            if isinstance(spec, ast.Call):
                nm = kwarg(spec, "name")
                if name is None and isinstance(nm, ast.Constant):
                    name = nm.value
                cfg = kwarg(spec, "config") or kwarg(spec, "model_args")
            else:
                cfg = None
            if not isinstance(name, str):
                continue
            keys, where = dict_keys(index, m, cfg) if cfg is not None else (None, "no config kwarg")
            reg = "auto" if m.name in auto else "experimental.custom_import"
            add(name, keys, where, {
                "module": m.name,
                "registered_at": f"{m.path}:{call.lineno}",
                "registration": reg,
            })

    # _supported_models / _supported_experiments (v0.2.x)
    for pkg, kind in (("torchtitan.models", "supported_models"), ("torchtitan.experiments", "supported_experiments")):
        pm = index.module(pkg)
        if pm is None:
            continue
        var = "_supported_models" if kind == "supported_models" else "_supported_experiments"
        b = pm.names.get(var)
        if not b or b[0] != "value":
            continue
        names = string_set(b[1].node) or []
        for name in names:
            modname = f"{pkg}.{name}"
            mm = index.module(modname)
            info = {"module": modname, "registration": f"{var} ({pm.path}:{b[1].lineno})"}
            if mm is None:
                add(name, None, "module not found", info)
                continue
            fn = mm.names.get("get_train_spec")
            if not fn or fn[0] != "func":
                add(name, None, f"no get_train_spec in {mm.path}", info)
                continue
            fnode = fn[1].node
            local = function_locals(fnode)
            cfg = None
            for call in iter_calls(fnode):
                if call_name(call).endswith("TrainSpec"):
                    cfg = kwarg(call, "model_args")
                    if cfg is not None:
                        break
            keys, where = dict_keys(index, mm, cfg, local) if cfg is not None else (None, "no model_args kwarg")
            info["get_train_spec"] = f"{mm.path}:{fnode.lineno}"
            add(name, keys, where, info)
    return models, details


def extract_models_python(index: Index) -> tuple[dict, dict, dict]:
    models: dict = {}
    details: dict = {}
    functions: dict = {}
    shorthands = []
    for pkg, var in (("torchtitan.models", "_supported_models"), ("torchtitan.experiments", "_supported_experiments")):
        pm = index.module(pkg)
        if pm is None:
            continue
        b = pm.names.get(var)
        if not b or b[0] != "value":
            continue
        for name in string_set(b[1].node) or []:
            shorthands.append((name, pkg, f"{var} ({pm.path}:{b[1].lineno})"))
    for name, pkg, reg in shorthands:
        modname = f"{pkg}.{name}"
        mm = index.module(modname)
        if mm is None:
            continue  # e.g. RL examples: config_registry only, no model_registry
        fb = mm.names.get("model_registry")
        if not fb or fb[0] != "func":
            continue
        res = _model_registry_flavors(index, fb[1], 0)
        keys, where, spec_name, fn = res
        info = {
            "module": modname,
            "registration": reg,
            "model_registry": f"{mm.path}:{fb[1].node.lineno}",
            "flavors_from": where,
        }
        if spec_name:
            info["spec_name"] = spec_name
        models[name] = keys
        details[name] = info
    return models, details, functions


def _model_registry_flavors(index: Index, fref: FuncRef, depth: int):
    fn = fref.node
    m = fref.module
    params = [a.arg for a in fn.args.args]
    flavor = params[0] if params else "flavor"
    spec_name = None
    for call in iter_calls(fn):
        if call_name(call).endswith("ModelSpec"):
            nm = kwarg(call, "name")
            if isinstance(nm, ast.Constant):
                spec_name = nm.value
    local = function_locals(fn)
    for node in ast.walk(fn):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) and node.slice.id == flavor:
            keys, where = dict_keys(index, m, node.value, local)
            if keys is not None:
                return keys, where, spec_name, fref
    if depth < 4:
        for call in iter_calls(fn):
            if call.args and isinstance(call.args[0], ast.Name) and call.args[0].id == flavor:
                r = index.resolve_expr(m, call.func)
                if isinstance(r, FuncRef) and r.dotted != fref.dotted:
                    keys, where, sn, _ = _model_registry_flavors(index, r, depth + 1)
                    if keys is not None:
                        return keys, where, spec_name or sn, r
    return None, f"no '<dict>[{flavor}]' found in {m.path}:{fn.lineno}", spec_name, fref


def extract_converters_toml(index: Index, auto: set[str]) -> tuple[list, dict]:
    details = {}
    for m in index.all_modules("torchtitan"):
        for call in iter_calls(m.tree):
            if call_name(call) != "register_model_converter" or len(call.args) < 2:
                continue
            if not isinstance(call.args[1], ast.Constant):
                continue
            name = call.args[1].value
            r = index.resolve_expr(m, call.args[0])
            details[name] = {
                "class": r.dotted if isinstance(r, ClassInfo) else ast.unparse(call.args[0]),
                "registered_at": f"{m.path}:{call.lineno}",
                "registration": "auto" if m.name in auto else "experimental.custom_import",
                "module": m.name,
            }
    return sorted(details), dict(sorted(details.items()))


def extract_schedules(index: Index, torch_schedules: str | None) -> dict:
    out: OrderedDict = OrderedDict()
    if torch_schedules:
        with open(torch_schedules, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        names = None
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "get_schedule_class":
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Dict) and sub.keys and all(isinstance(k, ast.Constant) for k in sub.keys):
                        names = [k.value for k in sub.keys]
                        break
        if names is None:
            raise SystemExit(f"get_schedule_class mapping not found in {torch_schedules}")
        out["names"] = names
        out["source"] = os.path.abspath(torch_schedules)
    else:
        out["names"] = list(TORCH_SCHEDULES_REFERENCE["names"])
        out["source"] = TORCH_SCHEDULES_REFERENCE["source"]
    out["case_insensitive"] = True
    out["note"] = (
        "torchtitan passes parallelism.pipeline_parallel_schedule to torch's get_schedule_class; "
        "the accepted set is the installed torch's. pipeline_parallel_schedule_csv selects a "
        "_PipelineScheduleRuntime CSV schedule instead."
    )
    imported = set()
    for m in index.all_modules("torchtitan"):
        for stmt in ast.walk(m.tree):
            if isinstance(stmt, ast.ImportFrom) and stmt.module == "torch.distributed.pipelining.schedules":
                for a in stmt.names:
                    imported.add(a.name)
    out["torchtitan_imports_from_torch"] = sorted(imported)
    return out


def extract_python_tables(index: Index, types: TypeReader, root: ClassInfo) -> dict:
    """Classes / symbols / functions for checking a Python config at main."""
    # experiments are left out of classes/functions/symbols (a config using them is reported
    # as unchecked, not wrong); converters are collected from everything.
    everything = [m for m in index.all_modules("torchtitan")] + [m for m in index.all_modules("torchtitan_recipes")]
    scope_mods = [m for m in everything if not m.name.startswith("torchtitan.experiments")]
    classes: dict = {}
    owners: set[str] = set()
    all_ci: dict[str, ClassInfo] = {}
    for m in everything:
        for ci in m.classes():
            all_ci[ci.dotted] = ci
            if m in scope_mods and index.is_config_class(ci):
                rec: OrderedDict = OrderedDict()
                rec["defined_in"] = f"{m.path}:{ci.node.lineno}"
                rec["bases"] = index.base_names(ci)
                rec["kw_only"] = ci.kw_only
                fields = OrderedDict()
                for n, (owner, stmt) in index.dc_fields(ci).items():
                    fr = field_record(index, types, owner, stmt, with_doc=False)
                    fr.pop("defined_in", None)
                    if owner is not ci:
                        fr["inherited_from"] = owner.dotted
                    fields[n] = fr
                rec["fields"] = fields
                classes[ci.dotted] = rec
                if ci.parent is not None:
                    owners.add(ci.parent.dotted)
    # subclasses
    for dotted, ci in all_ci.items():
        if dotted not in classes:
            continue
        for b in index.class_bases(ci):
            if b.dotted in classes:
                classes[b.dotted].setdefault("subclasses", []).append(dotted)
    for rec in classes.values():
        if "subclasses" in rec:
            rec["subclasses"] = sorted(set(rec["subclasses"]))

    # converters: subclasses of ModelConfigConverter
    converters = []
    conv_details = {}
    for dotted, ci in sorted(all_ci.items()):
        bases = [b.dotted for b in index.class_bases(ci)]
        if "torchtitan.protocols.model.ModelConfigConverter" in bases:
            converters.append(dotted)
            conv_details[dotted] = {
                "defined_in": f"{ci.module.path}:{ci.node.lineno}",
                "config_class": f"{dotted}.Config" if f"{dotted}.Config" in classes or any(
                    f"{b}.Config" in classes for b in bases) else None,
                "experimental": ci.module.name.startswith("torchtitan.experiments"),
            }

    if not converters:  # early Python-config revisions: Configurable *Converter classes
        for dotted, ci in sorted(all_ci.items()):
            if ci.parent is None and ci.qualname.endswith("Converter") and f"{dotted}.Config" in all_ci:
                converters.append(dotted)
                conv_details[dotted] = {
                    "defined_in": f"{ci.module.path}:{ci.node.lineno}",
                    "config_class": f"{dotted}.Config",
                    "experimental": ci.module.name.startswith("torchtitan.experiments"),
                }

    # functions: top-level functions whose return annotation is a known config class
    functions: dict = {}
    for m in scope_mods:
        for name, b in m.names.items():
            if b[0] != "func" or name.startswith("_") or b[1].module is not m:
                continue
            fn = b[1].node
            if fn.returns is None:
                continue
            k = types.kind(m, fn.returns)
            cls = kind_classes(k)
            if not cls and not (name == "model_registry"):
                continue
            args = fn.args
            params = [a.arg for a in args.posonlyargs + args.args] + [a.arg for a in args.kwonlyargs]
            rec = OrderedDict()
            rec["defined_in"] = f"{m.path}:{fn.lineno}"
            rec["params"] = params
            if args.vararg:
                rec["varargs"] = True
            if args.kwarg:
                rec["varkw"] = True
            rec["returns"] = cls[0] if len(cls) == 1 else (cls or ast.unparse(fn.returns))
            pk = OrderedDict()
            for a in args.posonlyargs + args.args + args.kwonlyargs:
                if a.annotation is not None:
                    pk[a.arg] = types.kind(m, a.annotation)
            if pk:
                rec["param_kinds"] = pk
            if name == "model_registry" and m.name.startswith("torchtitan.models."):
                rec["model"] = m.name[len("torchtitan.models."):]
                rec["flavor_param"] = params[0] if params else None
            functions[f"{m.name}.{name}"] = rec

    # symbols: public re-exports -> canonical dotted names
    targets = set(classes) | owners | set(functions) | set(converters)
    symbols: dict = {}
    for m in scope_mods:
        for name, b in m.names.items():
            if b[0] not in ("from", "value"):
                continue
            r = index.resolve_binding(m, name)
            dotted = None
            if isinstance(r, ClassInfo):
                dotted = r.dotted
            elif isinstance(r, FuncRef):
                dotted = r.dotted
            if dotted and dotted in targets and dotted != f"{m.name}.{name}":
                symbols[f"{m.name}.{name}"] = dotted

    return {
        "owners": sorted(o for o in owners if o not in classes),
        "classes": dict(sorted(classes.items())),
        "functions": dict(sorted(functions.items())),
        "symbols": dict(sorted(symbols.items())),
        "converters": converters,
        "converter_details": conv_details,
    }


def extract_config_modules(index: Index) -> dict:
    """--module shorthand -> config functions (main)."""
    out: dict = {}
    shorthands = []
    for pkg, var in (("torchtitan.models", "_supported_models"), ("torchtitan.experiments", "_supported_experiments")):
        pm = index.module(pkg)
        if pm is None:
            continue
        b = pm.names.get(var)
        if b and b[0] == "value":
            shorthands += [(n, pkg) for n in string_set(b[1].node) or []]
    for name, pkg in sorted(shorthands):
        for prefix in ("torchtitan.models", "torchtitan.experiments", "torchtitan.experiments.rl.examples"):
            modname = f"{prefix}.{name}.config_registry"
            m = index.module(modname)
            if m is None:
                continue
            fns = sorted(n for n, b in m.names.items() if b[0] == "func" and not n.startswith("_") and b[1].module is m)
            out[name] = {"module": modname, "path": m.path, "configs": fns}
            break
    for m in index.all_modules("torchtitan_recipes"):
        fns = sorted(n for n, b in m.names.items() if b[0] == "func" and not n.startswith("_"))
        if fns:
            out[m.name] = {"module": m.name, "path": m.path, "configs": fns}
    return dict(sorted(out.items()))


def extract(git_dir: str, ref: str, root_override: str | None, torch_schedules: str | None) -> dict:
    tree = GitTree(git_dir, ref)
    try:
        index = Index(tree)
        types = TypeReader(index)
        root, fmt = find_root(index, root_override)
        out: OrderedDict = OrderedDict()
        out["schema_version"] = SCHEMA_VERSION
        out["repo"] = REPO_NAME
        out["ref"] = ref
        out["commit"] = tree.sha
        out["commit_date"] = tree.commit_date
        out["commit_subject"] = tree.subject
        out["generated_by"] = GENERATED_BY
        out["config_format"] = fmt
        out["root"] = {"class": root.dotted, "defined_in": f"{root.module.path}:{root.node.lineno}"}
        out["launch"] = extract_launch(index, tree, fmt)
        subs = subclass_map(index) if fmt == "python" else None
        root_fields, sections = build_sections(index, types, root, subclasses=subs)
        if root_fields:
            out["root_fields"] = root_fields
        out["sections"] = sections
        auto = import_closure(index, ["torchtitan", "torchtitan.train"])
        if fmt == "toml":
            out["toml_unknown_keys"] = toml_unknown_key_behavior(index)
            out["extension_key"] = extension_key(index)
            out["extensions"] = extract_extensions(index, types, root)
            models, details = extract_models_toml(index, auto)
            out["models"] = dict(sorted(models.items()))
            out["model_details"] = dict(sorted(details.items()))
            conv, conv_details = extract_converters_toml(index, auto)
            out["converters"] = conv
            out["converter_details"] = conv_details
        else:
            models, details, _ = extract_models_python(index)
            out["models"] = dict(sorted(models.items()))
            out["model_details"] = dict(sorted(details.items()))
            py = extract_python_tables(index, types, root)
            out["converters"] = py.pop("converters")
            out["converter_details"] = py.pop("converter_details")
            out["converters_note"] = (
                "No name registry at this ref: converters are ModelConfigConverter subclasses, passed as "
                "model_registry(flavor, converters=[X.Config(...)]) in a Python config."
            )
            if not out["converters"]:  # early Python-config revisions still had the name registry
                out["converters"], out["converter_details"] = extract_converters_toml(index, auto)
                out["converters_note"] = "register_model_converter names (model.converters) at this ref."
            out["config_modules"] = extract_config_modules(index)
            out.update(py)
        out["pipeline_schedules"] = extract_schedules(index, torch_schedules)
        if index.parse_errors:
            out["parse_errors"] = sorted(index.parse_errors)
        return out
    finally:
        tree.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", required=True, help="torchtitan git directory (bare is fine)")
    ap.add_argument("--ref", required=True, help="tag, branch or commit")
    ap.add_argument("--out", required=True, help="output JSON path ('-' for stdout)")
    ap.add_argument("--label", default=None,
                    help="ref name to record (default: --ref); e.g. --ref <sha> --label main reproduces a head table")
    ap.add_argument("--root", default=None, help="override root config class, module:Qualname")
    ap.add_argument("--torch-schedules", default=None,
                    help="path to a torch/distributed/pipelining/schedules.py to read schedule names from")
    args = ap.parse_args(argv)
    data = extract(args.git_dir, args.ref, args.root, args.torch_schedules)
    if args.label:
        data["ref"] = args.label
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
