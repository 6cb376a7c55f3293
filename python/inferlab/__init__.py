"""inferlab: the analytic model of LLM inference, from Python.

The same functions as the ``inferlab`` command line, in one process: no process start per call, and results
as plain Python (lists of dicts, one dict per row, columns in order) that turn into a pandas DataFrame
with ``.frame()`` when pandas is installed.

    >>> import inferlab
    >>> inferlab.model("llama-3-8b")["kv_heads"]
    8
    >>> step = inferlab.step("llama-2-7b", "h100-sxm-80gb", phase="decode", batch=8, context=4096)
    >>> step["bound"], round(step["tokens_per_s"])
    ('memory', ...)
    >>> ops = inferlab.ops("llama-2-7b", "h100-sxm-80gb", phase="prefill", context=2048)
    >>> ops.frame()[["op", "flops", "bytes", "ai", "predicted_s"]]          # with pandas

Models are names from ``inferlab.models()`` or the path of any Hugging Face ``config.json`` (or a folder
holding one); hardware a name from ``inferlab.hardware_names()`` or a path. Every other keyword is a
parameter of the scenario behind the function, spelled as in the specs (``dtype="fp8"``, ``kv_heads=8``,
``weight_format="int4"``, ``tp=2``, ``ceilings="measured"``); ``inferlab.scenarios()`` lists them with
their defaults. Bad input raises ``inferlab.Error`` (a ``ValueError``) with the message the CLI prints;
warnings about a model config (a field read with an assumption) are issued as Python warnings.
"""
import os as _os
import warnings as _warnings

# An installed package carries the lab's data in share/ (models, hardware, traces, specs, plot scripts);
# imported from a build tree it reads the source tree it was built from.
_SHARE = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "share")
if "INFERLAB_ROOT" not in _os.environ and _os.path.isdir(_os.path.join(_SHARE, "data", "models")):
    _os.environ["INFERLAB_ROOT"] = _SHARE

from . import _core  # noqa: E402
from ._core import Error  # noqa: E402,F401

__all__ = ["Error", "Rows", "frame", "root", "models", "hardware_names", "specs", "scenarios", "model", "hardware",
           "evaluate", "ops", "step", "memory", "serve", "speculative", "spec_rows", "run", "compare"]


class Rows(list):
    """Result rows: a list of dicts (one per row, columns in order; numbers as int or float, empty cells as
    None). ``rows.frame()`` gives them as a pandas DataFrame."""

    def frame(self):
        """The rows as a pandas DataFrame (ImportError naming the package when pandas is missing)."""
        return frame(self)

    def where(self, **equal):
        """The rows whose columns equal the given values: ``rows.where(op="attention")``."""
        return Rows(r for r in self if all(r.get(k) == v for k, v in equal.items()))


def frame(rows):
    """Rows (a list of dicts) as a pandas DataFrame, the columns in the rows' order."""
    try:
        import pandas
    except ImportError as e:
        raise ImportError("inferlab: DataFrames need pandas (Debian: python3-pandas); the rows are plain "
                          "lists of dicts without it") from e
    columns = list(dict.fromkeys(c for r in rows for c in r))
    return pandas.DataFrame(list(rows), columns=columns)


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple, dict, set)):
        raise Error(f"a parameter takes one value, not {type(value).__name__} {value!r}")
    return str(value)


def _params(**given):
    return {k: _text(v) for k, v in given.items() if v is not None}


def _warn():
    for w in _core.drain_warnings():
        _warnings.warn(w, stacklevel=3)


def _call(fn, *args):
    try:
        return fn(*args)
    finally:
        _warn()


def root():
    """The folder whose data/, experiments/ and plots/ the lab reads."""
    return _core.project_root()


def models():
    """Names of the shipped model configs (data/models)."""
    return _core.model_names()


def hardware_names():
    """Names of the shipped hardware files (data/hardware)."""
    return _core.hardware_names()


def specs():
    """Names of the shipped experiment specs (experiments/*.yaml)."""
    return _core.spec_names()


def scenarios():
    """Every scenario a point can be evaluated by: name, help and parameters (name, default, help)."""
    return _core.scenarios()


def model(name):
    """A model config as a dict: parameters, layers, hidden, heads, KV heads, head dim, experts, sliding
    window, KV values per token and layer, ... (``name``: a shipped name or a config.json path)."""
    return _call(_core.model, str(name))


