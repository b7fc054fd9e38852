"""A faster graph for the encoder: its MatMul weights as int8, per output channel, and its
elementwise tails fused.

The bundled MiniLM "int8" file stores int8 weights that onnxruntime dequantizes when it loads them,
so every MatMul runs in float32 and one short question costs ~15 ms on one core. Made once per
model file, on first use, into the model cache: the dequantizing nodes folded by onnxruntime's
basic graph optimisation (constant folding), then onnxruntime's dynamic quantization with
per-channel int8 weights (`MatMulInteger`). A question of 27 tokens: 8-10 ms on one core against
15-17 ms, its vector at cosine 0.993 on average (0.979 at worst) to the float graph's over the 239
EgoLifeQA DAY1-2 questions. Then two rewrites that give the same numbers with fewer nodes
(`simplify`): the export's NaN guard after each softmax (`Where(IsNaN(p), 0, p)`: a row of
attention is never all masked, since every text keeps its [CLS] and [SEP]) is dropped, and
each GELU written out as `x * (0.5 * (1 + erf(x / sqrt 2)))`, a pattern onnxruntime's own
fusion does not match, becomes one `Gelu` node (onnxruntime then folds its bias in). Sessions
are opened without onnxruntime's SkipLayerNormalization fusion, whose CPU kernel is slower than
the Add and LayerNormalization it replaces (`DISABLED`). 16 units of 92 tokens on one thread:
231 ms through the float graph, 116 ms int8, 82 ms with all of the above. With
`retrieval.units_int8` (default) units are embedded through it too, so questions and units
share one graph. Any failure (the `onnx` package missing, an export the quantizer cannot read)
is a warning and the float graph serves.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path

from models.bundled import cache_dir, quiet_stderr

logger = logging.getLogger(__name__)
RECIPE = "fold+dynamic-int8-per-channel+no-nan-guard+gelu-v2"  # part of the marker: a new recipe makes the file again
DISABLED = ["SkipLayerNormFusion"]  # onnxruntime fusions that cost more than they save here


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class _Hush(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "onnxruntime" not in record.pathname


def _make(model: Path, target: Path) -> None:
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        folded = Path(tmp) / "folded.onnx"
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        opts.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        part = Path(tmp) / "q.onnx"
        hush = _Hush()
        logging.getLogger().addFilter(hush)  # the quantizer's advice is logged on the root logger
        try:
            with quiet_stderr():
                quantize_dynamic(str(folded), str(part), weight_type=QuantType.QInt8, per_channel=True)
        finally:
            logging.getLogger().removeFilter(hush)
        simplify(part)
        _check(model, part)
        os.replace(part, target)


def _check(model: Path, made: Path) -> None:
    """The graph made must load and give the source graph's outputs on a small batch to within
    int8's rounding, or it is not used (the caller falls back to the float graph)."""
    import numpy as np
    import onnxruntime as ort

    ids = np.array([[101, 2040, 2109, 1996, 11213, 2034, 102, 0], [101, 7570, 2003, 2437, 1037, 3419, 2185, 102]])
    want, got = (ort.InferenceSession(str(p), providers=["CPUExecutionProvider"], disabled_optimizers=DISABLED)
                 for p in (model, made))
    names = {i.name for i in want.get_inputs()}
    feed = {k: v for k, v in {"input_ids": ids, "attention_mask": (ids > 0).astype(np.int64),
                              "token_type_ids": np.zeros_like(ids)}.items() if k in names}
    a, b = want.run(None, feed)[0], got.run(None, feed)[0]
    if a.shape != b.shape or np.isnan(b).any():
        raise ValueError(f"the int8 graph gives {b.shape} where the float one gives {a.shape}, or NaN")
    m = (ids > 0)[:, :, None]
    pa, pb = (a * m).sum(1), (b * m).sum(1)  # mean-pooled, as the encoder reads it
    cos = (pa * pb).sum(1) / (np.linalg.norm(pa, axis=1) * np.linalg.norm(pb, axis=1))
    if cos.min() < 0.97:
        raise ValueError(f"the int8 graph strays from the float one (cosine {cos.min():.3f})")


