#!/usr/bin/env python3
"""Check dtplan's ds_config.json files against the real DeepSpeed package.

    check_ds_config.py --dp N CONFIG.json [CONFIG.json ...]
    check_ds_config.py --each N1 A.json --each N2 B.json ...   (one import for many plans)

Each file goes through deepspeed.runtime.config.DeepSpeedConfig, as deepspeed.initialize() builds
it, with the data-parallel world size N:

* DeepSpeed's own batch arithmetic (train_batch_size == micro x grad-accum x world size,
  DeepSpeedConfig._batch_assertion) runs with world size N. DeepSpeedConfig.__init__ takes the
  world size from `mpu.get_data_parallel_world_size()` when an mpu is given, as Megatron-DeepSpeed
  does (deepspeed/runtime/config.py:725-726 at v0.16.5, :458-463 at v0.19.8); we pass an mpu that
  answers N. The same try block first calls deepspeed.comm.get_rank(), which asserts that a comm
  backend is initialised; when it is not, a bare `except` (config.py:731-733 at v0.16.5; v0.19.8
  catches RuntimeError/AssertionError/AttributeError, :472-474) silently sets the world size to 1
  and ignores the mpu. So we put a stand-in for the backend that deepspeed.init_distributed() would
  have set (deepspeed.comm.comm.cdb: initialised, rank 0), and check afterwards that
  DeepSpeedConfig.world_size really is N.
* zero_optimization goes through the pydantic DeepSpeedZeroConfig (get_zero_config). DeepSpeed's
  models are DeepSpeedConfigModel (deepspeed/runtime/config_utils.py), with
  model_config extra="forbid", so an unknown or misspelt key is a ValidationError. Deprecated keys
  only log a warning ("Config parameter X is deprecated ..." from
  DeepSpeedConfigModel._process_deprecated_field), so every WARNING or ERROR that DeepSpeed logs
  while building the config fails the file, and so does every Python warning except those about
  DeepSpeed's own code (pydantic's deprecation notes on how DeepSpeed uses pydantic, and the
  ResourceWarning for the config file DeepSpeedConfig opens and never closes), which are notes.
* Top-level keys, and keys of the plain sub-dicts DeepSpeed reads by name (bf16, fp16, ...), that
  DeepSpeedConfig never looks at are silently ignored by DeepSpeed; they fail the file too (a
  typo such as "gradient_cliping" would otherwise pass). --allow-unread turns that into a note.

Prints "ok: FILE (deepspeed X.Y.Z)" per good file; otherwise "FAIL: FILE (deepspeed X.Y.Z): ..."
with DeepSpeed's exception or warnings, and exits 1. Exit 2: bad usage, or DeepSpeed cannot be
imported.

torch: when the real package is importable it is used. Otherwise a minimal stand-in module is put
in sys.modules (_install_torch_stub below): `import deepspeed` needs torch at import time only
(base classes, decorators, dtype constants); building a DeepSpeedConfig calls none of it. The
stand-in is strict: a name it lacks raises AttributeError/ImportError, and its functions raise if
called, so DeepSpeed cannot silently compute with a fake.
"""
import argparse
import importlib.util
import json
import logging
import os
import sys
import types
import warnings

