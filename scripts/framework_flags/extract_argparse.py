#!/usr/bin/env python3
"""Extract an argparse flag table from Python sources at a pinned git commit.

The sources are never imported or executed: every file is read with
``git show COMMIT:PATH`` and walked as a Python AST.  Two ways of declaring
flags are understood:

* explicit ``<anything>.add_argument(...)`` calls (argument groups and
  mutually exclusive groups included);
* Megatron-LM's ``ArgumentGroupFactory(SomeConfig, exclude=[...]).build_group(...)``
  (megatron/training/argument_utils.py), which turns every field of a
  dataclass into a flag.  Its type inference (bool -> store_true/store_false
  with ``--no-``/``--disable-`` names, Optional/Union, list -> nargs='+',
  Literal -> choices, Enum -> member names) is re-implemented statically and
  the ``argparse_meta`` field metadata overrides are applied on top, exactly in
  the order the factory applies them.

With ``--entry PATH:FUNC`` only the functions of PATH reachable from FUNC
(direct calls by name inside that file) contribute flags; without an entry
every add_argument call of the file counts.

Output is JSON with sorted keys, so running the same command against the same
commit reproduces the file byte for byte.  Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from typing import Any

GENERATED_BY = "scripts/framework_flags/extract_argparse.py"

FACTORY_CLASS = "ArgumentGroupFactory"
ENUM_BASES = {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "ReprEnum"}
NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "append_const",
                    "count", "help", "version", "BooleanOptionalAction"}
# Enums that live outside the repository: their members depend on the platform,
# so their choices are recorded as "dynamic".
EXTERNAL_ENUMS = {"signal.Signals"}
BUILTIN_TYPES = {"int", "float", "str", "bool", "list", "dict", "tuple", "set",
                 "complex", "bytes"}


class TypeInferenceError(Exception):
    """Mirrors argument_utils.TypeInferenceError (annotation argparse cannot use)."""


class Repo:
    """Read-only view of one repository at one commit."""

    def __init__(self, git_dir: str, commit: str, name: str):
        self.git_dir = git_dir
        self.name = name
        self.commit = self._git("rev-parse", "--verify", commit + "^{commit}").strip()
        self._cache: dict[str, str | None] = {}
        self.read_paths: set[str] = set()

    def _git(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(["git", "--git-dir", self.git_dir, *args],
                              capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise SystemExit(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout if proc.returncode == 0 else ""

    def read(self, path: str) -> str | None:
        if path not in self._cache:
            proc = subprocess.run(
                ["git", "--git-dir", self.git_dir, "show", f"{self.commit}:{path}"],
                capture_output=True)
            self._cache[path] = proc.stdout.decode("utf-8") if proc.returncode == 0 else None
        return self._cache[path]


class Module:
    """One parsed source file: top-level classes, functions, constants, imports."""

    def __init__(self, repo: Repo, path: str, text: str):
        self.repo = repo
        self.path = path
        self.tree = ast.parse(text, filename=path)
        parts = path[:-3].split("/")
        self.is_package = parts[-1] == "__init__"
        self.package = parts[:-1]
        self.classes: dict[str, ast.ClassDef] = {}
        self.functions: dict[str, ast.FunctionDef] = {}
        self.assigns: dict[str, ast.AST] = {}
        self.imports: dict[str, tuple[str, int, str]] = {}  # alias -> (module, level, name)
        self.star_imports: list[tuple[str, int]] = []
        for stmt in _flat_top_level(self.tree.body):
            if isinstance(stmt, ast.ClassDef):
                self.classes[stmt.name] = stmt
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[stmt.name] = stmt
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                    and isinstance(stmt.targets[0], ast.Name):
                self.assigns[stmt.targets[0].id] = stmt.value
            elif isinstance(stmt, ast.ImportFrom):
                for alias in stmt.names:
                    if alias.name == "*":
                        self.star_imports.append((stmt.module or "", stmt.level))
                    else:
                        self.imports[alias.asname or alias.name] = (
                            stmt.module or "", stmt.level, alias.name)

    def loc(self, node: ast.AST) -> str:
        return f"{self.path}:{node.lineno}"


def _flat_top_level(body: list[ast.stmt]):
    """Top-level statements, looking into module-level if/try blocks."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _flat_top_level(stmt.body)
            yield from _flat_top_level(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from _flat_top_level(stmt.body)
            for handler in stmt.handlers:
                yield from _flat_top_level(handler.body)
            yield from _flat_top_level(stmt.orelse)
            yield from _flat_top_level(stmt.finalbody)


class Resolver:
    """Finds modules, classes and constants inside one repository."""

    def __init__(self, repo: Repo):
        self.repo = repo
        self.modules: dict[str, Module | None] = {}

    def module_at(self, path: str) -> Module | None:
        if path not in self.modules:
            text = self.repo.read(path)
            self.modules[path] = Module(self.repo, path, text) if text is not None else None
            if text is not None:
                self.repo.read_paths.add(path)
        return self.modules[path]

    def module_named(self, name: str, level: int, origin: Module) -> Module | None:
        if level:
            base = list(origin.package)
            if level > 1:
                base = base[: len(base) - (level - 1)]
            parts = base + (name.split(".") if name else [])
        else:
            parts = name.split(".")
        stem = "/".join(parts)
        return self.module_at(stem + ".py") or self.module_at(stem + "/__init__.py")

    def lookup(self, module: Module, name: str, seen=None) -> tuple[Module, ast.AST] | None:
        """(defining module, ClassDef or assigned value) for a top-level name."""
        seen = seen or set()
        key = (module.path, name)
        if key in seen:
            return None
        seen.add(key)
        if name in module.classes:
            return module, module.classes[name]
        if name in module.assigns:
            return module, module.assigns[name]
        if name in module.imports:
            mod_name, level, orig = module.imports[name]
            target = self.module_named(mod_name, level, module)
            if target is not None:
                found = self.lookup(target, orig, seen)
                if found:
                    return found
            # "from package import submodule" is not a class; give up quietly.
            return None
        for mod_name, level in module.star_imports:
            target = self.module_named(mod_name, level, module)
            if target is not None:
                found = self.lookup(target, name, seen)
                if found:
                    return found
        return None

    def lookup_class(self, module: Module, name: str) -> tuple[Module, ast.ClassDef] | None:
        found = self.lookup(module, name)
        if found and isinstance(found[1], ast.ClassDef):
            return found  # type: ignore[return-value]
        return None

    # ---- enums -----------------------------------------------------------
    def enum_info(self, module: Module, name_node: ast.AST, depth: int = 0):
        """(class name, [member names], {name: literal value}) if name_node is an Enum."""
        if depth > 10:
            return None
        if isinstance(name_node, ast.Name):
            name = name_node.id
        elif isinstance(name_node, ast.Attribute):
            name = name_node.attr
        else:
            return None
        found = self.lookup_class(module, name)
        if not found:
            return None
        mod, cls = found
        is_enum = False
        for base in cls.bases:
            base_name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
            if base_name in ENUM_BASES or (base_name and self.enum_info(mod, base, depth + 1)):
                is_enum = True
        if not is_enum:
            return None
        members, values = [], {}
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                    and isinstance(stmt.targets[0], ast.Name) \
                    and not stmt.targets[0].id.startswith("_"):
                members.append(stmt.targets[0].id)
                try:
                    values[stmt.targets[0].id] = ast.literal_eval(stmt.value)
                except (ValueError, TypeError, SyntaxError):
                    pass
        return cls.name, members, values


# ---------------------------------------------------------------------------
# Normalising add_argument keyword values
# ---------------------------------------------------------------------------

class Ctx:
    """Where an expression is evaluated: its module and enclosing function."""

    def __init__(self, resolver: Resolver, module: Module, local_assigns=None,
                 local_imports=None):
        self.resolver = resolver
        self.module = module
        self.local_assigns: dict[str, ast.AST] = local_assigns or {}
        self.local_imports: dict[str, tuple[str, int, str]] = local_imports or {}

    def lookup(self, name: str):
        if name in self.local_assigns:
            return self.module, self.local_assigns[name]
        if name in self.local_imports:
            mod_name, level, orig = self.local_imports[name]
            target = self.resolver.module_named(mod_name, level, self.module)
            return self.resolver.lookup(target, orig) if target else None
        return self.resolver.lookup(self.module, name)

    def lookup_class(self, name: str):
        found = self.lookup(name)
        if found and isinstance(found[1], ast.ClassDef):
            return found
        return None

    def enum_info(self, node: ast.AST):
        name = node.id if isinstance(node, ast.Name) else None
        if name and (name in self.local_imports or name in self.local_assigns):
            found = self.lookup_class(name)
            if not found:
                return None
            return self.resolver.enum_info(found[0], ast.Name(id=found[1].name))
        return self.resolver.enum_info(self.module, node)


def _literal(node: ast.AST):
    try:
        return True, _jsonable(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _jsonable(value):
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_jsonable(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (bytes, complex)):
        return repr(value)
    return value


def type_repr(node: ast.AST, ctx: Ctx) -> str:
    if isinstance(node, ast.Name):
        if node.id in BUILTIN_TYPES:
            return node.id
        info = ctx.enum_info(node)
        if info:
            return f"enum-value:{info[0]}"  # Enum(value): CLI string must equal a member value
        return node.id
    if isinstance(node, ast.Lambda):
        return "lambda"
    return ast.unparse(node)


def resolve_choices(node: ast.AST, ctx: Ctx, depth: int = 0):
    """A list of literal choices, or None when it is not statically trivial."""
    ok, value = _literal(node)
    if ok and isinstance(value, list):
        return value
    if depth > 5:
        return None
    if isinstance(node, ast.Name):
        found = ctx.lookup(node.id)
        if found and not isinstance(found[1], ast.ClassDef):
            return resolve_choices(found[1], Ctx(ctx.resolver, found[0]), depth + 1)
        return None
    # list(SomeEnum) -> members; argparse compares converted values against them
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in ("list", "tuple", "sorted") and len(node.args) == 1 \
            and not node.keywords:
        info = ctx.enum_info(node.args[0])
        if info:
            return list(info[1])
        return resolve_choices(node.args[0], ctx, depth + 1)
    # [x.name for x in SomeEnum] / [x.value for x in SomeEnum]
    if isinstance(node, ast.ListComp) and len(node.generators) == 1:
        gen = node.generators[0]
        elt = node.elt
        if not gen.ifs and isinstance(gen.target, ast.Name) and isinstance(elt, ast.Attribute) \
                and isinstance(elt.value, ast.Name) and elt.value.id == gen.target.id:
            info = ctx.enum_info(gen.iter)
            if info and elt.attr == "name":
                return list(info[1])
            if info and elt.attr == "value" and all(m in info[2] for m in info[1]):
                return [info[2][m] for m in info[1]]
    return None


def norm_kw(key: str, node: ast.AST, ctx: Ctx, rec: dict[str, Any]) -> None:
    """Store one add_argument keyword into a normalised record."""
    if key == "action":
        ok, value = _literal(node)
        if ok and isinstance(value, str):
            rec["action"] = value
        else:
            text = type_repr(node, ctx)
            rec["action"] = "BooleanOptionalAction" if text in (
                "argparse.BooleanOptionalAction", "BooleanOptionalAction") else text
    elif key == "type":
        rec["type"] = type_repr(node, ctx)
        rec.pop("enum", None)
    elif key == "choices":
        choices = resolve_choices(node, ctx)
        if choices is None:
            rec["choices"] = "dynamic"
            rec["choices_expr"] = ast.unparse(node)
        else:
            rec["choices"] = choices
            rec.pop("choices_expr", None)
    elif key == "nargs":
        ok, value = _literal(node)
        if ok:
            rec["nargs"] = value
        else:
            text = ast.unparse(node)
            rec["nargs"] = {"argparse.REMAINDER": "...", "REMAINDER": "...",
                            "argparse.OPTIONAL": "?", "argparse.ZERO_OR_MORE": "*",
                            "argparse.ONE_OR_MORE": "+"}.get(text, text)
    elif key in ("dest", "required", "const", "default"):
        ok, value = _literal(node)
        if ok:
            rec[key] = value
            rec.pop(key + "_expr", None)
        else:
            rec.pop(key, None)
            rec[key + "_expr"] = ast.unparse(node)
    # help, metavar, etc. are not recorded


def derive_dest(option_strings: list[str]) -> str:
    for opt in option_strings:
        if opt.startswith("--"):
            return opt[2:].replace("-", "_")
    return option_strings[0].lstrip("-").replace("-", "_")


def expand_names(rec: dict[str, Any], names: list[str]) -> list[str]:
    """argparse.BooleanOptionalAction also registers --no-FOO for every --FOO."""
    if rec.get("action") != "BooleanOptionalAction":
        return list(names)
    out = list(names)
    for opt in names:
        if opt.startswith("--"):
            out.append("--no-" + opt[2:])
    return out


def finish_record(rec: dict[str, Any], names: list[str]) -> dict[str, Any]:
    rec.setdefault("action", "store")
    rec.setdefault("type", None)
    rec.setdefault("choices", None)
    rec.setdefault("nargs", None)
    if "dest" not in rec and "dest_expr" not in rec:
        rec["dest"] = derive_dest(names)
    rec["aliases"] = expand_names(rec, names)
    rec["takes_value"] = rec["action"] not in NO_VALUE_ACTIONS
    return rec


# ---------------------------------------------------------------------------
# Dataclass emulation of megatron/training/argument_utils.py:ArgumentGroupFactory
# ---------------------------------------------------------------------------

MISSING = object()


def _is_dataclass(cls: ast.ClassDef) -> bool:
    for dec in cls.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
        if name == "dataclass":
            return True
    return False


def _is_field_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name == "field"


def _subscript_parts(node: ast.Subscript) -> tuple[str, list[ast.AST]]:
    base = node.value
    name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", ast.unparse(base))
    sl = node.slice
    args = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
    return name, args


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _union_members(node: ast.AST) -> list[ast.AST]:
    """Flatten nested Union/Optional/| the way typing does (dedup, keep order)."""
    out: list[ast.AST] = []
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        out = _union_members(node.left) + _union_members(node.right)
    elif isinstance(node, ast.Subscript):
        name, args = _subscript_parts(node)
        if name == "Optional":
            out = _union_members(args[0]) + [ast.Constant(value=None)]
        elif name == "Union":
            for arg in args:
                out += _union_members(arg)
        else:
            out = [node]
    else:
        out = [node]
    seen, uniq = set(), []
    for member in out:
        key = ast.dump(member)
        if key not in seen:
            seen.add(key)
            uniq.append(member)
    return uniq


def extract_type(ann: ast.AST, ctx: Ctx) -> dict[str, Any]:
    """Static twin of ArgumentGroupFactory._extract_type."""
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        # A string annotation stays a str at runtime: argparse rejects it (not callable).
        raise TypeInferenceError(f"string annotation {ann.value!r}")
    members = _union_members(ann)
    if len(members) > 1:
        if _is_none(members[1]):
            return extract_type(members[0], ctx)
        raise TypeInferenceError(f"Unions not supported by argparse: {ast.unparse(ann)}")
    ann = members[0]
    if isinstance(ann, ast.Subscript):
        name, args = _subscript_parts(ann)
        if name in ("list", "List"):
            if len(args) == 1:
                kwargs = extract_type(args[0], ctx)
                kwargs["nargs"] = "+"
                return kwargs
            raise TypeInferenceError(f"Multi-type lists not supported: {ast.unparse(ann)}")
        if name == "Literal":
            values = []
            for arg in args:
                ok, value = _literal(arg)
                if not ok:
                    raise TypeInferenceError(f"non-literal Literal: {ast.unparse(ann)}")
                values.append(value)
            kinds = {type(v).__name__ for v in values}
            if len(kinds) != 1:
                raise TypeInferenceError(f"mixed Literal: {ast.unparse(ann)}")
            return {"type": kinds.pop(), "choices": values}
        raise TypeInferenceError(f"Unsupported type: {ast.unparse(ann)}")
    if isinstance(ann, ast.Name) and ann.id in ("List", "Tuple", "Dict", "Callable", "Union",
                                                "Optional", "Sequence", "Iterable"):
        raise TypeInferenceError(f"Unsupported type: {ann.id}")
    if ast.unparse(ann) in EXTERNAL_ENUMS:
        return {"type": f"enum:{ast.unparse(ann)}", "choices": "dynamic",
                "choices_expr": f"list({ast.unparse(ann)})"}
    info = ctx.enum_info(ann)
    if info:
        return {"type": f"enum:{info[0]}", "choices": list(info[1])}
    if isinstance(ann, ast.Name):
        return {"type": ann.id}
    return {"type": ast.unparse(ann)}


class DataclassEmulator:
    def __init__(self, resolver: Resolver, warnings: list[str]):
        self.resolver = resolver
        self.warnings = warnings

    def fields(self, module: Module, cls: ast.ClassDef, depth: int = 0):
        """Ordered {name: (module, AnnAssign)} as dataclasses.fields() would list them."""
        out: dict[str, tuple[Module, ast.AnnAssign]] = {}
        if depth > 20:
            return out
        for base in reversed(cls.bases):
            base_name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
            if not base_name:
                continue
            found = self.resolver.lookup_class(module, base_name)
            if found and _is_dataclass(found[1]):
                out.update(self.fields(found[0], found[1], depth + 1))
        if not _is_dataclass(cls):
            return out
        for stmt in cls.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            ann_text = ast.unparse(stmt.annotation)
            if ann_text.startswith(("ClassVar", "typing.ClassVar", "InitVar",
                                    "dataclasses.InitVar")) or ann_text in ("KW_ONLY",
                                                                            "dataclasses.KW_ONLY"):
                continue
            out[stmt.target.id] = (module, stmt)
        return out

    def build_group(self, cls_module: Module, cls: ast.ClassDef, exclude: set[str],
                    call_site: str, condition: list[str]):
        """Yield (names, record) for each flag the factory would add."""
        for name, (mod, stmt) in self.fields(cls_module, cls).items():
            if name in exclude:
                continue
            ctx = Ctx(self.resolver, mod)
            default_node, factory_node, meta_node, init = MISSING, None, None, True
            value = stmt.value
            if value is not None and _is_field_call(value):
                for kw in value.keywords:
                    if kw.arg == "default":
                        default_node = kw.value
                    elif kw.arg == "default_factory":
                        factory_node = kw.value
                    elif kw.arg == "metadata":
                        meta_node = kw.value
                    elif kw.arg == "init":
                        ok, lit = _literal(kw.value)
                        init = lit if ok else True
            elif value is not None:
                default_node = value
            if init is False:
                continue
            where = f"{mod.path}:{stmt.lineno}"
            rec: dict[str, Any] = {
                "generated_from": f"{cls.name}.{name} via {FACTORY_CLASS} at {call_site}",
                "source": where,
            }
            names = [f"--{name.replace('_', '-')}"]
            rec["dest"] = name
            # default (attribute.default, or default_factory() when there is none)
            attr_default, attr_default_known = MISSING, True
            if default_node is not MISSING:
                ok, lit = _literal(default_node)
                if ok:
                    attr_default = lit
                    rec["default"] = lit
                else:
                    attr_default_known = False
                    rec["default_expr"] = ast.unparse(default_node)
            elif factory_node is not None:
                text = ast.unparse(factory_node)
                lit = {"list": [], "dict": {}, "set": [], "tuple": []}.get(text, MISSING)
                if lit is not MISSING:
                    rec["default"] = lit
                else:
                    rec["default_expr"] = f"({text})()"
            else:
                self.warnings.append(f"{where}: {cls.name}.{name} has no default; "
                                     "the factory would fail calling MISSING")
            meta_items: list[tuple[str, ast.AST]] | None = None
            if meta_node is not None:
                meta_items = self._argparse_meta(meta_node, where)
            try:
                kwargs = extract_type(stmt.annotation, ctx)
                rec.update(kwargs)
                if rec.get("type") == "bool":
                    if not attr_default_known:
                        self.warnings.append(f"{where}: bool default not literal; "
                                             "assuming store_false")
                    is_false = attr_default is not MISSING and attr_default_known \
                        and attr_default == False  # noqa: E712  (mirrors the factory)
                    rec["action"] = "store_true" if is_false else "store_false"
                    rec.pop("type")
                    if rec["action"] == "store_false":
                        names = [f"--no-{name.replace('_', '-')}",
                                 f"--disable-{name.replace('_', '-')}"]
            except TypeInferenceError as err:
                if meta_items is None:
                    self.warnings.append(f"{where}: {cls.name}.{name}: {err} and no "
                                         "argparse_meta (the factory would raise)")
                    continue
            if meta_items:
                for key, node in meta_items:
                    if key == "arg_names":
                        ok, lit = _literal(node)
                        if ok and isinstance(lit, list):
                            names = lit
                        else:
                            self.warnings.append(f"{where}: arg_names not literal")
                    else:
                        norm_kw(key, node, ctx, rec)
            if condition:
                rec["condition"] = list(condition)
            yield names, finish_record(rec, names)

    def _argparse_meta(self, meta_node: ast.AST, where: str):
        if not isinstance(meta_node, ast.Dict):
            self.warnings.append(f"{where}: metadata is not a dict literal; ignored")
            return None
        for key, value in zip(meta_node.keys, meta_node.values):
            if isinstance(key, ast.Constant) and key.value == "argparse_meta":
                if not isinstance(value, ast.Dict):
                    self.warnings.append(f"{where}: argparse_meta is not a dict literal")
                    return None
                items = []
                for k, v in zip(value.keys, value.values):
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        items.append((k.value, v))
                    else:
                        self.warnings.append(f"{where}: argparse_meta key not literal")
                return items
        return None


# ---------------------------------------------------------------------------
# Walking argparse code
# ---------------------------------------------------------------------------

class FileWalker:
    def __init__(self, resolver: Resolver, module: Module, emulator: DataclassEmulator,
                 warnings: list[str], file_condition: str | None):
        self.resolver = resolver
        self.module = module
        self.emulator = emulator
        self.warnings = warnings
        self.file_condition = file_condition
        self.found: list[tuple[list[str], dict[str, Any]]] = []
        self.unresolved: list[str] = []
        self.parse_calls: list[dict[str, Any]] = []
        self.parsers: list[dict[str, Any]] = []
        self.calls_by_name: dict[str, list[str]] = {}

    # reachability --------------------------------------------------------
    def reachable(self, entry: str) -> list[ast.AST]:
        funcs = self.module.functions
        if entry not in funcs:
            raise SystemExit(f"entry function {entry} not found in {self.module.path}")
        order, todo, seen = [], [entry], set()
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.add(name)
            order.append(funcs[name])
            for node in ast.walk(funcs[name]):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                        and node.func.id in funcs and node.func.id not in seen:
                    todo.append(node.func.id)
        return order

    def _function_ctx(self, fn, parent: Ctx | None) -> Ctx:
        local_assigns = dict(parent.local_assigns) if parent else {}
        local_imports = dict(parent.local_imports) if parent else {}
        own_assigns: dict[str, ast.AST] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name != "*":
                        local_imports[alias.asname or alias.name] = (
                            node.module or "", node.level, alias.name)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                own_assigns.setdefault(node.targets[0].id, node.value)
        local_assigns.update(own_assigns)
        return Ctx(self.resolver, self.module, local_assigns, local_imports)

    def walk_all(self, entry: str | None):
        if entry:
            for fn in self.reachable(entry):
                self._walk_block(fn.body, self._function_ctx(fn, None), [], {}, fn)
        else:
            ctx = Ctx(self.resolver, self.module)
            self._walk_block(self.module.tree.body, ctx, [], {}, self.module.tree)

    def _walk_block(self, body, ctx, cond, mutex, root):
        """Walk statements in order; a mutually exclusive group assigned in this
        block is known to the statements after it."""
        mutex = dict(mutex)
        for stmt in body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                    and isinstance(stmt.targets[0], ast.Name) \
                    and isinstance(stmt.value, ast.Call) \
                    and isinstance(stmt.value.func, ast.Attribute) \
                    and stmt.value.func.attr == "add_mutually_exclusive_group":
                mutex[stmt.targets[0].id] = self.module.loc(stmt)
            self._walk_stmt(stmt, ctx, cond, mutex, root)

    def _walk_stmt(self, stmt, ctx, cond, mutex, root):
        if isinstance(stmt, ast.If):
            test = ast.unparse(stmt.test)
            self._scan_exprs(stmt.test, ctx, cond, mutex)
            self._walk_block(stmt.body, ctx, cond + [test], mutex, root)
            self._walk_block(stmt.orelse, ctx, cond + [f"not ({test})"], mutex, root)
            return
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # nested functions are walked with their parent; with an entry, the
            # top-level ones are roots only when reachable (see walk_all)
            self._walk_block(stmt.body, self._function_ctx(stmt, ctx), cond, mutex, root)
            return
        if isinstance(stmt, ast.ClassDef):
            self._walk_block(stmt.body, ctx, cond, mutex, root)
            return
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith,
                             ast.Try)):
            for field_name in ("iter", "test"):
                node = getattr(stmt, field_name, None)
                if isinstance(node, ast.AST):
                    self._scan_exprs(node, ctx, cond, mutex)
            for item in getattr(stmt, "items", []):
                self._scan_exprs(item.context_expr, ctx, cond, mutex)
            blocks = [stmt.body, getattr(stmt, "orelse", []), getattr(stmt, "finalbody", [])]
            blocks += [h.body for h in getattr(stmt, "handlers", [])]
            for block in blocks:
                self._walk_block(block, ctx, cond, mutex, root)
            return
        self._scan_exprs(stmt, ctx, cond, mutex)

    def _scan_exprs(self, node, ctx, cond, mutex):
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Call):
                continue
            func = sub.func
            if isinstance(func, ast.Attribute) and func.attr == "add_argument":
                self._add_argument(sub, ctx, cond, mutex)
            elif isinstance(func, ast.Attribute) and func.attr == "build_group":
                self._build_group(sub, ctx, cond)
            elif isinstance(func, ast.Attribute) and func.attr in ("parse_args",
                                                                     "parse_known_args"):
                self.parse_calls.append({"call": ast.unparse(sub), "source": self.module.loc(sub),
                                         "condition": list(cond)})
            elif (isinstance(func, ast.Attribute) and func.attr == "ArgumentParser") or \
                    (isinstance(func, ast.Name) and func.id == "ArgumentParser"):
                info = {"source": self.module.loc(sub), "allow_abbrev": True,
                        "conflict_handler": "error"}
                for kw in sub.keywords:
                    if kw.arg in ("allow_abbrev", "conflict_handler", "prefix_chars"):
                        ok, lit = _literal(kw.value)
                        info[kw.arg] = lit if ok else ast.unparse(kw.value)
                self.parsers.append(info)
            if isinstance(func, (ast.Attribute, ast.Name)):
                name = func.attr if isinstance(func, ast.Attribute) else func.id
                self.calls_by_name.setdefault(name, []).append(self.module.loc(sub))

    def _add_argument(self, call, ctx, cond, mutex):
        names = []
        for arg in call.args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.append(arg.value)
            else:
                self.unresolved.append(f"{self.module.loc(call)}: {ast.unparse(call)[:160]}")
                return
        if not names:
            self.unresolved.append(f"{self.module.loc(call)}: {ast.unparse(call)[:160]}")
            return
        if not names[0].startswith("-"):
            self.warnings.append(f"{self.module.loc(call)}: positional argument {names[0]!r} "
                                 "not recorded")
            return
        rec: dict[str, Any] = {"source": self.module.loc(call)}
        for kw in call.keywords:
            if kw.arg is None:
                self.unresolved.append(f"{self.module.loc(call)}: **kwargs in "
                                       f"{ast.unparse(call)[:120]}")
                rec["kwargs_expr"] = ast.unparse(kw.value)
                continue
            norm_kw(kw.arg, kw.value, ctx, rec)
        receiver = call.func.value
        if isinstance(receiver, ast.Name) and receiver.id in mutex:
            rec["mutually_exclusive_group"] = mutex[receiver.id]
        conds = list(cond)
        if conds:
            rec["condition"] = conds
        self.found.append((names, finish_record(rec, names)))

    def _build_group(self, call, ctx, cond):
        receiver = call.func.value
        factory_call = None
        if isinstance(receiver, ast.Call):
            factory_call = receiver
        elif isinstance(receiver, ast.Name) and receiver.id in ctx.local_assigns:
            value = ctx.local_assigns[receiver.id]
            if isinstance(value, ast.Call):
                factory_call = value
        if factory_call is None:
            return
        fname = factory_call.func
        fname = fname.attr if isinstance(fname, ast.Attribute) else getattr(fname, "id", None)
        if fname != FACTORY_CLASS:
            self.warnings.append(f"{self.module.loc(call)}: build_group on {fname}; not "
                                 "emulated")
            return
        if not factory_call.args or not isinstance(factory_call.args[0], ast.Name):
            self.unresolved.append(f"{self.module.loc(call)}: factory class not a name")
            return
        cls_name = factory_call.args[0].id
        exclude: set[str] = set()
        exclude_nodes = [kw.value for kw in factory_call.keywords if kw.arg == "exclude"]
        exclude_nodes += factory_call.args[1:2]
        for node in exclude_nodes:
            if isinstance(node, ast.Name) and node.id in ctx.local_assigns:
                node = ctx.local_assigns[node.id]
            ok, lit = _literal(node)
            if ok and isinstance(lit, list):
                exclude |= set(lit)
            elif not (ok and lit is None):
                self.unresolved.append(f"{self.module.loc(call)}: exclude list not literal")
        found = ctx.lookup_class(cls_name)
        if not found:
            self.unresolved.append(f"{self.module.loc(call)}: class {cls_name} not found")
            return
        call_site = self.module.loc(call)
        for names, rec in self.emulator.build_group(found[0], found[1], exclude, call_site,
                                                    list(cond)):
            self.found.append((names, rec))


