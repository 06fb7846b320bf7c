"""Run logs (`lpx train --out run.h5`), read through the run-log library
(runlog/run_log.hpp; the layout is docs/runlog.md)."""
import os

from . import _core


class Run:
    """One run log, as read_run() reads it.

    header           the root attributes (format, lpx_version, model, recipe,
                     recipe_json, config, param_table, seed)
    metrics          {column: 1-D array}, one row per step: step, loss, lr, grad_norm,
                     update_ratio, adam_rms, step_time_s, and where the log has them
                     attn_logit_max, output_logit_max, act_outlier_ratio, amax_staleness,
                     fixed_batch_loss (docs/runlog.md)
    eval             {column: 1-D array}, one row per evaluation: step, loss, accuracy
    quant            layers, layer_kinds, roles (lists), amax, flushed_pct,
                     saturated_pct, sqnr_db, clamped_blocks as (steps, layers, 6) arrays,
                     applied: (layers * 6) dicts, layer-major (what each quantizer applied)
    checkpoint_step  completed steps of the newest checkpoint (-1: none)
    missing          optional datasets absent from the file
    """

    def __init__(self, d):
        self.path = d["path"]
        self.header = d["header"]
        self.metrics = d["metrics"]
        self.eval = d["eval"]
        self.quant = d["quant"]
        self.checkpoint_step = d["checkpoint_step"]
        self.missing = d["missing"]

    @property
    def steps(self):
        return len(self.metrics["step"])

    @property
    def loss(self):
        return self.metrics["loss"]

    def __repr__(self):
        return (f"Run({self.path!r}, model={self.header['model']!r}, "
                f"recipe={self.header['recipe']!r}, steps={self.steps})")


def load(path):
    """Reads a run log. A missing file, a file that is not an lpx run log or a log of
    another format version is a ValueError with one line naming the file."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
    return Run(_core.read_run(os.fspath(path)))
