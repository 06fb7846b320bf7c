"""lpx.torch: the same recipe gives the same operands (docs/python.md#pytorch).

A recipe applied to a PyTorch model quantizes each of the six GEMM operands of every
linear exactly as the C++ trainer's quantizer (recipes/operand.hpp) does on the same
inputs: checked against a separate quantizer fed the same operands, and, for recipes
without delayed scaling, against the operand rebuilt from lpx's primitives and the key
derivation operand.hpp documents (call_key for SR and per-call RHT signs, the fixed
sign stream). The gradients are the products of the quantized operands."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import lpx  # noqa: E402
import lpx.torch as lt  # noqa: E402
from lpx import _core  # noqa: E402

ROLES = lt.ROLES
AXIS = {"fwd_x": 1, "fwd_w": 1, "dgrad_dy": 1, "dgrad_w": 0, "wgrad_x": 0, "wgrad_dy": 0}
GEMM = {"fwd_x": 0, "fwd_w": 0, "dgrad_dy": 1, "dgrad_w": 1, "wgrad_x": 2, "wgrad_dy": 2}


def rebuilt(recipe, layer, role, a, seed, step):
    """operand.hpp's apply(), composed from lpx.hadamard / lpx.cast / lpx.fake_quantize."""
    spec = recipe["roles"][role]
    if layer.quantizer.high_precision():
        fmt = recipe["high_precision"]["format"]
        return a.copy() if fmt == "fp32" else lpx.cast(a, "bf16", emit="values")
    key = _core.call_key(seed, layer.layer_name, layer_index(layer), len(layer.handle.layers),
                         layer.kind, ROLES.index(role), step)
    axis = AXIS[role]
    v = a
    t = spec["transform"]
    if t != "none" and a.shape[axis] % t["size"] == 0:
        n = t["size"]
        if t["signs"] == "per_call":
            s_seed, s_stream = _core.call_key(seed, layer.layer_name, layer_index(layer),
                                              len(layer.handle.layers), layer.kind, 8 + GEMM[role], step)
        else:
            s_seed, s_stream = seed, _core.fixed_sign_stream
        v = lpx.hadamard(v, n, axis=axis, signs=lpx.hadamard_signs(n, s_seed, s_stream))
    fmt = spec["format"]
    sr = dict(seed=key[0], stream=key[1], sr_bits=spec["sr_bits"]) if spec["round"] == "sr" else {}
    if fmt == "fp32":
        return v.copy()
    if fmt == "bf16":
        return lpx.cast(v, "bf16", round=spec["round"], emit="values", **sr)
    block = _core.canonical_block_spec(fmt).split(":")[1]
    kw = dict(round=spec["round"], headroom_3_4=spec["headroom_3_4"], **sr)
    if "scale_rule" in spec:
        kw["scale_rule"] = spec["scale_rule"]
    if block.startswith("b") or block in ("row", "channel"):
        kw["axis"] = axis
    return lpx.fake_quantize(v, fmt, **kw)


def layer_index(layer):
    return layer.handle.layers.index(layer)


def mlp(depth, width=64, classes=16):
    layers = []
    for i in range(depth):
        layers += [torch.nn.Linear(width, width if i + 1 < depth else classes), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


@pytest.mark.parametrize("recipe,depth", [("mxfp8", 3), ("mxfp4-sr-rht", 3), ("nvfp4", 12), ("fp8-delayed", 3)])
def test_operands_equal_the_cpp_quantizer(recipe, depth):
    torch.manual_seed(0)
    model = mlp(depth)
    seed = 5
    h = lt.apply_recipe(model, recipe, seed=seed)
    h.capture = True
    r = lpx.recipes.load(recipe)
    refs = [_core.Quantizer(recipe, l.layer_name, i, len(h.layers), l.kind, seed) for i, l in enumerate(h.layers)]
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 64) * 3
    y = torch.randint(0, 16, (64,))
    quantized_roles = set()
    for step in range(3):
        for l in h.layers:
            l.captured = {}
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        for i, l in enumerate(h.layers):
            for role in range(6):
                if role not in l.captured:
                    assert (i, role) in [(0, 2), (0, 3)]  # the first layer's dX is not needed
                    continue
                a, out = l.captured[role]
                want, _, _ = refs[i].apply(role, a, step)
                assert out.tobytes() == want.tobytes(), (recipe, step, l.layer_name, ROLES[role])
                if recipe != "fp8-delayed" or step == 0:
                    if recipe == "fp8-delayed" and not l.quantizer.high_precision():
                        # an empty history: scale 1, saturating
                        fmt = r["roles"][ROLES[role]]["format"].split(":")[0]
                        exp = lpx.cast(a, fmt, overflow="sat", emit="values")
                    else:
                        exp = rebuilt(r, l, ROLES[role], a, seed, step)
                    assert out.tobytes() == exp.tobytes(), (recipe, step, l.layer_name, ROLES[role])
                if not np.array_equal(out, a):
                    quantized_roles.add(ROLES[role])
            # the weight gradient is the product of the quantized wgrad operands
            dyq = torch.from_numpy(l.captured[5][1])
            xq = torch.from_numpy(l.captured[4][1])
            assert torch.equal(l.weight.grad, dyq.T @ xq)
        opt.step()
        h.step(loss.item())
    assert quantized_roles == set(ROLES)
    if recipe == "nvfp4":  # the first 2/62 and last 8/62 of 12 linears (0 and 2) stay bf16
        assert [l.quantizer.high_precision() for l in h.layers] == [False] * 10 + [True] * 2


