"""Checks every warning of `fp8kit watch --json` on real data against the data itself, recomputed
here with numpy/h5py (issue 27: no warning the data does not support). Usage:
  watch_check.py REPORT.json   (the files named in the report are read again)
Exits 1 naming the first warning whose evidence does not hold, or whose signal has no check."""
import csv
import json
import sys

import h5py
import ml_dtypes
import numpy as np

rep = json.load(open(sys.argv[1]))
K = 8.0           # --spike-k default
SW, W = 32, 128   # spike window, points kept (the longest growth window, the forecast's window)
problems = []


def decoded(o):
    x = o[...]
    tag = o.attrs.get("dtype")
    if tag == "bfloat16":
        x = x.view(np.uint16).view(ml_dtypes.bfloat16)
    elif tag == "float8_e4m3fn":
        x = x.view(ml_dtypes.float8_e4m3fn)
    return x


def series_of(path):
    d = {}
    if path.endswith(".csv"):
        for r in csv.DictReader(open(path)):
            d.setdefault(r["tensor"], []).append((int(r["step"]), np.float32(r["amax"])))
    elif path.endswith(".h5"):
        with h5py.File(path, "r") as f:
            def visit(n, o):
                if isinstance(o, h5py.Dataset) and o.attrs.get("role") != "optimizer_state" and "step" in o.attrs:
                    x = decoded(o)
                    name = n.split("/", 1)[1].replace("/", ".")  # the step component dropped, as dump traces name series
                    d.setdefault(name, []).append((int(o.attrs["step"]), np.float32(np.max(np.abs(x.astype(np.float32))))))
            f.visititems(visit)
    else:
        raise SystemExit(f"no reader here for {path}")
    return {k: (np.array([s for s, _ in sorted(v)]), np.array([a for _, a in sorted(v)], dtype=np.float32)) for k, v in d.items()}


def fail(w, why):
    problems.append(f"{w['signal']} {w['tensor']} ({w['file']}): {why}")


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def t_quantile(z, dof):
    """Student's t quantile at the normal quantile z's tail (Cornish-Fisher, two terms), as lib's."""
    return z + (z ** 3 + z) / (4 * dof) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * dof * dof)


def ols(st, l2):
    """Least-squares slope of log2 amax on the step and its standard error, log2 per 1000 steps."""
    x = st - st.mean()
    b = (x * (l2 - l2.mean())).sum() / (x * x).sum()
    r = l2 - l2.mean() - b * x
    return b * 1000, np.sqrt((r @ r) / (len(x) - 2) / (x * x).sum()) * 1000


# TransformerEngine DelayedScaling (te-delayed: history 1024, max, margin from the report), written
# out here from TE's delayed_scaling.cu (kernel_bulk) as docs/recipes.md describes it: the step
# casts with the scale of the steps before it; a nonzero amax rolls into the history, whose
# max m gives scale = fl32(fl32(fmax 2^-margin) / m) when m is finite and > 0, else the previous
# scale (an Inf scale becomes FLT_MAX). A cast overflows when fl32(amax x scale) rounds past the
# format's max under round-to-nearest-even: ml_dtypes' cast (no saturation) gives NaN (E4M3) or
# Inf (E5M2) for it.
FMAX = {"e4m3": 448.0, "e5m2": 57344.0}
FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def te_delayed_overflows(amax, fmt, margin, history=1024):
    """Per step: did the cast overflow under te-delayed with this margin."""
    scaled_max = np.float32(np.ldexp(FMAX[fmt], -margin))
    scale, rolled, out = np.float32(1.0), [], []
    for a in amax:
        s = np.float32(a) * scale
        out.append(bool(np.isinf(a) or not np.isfinite(np.float32(s).astype(FP8[fmt]))) and not np.isnan(s))
        if a != 0:
            rolled.append(a)
            win = [x for x in rolled[-history:] if not np.isnan(x)]
            m = max(win) if win else np.float32(0)
            if np.isfinite(m) and m > 0:
                scale = scaled_max / np.float32(m)
                if np.isinf(scale):
                    scale = np.float32(np.finfo(np.float32).max)
    return np.array(out)


def margin_removes(amax, steps, fmt, margin, since):
    """Whether te-delayed under `margin` leaves no overflow at steps >= since."""
    return not (te_delayed_overflows(amax, fmt, margin) & (steps >= since)).any()


