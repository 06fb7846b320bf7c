"""lpx.torch: lpx's quantizers on PyTorch tensors (docs/python.md#pytorch).

    import torch, lpx.torch
    handle = lpx.torch.apply_recipe(model, "mxfp8", seed=0, log="run.h5")
    for step, (x, y) in enumerate(batches):
        loss = loss_fn(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
        handle.step(loss.item(), lr=opt.param_groups[0]["lr"])   # logs, then the next step

- fake_quantize(x, fmt, ...): lpx.fake_quantize as an autograd function (the gradient
  passes straight through, as in quantization-aware training).
- apply_recipe(model, recipe): replaces every nn.Linear by an LpxLinear that quantizes the
  six GEMM operands (forward X and W, dgrad dY and W, wgrad X and dY) with the C++
  trainer's own per-layer quantizer (recipes/operand.hpp's OperandQuantizer through
  lpx._core.Quantizer): the same formats, scale rules, per-role rounding, stochastic
  rounding keys (seed, layer name, role, step), random Hadamard signs, 3/4 headroom,
  delayed-scaling histories and high-precision layers as `lpx train`
  (docs/recipes.md). The GEMMs themselves are PyTorch's float32 matmuls.

CPU tensors only: a CUDA tensor is a ValueError (the trainer's quantizer is CPU code;
lpx.cast, lpx.decode and lpx.fake_quantize take CUDA tensors: docs/python.md#dlpack).
handle.state_dict() / load_state_dict() carry a run's quantization state through a
checkpoint (docs/python.md#checkpoints). float32 parameters and activations; other dtypes are converted to float32
for the quantizer and the result is float32.
"""
import time

import torch
from torch import nn

from . import _core
from . import fake_quantize as _fake_quantize
from . import recipes as _recipes

ROLES = _core.role_names()  # fwd_x, fwd_w, dgrad_dy, dgrad_w, wgrad_x, wgrad_dy
FWD_X, FWD_W, DGRAD_DY, DGRAD_W, WGRAD_X, WGRAD_DY = range(6)


def _numpy(t):
    """A CPU float32 C-contiguous view of t's data (no copy when it already is one)."""
    if t.device.type != "cpu":
        raise ValueError(f"lpx.torch runs on CPU tensors; this one is on {t.device} "
                         f"(move it with .cpu(); the trainer's quantizer is CPU code)")
    return t.detach().to(torch.float32).contiguous().numpy()


class _FakeQuantize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, fmt, kwargs):
        return torch.from_numpy(_fake_quantize(_numpy(x), fmt, **kwargs))

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


def fake_quantize(x, fmt, **kwargs):
    """lpx.fake_quantize(x, fmt, **kwargs) on a tensor, differentiable with the
    straight-through estimator (the gradient passes unchanged)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, not {type(x).__name__}")
    return _FakeQuantize.apply(x, fmt, kwargs)


class _LinearFn(torch.autograd.Function):
    """Y = Q(X) Q(W)^T + b; dX = Q(dY) Q(W); dW = Q(dY)^T Q(X) (docs/recipes.md#roles)."""

    @staticmethod
    def forward(ctx, x, weight, bias, layer):
        step = layer.handle.step_index
        xq = layer.operand(FWD_X, x, step)
        wq = layer.operand(FWD_W, weight, step)
        y = xq @ wq.T
        if bias is not None:
            y = y + bias
        ctx.save_for_backward(x, weight)
        ctx.layer, ctx.step, ctx.has_bias = layer, step, bias is not None
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        layer, step = ctx.layer, ctx.step
        dy = dy.contiguous()
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = layer.operand(DGRAD_DY, dy, step) @ layer.operand(DGRAD_W, weight, step)
        if ctx.needs_input_grad[1]:
            dw = layer.operand(WGRAD_DY, dy, step).T @ layer.operand(WGRAD_X, x, step)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = dy.sum(0)
        return dx, dw, db, None


class LpxLinear(nn.Module):
    """An nn.Linear whose GEMM operands are quantized by the recipe (the same weight and
    bias Parameters as the module it replaces)."""

    def __init__(self, linear, handle, name, index, count, kind):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self.handle, self.layer_name, self.kind = handle, name, kind
        self.quantizer = _core.Quantizer(handle.recipe_source, name, index, count, kind, handle.seed)
        self.stats = [None] * 6     # this step's OperandStats per role (None: not quantized)
        self.applied = [None] * 6   # what each role applied (AppliedOperand)
        self.captured = {}          # role -> (input, quantized) when handle.capture is on

    def operand(self, role, t, step):
        """The role's operand quantized by the C++ quantizer (a new float32 tensor)."""
        a = _numpy(t)
        out, stats, applied = self.quantizer.apply(role, a, step)
        if self.stats[role] is None:
            self.stats[role] = stats
        else:  # a layer called twice in one step: one record, as sim merges attention calls
            self.stats[role] = _core.merge_stats(self.stats[role], stats)
        self.applied[role] = applied
        q = torch.from_numpy(out)
        if self.handle.capture:
            self.captured[role] = (a.copy(), out)
        return q

    def forward(self, x):
        shape = x.shape
        x2 = x.reshape(-1, self.in_features).to(torch.float32)
        if torch.is_grad_enabled():
            y = _LinearFn.apply(x2, self.weight, self.bias, self)
        else:
            # evaluation: the delayed-scaling histories are put back afterwards, so that
            # evaluating never changes training (as sim's evaluation does)
            saved = [self.quantizer.history(r) for r in (FWD_X, FWD_W)]
            stats = list(self.stats)
            try:
                y = _LinearFn.forward(_Ctx(), x2, self.weight.detach(), None if self.bias is None
                                      else self.bias.detach(), self)
            finally:
                for r, v in zip((FWD_X, FWD_W), saved):
                    self.quantizer.restore_history(r, v)
                self.stats = stats
        return y.reshape(*shape[:-1], self.out_features)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"layer={self.layer_name!r}, kind={self.kind}, recipe={self.handle.recipe!r}")