def test_sr_keys_follow_the_step_and_seed():
    torch.manual_seed(1)
    outs = []
    for seed, step in [(1, 0), (1, 0), (2, 0), (1, 1)]:
        model = mlp(2)
        model.load_state_dict(mlp_state)
        h = lt.apply_recipe(model, "mxfp4-sr-rht", seed=seed)
        h.step_index = step
        h.capture = True
        model(xs).sum().backward()
        outs.append(h.layers[1].captured[5][1])
    assert np.array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[0], outs[2]) and not np.array_equal(outs[0], outs[3])


torch.manual_seed(3)
mlp_state = mlp(2).state_dict()
xs = torch.randn(64, 64)


def test_fake_quantize_is_straight_through():
    x = torch.randn(4, 64, requires_grad=True)
    y = lt.fake_quantize(x, "mxfp4")
    assert np.array_equal(y.detach().numpy(), lpx.fake_quantize(x.detach().numpy(), "mxfp4"))
    (y * 3).sum().backward()
    assert torch.equal(x.grad, torch.full_like(x, 3.0))
    with pytest.raises(TypeError):
        lt.fake_quantize(np.ones(4, np.float32), "mxfp4")


def test_evaluation_leaves_training_state_alone(tmp_path):
    torch.manual_seed(2)
    a, b = mlp(3), mlp(3)
    b.load_state_dict(a.state_dict())
    ha = lt.apply_recipe(a, "fp8-delayed", seed=0)
    hb = lt.apply_recipe(b, "fp8-delayed", seed=0)
    x = torch.randn(32, 64)
    for step in range(3):
        for m, h in ((a, ha), (b, hb)):
            m(x).square().mean().backward()
            h.step(0.0)
        with torch.no_grad():  # only a is evaluated
            a(x * 100)
    for la, lb in zip(ha.layers, hb.layers):
        for role in range(6):
            assert la.quantizer.history(role) == lb.quantizer.history(role)