# ---------------------------------------------------------------------------

def extract(repo: Repo, files: list[str], entries: dict[str, str],
            conditions: dict[str, str], origin: dict[str, str] | None,
            warnings: list[str]):
    resolver = Resolver(repo)
    emulator = DataclassEmulator(resolver, warnings)
    results, unresolved, parse_calls, parsers, calls = [], [], [], [], {}
    for path in files:
        module = resolver.module_at(path)
        if module is None:
            raise SystemExit(f"{path} does not exist at {repo.name}@{repo.commit}")
        walker = FileWalker(resolver, module, emulator, warnings, conditions.get(path))
        walker.walk_all(entries.get(path))
        for names, rec in walker.found:
            if path in conditions:
                rec["condition"] = [conditions[path]] + rec.get("condition", [])
            if origin:
                rec["origin"] = dict(origin)
            results.append((names, rec))
        unresolved += walker.unresolved
        parse_calls += walker.parse_calls
        parsers += walker.parsers
        for name, locs in walker.calls_by_name.items():
            calls.setdefault(name, []).extend(locs)
    return results, unresolved, parse_calls, parsers, calls


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", required=True, help="bare git directory of the repository")
    ap.add_argument("--commit", required=True, help="commit (any rev; stored as full sha)")
    ap.add_argument("--repo", required=True, help="owner/name recorded in the output")
    ap.add_argument("--file", action="append", required=True, dest="files",
                    help="python file (repeatable) holding add_argument calls")
    ap.add_argument("--entry", action="append", default=[], metavar="PATH:FUNC",
                    help="only functions of PATH reachable from FUNC contribute")
    ap.add_argument("--condition", action="append", default=[], metavar="PATH=TEXT",
                    help="mark every flag from PATH as available only under TEXT")
    ap.add_argument("--extra-source", action="append", nargs=5, default=[],
                    metavar=("REPO", "GIT_DIR", "COMMIT", "PATH", "FUNC"),
                    help="add the flags of FUNC in PATH of another repository "
                         "(FUNC '-' = whole file), recorded with their origin")
    ap.add_argument("--note", action="append", default=[], help="free text kept in 'notes'")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    warnings: list[str] = []
    repo = Repo(args.git_dir, args.commit, args.repo)
    entries = {}
    for item in args.entry:
        path, _, func = item.rpartition(":")
        entries[path] = func
    conditions = {}
    for item in args.condition:
        path, _, text = item.partition("=")
        conditions[path] = text

    results, unresolved, parse_calls, parsers, calls = extract(
        repo, args.files, entries, conditions, None, warnings)

    extra_meta = []
    for name, git_dir, commit, path, func in args.extra_source:
        extra = Repo(git_dir, commit, name)
        origin = {"repo": name, "commit": extra.commit, "file": path}
        if func != "-":
            origin["function"] = func
        ents = {path: func} if func != "-" else {}
        res, unres, _, _, _ = extract(extra, [path], ents, {}, origin, warnings)
        results += res
        unresolved += unres
        invoked = sorted(set(calls.get(func, []))) if func != "-" else []
        extra_meta.append({"repo": name, "commit": extra.commit, "file": path,
                           "function": None if func == "-" else func,
                           "files_read": sorted(extra.read_paths),
                           "invoked_at": invoked,
                           "flags": sorted({n for names, r in res for n in names})})

    flags: dict[str, Any] = {}
    conflicts = []
    for names, rec in results:
        for opt in rec["aliases"]:
            if opt in flags:
                conflicts.append({"flag": opt, "kept": flags[opt]["source"],
                                  "also": rec["source"]})
                continue
            flags[opt] = rec

    entry_defaults = {}
    for path, func in entries.items():
        module = Resolver(repo).module_at(path)
        fn = module.functions[func] if module else None
        if fn is not None:
            pos = fn.args.args[len(fn.args.args) - len(fn.args.defaults):]
            params = {}
            for arg, default in zip(pos, fn.args.defaults):
                ok, lit = _literal(default)
                params[arg.arg] = lit if ok else ast.unparse(default)
            entry_defaults[f"{path}:{func}"] = {"source": f"{path}:{fn.lineno}",
                                                "parameter_defaults": params}

    out = {
        "repo": repo.name,
        "commit": repo.commit,
        "files": list(args.files),
        "files_read": sorted(repo.read_paths),
        "generated_by": GENERATED_BY,
        "entries": entry_defaults,
        "conditions": conditions,
        "argument_parsers": parsers,
        "parse_calls": parse_calls,
        "extra_sources": extra_meta,
        "flags": flags,
        "flag_count": len(flags),
        "conflicts": conflicts,
        "unresolved": sorted(set(unresolved)),
        "warnings": sorted(set(warnings)),
        "notes": list(args.note),
    }
    text = json.dumps(out, indent=1, sort_keys=True, ensure_ascii=True) + "\n"
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"{args.out}: {len(flags)} flags from {repo.name}@{repo.commit}"
          f" ({len(conflicts)} conflicts, {len(set(unresolved))} unresolved, "
          f"{len(set(warnings))} warnings)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
