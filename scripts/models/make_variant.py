#!/usr/bin/env python3
"""Make a copy of an ONNX variant for `modelless variants make`.

  make_variant.py fp16|folded|int8-dynamic|int8-static IN.onnx OUT.onnx [CALIBRATION_DIR]

fp16: weights and activations in half precision with ONNX Runtime's own converter
(onnxruntime.transformers.float16; onnxconverter-common's, the same code, where
onnxruntime's Python package is missing), inputs and outputs kept in fp32, so that
the copy takes and gives what the task's other variants do.

folded: float32 still, the element-wise steps around the convolutions taken into
them (see `folded`): the same outputs up to float rounding, fewer passes over the
activations; timed like int8-dynamic. Refused where there is nothing to fold.

int8-dynamic: weights int8 per channel, activations quantised at run time
(onnxruntime.quantization.quantize_dynamic); timed on the inputs in CALIBRATION_DIR
where given, else on synthetic ones.

int8-static: QDQ, weights int8 per channel, activations calibrated (min/max) on the
inputs in CALIBRATION_DIR (`meta.json`: the input's name and each input's shape, which
may differ where the input follows the image's size; `inputs.f32`: the inputs,
little-endian float32, one after another), made by the caller through the
variant's own preprocessing. Opsets below 13 are converted to 13 first (per-channel
weights need it). Scalar affine steps and written-out hard-swish activations
around the convolutions (PP-OCR's LCNet blocks) are first taken into them in float,
exactly (see `folded`). Two thirds calibrate, the rest is held out: each way of quantising
tried is measured there against the float model, for agreement (see `agreement`)
and for speed. Tried: everything quantised; the first 1, 2, 3 or 5 convolutions kept
in float (the layers nearest the pixels lose most to 8 bits); only convolutions and
matrix products quantised, the element-wise operators between them in float (each
quantised tensor adds its own rounding). Activations are unsigned: ONNX Runtime's x86 int8
kernels multiply u8 by s8, and signed activations measured slower than float here.
Kept is the fastest of those that agree within the noise of the best (one point, or
for a classifier two held-out inputs where that is more), timed again together in
seven interleaved rounds. Each of those ways is tried twice: as it is, and with
each quantised convolution's and Gemm's bias corrected for the mean its rounded
weights add (see `bias_corrected`).

Both int8 kinds time the copy against the original, interleaved, on the same inputs.
Says each step on stderr as `progress: …`, and at the end prints one JSON line: what
was converted, what was kept in float and why, how each candidate agreed, and the
measured speed ratio.
"""
import json
import os
import sys
import time


def fp16(src, dst):
    import onnx
    try:
        from onnxruntime.transformers.float16 import convert_float_to_float16
    except ImportError:
        from onnxconverter_common.float16 import convert_float_to_float16

    model = onnx.load(src)
    before = sum(1 for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT)
    # keep_io_types: the copy's inputs and outputs stay fp32 (casts at the edges).
    half = convert_float_to_float16(model, keep_io_types=True, disable_shape_infer=False)
    after = sum(1 for t in half.graph.initializer if t.data_type == onnx.TensorProto.FLOAT16)
    casts = sum(1 for n in half.graph.node if n.op_type == "Cast")
    save(half, dst)
    return {"kind": "fp16", "weights_fp32": before, "weights_fp16": after, "casts": casts,
            "kept_fp32": "inputs and outputs"}


def progress(step):
    print(f"progress: {step}", file=sys.stderr, flush=True)


def save(model, dst):
    import onnx
    tmp = dst + ".partial"
    onnx.save(model, tmp)
    os.replace(tmp, dst)