def test_run_log_opens_in_lpx_report(lpx_bin, tmp_path):
    import subprocess
    torch.manual_seed(4)
    model = mlp(3)
    (tmp_path / "runs").mkdir()
    h = lt.apply_recipe(model, "mxfp8", seed=0, log=tmp_path / "runs" / "torch.h5")
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    x, y = torch.randn(64, 64), torch.randint(0, 16, (64,))
    losses = []
    for step in range(5):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        assert h.step(loss.item(), lr=1e-3) == []
    h.eval(losses[-1], 0.5)
    h.close()
    run = lpx.runs.load(tmp_path / "runs" / "torch.h5")
    assert run.header["recipe"] == "mxfp8" and run.steps == 5
    assert np.array_equal(run.metrics["loss"], np.array(losses))
    assert run.quant["sqnr_db"].shape == (5, 3, 6)
    assert run.quant["applied"][0]["element"] == "float8_e4m3fn"
    assert run.quant["applied"][-1]["element"] == "bfloat16"  # the head stays bf16 (mxfp8)
    p = subprocess.run([lpx_bin, "report", str(tmp_path / "runs"), "--format", "md"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    # the report names the layer the recipe kept in high precision: the head, the third linear
    head = [l.layer_name for l in h.layers][-1]
    assert f"| torch | mxfp8 (kept high: {head}) |" in p.stdout


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown recipe|no-such"):
        lt.apply_recipe(mlp(2), "no-such-recipe")
    with pytest.raises(TypeError):
        lt.apply_recipe(object(), "mxfp8")
    with pytest.raises(ValueError, match="no nn.Linear"):
        lt.apply_recipe(torch.nn.ReLU(), "mxfp8")
    with pytest.raises(ValueError, match="head"):
        lt.apply_recipe(mlp(2), "mxfp8", head="nope")


def _train(model, handle, opt, steps, start):
    """Steps start .. start+steps-1 on batches that depend only on the step number."""
    for step in range(start, start + steps):
        g = torch.Generator().manual_seed(1000 + step)
        x = torch.randn(32, 64, generator=g) * 3
        y = torch.randint(0, 16, (32,), generator=g)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        handle.step(loss.item(), lr=1e-3)


@pytest.mark.parametrize("recipe", ["fp8-delayed", "mxfp4-sr-rht"])
def test_checkpoint_resume_is_bit_identical(recipe, tmp_path):
    """Train 5 steps straight; train 2, save model + optimizer + handle with torch.save,
    build everything anew, load, train 3 more: the weights are the same bits (delayed
    amax histories, the step counter behind SR keys and RHT signs, and the detectors'
    state all carried by the handle's state_dict)."""
    def fresh(init_seed):
        torch.manual_seed(init_seed)
        model = mlp(3)
        h = lt.apply_recipe(model, recipe, seed=7)
        return model, h, torch.optim.Adam(model.parameters(), lr=1e-3)

    model, h, opt = fresh(0)
    _train(model, h, opt, 5, 0)
    straight = {k: v.clone() for k, v in model.state_dict().items()}

    model, h, opt = fresh(0)
    _train(model, h, opt, 2, 0)
    state = h.state_dict()
    if recipe == "fp8-delayed":  # the histories are not empty: they are what is carried
        assert any(len(v) for hist in state["histories"].values() for v in hist)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "lpx": state}, tmp_path / "ck.pt")

    model, h, opt = fresh(123)  # other initial weights: everything must come from the file
    ck = torch.load(tmp_path / "ck.pt")
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    h.load_state_dict(ck["lpx"])
    assert h.step_index == 2
    _train(model, h, opt, 3, 2)
    resumed = model.state_dict()
    for k, v in straight.items():
        assert v.numpy().tobytes() == resumed[k].numpy().tobytes(), (recipe, k)

    # without the handle's state (step 0, empty histories) the same resume differs: the
    # comparison above can fail
    model, h, opt = fresh(123)
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    _train(model, h, opt, 3, 2)
    assert any(straight[k].numpy().tobytes() != v.numpy().tobytes() for k, v in model.state_dict().items())


def test_checkpoint_restores_the_detectors_and_refuses_a_mismatch():
    torch.manual_seed(0)
    model = mlp(2)
    # loss_spike is not among the default detectors (README "Divergence detection")
    h = lt.apply_recipe(model, "mxfp8", seed=1, detectors="all")
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    _train(model, h, opt, 2, 0)
    for k in range(20):  # a quiet history for the spike detectors (no forward needed)
        h.step(2.0 + 0.01 * (k % 3), lr=0.1, grad_norm=1.0 + 0.01 * (k % 2))
    state = h.state_dict()
    assert len(state["observed"]) == 22 and state["step"] == 22

    h2 = lt.apply_recipe(mlp(2), "mxfp8", seed=1, detectors="all")
    h2.load_state_dict(state)
    assert h2.flags == h.flags and h2.state_dict() == state
    # a loss spike is flagged against the restored history, as in the uninterrupted run;
    # a handle without the state has too short a history to flag it
    spike = dict(lr=0.1, grad_norm=1.0)
    a, b = h.step(500.0, **spike), h2.step(500.0, **spike)
    assert a and a == b and any(f["detector"] == "loss_spike" for f in a)
    h3 = lt.apply_recipe(mlp(2), "mxfp8", seed=1, detectors=["loss_spike", "nonfinite"])
    h3.step_index = 22
    assert not any(f["detector"] == "loss_spike" for f in h3.step(500.0, **spike))
    # the default set leaves loss_spike out; an unknown name is a ValueError
    h4 = lt.apply_recipe(mlp(2), "mxfp8", seed=1)
    h4.load_state_dict(state)
    assert not any(f["detector"] == "loss_spike" for f in h4.step(500.0, **spike))
    with pytest.raises(ValueError, match="unknown detector 'bogus'"):
        lt.apply_recipe(mlp(2), "mxfp8", seed=1, detectors="bogus")

    with pytest.raises(ValueError, match="seed"):
        lt.apply_recipe(mlp(2), "mxfp8", seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="recipe"):
        lt.apply_recipe(mlp(2), "nvfp4", seed=1).load_state_dict(state)
    with pytest.raises(ValueError, match="layers"):
        lt.apply_recipe(mlp(3), "mxfp8", seed=1).load_state_dict(state)
    with pytest.raises(ValueError, match="fresh handle"):
        h2.load_state_dict(state)
    with pytest.raises(TypeError, match="must be a dict"):
        h2.load_state_dict([1])
