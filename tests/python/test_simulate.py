"""fp8kit.msamp against an independent numpy transcription of MS-AMP's source (written from
msamp/common/tensor/meta.py, cast.py, msamp/nn/distributed.py, common/tensor/tensor_dist.py,
msamp/optim/adamw.py + adamw.cu and msccl-executor-nccl src/device/reduce_kernel.h; not from
fp8kit's C++). Casts use numpy / ml_dtypes, never fp8kit. Everything is compared bit for bit."""

import math
import pathlib

import fp8kit
import ml_dtypes
import numpy as np
import pytest

f32 = np.float32
E4 = ml_dtypes.float8_e4m3fn


# ---- casts, each from the library named ---------------------------------------------------
def e4m3_satfinite(x):
    """__nv_fp8_e4m3(float) / TE cast_to_fp8 (__NV_SATFINITE): RNE, |x| >= 448 and +-Inf -> +-448,
    NaN -> 0x7F. ml_dtypes rounds to nearest even but overflows to NaN, so clamp first."""
    x = np.asarray(x, f32)
    with np.errstate(invalid="ignore"):
        c = np.clip(x, f32(-448), f32(448)).astype(E4).view(np.uint8).copy()
    c[np.isnan(x)] = 0x7F
    return c


def e4m3_value(c):
    return np.asarray(c, np.uint8).view(E4).astype(f32)