def session(path):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    options.log_severity_level = 3
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def read_inputs(folder, model):
    """The calibration inputs, each with its own shape, and the name of the model
    input they are for (its first, where the caller named none)."""
    import numpy as np
    with open(os.path.join(folder, "meta.json")) as f:
        meta = json.load(f)
    name = meta.get("input") or session(model).get_inputs()[0].name
    data = np.fromfile(os.path.join(folder, "inputs.f32"), dtype="<f4")
    inputs, at = [], 0
    for shape in meta["shapes"]:
        size = int(np.prod(shape))
        if at + size > data.size:
            break
        inputs.append(data[at:at + size].reshape(shape))
        at += size
    if len(inputs) < 3:
        sys.exit(f"{folder}: {len(inputs)} calibration inputs; at least 3 are needed")
    return name, inputs


def synthetic_inputs(path):
    """Inputs for timing a model no calibration came with: its first input, batch 1,
    dynamic sides at 224, filled with a fixed pattern."""
    import numpy as np
    first = session(path).get_inputs()[0]
    shape = [d if isinstance(d, int) and d > 0 else 224 for d in first.shape[1:]]
    rng = np.random.default_rng(0)
    return first.name, list(rng.uniform(-1, 1, size=[8] + shape).astype("float32"))


def collapsed(steps):
    """A recogniser's text by greedy CTC decoding, as class indices: the top class of
    each step, repeats merged, the blank (class 0) dropped."""
    out, previous = [], 0
    for c in steps.argmax(-1):
        if c != previous and c != 0:
            out.append(int(c))
        previous = c
    return out


def edits(a, b):
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def agreement(reference, candidate):
    """How alike two models' outputs are, input by input, on average: the top-1 of a
    classifier's scores (`[1, classes]`); for a recogniser's steps (`[1, steps,
    classes]`), one less the edit distance between the texts greedy CTC decoding
    reads, over the original's length (most steps are blanks, so the steps' own top-1
    says little); else the share of elements on the same side of 0.3 (a detector's
    probability map)."""
    import numpy as np
    shares = []
    for a, b in zip(reference, candidate):
        a, b = np.asarray(a), np.asarray(b)
        if a.ndim == 2 and a.shape[-1] > 1:
            shares.append(np.mean(a.argmax(-1) == b.argmax(-1)))
        elif a.ndim == 3 and a.shape[-1] > 1:
            for x, y in zip(a, b):
                want, got = collapsed(x), collapsed(y)
                shares.append(1 - min(1, edits(want, got) / max(1, len(want))))
        else:
            shares.append(np.mean((a > 0.3) == (b > 0.3)))
    return float(np.mean(shares))


def outputs(sess, name, inputs):
    return [sess.run(None, {name: x[None]})[0] for x in inputs]


def speed_ratio(original, copy, name, inputs, rounds=5):
    """The copy's throughput over the original's (see `speed_ratios`)."""
    return speed_ratios(original, [copy], name, inputs, rounds)[0]


def speed_ratios(original, copies, name, inputs, rounds=5):
    """Each copy's throughput over the original's, in interleaved rounds (the
    machine's pace drifts), median of the rounds. A round runs the original and then
    each copy, in batches of up to 8 inputs of one shape, for up to 6 shapes (inputs
    that follow the image's size come in many), each for about a quarter of a
    second."""
    import numpy as np
    by_shape = {}
    for x in inputs:
        by_shape.setdefault(x.shape, []).append(x)
    groups = sorted(by_shape.values(), key=len, reverse=True)[:6]
    batches = [np.stack(group[:8]) for group in groups]
    first, others = session(original), [session(copy) for copy in copies]

    def once(sess):
        for batch in batches:
            sess.run(None, {name: batch})

    for sess in [first] + others:
        once(sess)
    start = time.perf_counter()
    once(first)
    repeats = max(1, int(0.25 / max(time.perf_counter() - start, 1e-6)))

    def timed(sess):
        start = time.perf_counter()
        for _ in range(repeats):
            once(sess)
        return time.perf_counter() - start

    ratios = [[] for _ in others]
    for _ in range(rounds):
        base = timed(first)
        for index, sess in enumerate(others):
            ratios[index].append(base / timed(sess))
    return [round(float(np.median(r)), 3) for r in ratios]