# ---------------------------------------------------------------------------------------------
# torch stand-in (only when torch is absent). Every name below is one that `import deepspeed`
# (0.16.5 and 0.19.x) touches at import time; the comment says where. Nothing here is called
# while a DeepSpeedConfig is built.
# ---------------------------------------------------------------------------------------------
# A torch both releases support (0.19 asks for >= 2.0): DeepSpeed's import-time version gates
# (elasticity: >= 1.11; utils/logging.py: >= 2.6) take the branch a current torch takes.
STUB_TORCH_VERSION = "2.6.0"
# (owner, kind, names): owner is a stub module or class by dotted name, and each name becomes
# "module" an empty submodule, "class" an empty class, "value_class" one that takes constructor
# arguments, "function" a function that raises if called, "decorator" one that returns the
# function it decorates, "const" an opaque constant.
STUB_NAMES = [
    # Submodules DeepSpeed imports (`import torch.x`, `from torch.x import y`) or reaches as
    # attributes at import.
    ("torch", "module", "distributed nn optim utils autograd jit compiler fx multiprocessing "
                        "_utils _C version"),
    ("torch.nn", "module", "functional parameter init modules"),
    ("torch.nn.modules", "module", "module"),
    ("torch.optim", "module", "lr_scheduler"),
    ("torch.utils", "module", "data"),
    ("torch.utils.data", "module", "distributed"),
    ("torch.autograd", "module", "graph"),                     # 0.19: offload_activations.py
    ("torch.fx", "module", "node"),                            # 0.19: deepspeed/compile/util.py
    # deepspeed/elasticity/elastic_agent.py (imported when torch >= 1.11) builds DSElasticAgent on
    # torch's elastic agent.
    ("torch.distributed", "module", "elastic"),
    ("torch.distributed.elastic", "module", "agent utils metrics multiprocessing"),
    ("torch.distributed.elastic.agent", "module", "server"),
    ("torch.distributed.elastic.agent.server", "module", "local_elastic_agent api"),
    ("torch.distributed.elastic.utils", "module", "distributed logging macros"),
    ("torch.distributed.elastic.agent.server.local_elastic_agent", "class", "LocalElasticAgent"),
    ("torch.distributed.elastic.agent.server.api", "class",
     "RunResult WorkerGroup WorkerSpec WorkerState"),
    ("torch.distributed.elastic.utils.distributed", "function", "get_free_port"),
    ("torch.distributed.elastic.metrics", "function", "put_metric"),
    ("torch.distributed.elastic.multiprocessing", "function", "start_processes"),
    # Base classes of DeepSpeed's modules, optimizers, autograd functions, datasets and
    # samplers (ops/, moe/, compression/, runtime/, inference/), and the classes that
    # flops_profiler/profiler.py and runtime/torch_autocast.py use as dict keys/list entries.
    ("torch.nn", "class", "Module Parameter Linear Embedding Conv1d Conv2d Conv3d BatchNorm2d "
                          "RNN GRU LSTM RNNCell LSTMCell GRUCell"),
    ("torch.optim", "class", "Optimizer Adam AdamW Adagrad"),     # runtime/zero/utils.py list
    ("torch.optim.lr_scheduler", "class", "_LRScheduler"),      # deepspeed/__init__.py
    ("torch.autograd", "class", "Function"),
    ("torch.autograd.graph", "class", "saved_tensors_hooks"),  # 0.19: a base class
    ("torch.utils.data", "class", "DataLoader RandomSampler Dataset"),
    ("torch.utils.data.distributed", "class", "DistributedSampler"),
    # Type annotations, some of them in pydantic models or dataclasses that inspect them.
    ("torch", "class", "Tensor LongTensor IntTensor FloatTensor ByteTensor Size layout"),
    ("torch.distributed", "class", "ProcessGroup Store GradBucket ReduceOp GroupMember"),
    ("torch.fx", "class", "Node Graph GraphModule Interpreter"),   # 0.19: deepspeed/compile/
    ("torch.fx.node", "class", "Argument"),                        # 0.19: deepspeed/compile/
    # Default argument values in deepspeed/comm/torch.py (all_reduce(op=...), barrier(group=...)).
    ("torch.distributed.ReduceOp", "const", "SUM"),
    ("torch.distributed.GroupMember", "const", "WORLD"),
    # torch.device('cpu') is a default argument (checkpoint/utils.py) and a dict key type.
    ("torch", "value_class", "device"),
    # Decorators applied at import: @torch.no_grad() (ops/adam/cpu_adam.py), @torch.jit.script
    # (moe/sharded_moe.py), torch.compiler.disable / torch._disable_dynamo (runtime/compiler.py).
    ("torch", "decorator", "no_grad _disable_dynamo"),
    ("torch.jit", "decorator", "script"),
    ("torch.compiler", "decorator", "disable"),
    # Functions DeepSpeed saves a reference to at import (utils/init_on_device.py and
    # runtime/zero/partition_parameters.py keep the originals to patch them later) or imports by
    # name (runtime/zero/stage3.py, runtime/lr_schedules.py, 0.19's compile/util.py).
    ("torch", "function", "empty zeros ones full tensor arange eye randn is_tensor"),
    ("torch._utils", "function", "_flatten_dense_tensors _unflatten_dense_tensors"),
    ("torch.fx.node", "function", "map_aggregate map_arg"),
    # 0.19: DeepSpeedConfig imports deepspeed/moe/ep_experts.py lazily (get_expert_parallel_config
    # -> module_inject/auto_ep_config.py), whose activation table holds F.silu.
    ("torch.nn.functional", "function", "silu"),
]