def check_extra_margin(w, amax, steps, fmt, margin, extra, since, what):
    """`extra` (null: none in 1..64) is the smallest d >= 1 with no overflow from `since` under margin + d."""
    if extra is None:
        if any(margin_removes(amax, steps, fmt, margin + d, since) for d in range(1, 65)):
            fail(w, f"{what}: reported no margin, but one in 1..64 removes the overflows")
    elif extra > 0 and not (margin_removes(amax, steps, fmt, margin + extra, since)
                            and (extra == 1 or not margin_removes(amax, steps, fmt, margin + extra - 1, since))):
        fail(w, f"{what}: margin +{extra} is not the smallest that removes the overflows from step {since}")


def check_overflow_replay(w, n, steps, amax, listed):
    """The listed steps are exactly the steps te-delayed overflows at; the extra margins are the
    smallest that remove the overflows after warm-up and all of them."""
    if n["recipe"] != "te-delayed":
        return fail(w, f"no replay here for recipe {n['recipe']}")
    ov = te_delayed_overflows(amax, n["format"], n["margin"])
    if n["steps_truncated"] or list(steps[ov]) != listed:
        fail(w, f"replayed overflow steps {list(steps[ov])} != listed {listed}")
    if int((ov & (steps >= n["warmup_end"])).sum()) != n["after_warmup"]:
        fail(w, f"after warm-up: {int((ov & (steps >= n['warmup_end'])).sum())} != {n['after_warmup']}")
    # The report's margins start at +1 for a tensor that overflows at all.
    check_extra_margin(w, amax, steps, n["format"], n["margin"], n["extra_margin_after_warmup"] if n["after_warmup"] else 0,
                       n["warmup_end"], "after warm-up")
    check_extra_margin(w, amax, steps, n["format"], n["margin"], n["extra_margin_all"], steps[0], "all steps")


def check_group(w, rep, series):
    """An overflow group: each member is a tensor's own overflow warning of the same file, recipe and
    margin, kept as info naming the group, with the same steps; the totals add up; the group's
    extra margins are the members' largest (each member's checked against the replay)."""
    n = w["numbers"]
    own = {x["tensor"]: x for x in rep["warnings"] if x["signal"] == "overflow" and x["file"] == w["file"]}
    if len(n["members"]) != n["tensors"] or n["tensors"] < 2:
        fail(w, f"{len(n['members'])} members, tensors {n['tensors']}")
    for m in n["members"]:
        x = own.get(m["tensor"])
        if x is None or x["level"] != "info" or "overflow-group" not in x["note"] or x["numbers"]["recipe"] != n["recipe"] \
                or x["numbers"]["margin"] != n["margin"] or x["numbers"]["after_warmup"] == 0:
            fail(w, f"member {m['tensor']}: no grouped overflow warning of its own")
            continue
        if any(m[k] != x["numbers"][k] for k in m if k != "tensor"):
            fail(w, f"member {m['tensor']}: differs from its own warning")
        if m["tensor"] not in w["evidence"]:
            fail(w, f"member {m['tensor']} not named in the evidence")
    # Every grouped overflow of the file is a member.
    grouped = {t for t, x in own.items() if "overflow-group" in x["note"]}
    if grouped != {m["tensor"] for m in n["members"]}:
        fail(w, f"grouped overflows {sorted(grouped)} != members")
    for key in ("count", "after_warmup"):
        if sum(m[key] for m in n["members"]) != n[key]:
            fail(w, f"{key} {n[key]} != the members' sum")
    for key in ("extra_margin_after_warmup", "extra_margin_all"):
        v = [m[key] for m in n["members"]]
        want = None if None in v else max(v)
        if n[key] != want:
            fail(w, f"{key} {n[key]} != the members' largest {want}")
    want = None if n["extra_margin_after_warmup"] is None else n["margin"] + n["extra_margin_after_warmup"]
    if n["margin_after_warmup"] != want:
        fail(w, f"margin_after_warmup {n['margin_after_warmup']} != {want}")