class _Ctx:
    """A stand-in for autograd's ctx when forward runs without a graph."""

    def save_for_backward(self, *a):
        pass


class RecipeHandle:
    """What apply_recipe() returns: the layers, the step counter, the statistics and the
    run log.

    step_index       the training step the next forward/backward uses (SR keys, RHT signs)
    layers           the LpxLinear modules, in model order
    step(loss, ...)  ends a step: runs the online divergence detectors
                     (divergence/detectors.hpp, as `lpx train`), writes the step's row
                     and the layers' operand statistics to the log, clears the
                     statistics, advances step_index and returns the step's new flags
                     (dicts: step, detector, layer, operand, evidence, describe)
    flags            every flag so far
    eval(loss, accuracy)  writes an evaluation row (at step_index completed steps)
    stats()          {layer: {role: {amax, flushed_pct, saturated_pct, sqnr_db,
                     clamped_blocks, elements}}} of the current step
    state_dict(), load_state_dict(d)  what a resumed run needs to continue bit for bit
                     (docs/python.md#checkpoints): the step, every layer's amax
                     histories and the detectors' inputs so far
    """

    STATE_VERSION = 1

    def __init__(self, model, recipe, seed, log, thresholds, detectors):
        self.model = model
        self.thresholds = thresholds
        self.detectors = detectors
        self.flags = []
        self.recipe_source = recipe
        self.recipe_json = _recipes.show(recipe)
        self.recipe = _recipes.load(recipe)["name"]
        self.seed = seed
        self.step_index = 0
        self.layers = []
        self.capture = False
        self.log_path = log
        self._writer = None
        self._observed = []  # every Monitor.observe() input so far (state_dict replays them)
        self._t0 = time.perf_counter()

    def _open_log(self, model_name):
        self._monitor = _core.Monitor([l.layer_name for l in self.layers], self.thresholds or "",
                                     self.detectors)
        if self.log_path is None:
            return
        header = {"model": model_name, "recipe": self.recipe, "recipe_json": self.recipe_json,
                  "config": "{}", "param_table": "[]", "seed": int(self.seed)}
        self._writer = _core.RunWriter(str(self.log_path), header, [l.layer_name for l in self.layers],
                                       [l.kind for l in self.layers])

    def stats(self):
        out = {}
        for l in self.layers:
            out[l.layer_name] = {
                ROLES[r]: {k: getattr(s, k) for k in ("elements", "amax", "flushed_pct",
                                                      "saturated_pct", "sqnr_db", "clamped_blocks")}
                for r, s in enumerate(l.stats) if s is not None}
        return out

    def step(self, loss, lr=float("nan"), grad_norm=None, update_ratio=float("nan"),
             adam_rms=float("nan")):
        """Ends the step. grad_norm: by default the global L2 norm of the model's .grad
        (call before zero_grad()); NaN values are "not measured" for the detectors."""
        now = time.perf_counter()
        if grad_norm is None:
            sq = 0.0
            for p in self.model.parameters():
                if p.grad is not None:
                    sq += float(p.grad.detach().to(torch.float64).pow(2).sum())
            grad_norm = sq ** 0.5
        nan = float("nan")
        flushed = [s.flushed_pct if s is not None else nan for l in self.layers for s in l.stats]
        saturated = [s.saturated_pct if s is not None else nan for l in self.layers for s in l.stats]
        args = (self.step_index, float(loss), float(grad_norm), float(update_ratio), float(lr),
                float(adam_rms), [float(v) for v in flushed], [float(v) for v in saturated])
        new = self._monitor.observe(*args)
        self._observed.append(args)
        self.flags.extend(new)
        if self._writer is not None:
            stats = [[s if s is not None else _core.OperandStats() for s in l.stats] for l in self.layers]
            applied = [[a if a is not None else _core.AppliedOperand() for a in l.applied]
                       for l in self.layers]
            self._writer.append_step(self.step_index, float(loss), float(lr), float(grad_norm),
                                     float(update_ratio), float(adam_rms), now - self._t0, stats, applied)
        self._t0 = now
        for l in self.layers:
            l.stats = [None] * 6
        self.step_index += 1
        return new

    def state_dict(self):
        """The handle's state as plain Python values (torch.save stores it beside the
        model's and the optimizer's): the recipe, seed and layers it was built for, the
        step counter (stochastic rounding keys and Hadamard signs depend on it), every
        layer's delayed-scaling amax histories (per role, oldest first) and every input the
        online detectors have seen. The detectors' state (divergence::Monitor) is not
        exposed by the library; it is a function of those inputs, so load_state_dict()
        rebuilds it by replaying them (flags included)."""
        return {
            "version": self.STATE_VERSION,
            "recipe": self.recipe,
            "seed": int(self.seed),
            "layers": [l.layer_name for l in self.layers],
            "step": int(self.step_index),
            "histories": {l.layer_name: [[float(v) for v in l.quantizer.history(r)] for r in range(6)]
                          for l in self.layers},
            "observed": [list(a) for a in self._observed],
        }

    def load_state_dict(self, state):
        """Restores state_dict()'s state into this handle (built by apply_recipe with the
        same recipe, seed and model structure, before its first step). ValueError when the
        recipe, seed or layers differ. The run log (log=) of this handle holds the steps it
        runs from here on."""
        if not isinstance(state, dict):
            raise TypeError(f"state must be a dict (from state_dict()), not {type(state).__name__}")
        if state.get("version") != self.STATE_VERSION:
            raise ValueError(f"state version {state.get('version')!r} is not {self.STATE_VERSION}")
        for key, mine in (("recipe", self.recipe), ("seed", int(self.seed)),
                          ("layers", [l.layer_name for l in self.layers])):
            if state.get(key) != mine:
                raise ValueError(f"the state was saved with {key} {state.get(key)!r}; this handle has {mine!r}")
        if self.step_index != 0 or self._observed:
            raise ValueError("load_state_dict needs a fresh handle (no step taken)")
        for l in self.layers:
            for r, values in enumerate(state["histories"][l.layer_name]):
                l.quantizer.restore_history(r, [float(v) for v in values])
        self._monitor = _core.Monitor([l.layer_name for l in self.layers], self.thresholds or "",
                                     self.detectors)
        self.flags = []
        for a in state["observed"]:
            args = (int(a[0]), *map(float, a[1:6]), [float(v) for v in a[6]], [float(v) for v in a[7]])
            self.flags.extend(self._monitor.observe(*args))
            self._observed.append(args)
        self.step_index = int(state["step"])

    def eval(self, loss, accuracy=float("nan")):
        if self._writer is not None:
            self._writer.append_eval(self.step_index, float(loss), float(accuracy))

    def close(self):
        if self._writer is not None:
            self._writer.flush()
            self._writer = None