def _install_torch_stub():
    from importlib.machinery import ModuleSpec

    def module(name):
        parent, _, child = name.rpartition(".")
        if parent and parent not in sys.modules:
            module(parent)
        m = types.ModuleType(name)
        # importlib.util.find_spec(name) raises on a sys.modules entry without __spec__.
        m.__spec__ = ModuleSpec(name, None, is_package=True)
        m.__path__ = []  # a package, so `import torch.x.y` looks in sys.modules only
        sys.modules[name] = m
        if parent:
            setattr(sys.modules[parent], child, m)
        return m

    def cls(mod, name):
        # A class DeepSpeed subclasses, names in isinstance()/issubclass() or in an annotation
        # that pydantic or a metaclass inspects; an empty class is enough for all three.
        c = type(name, (), {"__module__": getattr(mod, "__name__", "torch")})
        setattr(mod, name, c)
        return c

    def value_cls(mod, name):
        # A class DeepSpeed instantiates at import, e.g. torch.device('cpu') as a default argument.
        c = type(name, (), {"__module__": getattr(mod, "__name__", "torch"),
                            "__init__": lambda self, *args, **kwargs: setattr(self, "args", args),
                            "__repr__": lambda self: f"{name}{self.args!r}"})
        setattr(mod, name, c)

    def unavailable(mod, name):
        # A function DeepSpeed only refers to at import (default arguments, lookup tables,
        # hasattr checks); calling it means a code path this checker does not expect.
        qual = f"{getattr(mod, '__name__', 'torch')}.{name}"

        def f(*args, **kwargs):
            raise NotImplementedError(f"{qual}() called: torch is only a stand-in here")

        f.__name__ = f.__qualname__ = name
        setattr(mod, name, f)

    def decorator(mod, name):
        # Used as @torch.x or @torch.x(...) on DeepSpeed functions at import: hand the function
        # back unchanged.
        def deco(*args, **kwargs):
            if len(args) == 1 and callable(args[0]) and not kwargs:
                return args[0]
            return lambda fn: fn

        setattr(mod, name, deco)

    class dtype:
        # deepspeed/runtime/config.py DtypeEnum uses torch.float16/float32/int8/bfloat16 as enum
        # values (so they must be distinct and hashable) and serialises them with str().
        def __init__(self, name):
            self.name = name

        def __repr__(self):
            return "torch." + self.name

    torch = module("torch")
    # deepspeed/utils/torch.py required_torch_version() parses it at import.
    torch.__version__ = STUB_TORCH_VERSION
    torch.dtype = dtype
    for name in ("float16", "float32", "float64", "bfloat16", "complex64", "complex128", "uint8",
                 "int8", "int16", "int32", "int64", "bool"):
        setattr(torch, name, dtype(name))
    torch.half, torch.float = torch.float16, torch.float32
    torch.inf = float("inf")  # `from torch import inf` (runtime/utils.py)

    def const(owner, name):
        # An enum member or sentinel DeepSpeed uses as a default argument value.
        setattr(owner, name, type(name, (), {"__repr__": lambda self: f"<torch stub {name}>"})())

    def resolve(path):
        if path in sys.modules:
            return sys.modules[path]
        parent, _, child = path.rpartition(".")
        owner = resolve(parent) if parent else None
        return getattr(owner, child) if hasattr(owner, child) else module(path)

    make = {"module": lambda owner, n: module(f"{owner.__name__}.{n}"), "class": cls,
            "value_class": value_cls,
            "function": unavailable, "decorator": decorator, "const": const}
    for owner, kind, names in STUB_NAMES:
        target = resolve(owner)
        for name in names.split():
            make[kind](target, name)
    # The same class under torch's other import paths (runtime/engine.py `from torch.nn.modules
    # import Module`, runtime/zero/linear.py, module_inject/containers/bert.py).
    torch.nn.modules.Module = torch.nn.modules.module.Module = torch.nn.Module
    torch.nn.parameter.Parameter = torch.nn.Parameter
    # deepspeed/__init__.py checks torch.version.hip (ROCm) before importing triton.
    torch.version.hip = torch.version.cuda = None
    # elasticity/elastic_agent.py: `logger = get_logger()` at import.
    torch.distributed.elastic.utils.logging.get_logger = logging.getLogger
    return torch


