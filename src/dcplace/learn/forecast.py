"""PADRL's demand forecast (Prediction-Aware DRL, ZDK+22 in ``../shared/papers/002_0cf75b9bf5d3860a.txt``): an LSTM
that reads the requests seen so far and predicts what the next ones will ask for.

Input per request (``F_IN = 3``): CPU and memory as fractions of one NUMA node, multi-NUMA flag. Output after each
request (``F_OUT = 4``), a forecast over the next ``horizon`` creation requests: their mean CPU and memory fractions,
the fraction that is multi-NUMA, and the fraction that is *large* (at least :data:`LARGE_CPU` of a node's CPU, the
requests that end episodes in the paper's regime). Trained supervised (mean squared error) on the training rows of a
trace (:func:`train_forecaster`), then frozen; the DRL agent reads the forecast as context appended to every
machine's row (:mod:`dcplace.learn.cvd_model`, ``CvdConfig.forecast_hidden``).

At a decision the agent runs the LSTM one step per *new* request (:class:`ForecastState`, numpy, O(hidden^2)),
keeping the recurrent state over the episode; a request index lower than the last one seen, or more than
:data:`EPISODE_GAP` above it, starts a new episode (the policy is not told when episodes start).

Shapes: :class:`DemandLSTM` maps ``(B, T, F_IN)`` to ``(B, T, F_OUT)``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from dcplace.sim.numa import PreparedTrace

F_IN = 3
F_OUT = 4
EPISODE_GAP = 1000
"""Request indices further apart than this belong to different episodes (an episode's decisions are consecutive
creations, a few indices apart at most)."""
LARGE_CPU = 0.4
"""A request taking at least this fraction of a node's CPU (16 of 40 cores) counts as large."""


class DemandLSTM(nn.Module):
    """One LSTM layer and a linear head: ``h_t = LSTM(x_1..x_t)``, ``forecast_t = W h_t + b``."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(F_IN, hidden, batch_first=True)
        self.head = nn.Linear(hidden, F_OUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(x)
        out: torch.Tensor = self.head(h)
        return out


def request_features(
    demand: npt.NDArray[np.float64], multi: npt.NDArray[np.bool_], node: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """``(n, F_IN)`` inputs of requests with ``demand`` (n, 2) on nodes of capacity ``node`` (2,)."""
    out: npt.NDArray[np.float64] = np.c_[demand / node, multi.astype(np.float64)]
    return out


def targets(x: npt.NDArray[np.float64], horizon: int) -> npt.NDArray[np.float64]:
    """``(n, F_OUT)``: for each request ``t``, the forecast target over requests ``t + 1 .. t + horizon`` (fewer at
    the end; the last request's target repeats the one before)."""
    y = np.c_[x, (x[:, 0] >= LARGE_CPU).astype(np.float64)]
    c = np.vstack([np.zeros((1, F_OUT)), np.cumsum(y, axis=0)])
    n = len(x)
    lo = np.minimum(np.arange(n) + 1, n - 1)
    hi = np.minimum(np.arange(n) + 1 + horizon, n)
    out: npt.NDArray[np.float64] = (c[hi] - c[lo]) / np.maximum(hi - lo, 1)[:, None]
    return out


def creation_features(trace: PreparedTrace, node: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Inputs of the trace's creation requests in event order."""
    req = trace.ev_req[~trace.ev_dep]
    return request_features(trace.demand[req], trace.multi[req], node)


def train_forecaster(
    trace: PreparedTrace,
    node: npt.NDArray[np.float64],
    rows: tuple[int, int],
    hidden: int = 32,
    horizon: int = 64,
    chunk: int = 256,
    steps: int = 300,
    seed: int = 0,
) -> tuple[DemandLSTM, dict[str, float]]:
    """Fit a :class:`DemandLSTM` on creation requests ``rows`` of ``trace`` (chunks of ``chunk`` requests, batches
    of 16, Adam 3e-3, ``steps`` steps); the last tenth of the rows is held out. Returns the model and its held-out
    mean squared error beside a naive forecast's (the mean of the last ``horizon`` requests)."""
    torch.manual_seed(seed)
    x = creation_features(trace, node)
    lo, hi = rows
    hi = min(hi, len(x))
    y = targets(x, horizon)
    cut = lo + int(0.9 * (hi - lo))
    model = DemandLSTM(hidden)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(seed)
    xt, yt = torch.from_numpy(x).float(), torch.from_numpy(y).float()
    for _ in range(steps):
        starts = rng.integers(lo, cut - chunk, 16)
        idx = torch.from_numpy(starts[:, None] + np.arange(chunk)[None, :])
        loss = nn.functional.mse_loss(model(xt[idx])[:, chunk // 4 :], yt[idx][:, chunk // 4 :])
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
    with torch.no_grad():
        pred = model(xt[cut:hi][None])[0].numpy()
    held = y[cut:hi]
    # the naive forecast: the mean of the last ``horizon`` requests (the current one included)
    yy = np.c_[x, (x[:, 0] >= LARGE_CPU).astype(np.float64)]
    c = np.vstack([np.zeros((1, F_OUT)), np.cumsum(yy, axis=0)])
    t = np.arange(cut, hi)
    past = (c[t + 1] - c[np.maximum(t + 1 - horizon, 0)]) / np.minimum(t + 1, horizon)[:, None]
    model.eval()
    return model, {
        "mse": float(np.mean((pred[chunk // 4 :] - held[chunk // 4 :]) ** 2)),
        "mse_naive": float(np.mean((past[chunk // 4 :] - held[chunk // 4 :]) ** 2)),
    }


class ForecastState:
    """The LSTM run incrementally in numpy over the requests an agent sees (module docstring)."""

    def __init__(self, model: DemandLSTM) -> None:
        w = {k: v.detach().numpy().astype(np.float64) for k, v in model.lstm.state_dict().items()}
        self.w_ih = w["weight_ih_l0"]  # (4H, F_IN), gates in torch's order: input, forget, cell, output
        self.w_hh = w["weight_hh_l0"]  # (4H, H)
        self.b = w["bias_ih_l0"] + w["bias_hh_l0"]  # (4H,)
        self.w_out = model.head.weight.detach().numpy().astype(np.float64)  # (F_OUT, H)
        self.b_out = model.head.bias.detach().numpy().astype(np.float64)
        self.hidden = self.w_hh.shape[1]
        self.reset()

    def reset(self) -> None:
        self.h = np.zeros(self.hidden)
        self.c = np.zeros(self.hidden)
        self.last = -1
        self.out = self.b_out.copy()

    def see(self, request: int, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """The forecast after request ``request`` with inputs ``x`` (F_IN,); a repeated index returns the same
        forecast, a lower one or one more than :data:`EPISODE_GAP` ahead starts over."""
        if request == self.last and request >= 0:
            return self.out
        if request < self.last or (self.last >= 0 and request > self.last + EPISODE_GAP):
            self.reset()
        z = self.w_ih @ x + self.w_hh @ self.h + self.b
        n = self.hidden
        i, f = 1 / (1 + np.exp(-z[:n])), 1 / (1 + np.exp(-z[n : 2 * n]))
        g, o = np.tanh(z[2 * n : 3 * n]), 1 / (1 + np.exp(-z[3 * n :]))
        self.c = f * self.c + i * g
        self.h = o * np.tanh(self.c)
        self.out = self.w_out @ self.h + self.b_out
        self.last = request
        return self.out