def apply_recipe(model, recipe, seed=0, log=None, head="last", model_name="torch", thresholds=None,
                 detectors=None):
    """Replaces every nn.Linear of `model` (in named_modules() order) by an LpxLinear
    quantizing its GEMM operands as `recipe` (a catalogue name or a .json file) says, and
    returns a RecipeHandle.

    Layers are keyed as the C++ trainer keys them: name = the module's path in the model
    (its random streams: FNV-1a of it), index = its position among the linears, count =
    their number (high_precision's first/last blocks and fractions count in linears), kind =
    "head" for the `head` layer (default "last": the last linear, as sim's MLP; None: no
    head; or a module path) and "linear" otherwise. seed: the run seed of the SR keys and
    RHT signs. log: a path to write the HDF5 run log (runlog/, readable by `lpx report`
    and lpx.runs.load). thresholds: the detectors' thresholds as JSON text (the format of
    `lpx report --thresholds`; default the built-in ones). detectors: the detectors whose
    flags step() returns, as `lpx train --detectors`: None for the default six (nonfinite,
    attn_logit, loss_rise, update_size, fixed_batch_rise, ramp_rise; the last two stay
    silent here, as the handle measures no fixed-batch loss), "all", or names (a list or a comma-separated str).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    from ._arrays import int_arg, UINT64_MAX
    seed = int_arg("seed", seed, 0, UINT64_MAX)
    if detectors is None:
        detectors = ""
    elif not isinstance(detectors, str):
        detectors = ",".join(detectors)
    handle = RecipeHandle(model, recipe, seed, log, thresholds, detectors)
    linears = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError("the model has no nn.Linear modules")
    names = [n for n, _ in linears]
    if head == "last":
        head = names[-1]
    elif head is not None and head not in names:
        raise ValueError(f"head '{head}' is not an nn.Linear of the model (linears: {', '.join(names)})")
    for i, (name, lin) in enumerate(linears):
        layer = LpxLinear(lin, handle, name, i, len(linears), "head" if name == head else "linear")
        handle.layers.append(layer)
        parent = model
        *path, last = name.split(".") if name else ("",)
        for p in path:
            parent = getattr(parent, p)
        if name == "":
            raise ValueError("apply_recipe replaces the linears inside a model, not a bare nn.Linear")
        setattr(parent, last, layer)
    handle._open_log(model_name)
    return handle