def _import_deepspeed():
    stubbed = importlib.util.find_spec("torch") is None
    if stubbed:
        # Without torch, DeepSpeed's accelerator auto-detection would probe CUDA, MPS, ... through
        # torch; name the CPU accelerator (deepspeed/accelerator/real_accelerator.py).
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
        _install_torch_stub()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import deepspeed  # runs deepspeed/__init__.py, as for deepspeed.initialize() users
        import deepspeed.comm.comm
        from deepspeed.runtime.config import DeepSpeedConfig
        from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    # Import-time warnings say nothing about a config file; show them, do not fail on them.
    for w in caught:
        note(f"warning while importing deepspeed: {w.category.__name__}: {w.message}")
    return deepspeed, DeepSpeedConfig, DeepSpeedZeroConfig, stubbed


class DataParallelMpu:
    """The one thing DeepSpeedConfig asks of Megatron's mpu (config.py:725-726 at v0.16.5,
    :458-463 at v0.19.8): the data-parallel world size. Any other question is an AttributeError."""

    def __init__(self, dp):
        self.dp = dp

    def get_data_parallel_world_size(self):
        return self.dp


class InitialisedBackend:
    """Stands in for the comm backend that deepspeed.init_distributed() sets as
    deepspeed.comm.comm.cdb in a real run. DeepSpeedConfig only asks it for this process's rank
    (dist.get_rank(), config.py:724 at v0.16.5, :457 at v0.19.8); with an mpu it never asks for a
    world size, so that raises (and the world-size check below then names the problem)."""

    def is_initialized(self):
        return True

    def get_rank(self, group=None):
        return 0

    def get_world_size(self, group=None):
        raise RuntimeError("DeepSpeedConfig asked the comm backend for the world size")