def named(src, dst, why="per-channel quantisation needs it"):
    """`src` at opset 13 or later, with every node named (the quantiser excludes nodes
    by name) and optimised as the quantiser recommends; written to `dst`."""
    import onnx
    from onnx import version_converter
    from onnxruntime.quantization.shape_inference import quant_pre_process
    model = onnx.load(src)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 13:
        # Per-channel weights need DequantizeLinear's `axis`, which opset 13 brought.
        progress(f"converting opset {opset} to 13 ({why})")
        onnx.save(version_converter.convert_version(model, 13), dst)
        src = dst
    quant_pre_process(src, dst, skip_symbolic_shape=True)
    model = onnx.load(dst)
    for index, node in enumerate(model.graph.node):
        if not node.name:
            node.name = f"{node.op_type}_{index}"
    onnx.save(model, dst)
    return model


def folded(model):
    """`model` (an onnx ModelProto, changed in place) with the element-wise steps
    around its convolutions taken into them, exactly up to float rounding, as
    PP-OCR's LCNet blocks have them (conv, scalar affine, hard-swish written out as
    x·clip(x+3, 0, 6)/6, scalar affine, conv): a scalar affine step (Mul, Add) after a
    convolution goes into its weights and bias; the written-out hard-swish becomes
    one HardSwish node (opset 14); a scalar affine step whose output only
    convolutions take goes into their weights (the scale, exact under zero padding)
    and one Add (the shift, over the scale). Each element-wise operator costs a pass
    over the activations in float, and a rounding once quantised. Returns how many of
    each were rewritten."""
    import numpy as np
    from onnx import helper, numpy_helper
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    counts = {"affine steps after convolutions": 0, "hard-swish activations": 0,
              "affine steps before convolutions": 0}

    def scalar(name):
        if name not in inits or int(np.prod(inits[name].dims)) != 1:
            return None
        return float(numpy_helper.to_array(inits[name]).ravel()[0])

    def split(node):
        """A binary node's tensor input and the value of its scalar one."""
        a, b = node.input
        return (b, scalar(a)) if scalar(a) is not None else (a, scalar(b))

    def constant(value, name):
        graph.initializer.append(numpy_helper.from_array(value.astype(np.float32), name))
        inits[name] = graph.initializer[-1]
        return name

    def takers():
        taken = {}
        for node in graph.node:
            for name in node.input:
                taken.setdefault(name, []).append(node)
        for output in graph.output:
            taken.setdefault(output.name, []).append(None)
        return taken

    def only(taken, name, op):
        nodes = taken.get(name, [])
        return nodes[0] if len(nodes) == 1 and nodes[0] is not None and nodes[0].op_type == op else None

    def without(gone, replaced=None):
        """The graph less the nodes in `gone`, those in `replaced` put in their place."""
        replaced = replaced or {}
        kept = [replaced.get(id(n), n) for n in graph.node if id(n) not in gone or id(n) in replaced]
        kept = [type(n).FromString(n.SerializeToString()) for n in kept]
        del graph.node[:]
        graph.node.extend(kept)

    gone, taken = set(), takers()
    for conv in graph.node:
        mul = only(taken, conv.output[0], "Mul") if conv.op_type == "Conv" else None
        if mul is None or split(mul)[1] is None or conv.input[1] not in inits:
            continue
        scale = split(mul)[1]
        add = only(taken, mul.output[0], "Add")
        shift = split(add)[1] if add is not None else None
        last = add if shift is not None else mul
        has_bias = len(conv.input) > 2
        if has_bias and conv.input[2] not in inits:
            continue
        weights = numpy_helper.to_array(inits[conv.input[1]])
        bias = numpy_helper.to_array(inits[conv.input[2]]) if has_bias else np.zeros(weights.shape[0], np.float32)
        conv.input[1] = constant(weights * scale, f"{conv.name}.folded_weights")
        bias_name = constant(bias * scale + (shift or 0.0), f"{conv.name}.folded_bias")
        if has_bias:
            conv.input[2] = bias_name
        else:
            conv.input.append(bias_name)
        conv.output[0] = last.output[0]
        gone.update({id(mul), id(last)})
        counts["affine steps after convolutions"] += 1
    without(gone)

    gone, replaced, taken = set(), {}, takers()
    for add in graph.node:
        if add.op_type != "Add" or split(add)[1] != 3.0:
            continue
        x = split(add)[0]
        clip = only(taken, add.output[0], "Clip")
        if clip is None or len(clip.input) != 3 or (scalar(clip.input[1]), scalar(clip.input[2])) != (0.0, 6.0):
            continue
        mul = only(taken, clip.output[0], "Mul")
        div = only(taken, mul.output[0], "Div") if mul is not None and x in mul.input else None
        if div is None or scalar(div.input[1]) != 6.0:
            continue
        replaced[id(div)] = helper.make_node("HardSwish", [x], [div.output[0]], name=f"{div.name}.hard_swish")
        gone.update({id(add), id(clip), id(mul), id(div)})
        counts["hard-swish activations"] += 1
    without(gone, replaced)

    gone, taken = set(), takers()
    for mul in graph.node:
        x, scale = split(mul) if mul.op_type == "Mul" and len(mul.input) == 2 else (None, None)
        add = only(taken, mul.output[0], "Add") if scale is not None and abs(scale) > 1e-6 else None
        shift = split(add)[1] if add is not None else None
        convs = taken.get(add.output[0], []) if shift is not None else []
        if not convs or any(c is None or c.op_type != "Conv" or c.input[1] not in inits for c in convs):
            continue
        for conv in convs:
            weights = numpy_helper.to_array(inits[conv.input[1]])
            conv.input[1] = constant(weights * scale, f"{conv.name}.scaled_weights")
        add.input[:] = [x, constant(np.array([shift / scale]), f"{mul.name}.shift")]
        gone.add(id(mul))
        counts["affine steps before convolutions"] += 1
    without(gone)

    if counts["hard-swish activations"]:
        for opset in model.opset_import:
            if opset.domain in ("", "ai.onnx") and opset.version < 14:
                opset.version = 14
    used = {name for node in graph.node for name in node.input}
    unused = [t for t in graph.initializer if t.name not in used]
    for t in unused:
        graph.initializer.remove(t)
    return counts