def simplify(path: Path) -> tuple[int, int]:
    """Drops the softmax NaN guards and fuses the written-out GELUs of the graph at `path`, in
    place; returns how many of each."""
    import onnx

    m = onnx.load(str(path))
    guards = _drop_nan_guards(m.graph)
    gelus = _fuse_gelus(m.graph)
    if gelus and not any(o.domain == "com.microsoft" for o in m.opset_import):
        m.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))
    used = {i for n in m.graph.node for i in n.input}
    keep = [t for t in m.graph.initializer if t.name in used]
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)
    onnx.save(m, str(path))
    return guards, gelus


def _links(graph):
    made = {o: n for n in graph.node for o in n.output}
    users: dict[str, list] = {}
    for n in graph.node:
        for i in n.input:
            users.setdefault(i, []).append(n)
    return made, users


def _drop_nan_guards(graph) -> int:
    """`Where(IsNaN(p), c, p)` -> `p`."""
    made, users = _links(graph)
    drop, rename = set(), {}
    for n in graph.node:
        guard = made.get(n.input[0]) if n.op_type == "Where" and len(n.input) == 3 else None
        if (guard is not None and guard.op_type == "IsNaN" and guard.input[0] == n.input[2]
                and getattr(made.get(n.input[2]), "op_type", "") == "Softmax" and len(users[guard.output[0]]) == 1):
            rename[n.output[0]] = n.input[2]
            drop.update((id(n), id(guard)))
    _replace(graph, drop, {}, rename)
    return len(rename)


def _fuse_gelus(graph) -> int:
    """`x * (0.5 * (1 + erf(x / sqrt 2)))` -> `Gelu(x)` (com.microsoft)."""
    import onnx

    made, users = _links(graph)
    drop, new = set(), {}
    for erf in graph.node:
        if erf.op_type != "Erf" or erf.input[0] not in made:
            continue
        div = made[erf.input[0]]
        chain = [div, erf]
        for _ in range(3):  # Add 1, Mul 0.5, Mul x
            nxt = users.get(chain[-1].output[0], [])
            if len(nxt) != 1:
                break
            chain.append(nxt[0])
        if len(chain) != 5 or [c.op_type for c in chain] != ["Div", "Erf", "Add", "Mul", "Mul"]:
            continue
        x, out = div.input[0], chain[-1]
        if x not in out.input:
            continue
        drop.update(id(c) for c in chain)
        new[id(out)] = onnx.helper.make_node("Gelu", [x], [out.output[0]], name=out.name + "_gelu",
                                             domain="com.microsoft")
    _replace(graph, drop, new, {})
    return len(new)


def _replace(graph, drop: set[int], new: dict, rename: dict[str, str]) -> None:
    nodes = [new[id(n)] if id(n) in new else n for n in graph.node if id(n) in new or id(n) not in drop]
    for n in nodes:
        for k, i in enumerate(n.input):
            if i in rename:
                n.input[k] = rename[i]
    del graph.node[:]
    graph.node.extend(nodes)


def query_graph(model: Path) -> Path | None:
    """The int8 graph of `model` (made once, kept in the model cache), or None: use the model
    itself."""
    model = Path(model)
    try:
        key = f"{_digest(model)} {RECIPE}"
        target = cache_dir() / f"{model.stem}-{key[:12]}.query-int8.onnx"
        ok = target.with_name(target.name + ".ok")
        if target.exists() and ok.exists() and ok.read_text() == key:
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        _make(model, target)
        ok.write_text(key)
        logger.info("int8 encoder graph made", extra={"path": str(target), "from": str(model)})
        return target
    except Exception as e:  # noqa: BLE001 - a faster question graph is an optimisation, never a failure
        logger.warning("encoder stays float32: %s", e, extra={"model": str(model)})
        return None