def to_f16(x):
    """__float2half / .to(torch.float16): numpy's float32 -> float16 (RNE, Inf on overflow)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, f32).astype(np.float16)


# ---- msamp/common/tensor/meta.py: ScalingMeta.compute_scaling_factor (TorchScript) ----------
def compute_scaling_factor(amax, scale, fp_max, margin):
    amax = np.asarray(amax, f32)
    scale = np.broadcast_to(np.asarray(scale, f32), amax.shape)
    with np.errstate(all="ignore"):
        # TorchScript's builtin div(a: Scalar, b: Tensor) is torch.reciprocal(b) * a
        q = (f32(1) / amax) * f32(fp_max)
        exp = np.floor(np.log2(q)) - f32(margin)
        sf = np.round(np.power(f32(2), np.abs(exp)))
        sf = np.where(amax > 0.0, sf, scale)
        sf = np.where(np.isfinite(amax), sf, scale)
        sf = np.where(exp < 0, f32(1) / sf, sf)
    return sf.astype(f32)


def log2_not_correctly_rounded(amax, fp_max):
    """Where numpy's float32 log2 differs from the correctly rounded one (the binary64 log2
    rounded to float32), which fp8kit takes for torch.log2: such amaxes are left out, as a
    library difference, not an MS-AMP one (docs/msamp.md)."""
    with np.errstate(all="ignore"):
        q = (f32(1) / np.asarray(amax, f32)) * f32(fp_max)
        ok = np.isfinite(q) & (q > 0)
        a = np.log2(q)
        b = np.log2(q.astype(np.float64)).astype(f32)
    return ok & (np.floor(a) != np.floor(b))


def bits(a):
    a = np.asarray(a, f32)
    return a.view(np.uint32)


def test_scale_rule_hand_worked():
    f = fp8kit.msamp.msamp_scale
    assert f(1.0) == 256.0  # 448/1 -> floor(log2 448) = 8
    assert f(448.0) == 1.0  # exp 0
    assert f(3e38) == f32(2.0**-120)  # exp -120: the inverse
    assert f(0.0, scale=4.0) == 4.0  # not positive: old scale
    assert f(-2.0, scale=4.0) == 4.0  # negative: old scale (log2 NaN, exp < 0 false)
    assert f(np.nan, scale=4.0) == 4.0  # NaN: old scale
    assert f(np.inf, scale=4.0) == 0.25  # +Inf: q = 0, exp = -Inf, old scale, then inverted
    assert f(-np.inf, scale=4.0) == 0.25  # -Inf: q = -0, log2 = -Inf, same
    assert f(1e-35) == f32(2.0**125)
    assert np.isinf(f(1e-36))  # 448/amax overflows float32: Inf scale is kept
    assert np.isinf(f(1e-40))  # subnormal amax: 1/amax is Inf
    assert f(1.0, margin=2) == 64.0
    assert f(1.0, fp_max=65504.0) == 32768.0
    assert f(1.0, fp_max=57344.0) == 32768.0
    assert f(np.uint32(0x3FE00001).view(f32)) == 256.0  # float32 log2 rounds 7.9999999 up to 8


def test_scale_rule_random():
    rng = np.random.default_rng(5)
    amax = np.concatenate(
        [
            rng.integers(0, 0xFFFFFFFF, size=200_000, dtype=np.uint32).view(f32),  # every class
            (2.0 ** rng.uniform(-150, 128, size=100_000)).astype(f32),
            np.array([0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 1e-40, 2**-126, 3.4e38], f32),
        ]
    )
    old = (2.0 ** rng.integers(-20, 20, size=amax.size)).astype(f32)
    for fp_max in (448.0, 57344.0, 65504.0):
        for margin in (0, 1, 3):
            want = compute_scaling_factor(amax, old, fp_max, margin)
            got = fp8kit.msamp.msamp_scale(amax, old, fp_max, margin)
            keep = ~log2_not_correctly_rounded(amax, fp_max)
            assert keep.sum() > amax.size - 10
            np.testing.assert_array_equal(bits(got)[keep], bits(want)[keep])


# ---- msamp/nn/distributed.py _reduce_bucket + the NCCL FP8 sum -------------------------------
def fp8_add(a, b, hop):
    """msccl-executor-nccl reduce_kernel.h FuncSum<__nv_fp8_e4m3>."""
    if hop == "half":  # __nv_fp8_e4m3(__hadd(__half(x), __half(y)))
        s = e4m3_value(a).astype(np.float16) + e4m3_value(b).astype(np.float16)
        return e4m3_satfinite(s.astype(f32))
    return e4m3_satfinite(e4m3_value(a) + e4m3_value(b))  # __nv_fp8_e4m3(float(x) + float(y))


def reduce_codes(q, order, hop):
    n, size = q.shape
    if order == "rank":
        acc = q[0]
        for r in range(1, n):
            acc = fp8_add(acc, q[r], hop)
        return acc
    if order == "ring":
        idx = np.arange(size)
        start = ((idx * n // size) + 1) % n
        acc = q[start, idx]
        for k in range(1, n):
            acc = fp8_add(acc, q[(start + k) % n, idx], hop)
        return acc
    level = list(q)
    while len(level) > 1:
        nxt = [fp8_add(level[k], level[k + 1], hop) for k in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def msamp_allreduce(grads, order, path="ddp", hop="half", old_scale=1.0):
    n = grads.shape[0]
    with np.errstate(invalid="ignore"):
        amaxs = np.array([np.max(np.abs(g)) for g in grads], f32)  # g.abs().max(): NaN propagates
    amaxs = np.nan_to_num(amaxs, nan=np.inf, posinf=np.inf)  # "reduce ignores NAN"
    amax = amaxs.max()  # all_reduce(MAX)
    sf = compute_scaling_factor(amax, f32(old_scale), 448.0, 0)
    if path == "ddp":
        sf = f32(sf * f32(1.0 / math.sqrt(n)))  # sf.mul_(pre_scale)
    with np.errstate(all="ignore"):
        q = np.stack([e4m3_satfinite(g * sf) for g in grads])  # TE cast_to_fp8
        scale_inv = f32(f32(1) / sf)  # scale_inv = reciprocal(scale)
        scale_inv = f32(scale_inv / f32(n))  # grad.div_(world_size) divides scale_inv
        codes = reduce_codes(q, order, hop)
        values = e4m3_value(codes) * scale_inv
    return amax, sf, scale_inv, codes, values


def nan_norm(c):
    c = c.copy()
    c[(c & 0x7F) == 0x7F] = 0x7F
    return c


def special_grads(rng, n, size):
    g = (rng.standard_normal((n, size)) * 10.0 ** rng.uniform(-8, 2)).astype(f32)
    g[0, :4] = [0.0, -0.0, 1e-45, -1e-42]  # zero and subnormal
    g[1 % n, 4] = f32(1e-30)
    return g


@pytest.mark.parametrize("n", [2, 3, 8, 64, 1024])
@pytest.mark.parametrize("path", ["ddp", "non-ddp"])
def test_allreduce_bit_exact(n, path):
    rng = np.random.default_rng(n)
    size = 96 if n >= 1024 else 333
    g = special_grads(rng, n, size)
    for hop in ("half", "float32"):
        res = fp8kit.msamp.allreduce(g, orders=["rank", "ring", "tree"], path=path, hop=hop, old_scale=2.0)
        for order in ("rank", "ring", "tree"):
            amax, sf, sinv, codes, values = msamp_allreduce(g, order, path, hop, 2.0)
            assert bits(res["amax"]) == bits(amax)
            assert bits(res["scale"]) == bits(sf) and bits(res["scale_inv"]) == bits(sinv)
            np.testing.assert_array_equal(nan_norm(res["orders"][order]["codes"]), nan_norm(codes))
            np.testing.assert_array_equal(bits(res["orders"][order]["values"]), bits(values))


@pytest.mark.parametrize("case", ["nan", "inf", "-inf", "zero", "tiny", "huge"])
def test_allreduce_special_amax(case):
    rng = np.random.default_rng(7)
    g = rng.standard_normal((4, 200)).astype(f32)
    if case == "nan":
        g[2, 5] = np.nan
    elif case == "inf":
        g[1, 0] = np.inf
    elif case == "-inf":
        g[3, 9] = -np.inf
    elif case == "zero":
        g[:] = 0
    elif case == "tiny":
        g *= f32(1e-39)
    else:
        g *= f32(1e37)
    for order in ("rank", "tree", "ring"):
        res = fp8kit.msamp.allreduce(g, orders=[order], old_scale=8.0)
        amax, sf, sinv, codes, values = msamp_allreduce(g, order, old_scale=8.0)
        assert bits(res["amax"]) == bits(amax) and bits(res["scale"]) == bits(sf)
        np.testing.assert_array_equal(nan_norm(res["orders"][order]["codes"]), nan_norm(codes))
        np.testing.assert_array_equal(bits(res["orders"][order]["values"]), bits(values))


def test_order_moves_result():
    g = (np.random.default_rng(3).standard_normal((64, 4000)) * 0.01).astype(f32)
    res = fp8kit.msamp.allreduce(g)
    assert res["order_differs"] > 0 and res["order_spread"] > 0
    a, b = res["orders"]["rank"]["codes"], res["orders"]["tree"]["codes"]
    assert np.count_nonzero(a != b) == np.count_nonzero(
        reduce_codes(np.stack([e4m3_satfinite(x * res["scale"]) for x in g]), "rank", "half")
        != reduce_codes(np.stack([e4m3_satfinite(x * res["scale"]) for x in g]), "tree", "half")
    )


# ---- the split model (docs/msamp.md) -----------------------------------------------------------
def splitmix64(x):
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)).astype(np.uint64)
        x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)).astype(np.uint64)
        x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)).astype(np.uint64)
        return x ^ (x >> np.uint64(31))


def split_rank(g, n, r, spread, seed):
    i = np.arange(g.size, dtype=np.uint64)
    h = splitmix64(np.uint64(seed) ^ splitmix64(np.uint64(r // 2)) ^ i)
    u = (h >> np.uint64(40)).astype(f32) * f32(2.0**-23) - f32(1)
    u = u * f32(1 if r % 2 == 0 else -1)
    if n % 2 and r == n - 1:
        u[:] = 0
    return g * (f32(1) + f32(spread) * u)


@pytest.mark.parametrize("n", [2, 5, 16])
def test_split_model(n):
    g = np.random.default_rng(1).standard_normal(1000).astype(f32)
    ranks = np.stack([split_rank(g, n, r, 0.5, 42) for r in range(n)])
    for r in range(n):
        np.testing.assert_array_equal(bits(fp8kit.msamp.split_rank(g, n, r, 0.5, 42)), bits(ranks[r]))
    res = fp8kit.msamp.allreduce(g, ranks=n, spread=0.5, seed=42)
    want = fp8kit.msamp.allreduce(ranks)
    for order in ("rank", "ring", "tree"):
        np.testing.assert_array_equal(res["orders"][order]["codes"], want["orders"][order]["codes"])


# ---- msamp/optim/adamw.py (LBAdamW.adamw_fn) + adamw.cu -----------------------------------------
# LBAdamW's state dtypes: torch.uint8 (E4M3) or torch.float16, each with a scale. Per dtype:
# Floating.fp_maxs (msamp/common/dtype/floating.py), cast_dtype<T>(float) (adamw.cu) and its inverse.
STATE_DTYPES = {
    "fp8": (448.0, e4m3_satfinite, e4m3_value),
    "fp16": (65504.0, to_f16, lambda c: np.asarray(c, np.float16).astype(f32)),
}


class NumpyLBAdamW:
    """The low-precision branch of LBAdamW.adamw_fn for one parameter, exp_avg and exp_avg_sq uint8
    (E4M3) or float16 (MS-AMP's defaults: uint8, float16), tensor_scale=True, master weight a
    ScalingTensor of qtype float16. adamw.cu's arithmetic as MS-AMP's build compiles it: the three
    multiply-adds that nvcc contracts (docs/msamp.md section 3) are FMAs (fma32)."""

    def __init__(self, w, m, v, lr, b1, b2, eps, wd, fp16_master, m_dtype="fp8", v_dtype="fp16"):
        self.lr, self.b1, self.b2, self.eps, self.wd = lr, b1, b2, eps, wd
        self.fp16_master = fp16_master
        self.m_max, self.m_cast, self.m_value = STATE_DTYPES[m_dtype]
        self.v_max, self.v_cast, self.v_value = STATE_DTYPES[v_dtype]
        # TypeCast.cast_to_fp8 / cast_to_fp16 of the FP32 tensors, scale starting at 1
        self.m_scale = compute_scaling_factor(np.max(np.abs(m)), f32(1), self.m_max, 0)
        self.m = self.m_cast(m * self.m_scale)
        self.v_scale = compute_scaling_factor(np.max(np.abs(v)), f32(1), self.v_max, 0)
        self.v = self.v_cast(v * self.v_scale)
        self.w_scale = f32(1)
        if fp16_master:
            self.cast_master(w)
        else:
            self.w = w.copy()
        self.t = 0

    def cast_master(self, p):  # cast.py cast_to_fp16: in-time amax, reset_scaling_factor, (x*scale).to(fp16)
        self.w_scale = compute_scaling_factor(np.max(np.abs(p)), self.w_scale, 65504.0, 0)
        self.w = to_f16(p * self.w_scale)

    def weight(self):  # cast_from_fp16: (value * scale_inv).to(float32), scale_inv = reciprocal(scale)
        return (self.w.astype(f32) * (f32(1) / self.w_scale)).astype(f32) if self.fp16_master else self.w

    def moments(self, g, inv_m, inv_v):  # the same expressions in stage 1 and stage 2 (adamw.cu)
        b1, b2 = f32(self.b1), f32(self.b2)
        # beta1 * m * factor + (1 - beta1) * g: (beta1 * m) * factor and the add are one FMA
        m = fma32(b1 * self.m_value(self.m), inv_m, (f32(1) - b1) * g)
        v = fma32(b2 * self.v_value(self.v), inv_v, (f32(1) - b2) * (g * g))
        return m.astype(f32), v.astype(f32)

    def step(self, g):
        self.t += 1
        inv_m = f32(1.0 / float(self.m_scale))  # 1.0 / exp_avg.meta.scale, passed as float
        inv_v = f32(1.0 / float(self.v_scale))
        p = self.weight().copy()
        p = (p * f32(1 - self.lr * self.wd)).astype(f32)  # param.mul_(1 - lr * weight_decay)
        # adamw_fp8_stage1_compute: bias corrections in double (pow(float, int)), stored as float
        bc1 = f32(1 - float(f32(self.b1)) ** self.t)
        bc2 = f32(1 - float(f32(self.b2)) ** self.t)
        step_size = f32(f32(self.lr) / bc1)
        sqrt_bc2 = np.sqrt(bc2, dtype=f32)
        m, v = self.moments(g, inv_m, inv_v)
        amax_m = f32(np.fmax.reduce(np.abs(m), initial=0))  # fmaxf: NaN skipped
        amax_v = f32(np.fmax.reduce(np.abs(v), initial=0))
        denom = np.sqrt(v) / sqrt_bc2 + f32(self.eps)
        p = fma32(-(m / denom), step_size, p)  # param -= step_size * (m / denom), one FMA
        if self.fp16_master:
            self.cast_master(p)
        else:
            self.w = p
        new_m = compute_scaling_factor(amax_m, f32(1), self.m_max, 0)  # (amaxs, ones, fp_max, 0)
        new_v = compute_scaling_factor(amax_v, f32(1), self.v_max, 0)
        m, v = self.moments(g, inv_m, inv_v)  # adamw_fp8_stage2_compute
        self.m = self.m_cast(m * new_m)
        self.v = self.v_cast(v * new_v)
        self.m_scale, self.v_scale = new_m, new_v


@pytest.mark.parametrize("fp16_master", [True, False])
@pytest.mark.parametrize("gscale", [1e-2, 1e-6, 1e-9])
@pytest.mark.parametrize("m_dtype", ["fp8", "fp16"])
def test_adam_bit_exact(fp16_master, gscale, m_dtype):
    rng = np.random.default_rng(11)
    n = 3000
    w = (rng.standard_normal(n) * 0.02).astype(f32)
    m0 = (rng.standard_normal(n) * gscale * 0.1).astype(f32)
    v0 = (rng.standard_normal(n) * gscale) ** 2
    v0 = v0.astype(f32)
    m0[:5] = 0
    hyper = dict(lr=3e-3, b1=0.9, b2=0.999, eps=1e-8, wd=0.01)
    ref = NumpyLBAdamW(w, m0, v0, fp16_master=fp16_master, m_dtype=m_dtype, **hyper)
    sim = fp8kit.msamp.adam(
        w,
        m0,
        v0,
        lr=3e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0.01,
        fp16_master=fp16_master,
        exp_avg_dtype=m_dtype,
    )
    for step in range(5):
        g = (rng.standard_normal(n) * gscale).astype(f32)
        g[:3] = [0.0, 1e-42, -1e-40]
        ref.step(g)
        sim.step(g)
        np.testing.assert_array_equal(sim.m_codes, ref.m if m_dtype == "fp8" else ref.m.view(np.uint16))
        np.testing.assert_array_equal(sim.v_bits, ref.v.view(np.uint16))
        assert bits(sim.m_scale) == bits(ref.m_scale) and bits(sim.v_scale) == bits(ref.v_scale)
        np.testing.assert_array_equal(bits(sim.weight), bits(ref.weight()))
        if fp16_master:
            np.testing.assert_array_equal(sim.master_bits, ref.w.view(np.uint16))
    rep = sim.report()
    assert rep["steps"] == 5 and rep["m_rel_error"] > 0


class NumpyLBAdamWSeparateMoments(NumpyLBAdamW):
    """The same with the moments' multiply and add rounded separately (no FMA there)."""

    def moments(self, g, inv_m, inv_v):
        b1, b2 = f32(self.b1), f32(self.b2)
        with np.errstate(under="ignore"):
            m = b1 * self.m_value(self.m) * inv_m + (f32(1) - b1) * g
            v = b2 * self.v_value(self.v) * inv_v + (f32(1) - b2) * (g * g)
        return m.astype(f32), v.astype(f32)


@pytest.mark.parametrize("m_dtype", ["fp8", "fp16"])
@pytest.mark.parametrize("moment", ["m", "v"])
def test_adam_tiny_moments_fma(m_dtype, moment):
    """Where the moments' FMAs matter: (beta * state) * (1 / scale) is exact unless subnormal, so
    tiny moments (state scales near 2^126) from weights at 0, as msamp_adam_probe's sets 8-11. The
    model must follow the transcription with FMAs, and the inputs must tell it from the one without."""
    rng = np.random.default_rng(3)
    n = 4000
    lo, hi = {"m": (-126 if m_dtype == "fp8" else -128, -114 if m_dtype == "fp8" else -107), "v": (-70, -50)}[moment]
    eps = 1e-8 if moment == "m" else 1e-30
    hyper = dict(lr=1e-3, b1=0.9, b2=0.999, eps=eps, wd=0.01)
    zeros = np.zeros(n, f32)
    ref = NumpyLBAdamW(zeros, zeros, zeros, fp16_master=False, m_dtype=m_dtype, **hyper)
    other = NumpyLBAdamWSeparateMoments(zeros, zeros, zeros, fp16_master=False, m_dtype=m_dtype, **hyper)
    sim = fp8kit.msamp.adam(
        zeros, lr=1e-3, betas=(0.9, 0.999), eps=eps, weight_decay=0.01, fp16_master=False, exp_avg_dtype=m_dtype
    )
    differ = 0
    for step in range(5):
        mag = np.ldexp(f32(1) + rng.random(n, dtype=f32), rng.integers(lo, hi, n)).astype(f32)
        g = np.where(rng.random(n) < 0.5, -mag, mag).astype(f32)
        with np.errstate(under="ignore"):
            ref.step(g)
            other.step(g)
        sim.step(g)
        np.testing.assert_array_equal(bits(sim.weight), bits(ref.weight()))
        np.testing.assert_array_equal(sim.m_codes, ref.m if m_dtype == "fp8" else ref.m.view(np.uint16))
        np.testing.assert_array_equal(sim.v_bits, ref.v.view(np.uint16))
        assert bits(sim.m_scale) == bits(ref.m_scale) and bits(sim.v_scale) == bits(ref.v_scale)
        differ += int(np.count_nonzero(bits(other.weight()) != bits(ref.weight())))
    assert ref.m_scale >= 2.0**120 if moment == "m" else ref.v_scale >= 2.0**120
    assert differ > 0  # the FMAs are visible here


def test_adam_zero_states_and_size_error():
    sim = fp8kit.msamp.adam(np.ones(10, f32))
    assert sim.m_scale == 1.0 and sim.v_scale == 1.0  # amax 0 keeps scale 1
    with pytest.raises(ValueError, match="gradient of 3 elements"):
        sim.step(np.ones(3, f32))
    with pytest.raises(ValueError, match="exp_avg dtype bf16: LBAdamW's low-precision states are fp8"):
        fp8kit.msamp.adam(np.ones(3, f32), exp_avg_dtype="bf16")


# ---- TransformerEngine FusedAdam, transcribed from transformer_engine/pytorch/optimizers/
# fused_adam.py (_initialize_state, get_unscaled_state, _apply_scale, step) and
# transformer_engine/common/multi_tensor/adam.cu (multi_tensor_adam_cuda, AdamFunctor ADAM_MODE_1).
BF16 = ml_dtypes.bfloat16
TE_RANGE = {"fp16": f32(np.finfo(np.float16).max / 2.0), "fp8": f32(448.0)}  # dtype_to_range_map


class NumpyTeState:
    def __init__(self, dtype, n):
        # _initialize_state(zero_buffer=True): zeros; FP8 quantize_ with scale ones (scale_inv 1)
        self.dtype, self.scale, self.qscale, self.scale_inv = dtype, f32(1), f32(1), f32(1)
        self.data = {
            "fp32": np.zeros(n, f32),
            "fp16": np.zeros(n, np.float16),
            "bf16": np.zeros(n, BF16),
            "fp8": np.zeros(n, np.uint8),
        }[dtype]

    def unscaled(self):  # get_unscaled_state
        if self.dtype == "fp8":  # Float8Tensor.float(): data * scale_inv
            return e4m3_value(self.data) * self.scale_inv
        if self.dtype == "fp16":  # .float().mul_(scale)
            return self.data.astype(f32) * self.scale
        return self.data.astype(f32)

    def apply_scale(self, x):  # _apply_scale (set_scaled_state for fp32: copy)
        x = np.asarray(x, f32)
        if self.dtype == "fp32":
            self.data = x.copy()
            return
        if self.dtype == "bf16":
            self.data = x.astype(BF16)
            return
        with np.errstate(all="ignore"):
            absmax = np.maximum(-x.min(), x.max())  # torch.aminmax; min/max propagate NaN
            self.scale = f32(absmax) / TE_RANGE[self.dtype]  # torch.div(absmax, max_range, out=scale)
            if self.dtype == "fp8":
                self.qscale = f32(1) / self.scale  # quantizer.scale.copy_(1 / scale)
                self.data = e4m3_satfinite(x * self.qscale)  # unary_kernel: fp8(x * s)
                self.scale_inv = f32(1) / self.qscale  # reciprocal<float>: __frcp_rn(s)
            else:
                rscale = (f32(1) / self.scale) if self.scale > 0 else f32(0)  # where(scale > 0, ...)
                self.data = (x * rscale).astype(np.float16)  # mul_(rscale), copy_ to fp16


def fma32(a, b, c):
    """float32 a * b + c rounded once, in numpy: a * b is exact in float64; the float64 sum is
    rounded to odd (TwoSum gives its exact error), which has enough extra bits that rounding it to
    float32 is the correctly rounded result (Boldo and Melquiond, "Emulation of FMA and correctly
    rounded sums: proved algorithms using rounding to odd", IEEE Trans. Computers 57(4), 2008)."""
    a, b, c = (np.asarray(x, np.float32).astype(np.float64) for x in (a, b, c))
    prod = a * b
    s = prod + c
    bb = s - prod
    err = (prod - (s - bb)) + (c - bb)
    even = (s.view(np.int64) & 1) == 0
    step = np.isfinite(s) & np.isfinite(err) & (err != 0) & even
    s = np.where(step, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


class NumpyTeFusedAdam:
    def __init__(self, w, m0, v0, m_dtype, v_dtype, master_dtype, lr, b1, b2, eps, wd):
        self.lr, self.b1, self.b2, self.eps, self.wd = f32(lr), f32(b1), f32(b2), f32(eps), f32(wd)
        self.step_no = 0
        n = len(w)
        self.m, self.v = NumpyTeState(m_dtype, n), NumpyTeState(v_dtype, n)
        if m0 is not None:
            self.m.apply_scale(m0)  # load_state_dict -> set_scaled_state
        if v0 is not None:
            self.v.apply_scale(v0)
        self.master = NumpyTeState(master_dtype, n)
        self.master.apply_scale(w)  # initialize_state: set_scaled_state(param, "master_param", ...)

    def kernel(self, g, p, m, v):
        b1, b2 = self.b1, self.b2
        # multi_tensor_adam_cuda: bias_correction = 1 - std::pow(beta1, step) (double), as float
        bc1 = f32(1 - math.pow(float(b1), self.step_no))
        bc2 = f32(1 - math.pow(float(b2), self.step_no))
        with np.errstate(all="ignore"):
            # The four multiply-adds nvcc contracts into FMAs in TE's build of adam.cu (its SASS:
            # scripts/gpu/te_adam_probe.sh); the rest as written.
            m = fma32(f32(1) - b1, g, b1 * m)
            v = fma32(g, (f32(1) - b2) * g, b2 * v)
            denom = np.sqrt(v / bc2) + self.eps
            update = fma32(self.wd, p, (m / bc1) / denom)
            p = fma32(-self.lr, update, p)
        return p.astype(f32), m.astype(f32), v.astype(f32)

    def step(self, g):
        self.step_no += 1
        p, m, v = self.kernel(np.asarray(g, f32), self.master.unscaled(), self.m.unscaled(), self.v.unscaled())
        self.m.apply_scale(m)
        self.v.apply_scale(v)
        self.master.apply_scale(p)


def same_bits(a, b):
    """Bit for bit, except that a NaN matches any NaN (its sign and payload depend on the operand
    order the compiler picks, which neither library specifies)."""
    a, b = np.atleast_1d(np.asarray(a, f32)), np.atleast_1d(np.asarray(b, f32))
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    keep = ~np.isnan(a)
    np.testing.assert_array_equal(bits(a[keep]), bits(b[keep]))


def te_state_bits(s):
    return s.data.view(np.uint8 if s.dtype == "fp8" else np.uint16 if s.dtype in ("fp16", "bf16") else np.uint32)


@pytest.mark.parametrize(
    "m_dtype,v_dtype,master",
    [
        ("fp8", "fp8", "fp32"),
        ("fp8", "fp16", "fp16"),
        ("fp16", "fp16", "fp32"),
        ("bf16", "fp8", "fp32"),
        ("fp32", "bf16", "fp16"),
    ],
)
@pytest.mark.parametrize("gscale", [1e-2, 1e-6, 1e-30, 3e4])
@pytest.mark.parametrize("given_states", [True, False])
def test_te_fused_adam_bit_exact(m_dtype, v_dtype, master, gscale, given_states):
    rng = np.random.default_rng(5)
    n = 2000
    w = (rng.standard_normal(n) * 0.02).astype(f32)
    m0 = v0 = None
    if given_states:
        m0 = (rng.standard_normal(n) * gscale * 0.1).astype(f32)
        v0 = ((rng.standard_normal(n) * gscale) ** 2).astype(f32)
        m0[:4] = [0.0, 1e-42, -1e-40, 0.0]
    hyper = dict(lr=3e-3, b1=0.9, b2=0.999, eps=1e-8, wd=0.01)
    ref = NumpyTeFusedAdam(w, m0, v0, m_dtype, v_dtype, master, **hyper)
    sim = fp8kit.msamp.te_fused_adam(
        w,
        m0,
        v0,
        lr=3e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0.01,
        exp_avg_dtype=m_dtype,
        exp_avg_sq_dtype=v_dtype,
        master_weight_dtype=master,
        build="nvcc-default",  # the transcription's IEEE arithmetic; TE's fast-math build: below
    )
    for _ in range(4):
        g = (rng.standard_normal(n) * gscale).astype(f32)
        g[:3] = [0.0, 1e-42, -1e-40]
        ref.step(g)
        sim.step(g)
        for name, st in (("exp_avg", ref.m), ("exp_avg_sq", ref.v), ("master", ref.master)):
            got = sim.__getattribute__(name)
            assert got["dtype"] == st.dtype
            np.testing.assert_array_equal(got["bits"], te_state_bits(st).astype(np.uint32))
            same_bits(got["scale"], st.scale)
            same_bits(got["fp8_scale_inv"], st.scale_inv)
        same_bits(sim.weight, ref.master.unscaled())
    rep = sim.report()
    assert rep["steps"] == 4


def test_te_fused_adam_zero_gradient_and_errors():
    # amax 0: an FP8 state becomes NaN (scale 0, quantizer scale Inf, 0 * Inf), FP16 stays zero
    w = np.array([1.0, -2.0, 0.5], f32)
    ref = NumpyTeFusedAdam(w, None, None, "fp8", "fp16", "fp32", 1e-3, 0.9, 0.999, 1e-8, 0.0)
    sim = fp8kit.msamp.te_fused_adam(
        w, lr=1e-3, weight_decay=0.0, exp_avg_dtype="fp8", exp_avg_sq_dtype="fp16", build="nvcc-default"
    )
    for g in (np.zeros(3, f32), np.ones(3, f32)):
        ref.step(g)
        sim.step(g)
        np.testing.assert_array_equal(sim.exp_avg["bits"], ref.m.data.astype(np.uint32))
        np.testing.assert_array_equal(sim.exp_avg_sq["bits"], ref.v.data.view(np.uint16).astype(np.uint32))
        same_bits(sim.weight, ref.master.unscaled())
    assert np.all(ref.m.data == 0x7F) and np.isnan(sim.weight).all()
    assert not np.isnan(sim.ref_weight).any()
    with pytest.raises(ValueError, match="gradient of 2 elements"):
        sim.step(np.ones(2, f32))
    with pytest.raises(ValueError, match="unknown state dtype 'fp4'"):
        fp8kit.msamp.te_fused_adam(w, exp_avg_dtype="fp4")
    with pytest.raises(ValueError, match="master weight dtype bf16"):
        fp8kit.msamp.te_fused_adam(w, master_weight_dtype="bf16")
    with pytest.raises(ValueError, match="unknown TE build 'fast'"):
        fp8kit.msamp.te_fused_adam(w, build="fast")


def read_te_adam_probe(path):
    """scripts/gpu/te_adam_probe.cu's output: per hyperparameter set, the inputs and (g, p, m, v)
    after each step, all float32, as the GPU computed them."""
    raw = np.fromfile(path, dtype=np.uint32)
    assert int(raw[0]) == 0x50414554
    nsets, steps, n = (int(x) for x in raw[1:4])
    f, pos, sets = raw[4:].view(f32), 0, []
    for _ in range(nsets):
        hyper = f[pos : pos + 5].tolist()
        pos += 5
        start = [f[pos + k * n : pos + (k + 1) * n] for k in range(3)]
        pos += 3 * n
        per_step = []
        for _ in range(steps):
            per_step.append([f[pos + k * n : pos + (k + 1) * n] for k in range(4)])
            pos += 4 * n
        sets.append((hyper, start, per_step))
    return sets


@pytest.mark.parametrize("build,file", [("fast-math", "adam_fast_math.bin"), ("nvcc-default", "adam_default.bin")])
def test_te_fused_adam_as_the_gpu_computes_it(build, file):
    # tests/golden/te_adam: TE's adam_update built with TE's flags (--use_fast_math) and with nvcc's
    # defaults, run on an H200 (tests/golden/README.md). The FP32 path is the kernel alone.
    path = pathlib.Path(__file__).resolve().parents[1] / "golden" / "te_adam" / file
    for (lr, b1, b2, eps, wd), (p0, m0, v0), per_step in read_te_adam_probe(path):
        sim = fp8kit.msamp.te_fused_adam(
            p0, m0, v0, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd,
            exp_avg_dtype="fp32", exp_avg_sq_dtype="fp32", build=build,
        )  # fmt: skip
        for g, p, m, v in per_step:
            sim.step(g)
            for ours, gpu in ((sim.ref_weight, p), (sim.ref_m, m), (sim.ref_v, v)):
                np.testing.assert_array_equal(bits(ours), bits(gpu))


# ---- Whole simulations over dumps (fp8kit.msamp.simulate = simulate::run_msamp, as the CLI) ----
RANK_FILES = [
    str(pathlib.Path(__file__).resolve().parents[2] / "data" / "example" / "msamp_ranks" / f"rank{r}.h5")
    for r in range(4)
]


def _optimizer_metrics(res, tensor):
    d = res["rows"]
    d = d[(d.section == "optimizer") & (d.tensor == tensor)]
    return dict(zip(d.metric, d.value))


def test_simulate_dumps_optimizer_grad():
    """O2 with optimizer_grad='fp8-allreduce' equals, bit for bit, the composition done by hand from
    the files: h5py reads, the rank-order DDP all-reduce of each later step's rank gradients, and
    MsampAdam stepping on it with the exact rank mean as the FP32 reference's gradient."""
    pytest.importorskip("pandas")
    h5py = pytest.importorskip("h5py")
    tensor = "model.layers.1.self_attn.k_proj"
    res = fp8kit.msamp.simulate(
        RANK_FILES, level="O2", tensor=f"*{tensor}*", orders=["rank"], paths=["ddp"], optimizer_grad="fp8-allreduce"
    )
    assert res["params"] == [tensor] and any("FP8 all-reduce" in n for n in res["notes"])
    got = _optimizer_metrics(res, tensor)
    files = [h5py.File(p, "r") for p in RANK_FILES]
    try:
        steps = sorted(int(k.split("_")[1]) for k in files[0])
        s0 = files[0][f"step_{steps[0]:06d}"][tensor]
        opt = fp8kit.msamp.adam(s0["weight"][...], s0["exp_avg"][...], s0["exp_avg_sq"][...], step=steps[0] + 1)
        old = 1.0  # the wgrad meta's scale, carried from step to step (the first step's all-reduce too)
        for t in steps:
            g = np.stack([f[f"step_{t:06d}"][tensor]["wgrad"][...].astype(np.float32).ravel() for f in files])
            ar = fp8kit.msamp.allreduce(g, orders=["rank"], path="ddp", old_scale=old)
            old = float(ar["scale"])
            if t == steps[0]:
                continue
            mean = (g.astype(np.float64).sum(axis=0) / len(files)).astype(np.float32)
            opt.step(ar["orders"]["rank"]["values"], mean)
            if t == steps[1]:
                step1 = opt.report()["update_rel_error"]
    finally:
        for f in files:
            f.close()
    rep = opt.report()
    assert got["steps_applied"] == len(steps) - 1
    for k in ("m_rel_error", "v_rel_error", "update_rel_error"):
        assert got[k] == rep[k], k
    assert got["update_rel_error_step1"] == step1 and step1 != rep["update_rel_error"]
    # fed the exact mean instead, the drift is smaller: the FP8 gradient's own error is left out
    base = _optimizer_metrics(fp8kit.msamp.simulate(RANK_FILES, level="O2", tensor=f"*{tensor}*"), tensor)
    assert 0 < base["update_rel_error"] < got["update_rel_error"]


def test_simulate_dumps_msamp_state_dtypes():
    """The run's LBAdamW states are the dtypes given: FP16 exp_avg is far closer to FP32 than the
    default E4M3; dtypes LBAdamW does not take, and a master dtype for msamp, are refused."""
    tensor = "model.layers.1.self_attn.k_proj"
    got = _optimizer_metrics(
        fp8kit.msamp.simulate(RANK_FILES, level="O2", tensor=f"*{tensor}*", exp_avg_dtype="fp16"), tensor
    )
    default = _optimizer_metrics(fp8kit.msamp.simulate(RANK_FILES, level="O2", tensor=f"*{tensor}*"), tensor)
    assert got["m_rel_error"] < default["m_rel_error"] / 10
    with pytest.raises(ValueError, match="fp8 or fp16"):
        fp8kit.msamp.simulate(RANK_FILES, level="O2", exp_avg_dtype="bf16")
    with pytest.raises(ValueError, match="te-fused-adam only"):
        fp8kit.msamp.simulate(RANK_FILES, level="O2", master_weight_dtype="fp16")


def test_simulate_dumps_errors():
    with pytest.raises(ValueError, match="no/such.h5"):
        fp8kit.msamp.simulate(["no/such.h5"])
    with pytest.raises(ValueError, match="mean or fp8-allreduce"):
        fp8kit.msamp.simulate(RANK_FILES, level="O2", optimizer_grad="fp8")
    with pytest.raises(ValueError, match="ranks splits a single dump"):
        fp8kit.msamp.simulate(RANK_FILES, ranks=8)


# ---- The gradient's ScalingMeta over the dumped steps, and the flags at N = 8, 64, 1024 ----------
def _write_rank_dumps(h5py, folder, per_step, tensor="layer.w"):
    """per_step: {step: array (ranks, size)}; one file per rank, as data/example/msamp_ranks."""
    n = next(iter(per_step.values())).shape[0]
    files = [str(folder / f"rank{r}.h5") for r in range(n)]
    for r, f in enumerate(files):
        with h5py.File(f, "w") as h:
            for s, g in per_step.items():
                h[f"step_{s:06d}/{tensor}/wgrad"] = g[r]
    return files


def _allreduce_metrics(res, tensor, step, path):
    d = res["rows"]
    d = d[(d.section == "allreduce") & (d.tensor == tensor) & (d.step == step) & (d.path == path) & (d.order == "")]
    return dict(zip(d.metric, d.value))


def test_simulate_dumps_carry_gradient_scale(tmp_path):
    """MS-AMP's wgrad ScalingMeta lives across steps (msamp/nn/linear.py scaling_metas['wgrad'];
    distributed.py _reduce_bucket: meta.scale.copy_(sf * pre_scale); cast.py cast_to_fp8(sync=True):
    reset_scaling_factor stores sf): a step whose amax is 0, NaN or +-Inf takes the previous step's
    scale. Held bit for bit against msamp_allreduce above with the scale carried by hand."""
    pytest.importorskip("pandas")
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(24)
    n, size = 4, 64
    base = (rng.standard_normal((n, size)) * 1e-3).astype(f32)
    per_step = {
        1: base,
        2: np.zeros((n, size), f32),
        3: base.copy(),
        4: base * f32(30),
        5: base.copy(),
        6: base.copy(),
        7: (base * f32(1e-36)).astype(f32),
    }
    per_step[3][2, 7] = np.nan  # amax NaN -> +Inf: 1 / old scale
    per_step[5][0, 0] = -np.inf  # amax +Inf
    tensor = "layer.w"
    files = _write_rank_dumps(h5py, tmp_path, per_step, tensor)
    res = fp8kit.msamp.simulate(files, orders=["rank", "tree"])
    for path in ("ddp", "non-ddp"):
        old = f32(1)
        scales = []
        for s, g in per_step.items():
            got = _allreduce_metrics(res, tensor, s, path)
            amax, sf, sinv, codes, values = msamp_allreduce(g, "rank", path, old_scale=old)
            assert bits(f32(got["old_scale"])) == bits(old), (path, s)
            assert bits(f32(got["scale"])) == bits(sf), (path, s, got["scale"], sf)
            assert bits(f32(got["scale_inv"])) == bits(sinv), (path, s)
            both = fp8kit.msamp.allreduce(g, orders=["rank"], path=path, old_scale=float(old))
            np.testing.assert_array_equal(bits(both["orders"]["rank"]["values"]), bits(values))
            scales.append(sf)
            old = sf
        # the carry matters: a zero gradient keeps (DDP: and pre-scales again) the previous scale
        pre = f32(1.0 / math.sqrt(n))
        assert scales[1] == (f32(scales[0] * pre) if path == "ddp" else scales[0])
        assert scales[1] != fp8kit.msamp.allreduce(per_step[2], path=path)["scale"] or path == "non-ddp"
        assert scales[2] == (f32((f32(1) / scales[1]) * pre) if path == "ddp" else f32(1) / scales[1])
        assert np.isinf(scales[6]) or scales[6] > 2**100


def _split_allreduce_flags(g, n, spread, seed, path):
    """Whether the split model's all-reduce clamps (a rank cast past 448, a hop past 448, a result
    not finite), whether >= 1% of the elements sum to 0 though their mean is not 0, in any of the
    three orders, and the margin that avoids every clamp: docs/msamp.md, transcribed with
    msamp_allreduce and _reduce_tracking (below)."""
    ranks = np.stack([split_rank(g, n, r, spread, seed) for r in range(n)])
    amax, sf, sinv, _, _ = msamp_allreduce(ranks, "rank", path)
    with np.errstate(all="ignore"):
        over = bool(np.any(np.abs(ranks * sf) > 448))
        q = np.stack([e4m3_satfinite(x * sf) for x in ranks])
    mean = ranks.astype(np.float64).sum(axis=0) / n
    start = ((np.arange(g.size) * n // g.size) + 1) % n
    under, peak = False, [0.0]
    for order in ("rank", "ring", "tree"):
        codes, hops, _ = _reduce_tracking(q, order, start, peak)
        with np.errstate(all="ignore"):
            values = e4m3_value(codes) * sinv
        over = over or hops > 0 or bool((~np.isfinite(values)).any())
        under = under or np.count_nonzero((mean != 0) & (values == 0)) / g.size >= 0.01
    margin = 0
    while peak[0] > 448 * 2.0**margin:
        margin += 1
    return over, under, margin


def test_simulate_dumps_flags_at_8_64_1024(tmp_path):
    """The overflow / underflow lists per (N, path) for N = 8, 64, 1024 (the issue's "which tensors
    would overflow or underflow"), against the transcription on tensors built to land on each side."""
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(3)
    size = 48
    tensors = {
        "calm": np.full(size, f32(1e-3)) * (1 + f32(0.01) * rng.standard_normal(size)).astype(f32),
        "wide": (rng.standard_normal(size) * 10.0 ** rng.uniform(-9, 0, size)).astype(f32),
        "normal": rng.standard_normal(size).astype(f32),
    }
    f = str(tmp_path / "one.h5")
    with h5py.File(f, "w") as h:
        for name, g in tensors.items():
            h[f"step_000005/{name}/wgrad"] = g
    res = fp8kit.msamp.simulate(f, ranks=[8, 64, 1024], spread=0.5, seed=9)
    flags = {(d["ranks"], d["path"]): d for d in res["flags"]}
    assert set(flags) == {(n, p) for n in (8, 64, 1024) for p in ("ddp", "non-ddp")}
    seen = set()
    for (n, path), d in flags.items():
        for name, g in tensors.items():
            over, under, margin = _split_allreduce_flags(g, n, 0.5, 9, path)
            assert (name in d["overflow"]) == over, (n, path, name)
            assert (name in d["underflow"]) == under, (n, path, name)
            assert d["margin"].get(name, 0) == margin, (n, path, name)
            seen.add((over, under))
    # Under the split model every tensor clamps a hop from N = 8 on (the rank sum of the largest
    # element grows like sqrt(N) past the pre-scale: docs/msamp.md section 6); underflow varies.
    assert {bool(u) for _, u in seen} == {True, False}


# ---- The reported metrics, recomputed from the definitions in docs/msamp.md --------------------
def _reduce_tracking(q, order, chunk_start, peak):
    """reduce_codes (half hop) that also counts the hops past 448, the largest |sum| before the
    cast, and the largest |partial sum| of the same order summed exactly (into peak[0])."""
    n, size = q.shape
    over = [0, 0.0]

    def add(a, b, ea, eb):
        s = e4m3_value(a) + e4m3_value(b)  # the exact sum (float32 holds it)
        with np.errstate(invalid="ignore"):
            big = np.abs(s) > 448
            over[0] += int(np.count_nonzero(big))
            m = np.nanmax(np.abs(s)) if np.any(~np.isnan(s)) else 0.0
        over[1] = max(over[1], float(m))
        e = ea + eb
        with np.errstate(invalid="ignore"):
            pe = np.nanmax(np.abs(e)) if np.any(~np.isnan(e)) else 0.0
        peak[0] = max(peak[0], float(pe))
        return fp8_add(a, b, "half"), e

    x = e4m3_value(q).astype(np.float64)
    if order == "rank":
        acc, ea = q[0], x[0]
        for r in range(1, n):
            acc, ea = add(acc, q[r], ea, x[r])
    elif order == "ring":
        idx = np.arange(size)
        acc, ea = q[chunk_start, idx], x[chunk_start, idx]
        for k in range(1, n):
            acc, ea = add(acc, q[(chunk_start + k) % n, idx], ea, x[(chunk_start + k) % n, idx])
    else:
        level = [(q[r], x[r]) for r in range(n)]
        while len(level) > 1:
            nxt = [add(level[k][0], level[k + 1][0], level[k][1], level[k + 1][1]) for k in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        acc = level[0][0]
    return acc, over[0], over[1]


@pytest.mark.parametrize("n,path", [(2, "ddp"), (8, "non-ddp"), (64, "ddp"), (1024, "non-ddp")])
def test_allreduce_metrics(n, path):
    """cast_*, hop_overflows, max_partial, rel_error, sqnr_db, underflow_share, nonfinite, order_spread,
    order_differs and extra_margin from their definitions (docs/msamp.md "Metrics"). Counts and the
    margin exactly; float64 sums to 1e-9 relative (their summation order is not specified)."""
    rng = np.random.default_rng(n + 17)
    size = 40 if n >= 1024 else 300
    g = (rng.standard_normal((n, size)) * 10.0 ** rng.uniform(-6, 0, size)).astype(f32)
    g[0, 0] = 0
    g[:, 1] = 0  # mean 0
    orders = ["rank", "ring", "tree"]
    res = fp8kit.msamp.allreduce(g, orders=orders, path=path)
    amax, sf, sinv, _, _ = msamp_allreduce(g, "rank", path)
    with np.errstate(all="ignore"):
        q = np.stack([e4m3_satfinite(x * sf) for x in g])
        assert res["cast_saturated"] == np.count_nonzero(np.abs(g * sf) > 448)
    # Shares of two integer counts: one correctly rounded division in C++ and in Python, so exact.
    assert res["cast_underflow_share"] == np.count_nonzero((g != 0) & ((q & 0x7F) == 0)) / np.count_nonzero(g)
    mean = g.astype(np.float64).sum(axis=0) / n
    start = ((np.arange(size) * n // size) + 1) % n
    peak = [0.0]
    vals = {}
    for order in orders:
        codes, hops, maxp = _reduce_tracking(q, order, start, peak)
        got = res["orders"][order]
        np.testing.assert_array_equal(nan_norm(got["codes"]), nan_norm(codes))
        v = e4m3_value(codes) * sinv
        vals[order] = v
        fin = np.isfinite(v)
        assert got["hop_overflows"] == hops and got["max_partial"] == maxp
        assert got["nonfinite"] == np.count_nonzero(~fin)
        assert got["underflow_share"] == np.count_nonzero((mean != 0) & (v == 0)) / size
        err2 = np.sum((v[fin].astype(np.float64) - mean[fin]) ** 2)
        ref2 = np.sum(mean**2)
        assert got["rel_error"] == pytest.approx(math.sqrt(err2 / ref2), rel=1e-9)
        assert got["sqnr_db"] == pytest.approx(10 * math.log10(ref2 / err2), rel=1e-9)
    stack = np.stack([vals[o] for o in orders])
    codes = np.stack([res["orders"][o]["codes"] for o in orders])
    assert res["order_differs"] == np.count_nonzero(np.any(codes != codes[0], axis=0))
    spread = np.max(stack.max(axis=0).astype(np.float64) - stack.min(axis=0))
    assert res["order_spread"] == pytest.approx(spread / math.sqrt(np.sum(mean**2) / size), rel=1e-9)
    k = 0
    while peak[0] > 448 * 2.0**k:
        k += 1
    assert res["extra_margin"] == k


def test_adam_report_metrics():
    """MsampAdam's FP32 reference (the same kernel expressions, FP32 states, factor 1) and its
    report (docs/msamp.md section 3) recomputed from the definitions; two steps, so the drift
    after one step and after the sequence are both checked."""
    rng = np.random.default_rng(21)
    n = 2000
    w = (rng.standard_normal(n) * 0.02).astype(f32)
    hyper = dict(lr=3e-3, b1=0.9, b2=0.999, eps=1e-8, wd=0.01)
    sim = fp8kit.msamp.adam(w, lr=3e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    ref = NumpyLBAdamW(w, np.zeros(n, f32), np.zeros(n, f32), fp16_master=True, **hyper)
    m32, v32, w32 = np.zeros(n, f32), np.zeros(n, f32), w.copy()
    b1, b2 = f32(0.9), f32(0.999)
    for t in (1, 2):
        g = (rng.standard_normal(n) * 1e-4).astype(f32)
        g[:50] *= f32(1e-5)  # small entries the E4M3 first moment loses
        sim.step(g)
        ref.step(g)
        bc1 = f32(1 - float(b1) ** t)
        bc2 = f32(1 - float(b2) ** t)
        step_size, sqrt_bc2 = f32(f32(3e-3) / bc1), np.sqrt(bc2, dtype=f32)
        p = (w32 * f32(1 - 3e-3 * 0.01)).astype(f32)
        m32 = fma32(b1 * m32, f32(1), (f32(1) - b1) * g)
        v32 = fma32(b2 * v32, f32(1), (f32(1) - b2) * (g * g))
        w32 = fma32(-(m32 / (np.sqrt(v32) / sqrt_bc2 + f32(1e-8))), step_size, p)
        np.testing.assert_array_equal(bits(sim.ref_m), bits(m32))
        np.testing.assert_array_equal(bits(sim.ref_v), bits(v32))
        np.testing.assert_array_equal(bits(sim.ref_weight), bits(w32))
        m = e4m3_value(ref.m) * (f32(1) / ref.m_scale)
        v = ref.v.astype(f32) * (f32(1) / ref.v_scale)
        wq = ref.weight().astype(np.float64)
        rep = sim.report()
        d_ref, d_sim = w32.astype(np.float64) - w, wq - w
        assert rep["update_rel_error"] == pytest.approx(
            math.sqrt(np.sum((d_sim - d_ref) ** 2) / np.sum(d_ref**2)), rel=1e-9
        )
        assert rep["weight_max_abs_diff"] == np.max(np.abs(wq - w32))
        assert rep["m_rel_error"] == pytest.approx(
            math.sqrt(np.sum((m.astype(np.float64) - m32) ** 2) / np.sum(m32.astype(np.float64) ** 2)), rel=1e-9
        )
        assert rep["v_rel_error"] == pytest.approx(
            math.sqrt(np.sum((v.astype(np.float64) - v32) ** 2) / np.sum(v32.astype(np.float64) ** 2)), rel=1e-9
        )
        for s, r_, q_ in (("m", m32, m), ("v", v32, v)):
            assert rep[f"{s}_underflow"] == np.count_nonzero((r_ != 0) & (q_ == 0))
            assert rep[f"{s}_nonzero"] == np.count_nonzero(r_)
    assert rep["m_underflow"] > 0 and rep["update_rel_error"] > 0