class ReadTracker(dict):
    """A config (sub-)dict that records which keys DeepSpeed looks up (d[k], d.get(k), k in d,
    k in d.keys()). A dict whose keys are iterated (`**d` into a pydantic model, which then
    forbids unknown keys itself) counts as read whole, with everything under it."""

    def _mark(self, key):
        self._log["read"].add(self._path + (key,))

    def __getitem__(self, key):
        self._mark(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._mark(key)
        return super().get(key, default)

    def __contains__(self, key):
        self._mark(key)
        return super().__contains__(key)

    def pop(self, key, *default):
        self._mark(key)
        return super().pop(key, *default)

    def setdefault(self, key, default=None):
        self._mark(key)
        return super().setdefault(key, default)

    def keys(self):
        return TrackedKeys(self)

    # Iterating a section's items or values reads all of it: get_pipeline_config copies every
    # key of "pipeline" over its defaults (deepspeed/runtime/config.py:471 at v0.16.5), so no
    # key there is ignored.
    def items(self):
        self._log["whole"].add(self._path)
        return super().items()

    def values(self):
        self._log["whole"].add(self._path)
        return super().values()

    def __iter__(self):  # defined so that `**d` goes through keys() and __getitem__
        return super().__iter__()


class TrackedKeys:
    """d.keys() of a ReadTracker: `k in d.keys()` reads k, iterating reads them all."""

    def __init__(self, d):
        self.d = d

    def __contains__(self, key):
        return key in self.d

    def __iter__(self):
        self.d._log["whole"].add(self.d._path)
        return dict.__iter__(self.d)

    def __len__(self):
        return dict.__len__(self.d)


def tracked(value, path, log):
    if not isinstance(value, dict):
        return value
    d = ReadTracker((k, tracked(v, path + (k,), log)) for k, v in value.items())
    d.__dict__.update(_path=path, _log=log)  # kept by copy.copy(), which DeepSpeedConfig uses
    return d


def unread_keys(value, path, log):
    """Key paths under `value` that DeepSpeedConfig never looked up."""
    if path in log["whole"]:
        return []
    out = []
    for k, v in value.items():
        p = path + (k,)
        if p not in log["read"]:
            out.append(".".join(p))
        elif isinstance(v, dict):
            out += unread_keys(v, p, log)
    return out


_NOTED = set()


def note(msg):
    """Print a note once per run (DeepSpeed repeats some warnings for every model it builds)."""
    if msg not in _NOTED:
        _NOTED.add(msg)
        print(f"note: {msg}", file=sys.stderr)


def about_deepspeeds_code(w):
    """Python warnings that are about DeepSpeed's code, not the config it reads: pydantic's
    deprecation notes on how DeepSpeed uses pydantic (e.g. instance .model_fields, deprecated
    since pydantic 2.11), and the ResourceWarning for the file DeepSpeedConfig opens and never
    closes (`hjson.load(open(config, "r"), ...)`, runtime/config.py)."""
    import pydantic

    pydantic_deprecation = getattr(pydantic, "PydanticDeprecationWarning", None)
    return (issubclass(w.category, ResourceWarning) or
            (pydantic_deprecation is not None and issubclass(w.category, pydantic_deprecation)))


class Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def build(DeepSpeedConfig, config, dp):
    """DeepSpeedConfig(config, mpu) with DeepSpeed's WARNING+ log records and Python warnings
    captured; returns (config object or None, exception or None, problems)."""
    from deepspeed.utils import logger as ds_logger
    import deepspeed.comm.comm as ds_comm

    capture = Capture()
    saved = [(h, h.level) for h in ds_logger.handlers]
    for h, _ in saved:  # DeepSpeed's own stdout handler: we report what it would print
        h.setLevel(logging.CRITICAL + 1)
    ds_logger.addHandler(capture)
    saved_cdb = ds_comm.cdb
    if saved_cdb is None:
        ds_comm.cdb = InitialisedBackend()
    cfg = err = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            cfg = DeepSpeedConfig(config, mpu=DataParallelMpu(dp))
        except Exception as e:  # noqa: BLE001 - DeepSpeed raises AssertionError, ValueError,
            err = e  # pydantic.ValidationError, DeepSpeedConfigError, ...
        finally:
            ds_comm.cdb = saved_cdb
            ds_logger.removeHandler(capture)
            for h, level in saved:
                h.setLevel(level)
    problems = [f"DeepSpeed logged {r.levelname}: {r.getMessage()}" for r in capture.records]
    for w in caught:
        if issubclass(w.category, ResourceWarning):  # one note, not one per file
            note("ResourceWarning from DeepSpeed's own code: DeepSpeedConfig leaves the config "
                 "file open")
        elif about_deepspeeds_code(w):
            note(f"{w.category.__name__} from DeepSpeed's own code: {w.message}")
        else:
            problems.append(f"Python warning {w.category.__name__}: {w.message}")
    return cfg, err, problems


def check(path, dp, ds_classes, allow_unread):
    DeepSpeedConfig, DeepSpeedZeroConfig = ds_classes
    try:
        with open(path) as f:
            data = json.load(f)  # strict JSON; DeepSpeed itself would also take hjson
    except (OSError, ValueError) as e:
        return [f"not a JSON file: {e}"], []
    if not isinstance(data, dict):
        return ["not a JSON object"], []

    # 1. As deepspeed.initialize() reads it: from the path (hjson, duplicate keys refused).
    cfg, err, problems = build(DeepSpeedConfig, path, dp)
    if err is not None:
        return [f"{type(err).__name__}: {err}"] + problems, []
    if cfg.world_size != dp:
        problems.append(f"DeepSpeedConfig took world size {cfg.world_size}, not the mpu's {dp}; "
                        "its batch checks did not run for this plan")
    if not isinstance(cfg.zero_config, DeepSpeedZeroConfig):
        problems.append(f"zero_config is {type(cfg.zero_config).__name__}, not DeepSpeedZeroConfig")
    zero = data.get("zero_optimization")
    if isinstance(zero, dict) and "stage" in zero and cfg.zero_optimization_stage != zero["stage"]:
        problems.append(f"ZeRO stage read as {cfg.zero_optimization_stage}, file says "
                        f"{zero['stage']}")
    for key, attr in (("train_batch_size", "train_batch_size"),
                      ("train_micro_batch_size_per_gpu", "train_micro_batch_size_per_gpu"),
                      ("gradient_accumulation_steps", "gradient_accumulation_steps")):
        if key in data and getattr(cfg, attr) != data[key]:
            problems.append(f"{key} read as {getattr(cfg, attr)}, file says {data[key]}")

    # 2. Again from a dict that records DeepSpeed's look-ups: keys it silently ignores.
    log = {"read": set(), "whole": set()}
    _, err2, _ = build(DeepSpeedConfig, tracked(data, (), log), dp)
    notes = []
    if err2 is not None:
        problems.append(f"second read (from a dict) failed: {type(err2).__name__}: {err2}")
    else:
        unread = unread_keys(data, (), log)
        if unread:
            msg = "keys DeepSpeedConfig never reads (DeepSpeed ignores them): " + ", ".join(unread)
            (notes if allow_unread else problems).append(msg)
    return problems, notes


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        usage="%(prog)s --dp N CONFIG.json [CONFIG.json ...] | --each N CONFIG.json [--each ...]")
    ap.add_argument("--dp", type=int, help="the plan's data-parallel size, for CONFIG.json ...")
    ap.add_argument("--each", nargs=2, action="append", default=[], metavar=("N", "CONFIG.json"),
                    help="one more file with its own data-parallel size (one import for many "
                         "plans)")
    ap.add_argument("--allow-unread", action="store_true",
                    help="only note keys DeepSpeedConfig never reads, do not fail on them")
    ap.add_argument("configs", nargs="*", metavar="CONFIG.json")
    args = ap.parse_args()
    if args.configs and args.dp is None:
        ap.error("CONFIG.json needs --dp N")
    if args.dp is not None and not args.configs:
        ap.error("--dp N needs at least one CONFIG.json")
    jobs = [(args.dp, path) for path in args.configs]
    for n, path in args.each:
        if not n.isdigit():
            ap.error(f"--each {n} {path}: N must be a whole number")
        jobs.append((int(n), path))
    if not jobs:
        ap.error("no CONFIG.json given")
    if any(dp < 1 for dp, _ in jobs):
        ap.error("the data-parallel size must be at least 1")
    try:
        ds, DeepSpeedConfig, DeepSpeedZeroConfig, stubbed = _import_deepspeed()
    except Exception as e:  # noqa: BLE001
        if os.environ.get("CHECK_DS_TRACEBACK"):
            import traceback
            traceback.print_exc()
        print(f"error: cannot import deepspeed: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    version = getattr(ds, "__version__", "?")
    torch_note = ", torch stand-in" if stubbed else ""
    failed = 0
    for dp, path in jobs:
        problems, notes = check(path, dp, (DeepSpeedConfig, DeepSpeedZeroConfig),
                                args.allow_unread)
        for n in notes:
            note(f"{path}: {n}")
        if problems:
            failed += 1
            print(f"FAIL: {path} (deepspeed {version}{torch_note}, dp {dp}):")
            for p in problems:
                print("  " + p.replace("\n", "\n  "))
        else:
            print(f"ok: {path} (deepspeed {version})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