def hardware(name, ceilings="datasheet"):
    """A GPU as a dict: memory bytes and bandwidth, dense tensor-core and vector peaks, launch overhead;
    ``ceilings`` as the CLI's --ceilings (datasheet, measured, auto or a measured file)."""
    return _call(_core.hardware, str(name), ceilings)


def evaluate(scenario, **params):
    """The predicted rows of one point of any scenario (``inferlab.scenarios()``), e.g.
    ``evaluate("linear", format="int4", m=1, n=4096, k=4096)``."""
    return Rows(_call(_core.evaluate, scenario, _params(**params)))


def ops(model, hardware, context, phase="decode", batch=1, **params):
    """Per-operator roofline of one forward step: a row per operator (FLOPs, bytes by role, arithmetic
    intensity, compute/memory/launch terms, predicted time, bound, share of the step), the collectives of
    a parallel layout, and a last row ``op == "total"`` for the whole step (``step()``). ``context``: the
    prompt tokens (prefill) or the tokens attended (decode)."""
    return evaluate("model", model=model, hardware=hardware, context=context, phase=phase, batch=batch, **params)


def step(model, hardware, context, phase="decode", batch=1, **params):
    """The whole step of ``ops()`` as one dict: predicted_s, tokens_per_s, bound, flops, bytes, ai, ..."""
    return ops(model, hardware, context, phase, batch, **params).where(op="total")[0]


def memory(model, context, batch=1, hardware=None, **params):
    """Weights, KV cache and activations of ``batch`` sequences of ``context`` tokens, and with a
    ``hardware``: whether they fit, the largest batch at this context and the longest context at this
    batch; contiguous vs paged KV reservation. One dict."""
    return evaluate("memory", model=model, context=context, batch=batch, hardware=hardware or "none", **params)[0]


def serve(model, hardware, timeline_every_s=0, **params):
    """Serving simulation of a request trace (generated: ``requests``, ``rate``, ``seed``; or ``trace``, a
    CSV path) by a scheduler (``scheduler="continuous"``, static, chunked) and KV allocator (``kv="paged"``,
    contiguous; paged admits ``admission="optimistic"`` or reserve). Returns the summary row (throughput, TTFT/TPOT/latency percentiles, KV memory); with
    ``timeline_every_s`` > 0, all rows: the summary first, then one row per sample of the timeline."""
    rows = evaluate("serving", model=model, hardware=hardware, sample_every_s=timeline_every_s, **params)
    return rows if timeline_every_s else rows[0]


def speculative(target, hardware, alpha, gamma, **params):
    """Speculative decoding at acceptance rate ``alpha`` and draft length ``gamma``: expected tokens per
    target pass, speedup (cost model and closed form). One dict."""
    return evaluate("speculative", target=target, hardware=hardware, alpha=alpha, gamma=gamma, **params)[0]


def spec_rows(spec, ceilings=None, shard=None):
    """Every row of an experiment spec (a path, or a shipped spec's name), predicted in memory: nothing is
    written. ``shard="I/N"`` keeps every N-th point from the I-th (as ``inferlab run --shard``)."""
    result = _call(_core.spec_rows, _spec_path(spec), ceilings or "", shard or "")
    result["rows"] = Rows(result["rows"])
    return result


def run(spec, out, predict_only=True, ceilings=None, shard=None, plots=False, fresh=False):
    """Runs a spec as ``inferlab run`` does: its CSV and provenance JSON written into ``out`` (atomically;
    measurements of an earlier run there kept), figures drawn when ``plots``. Returns a dict with the file
    paths, the figures and the rows as written."""
    result = _call(_core.run_spec, _spec_path(spec), str(out), predict_only, ceilings or "", shard or "", plots, fresh)
    result["rows"] = Rows(result["rows"])
    return result


def compare(models, hardware, **params):
    """Models or GPUs side by side, a row per (model, hardware): weights, KV cache per token, whether the
    batch fits and the largest batch at the context, prefill and decode step times and tokens/s.
    ``models`` and ``hardware``: a name or a list; parameters as ``inferlab compare`` (batch, context,
    dtype, kv_dtype, ceilings, ...)."""
    as_list = lambda v: [str(x) for x in ([v] if isinstance(v, str) else v)]
    return Rows(_call(_core.compare, as_list(models), as_list(hardware), _params(**params)))


def _spec_path(spec):
    spec = str(spec)
    if _os.path.exists(spec):
        return spec
    shipped = _os.path.join(root(), "experiments", spec + ("" if spec.endswith(".yaml") else ".yaml"))
    return shipped if _os.path.exists(shipped) else spec
