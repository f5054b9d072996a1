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
            if not (i > 0 and amax[i] > np.max(amax[:i])):
                fail(w, f"step {s} amax {amax[i]} is no new maximum")
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
    s = cache[w["file"]].get(w["tensor"])
    done = check_trend(w, *s) if s is not None else False
    if not done and not check_shape(w):
        fail(w, "no check for this signal on this input")
kinds = sorted({w["signal"] for w in rep["warnings"]})
print(f"{len(rep['warnings'])} warnings checked against the data ({', '.join(kinds)})")
for p in problems[:20]:
    print("UNSUPPORTED:", p)
sys.exit(1 if problems else 0)