def folds_said(rewritten):
    """What `folded` rewrote, in words."""
    return ", ".join(f"{n} {what}" for what, n in rewritten.items()) + " taken into the convolutions"


def fp32_folded(src, dst, folder=None):
    prepared = dst + ".prepared.onnx"
    model = named(src, prepared, why="the rewrite works on opset 13 and later")
    os.remove(prepared)
    rewritten = {what: n for what, n in folded(model).items() if n}
    if not rewritten:
        sys.exit("nothing to fold: no scalar affine step or written-out hard-swish sits next to a convolution, "
                 "so the copy would be the original")
    save(model, dst)
    name, inputs = read_inputs(folder, src) if folder else synthetic_inputs(src)
    progress("timing the copy against the original")
    ratio = speed_ratio(src, dst, name, inputs)
    return {"kind": "folded", "rewritten": rewritten, "kept_float": "everything (float32)",
            "kept_float_why": "a float copy: only the graph is rewritten",
            "rewritten_why": f"{folds_said(rewritten)}, exact up to float rounding", "speed_ratio": ratio}

def int8_dynamic(src, dst, folder=None):
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    prepared = dst + ".prepared.onnx"
    named(src, prepared)
    progress("quantising the weights")
    quantize_dynamic(prepared, dst + ".partial", per_channel=True, weight_type=QuantType.QInt8)
    os.replace(dst + ".partial", dst)
    os.remove(prepared)
    ops = {}
    for node in onnx.load(dst).graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    name, inputs = read_inputs(folder, src) if folder else synthetic_inputs(src)
    progress("timing the copy against the original")
    ratio = speed_ratio(src, dst, name, inputs)
    report = {"kind": "int8-dynamic", "integer_ops": {k: v for k, v in ops.items() if "Integer" in k},
              "kept_float": "activations between the integer operators (quantised at run time)",
              "speed_ratio": ratio}
    if ratio < 1.0 and ops.get("ConvInteger"):
        report["slower_because"] = (
            "its convolutions became ConvInteger, which ONNX Runtime runs without the fast int8 "
            "kernels its static QDQ convolutions get, and every activation is quantised again at run "
            "time; dynamic quantisation pays off for MatMul-heavy models, not convolutional ones")
    return report


