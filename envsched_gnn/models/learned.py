r"""The learned propagation: a heterogeneous GNN that replaces the fixed layer of spec 4.4-4.5.

Per half-life, node features (:mod:`.features`) pass through :mod:`.variance_gnn`, whose head
corrects the analytic estimate E^a in logit space (``residual``; zero-initialised):

.. math::
    E_v = 0.25\,\sigma(\mathrm{logit}(E^{a}_v / 0.25) + o_v), \quad
    E_m = \sigma(\mathrm{logit}(E^{a}_m) + o_m), \quad
    E_d = \sigma(\mathrm{logit}(E^{a}_d) + o_d)

then spec 4.6-4.7. ``update`` fits every earlier step's (v, m, d) with loss
mean((4 E_v - 4 v)^2) + aux_weight * mean((E_m - m)^2 + (E_d - d)^2) (docs/results/predictor.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch_geometric.data import HeteroData

from envsched_gnn.graph.hetero import csr_tensor
from envsched_gnn.graph.task_graph import RELATIONS
from envsched_gnn.models.analytic import AnalyticPredictor
from envsched_gnn.models.calibration import (
    calibrate,
    decline_penalty,
    percentile_rank,
    reconstructed_variance,
)
from envsched_gnn.models.config import LearnedConfig
from envsched_gnn.models.features import FEATURE_NAMES, SCALE, node_features
from envsched_gnn.models.graph_view import GraphView
from envsched_gnn.models.prediction import Prediction
from envsched_gnn.models.variance_gnn import EDGE_TYPES, VarianceGNN
from envsched_gnn.observations import ObservationLog


def _to_json(value):
    """Tensors (nested in dicts / lists) to ``{"tensor": list, "dtype": str}``."""
    if isinstance(value, torch.Tensor):
        return {"tensor": value.tolist(), "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, dict):
        return {"items": [[k, _to_json(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    return value


def _from_json(value):
    if isinstance(value, dict) and "tensor" in value:
        return torch.tensor(value["tensor"], dtype=getattr(torch, value["dtype"]))
    if isinstance(value, dict) and "items" in value:
        return {k: _from_json(v) for k, v in value["items"]}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


OUTPUT_SCALE = torch.tensor([0.25, 1.0, 1.0])
"""Upper end of (E_v, E_m, E_d)."""
LOGIT_CLIP = 1e-4
"""Analytic estimates are clipped into [eps, 1 - eps] of their range before the logit, so a
task whose estimate is exactly 0 (no reward spread anywhere near it) gets a finite logit."""


def _outputs(logits: torch.Tensor) -> torch.Tensor:
    """(E_v, E_m, E_d) from logits: 0.25 sigmoid, sigmoid, sigmoid."""
    return torch.sigmoid(logits) * OUTPUT_SCALE.to(logits.dtype)


def base_logits(base: np.ndarray) -> torch.Tensor:
    """logit(E^a / scale) of analytic estimates (..., 3), float32."""
    share = np.clip(base / OUTPUT_SCALE.numpy().astype(np.float64), LOGIT_CLIP, 1 - LOGIT_CLIP)
    return torch.from_numpy(np.log(share) - np.log1p(-share)).float()


@dataclass
class _Example:
    step: int
    features: torch.Tensor  # (2, N, F) float32
    base: torch.Tensor  # (2, N, 3) float32, logits of the analytic estimates
    tasks: torch.Tensor  # (n_obs,) int64
    targets: torch.Tensor  # (n_obs, 3) float32, (v, m, d)


class LearnedPropagation:
    """Online-trained heterogeneous GNN predictor with the analytic calibration (module doc);
    scikit-learn conventions, learned attributes ``model_``, ``optimizer_``, ``examples_``,
    ``last_step_``; seeded by ``config.seed``.
    """

    def __init__(self, config: LearnedConfig | None = None) -> None:
        self.config = config or LearnedConfig()

    def __repr__(self) -> str:
        c = self.config
        return (
            f"LearnedPropagation(hidden_channels={c.hidden_channels}, num_layers={c.num_layers}, "
            f"relations={RELATIONS}, use_text={c.use_text}, seed={c.seed})"
        )

    def reset_parameters(self) -> LearnedPropagation:
        """Forget everything learned: fresh seeded weights, optimiser and examples."""
        for name in (
            "model_",
            "optimizer_",
            "examples_",
            "last_step_",
            "rng_",
            "_graph_source",
            "_graph_cache",
            "_analytic",
            "_rebuild",
        ):
            self.__dict__.pop(name, None)
        return self

    # -- inputs ---------------------------------------------------------------------------

    def _ensure_model(self, data: HeteroData) -> None:
        if hasattr(self, "model_"):
            return
        c = self.config
        in_channels = len(FEATURE_NAMES) + (self._text(data).shape[1] if c.use_text else 0)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(c.seed)
            self.model_ = VarianceGNN(
                in_channels, c.hidden_channels, c.num_layers, zero_head=c.residual
            )
            self.model_.reset_parameters()
        self.optimizer_ = torch.optim.Adam(
            self.model_.parameters(), lr=c.learning_rate, weight_decay=c.weight_decay
        )
        self.examples_: list[_Example] = []
        self.last_step_ = -1
        self.rng_ = np.random.default_rng(c.seed)

    @staticmethod
    def _text(data: HeteroData) -> torch.Tensor:
        x = getattr(data["task"], "x", None)
        if x is None:
            raise ValueError("LearnedConfig.use_text is set but data['task'].x is missing")
        return x.float()

    def _features(self, data: HeteroData, log, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Features (2, N, F) and analytic base logits (2, N, 3), float32."""
        analytic = self._analytic_predictor()
        features = node_features(data, log, step, self.config.predictor, analytic)
        x = torch.from_numpy(features.x).float()
        if self.config.use_text:
            text = self._text(data)
            x = torch.cat([x, text.expand(2, *text.shape)], dim=2)
        return x, base_logits(features.base)

    def _graph(self, data: HeteroData, copies: int) -> dict:
        """Per edge type, the float32 CSR adjacency (rows = targets) of ``copies`` disjoint
        copies of the graph (3-4x faster than scatter on CPU). Cached per ``copies`` for the
        ``adj_t`` of one graph (compared by identity); another graph, ``reset_parameters`` and
        ``load_state_dict`` empty the cache.
        """
        view = GraphView.of(data)
        source = tuple(data[et].adj_t for et in EDGE_TYPES)
        held = self.__dict__.get("_graph_source")
        if held is None or any(a is not b for a, b in zip(held, source, strict=True)):
            self._graph_source, self._graph_cache = source, {}
        if copies not in self._graph_cache:
            n = view.num_nodes
            adjacency = {}
            for relation, et in zip(RELATIONS, EDGE_TYPES, strict=True):
                csr = view.relations[relation]
                edges = csr.col.shape[0]
                crow = np.concatenate(
                    [[0], *(csr.crow[1:] + k * edges for k in range(copies))]
                ).astype(np.int64)
                col = np.concatenate([csr.col + k * n for k in range(copies)])
                values = np.tile(csr.sim, copies).astype(np.float32)
                adjacency[et] = csr_tensor(crow, col, values, (copies * n, copies * n))
            self._graph_cache[copies] = adjacency
        return self._graph_cache[copies]

    def _analytic_predictor(self) -> AnalyticPredictor:
        """The analytic predictor of the features (kept for its propagation layer)."""
        if "_analytic" not in self.__dict__:
            self._analytic = AnalyticPredictor(self.config.predictor)
        return self._analytic

    def _forward(self, data: HeteroData, x: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
        """(C, N, F) features and (C, N, 3) base logits -> (C, N, 3) outputs (E_v, E_m, E_d),
        C disjoint graph copies."""
        copies, n, f = x.shape
        adjacency = self._graph(data, copies)
        logits = self.model_(x.reshape(copies * n, f), adjacency).reshape(copies, n, 3)
        return _outputs(logits + base if self.config.residual else logits)

    # -- learning -------------------------------------------------------------------------

    def update(self, data: HeteroData, log: ObservationLog, step: int) -> LearnedPropagation:
        """Train on the observations of steps s < ``step`` not yet seen; returns ``self``."""
        self._ensure_model(data)
        columns = log.arrays()
        steps = np.unique(columns["step"])
        new = steps[(steps < step) & (steps > self.last_step_)]
        if self.__dict__.pop("_rebuild", False):
            old = steps[steps <= self.last_step_][-self.config.replay_steps :]
            new = np.concatenate([old, new])
        else:
            old = new[:0]
        for s in new.tolist():
            rows = columns["step"] == s
            targets = np.column_stack([columns["v"][rows], columns["m"][rows], columns["d"][rows]])
            x, base = self._features(data, log, s)
            self.examples_.append(
                _Example(
                    s,
                    x,
                    base,
                    torch.from_numpy(columns["task"][rows]),
                    torch.from_numpy(targets).float(),
                )
            )
        if new.size == old.size:
            return self
        self.last_step_ = int(new[-1])
        del self.examples_[: -self.config.replay_steps]
        self._train(data)
        return self

    def _train(self, data: HeteroData) -> None:
        c = self.config
        self.model_.train()
        scale = torch.from_numpy(SCALE).float()
        weights = torch.tensor([1.0, c.aux_weight, c.aux_weight])
        for _ in range(c.gradient_steps):
            older = len(self.examples_) - 1
            picked = self.rng_.choice(older, min(older, c.steps_per_batch - 1), replace=False)
            batch = [self.examples_[-1], *(self.examples_[i] for i in sorted(picked.tolist()))]
            x = torch.cat([e.features for e in batch])
            out = self._forward(data, x, torch.cat([e.base for e in batch]))
            losses = []
            for b, example in enumerate(batch):
                pred = out[2 * b : 2 * b + 2, example.tasks]  # (2, n_obs, 3)
                err = ((pred - example.targets) * scale) ** 2
                losses.append((err * weights).sum(-1).mean())
            loss = torch.stack(losses).mean()
            self.optimizer_.zero_grad()
            loss.backward()
            self.optimizer_.step()
        self.model_.eval()

    # -- state ----------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """JSON-serialisable state: weights, optimiser moments, sampler state, last step."""
        if not hasattr(self, "model_"):
            return {}
        return {
            "model": {k: _to_json(v) for k, v in self.model_.state_dict().items()},
            "optimizer": _to_json(self.optimizer_.state_dict()),
            "rng": self.rng_.bit_generator.state,
            "last_step": self.last_step_,
            "in_channels": self.model_.in_channels,
        }

    def load_state_dict(self, state: dict, data: HeteroData | None = None) -> None:
        """Restore :meth:`state_dict`; an empty state resets the predictor."""
        self.reset_parameters()
        if not state:
            return
        c = self.config
        with torch.random.fork_rng(devices=[]):
            self.model_ = VarianceGNN(
                state["in_channels"], c.hidden_channels, c.num_layers, zero_head=c.residual
            )
        self.model_.load_state_dict({k: _from_json(v) for k, v in state["model"].items()})
        self.optimizer_ = torch.optim.Adam(
            self.model_.parameters(), lr=c.learning_rate, weight_decay=c.weight_decay
        )
        self.optimizer_.load_state_dict(_from_json(state["optimizer"]))
        self.rng_ = np.random.default_rng(c.seed)
        self.rng_.bit_generator.state = state["rng"]
        self.last_step_ = int(state["last_step"])
        self.examples_ = []
        self._rebuild = True

    # -- prediction -----------------------------------------------------------------------

    def estimates(self, data: HeteroData, log: ObservationLog, step: int) -> np.ndarray:
        """(E_v, E_m, E_d) of every task for (h_long, h_short) at ``step``: float64 (2, N, 3)."""
        self._ensure_model(data)
        with torch.no_grad():
            return self._forward(data, *self._features(data, log, step)).double().numpy()

    def predict(self, data: HeteroData, log: ObservationLog, step: int) -> Prediction:
        """Calibrated prediction at ``step`` from observations with s < ``step`` (spec 4.6-4.7)."""
        p = self.config.predictor
        e = self.estimates(data, log, step)
        u_h = [
            calibrate(
                e[k, :, 0],
                reconstructed_variance(e[k, :, 1], e[k, :, 2]),
                p.weight_variance_rank,
                p.weight_reconstructed_rank,
            )["u"]
            for k in range(2)
        ]
        u = decline_penalty(u_h[0], u_h[1], p.eta)
        return Prediction(
            q=percentile_rank(u),
            u=u,
            u_long=u_h[0],
            u_short=u_h[1],
            E_v=e[0, :, 0],
            E_m=e[0, :, 1],
            E_d=e[0, :, 2],
        )