def check_trend(w, steps, amax):
    pos = amax > 0
    st, am = steps[pos], amax[pos]
    n = w["numbers"]
    if w["signal"] == "spike":
        for s in n["spikes"]:
            i = int(np.nonzero(st == s["step"])[0][0])
            med = np.median(am[i - SW:i])
            if am[i] != np.float32(s["amax"]) or not close(float(med), s["median"], 1e-6) or not am[i] >= K * med:
                fail(w, f"step {s['step']}: amax {am[i]} median {med} vs {s}")
    elif w["signal"] == "growth":
        # The steepest fit: slope and se over its window; the first fit: past the baseline by the
        # threshold and z standard errors.
        for fit, key in ((n, "slope_log2_per_1000"), (n["first"], None)):
            i = int(np.nonzero(st == fit["to_step"])[0][0])
            win = fit["window"]
            slope, se = ols(st[i - win + 1:i + 1].astype(np.float64), np.log2(am[i - win + 1:i + 1].astype(np.float64)))
            base = n["baseline_log2_per_1000"] if key is None else min(0, n["baseline_log2_per_1000"])
            # Tolerances: binary64 sums in another order (se from SSE = Syy - b Sxy loses digits
            # when the fit is close; 1e-6 log2/1000 absolute is far below any threshold).
            if not (close(slope, fit["slope_log2_per_1000"], 1e-6) and abs(se - fit["se_log2_per_1000"]) <= 1e-4 * se + 1e-6) or \
                    slope - base < n["threshold"] or slope - base < t_quantile(n["z"], win - 2) * se:
                fail(w, f"window ending {fit['to_step']}: slope {slope} se {se} vs {fit}")
        i0 = int(np.nonzero(st == n["from_step"])[0][0])
        if not close(float(am[i0]), n["from_amax"], 1e-6):
            fail(w, f"from_amax {n['from_amax']} != {am[i0]}")
    elif w["signal"] == "overflow":
        listed = [s for a, b in n["steps"] for s in steps[(steps >= a) & (steps <= b)]]
        if len(listed) != n["count"] or listed[0] != n["first_step"]:
            fail(w, f"{len(listed)} steps listed, count {n['count']}")
        for s in listed:  # margin 0: only a new maximum can overflow
            i = int(np.nonzero(steps == s)[0][0])
            if n["margin"] == 0 and not (i > 0 and amax[i] > np.max(amax[:i])):
                fail(w, f"step {s} amax {amax[i]} is no new maximum")
        check_overflow_replay(w, n, steps, amax, listed)
    elif w["signal"] == "overflow-forecast":
        i = int(np.nonzero(st == n["step"])[0][0])
        l2 = np.log2(am[i - W:i].astype(np.float64))
        g = np.diff(l2) / np.diff(st[i - W:i].astype(np.float64))
        m = np.partition(g, (W - 1) // 2)[(W - 1) // 2]
        sig = 1.4826 * np.partition(np.abs(g - m), (W - 1) // 2)[(W - 1) // 2]
        if not (close(m, n["median_growth"]) and close(sig, n["sigma"])) or not (0 <= n["probability"] <= 1):
            fail(w, f"median {m} sigma {sig} vs {n}")
    else:
        return False
    return True


def tensor_of(path, name):
    with h5py.File(path, "r") as f:
        x = decoded(f[name]).astype(np.float32)
        return x.reshape(-1, x.shape[-1])


def mxfp8_columns(x):
    """TE's MXFP8 cast (transcribed: float_to_e8m0 rounds amax * fl32(1/448) up to a power of two,
    E4M3 round-to-nearest-even by ml_dtypes) of each row of x in blocks of 32, dequantised, float64."""
    x = np.asarray(x, dtype=np.float32)
    f, t = x.shape
    b = x.reshape(f, t // 32, 32)
    d = (np.abs(b).max(axis=-1, keepdims=True) * (np.float32(1) / np.float32(448))).astype(np.float32).astype(np.float64)
    m, e = np.frexp(d)
    s = np.exp2(np.where(m == 0.5, e - 1, e))
    return ((b / s).astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) * s).reshape(f, t)


def check_gradient(w):
    """grad-noise: ||G|| of every recipe entry recomputed from the dumped input and output gradient;
    the noise recomputed independently for MXFP8 with round-to-nearest (the other recipes' noise is
    checked for consistency with the ratio only)."""
    n = w["numbers"]
    layer = n["layer"]
    with h5py.File(w["file"], "r") as f:
        x = decoded(f[layer["layer"] + "/input"]).astype(np.float32).reshape(layer["tokens"], -1)
        dy = decoded(f[layer["layer"] + "/grad_output"]).astype(np.float32).reshape(layer["tokens"], -1)
    g = dy.astype(np.float64).T @ x.astype(np.float64)
    for r in layer["recipes"]:
        if not close(r["grad_norm"], np.linalg.norm(g), 1e-9):
            fail(w, f"{r['recipe']}: ||G|| {r['grad_norm']} != {np.linalg.norm(g)}")
        if r["recipe"] == "mxfp8" and layer["tokens"] % 32 == 0:
            noise = np.linalg.norm(mxfp8_columns(dy.T) @ mxfp8_columns(x.T).T - g)
            if not close(r["noise_rtn"], noise, 1e-9):
                fail(w, f"mxfp8 noise {r['noise_rtn']} != {noise}")
    for b in n["below"]:
        r = next(r for r in layer["recipes"] if r["recipe"] == b["recipe"])
        key = "ratio_rtn" if b["rounding"] == "round-to-nearest" else "ratio_sr"
        if not (b["ratio"] < n["threshold"] and close(r[key], r["grad_norm"] / r["noise_" + key[6:]], 1e-12)):
            fail(w, f"{b}: not below {n['threshold']} or inconsistent")


def check_norm(w):
    n = w["numbers"]
    if n["recipe"] != "mxfp8":
        return fail(w, f"no independent check for recipe {n['recipe']}")
    with h5py.File(w["file"], "r") as f:
        v = decoded(f[w["tensor"]]).astype(np.float32).reshape(-1)
    pad = (-len(v)) % 32  # zeros do not change a block's amax nor the sums
    q = mxfp8_columns(np.concatenate([v, np.zeros(pad, np.float32)]).reshape(1, -1))[0, :len(v)]
    bias = (q - v).sum() / np.abs(v.astype(np.float64)).sum()
    if not (close(bias, n["bias"], 1e-9) and abs(bias) > 0.005):
        fail(w, f"bias {bias} vs {n['bias']}")


def check_shape(w):
    n = w["numbers"]
    if w["signal"] == "grad-noise":
        check_gradient(w)
        return True
    if w["signal"] == "norm-weight-bias":
        check_norm(w)
        return True
    if w["signal"] == "outlier-channels":
        x = tensor_of(w["file"], w["tensor"])
        ch = np.max(np.abs(x), axis=0).astype(np.float64)
        med = np.partition(ch, len(ch) // 2)[len(ch) // 2]
        if list(np.nonzero(ch > 64 * med)[0]) != n["channels"] or not close(med, n["median_channel_amax"]):
            fail(w, f"channels {np.nonzero(ch > 64 * med)[0]} median {med}")
    elif w["signal"] == "kurtosis":
        x = tensor_of(w["file"], w["tensor"]).astype(np.float64).ravel()
        k = np.mean((x - x.mean()) ** 4) / np.mean((x - x.mean()) ** 2) ** 2
        if not (close(k, n["kurtosis"], 1e-6) and k > n["threshold"]):
            fail(w, f"kurtosis {k}")
    elif w["signal"] == "swiglu-alignment":
        g, u = tensor_of(w["file"], n["gate"]).astype(np.float64), tensor_of(w["file"], n["up"]).astype(np.float64)
        cos = np.sum(g * u, 1) / np.sqrt(np.sum(g * g, 1) * np.sum(u * u, 1))
        if sorted(np.nonzero(np.abs(cos) >= n["threshold"])[0].tolist()) != sorted(n["channels"]):
            fail(w, f"aligned channels {np.nonzero(np.abs(cos) >= n['threshold'])[0]}")
    else:
        return False
    return True


cache = {}
for w in rep["warnings"]:
    if w["file"] not in cache:
        cache[w["file"]] = series_of(w["file"])
    if w["signal"] == "overflow-group":
        check_group(w, rep, cache[w["file"]])
        continue
    s = cache[w["file"]].get(w["tensor"])
    done = check_trend(w, *s) if s is not None else False
    if not done and not check_shape(w):
        fail(w, "no check for this signal on this input")
kinds = sorted({w["signal"] for w in rep["warnings"]})
print(f"{len(rep['warnings'])} warnings checked against the data ({', '.join(kinds)})")
for p in problems[:20]:
    print("UNSUPPORTED:", p)
sys.exit(1 if problems else 0)