def input_means(path, name, inputs, tensors):
    """The mean of each channel (axis 1) of each of `tensors` in the float model at
    `path`, over `inputs`."""
    import numpy as np
    import onnx
    from onnx import helper
    model = onnx.load(path)
    given = {i.name for i in model.graph.input}
    inner = [t for t in tensors if t not in given]
    del model.graph.output[:]
    for t in inner:
        model.graph.output.append(helper.make_tensor_value_info(t, onnx.TensorProto.FLOAT, None))
    sess = session(model.SerializeToString()) if inner else None
    sums = {}
    for x in inputs:
        values = dict(zip(inner, sess.run(None, {name: x[None]}))) if inner else {}
        values.update({t: x[None] for t in tensors if t in given})
        for t, v in values.items():
            axes = tuple(a for a in range(v.ndim) if a != 1)
            sums[t] = sums.get(t, 0) + v.mean(axis=axes, dtype=np.float64)
    return {t: v / len(inputs) for t, v in sums.items()}


def bias_corrected(model, means, excluded):
    """`model` (an onnx ModelProto, changed in place) with each quantised convolution's
    and Gemm's bias less the mean its int8 weights add to the output: the
    weights rounded as the quantiser rounds them (symmetric, per output channel,
    ±127), their error times the mean of each input channel on the calibration
    inputs. Rounding errors that lean one way in a channel shift every output of it;
    over fifty layers the shifts add up to a different answer. Returns how many
    biases changed."""
    import numpy as np
    from onnx import helper, numpy_helper
    inits = {i.name: i for i in model.graph.initializer}
    changed = 0
    for node in model.graph.node:
        if node.op_type not in ("Conv", "Gemm") or node.name in excluded or len(node.input) < 3:
            continue
        if node.input[1] not in inits or node.input[2] not in inits or node.input[0] not in means:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        weights = numpy_helper.to_array(inits[node.input[1]]).astype(np.float64)
        if node.op_type == "Gemm":
            if attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0 or attrs.get("transA", 0):
                continue
            weights = weights if attrs.get("transB", 0) else weights.T
            weights = weights[:, :, None, None]
        bias = numpy_helper.to_array(inits[node.input[2]]).astype(np.float64)
        if bias.shape != (weights.shape[0],):
            continue
        flat = weights.reshape(weights.shape[0], -1)
        scale = np.abs(flat).max(axis=1) / 127.0
        scale[scale == 0] = 1.0
        error = np.clip(np.rint(flat / scale[:, None]), -127, 127) * scale[:, None] - flat
        error = error.reshape(weights.shape).sum(axis=(2, 3))
        mean = means[node.input[0]]
        per_group = error.shape[1]
        groups = attrs.get("group", 1)
        outputs_per_group = weights.shape[0] // groups
        taken = np.stack([mean[(o // outputs_per_group) * per_group:(o // outputs_per_group + 1) * per_group]
                          for o in range(weights.shape[0])])
        shift = (error * taken).sum(axis=1)
        inits[node.input[2]].CopyFrom(numpy_helper.from_array((bias - shift).astype(np.float32), node.input[2]))
        changed += 1
    return changed


def int8_static(src, dst, folder):
    import numpy as np
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    name, inputs = read_inputs(folder, src)
    split = max(1, len(inputs) * 2 // 3)
    calibration, held_out = inputs[:split], inputs[split:]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{name: x[None]} for x in calibration])

        def get_next(self):
            return next(self.items, None)

    prepared = dst + ".prepared.onnx"
    model = named(src, prepared)
    rewritten = {what: n for what, n in folded(model).items() if n}
    float_ratio = None
    if rewritten:
        onnx.save(model, prepared)
        progress("rewritten in float: " + ", ".join(f"{n} {what}" for what, n in rewritten.items()))
        float_ratio = speed_ratio(src, prepared, name, held_out, rounds=3)
        progress(f"  the rewritten float model alone runs {float_ratio:.2f}x the original")
    convs = [n.name for n in model.graph.node if n.op_type == "Conv"]
    reference = outputs(session(src), name, held_out)
    products = ["Conv", "MatMul", "Gemm"]
    everything = {"nodes_to_exclude": []}
    candidates = [("every operator quantised", everything)]
    candidates += [(f"the first {k} convolution{'s' if k > 1 else ''} in float", {"nodes_to_exclude": convs[:k]})
                   for k in (1, 2, 3, 5) if k <= len(convs)]
    candidates += [("only convolutions and matrix products quantised, the element-wise operators between them "
                    "in float", {"nodes_to_exclude": [], "op_types_to_quantize": products})]
    weighted = [n for n in model.graph.node if n.op_type in ("Conv", "Gemm") and len(n.input) > 2]
    means = input_means(prepared, name, calibration, {n.input[0] for n in weighted})
    candidates = [(f"{label}, biases corrected", {**choice, "correct_biases": True}) for label, choice in candidates] \
        + candidates
    tried = []
    for index, (label, choice) in enumerate(candidates):
        progress(f"candidate {index + 1} of {len(candidates)}: {label}")
        out, quantised = f"{dst}.candidate{index}.onnx", prepared
        choice = dict(choice)
        correct = choice.pop("correct_biases", False)
        if correct:
            corrected = onnx.load(prepared)
            bias_corrected(corrected, means, set(choice["nodes_to_exclude"]))
            quantised = f"{dst}.corrected.onnx"
            onnx.save(corrected, quantised)
        arguments = {"quant_format": QuantFormat.QDQ, "per_channel": True,
                     "activation_type": QuantType.QUInt8, "weight_type": QuantType.QInt8, **choice}
        quantize_static(quantised, out, Reader(), **arguments)
        if quantised != prepared:
            os.remove(quantised)
        agreed = agreement(reference, outputs(session(out), name, held_out))
        kept = choice["nodes_to_exclude"] or ([f"every operator but {', '.join(products)}"]
                                              if "op_types_to_quantize" in choice else [])
        tried.append({"candidate": label, "kept_float": kept, "agreement": round(agreed, 4),
                      "biases_corrected": correct,
                      "speed_ratio": speed_ratio(src, out, name, held_out, rounds=3), "file": out})
        progress(f"  agreed {agreed * 100:.1f} % on {len(held_out)} held-out inputs, "
                 f"{tried[-1]['speed_ratio']:.2f}x the original's speed")
    best = max(t["agreement"] for t in tried)
    # A classifier's input agrees or not, so 80 held-out inputs only tell points
    # apart; a recogniser's text or a detector's map is a share of many characters or
    # pixels, where two points of agreement were two and a half points of a page's
    # character accuracy.
    top1 = all(np.asarray(r).ndim == 2 and np.asarray(r).shape[-1] > 1 for r in reference)
    noise = max(0.01, 2 / len(held_out)) if top1 else 0.01
    # Each candidate's speed above came from three short rounds, too few to tell
    # near ones apart on a machine whose pace drifts: those in the band are timed
    # again, together, in more rounds, and the fastest of that timing is kept.
    band = [t for t in tried if t["agreement"] >= best - noise - 1e-9]
    retimed = len(band) > 1
    if retimed:
        progress(f"timing the {len(band)} ways within the band again, together")
        for t, ratio in zip(band, speed_ratios(src, [t["file"] for t in band], name, held_out, rounds=7)):
            t["speed_ratio"] = ratio
    chosen = max(band, key=lambda t: t["speed_ratio"])
    os.replace(chosen["file"], dst)
    for t in tried:
        leftover = t.pop("file")
        if os.path.exists(leftover):
            os.remove(leftover)
    os.remove(prepared)
    kept = chosen["kept_float"]
    plain = next(t["agreement"] for t in tried if t["candidate"] == "every operator quantised")
    what = ", ".join(kept) if kept else "nothing"
    corrected = " (biases corrected for the weights' rounding)" if chosen["biases_corrected"] else ""
    why = (f"{what}{corrected}: of the ways tried that agreed with the original within {noise * 100:.1f} points of "
           f"the best ({best * 100:.1f} %) on the held-out inputs, this one ran fastest ({chosen['speed_ratio']:.2f}x "
           f"the original); it agreed {chosen['agreement'] * 100:.1f} %, everything quantised as it is "
           f"{plain * 100:.1f} %")
    ratio = chosen["speed_ratio"]
    report = {"kind": "int8-static", "format": "QDQ, weights int8 per channel, activations min/max",
              "calibration_inputs": len(calibration), "held_out_inputs": len(held_out),
              "chosen": chosen["candidate"], "kept_float": kept, "kept_float_why": why,
              "biases_corrected": chosen["biases_corrected"], "candidates": tried, "speed_ratio": ratio}
    if rewritten:
        report["rewritten"] = rewritten
        report["rewritten_why"] = (
            f"before quantising, {folds_said(rewritten)} (exact up to float rounding: one pass and, "
            f"once quantised, one rounding fewer each); that float model alone ran {float_ratio:.2f}x the "
            f"original, so of the copy's {ratio:.2f}x, int8 gives {ratio / float_ratio:.2f}x")
    faster = [t for t in tried if t["speed_ratio"] > ratio]
    if faster:
        fastest = max(faster, key=lambda t: t["speed_ratio"])
        report["faster_but_less_alike"] = (
            f"{len(faster)} way{'s' if len(faster) > 1 else ''} ran faster but agreed less, the fastest "
            f"({fastest['candidate']}) {fastest['speed_ratio']:.2f}x at {fastest['agreement'] * 100:.1f} %, outside "
            f"the noise of the best"
            + (" (their speeds from the three short rounds, the kept one's from the seven rounds that timed the "
               "band again)" if retimed else ""))
    if ratio < 1.0:
        report["slower_because"] = (
            "ONNX Runtime's int8 kernels on this CPU do not beat its float ones for this model's operators "
            "(the quantise/dequantise pairs around the operators left in float cost more than they save)")
    return report


def main():
    kinds = ("fp16", "folded", "int8-dynamic", "int8-static")
    if len(sys.argv) not in (4, 5) or sys.argv[1] not in kinds:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    kind, src, dst = sys.argv[1:4]
    if kind == "fp16":
        report = fp16(src, dst)
    elif kind == "folded":
        report = fp32_folded(src, dst, sys.argv[4] if len(sys.argv) == 5 else None)
    elif kind == "int8-dynamic":
        report = int8_dynamic(src, dst, sys.argv[4] if len(sys.argv) == 5 else None)
    else:
        if len(sys.argv) != 5:
            sys.exit("int8-static needs the folder of calibration inputs")
        report = int8_static(src, dst, sys.argv[4])
    print(json.dumps(report))


if __name__ == "__main__":
    main()
