"""Peak memory of CBO's gate derivatives at any model size, on the meta device (no weights, no
compute): the bytes autograd saves, counted with ``torch.autograd.graph.saved_tensors_hooks``, plus
the tensors the computation holds (engine/gate_derivatives.py's module docstring).

``whole_graph_bytes``: the former computation (every block's double-backward graph at once).
``blockwise_peak_bytes``: the computation now used (one row, one block at a time).
``fisher_peak_bytes``: ``cbo``'s per-sample gate gradients (engine/gate_fisher.py): one row's
first-order graph in the model's own dtype.
Counts are upper bounds of what is live (a saved tensor that aliases another is counted twice).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

GIB = 1 << 30


def _meta_layer(config: Mapping):
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(**{**config, "num_hidden_layers": 1})
    cfg._attn_implementation = "sdpa"
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg).float()
    return model, model.model.layers[0], model.model.rotary_emb


class SavedBytes:
    """Bytes autograd saves while the context is open; ``weights``' parameters, and views of them,
    are not counted (they are the loaded model's, not new memory)."""

    def __init__(self, weights: torch.nn.Module | None = None):
        self.bytes = 0
        self._weights = {id(p) for p in weights.parameters()} if weights is not None else set()

    def __enter__(self):
        def pack(tensor):
            if id(tensor) not in self._weights and id(tensor._base) not in self._weights:
                self.bytes += tensor.numel() * tensor.element_size()
            return tensor

        self._hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)


def _block_inputs(model, rotary, rows: int, seq_len: int):
    with torch.device("meta"):
        hidden = torch.zeros(rows, seq_len, model.config.hidden_size, requires_grad=True)
        positions = torch.arange(seq_len)[None].expand(rows, -1)
        mask = torch.zeros(rows, 1, seq_len, seq_len)
        return hidden, {"attention_mask": mask, "position_embeddings": rotary(hidden, positions)}


def block_double_backward_bytes(config: Mapping, rows: int, seq_len: int) -> int:
    """Saved bytes of one block's gated forward and its create_graph backward (float32): what the
    whole-graph computation keeps per block until its Hessian rows are done."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    model, layer, rotary = _meta_layer(config)
    hidden, kwargs = _block_inputs(model, rotary, rows, seq_len)
    with torch.device("meta"), sdpa_kernel(SDPBackend.MATH), SavedBytes() as saved:
        alpha = torch.ones((), requires_grad=True)
        out = layer(hidden, **kwargs)
        out = out[0] if isinstance(out, tuple) else out
        gated = hidden + alpha * (out - hidden)
        (_gradient,) = torch.autograd.grad((gated * gated).sum(), alpha, create_graph=True)
    return saved.bytes


def block_step_bytes(config: Mapping, seq_len: int) -> int:
    """Saved bytes of the largest block-local step of the blockwise computation (one row): the
    forward f_k(h), the create_graph vjp J_kᵀλ and the second-order product through it."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    model, layer, rotary = _meta_layer(config)
    hidden, kwargs = _block_inputs(model, rotary, 1, seq_len)
    with torch.device("meta"), sdpa_kernel(SDPBackend.MATH), SavedBytes() as saved:
        out = layer(hidden, **kwargs)
        out = out[0] if isinstance(out, tuple) else out
        update = out - hidden
        adjoint = torch.zeros_like(update)
        (u,) = torch.autograd.grad(update, hidden, adjoint, create_graph=True)
        torch.autograd.grad(u, hidden, torch.zeros_like(u))
    return saved.bytes


def head_hvp_bytes(config: Mapping, seq_len: int) -> int:
    """Saved bytes of the LM head's loss and its create_graph gradient for one row (kept for the
    N head Hessian-vector products): final norm, logits and log-softmax in float32."""
    model, _, _ = _meta_layer(config)
    with torch.device("meta"), SavedBytes() as saved:
        hidden = torch.zeros(1, seq_len, model.config.hidden_size, requires_grad=True)
        logits = model.lm_head(model.model.norm(hidden)).float()
        targets = torch.zeros(1, seq_len, 1, dtype=torch.long)
        loss = torch.log_softmax(logits, dim=-1).gather(-1, targets).sum()
        torch.autograd.grad(loss, hidden, create_graph=True)
    return saved.bytes


def model_copies_bytes(config: Mapping, model_bytes_per_param: int) -> tuple[int, int]:
    """(the loaded model, its float32 working copy; 0 when it runs in float32 already)."""
    model, layer, _ = _meta_layer(config)  # one block: the others are alike
    block = sum(p.numel() for p in layer.parameters())
    params = sum(p.numel() for p in model.parameters()) + (int(config["num_hidden_layers"]) - 1) * block
    return params * model_bytes_per_param, (params * 4 if model_bytes_per_param != 4 else 0)


def whole_graph_bytes(config: Mapping, rows: int, seq_len: int, model_bytes_per_param: int = 2) -> int:
    """Peak of the former computation: both model copies and every block's double-backward graph
    of a micro-batch of ``rows`` rows (the head's graph not even counted)."""
    loaded, copy = model_copies_bytes(config, model_bytes_per_param)
    return loaded + copy + int(config["num_hidden_layers"]) * block_double_backward_bytes(config, rows, seq_len)


def blockwise_peak_bytes(config: Mapping, seq_len: int, model_bytes_per_param: int = 2) -> int:
    """Peak of the blockwise computation: both model copies; one row's h_k, λ_k and ḣ_k (3 (N+1)
    float32 states, the embeddings' copy among them); the head's kept graph; the largest block step."""
    loaded, copy = model_copies_bytes(config, model_bytes_per_param)
    states = 3 * (int(config["num_hidden_layers"]) + 1) * seq_len * int(config["hidden_size"]) * 4
    return loaded + copy + states + head_hvp_bytes(config, seq_len) + block_step_bytes(config, seq_len)


def gated_block_bytes(config: Mapping, seq_len: int, model_bytes_per_param: int = 2) -> int:
    """Saved bytes of one block's forward for one row under Jansen et al.'s gate (the hooks of
    engine/gate_fisher.branch_gates on the family's branches), in the model's own dtype: what a
    first-order backward needs of each block."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from depthprune.engine.gate_fisher import branch_gates
    from depthprune.models.families import family_for

    dtype = {2: torch.bfloat16, 4: torch.float32, 8: torch.float64}[model_bytes_per_param]
    model, layer, rotary = _meta_layer(config)
    layer = layer.to(dtype)
    hidden, kwargs = _block_inputs(model, rotary, 1, seq_len)
    hidden = hidden.to(dtype)
    kwargs["position_embeddings"] = tuple(t.to(dtype) for t in kwargs["position_embeddings"])
    kwargs["attention_mask"] = kwargs["attention_mask"].to(dtype)
    with torch.device("meta"), sdpa_kernel(SDPBackend.MATH), SavedBytes(weights=layer) as saved:
        alpha = torch.ones(1, requires_grad=True)
        with branch_gates([layer], family_for(model), alpha):
            layer(hidden, **kwargs)
    return saved.bytes


def head_grad_bytes(config: Mapping, seq_len: int) -> int:
    """Saved bytes of the LM head's loss for one row, for a first-order backward (final norm,
    logits and log-softmax in float32)."""
    model, _, _ = _meta_layer(config)
    with torch.device("meta"), SavedBytes(weights=model) as saved:
        hidden = torch.zeros(1, seq_len, model.config.hidden_size, requires_grad=True)
        logits = model.lm_head(model.model.norm(hidden)).float()
        targets = torch.zeros(1, seq_len, 1, dtype=torch.long)
        torch.log_softmax(logits, dim=-1).gather(-1, targets).sum()
    return saved.bytes


def fisher_peak_bytes(config: Mapping, seq_len: int, model_bytes_per_param: int = 2) -> int:
    """Peak of ``cbo``'s per-sample gate gradients: the loaded model (no float32 copy: it runs in its
    own dtype), every block's saved forward of one row and the head's, and the dense capture of the
    row (its embeddings)."""
    loaded, _copy = model_copies_bytes(config, model_bytes_per_param)
    n_blocks = int(config["num_hidden_layers"])
    embeddings = seq_len * int(config["hidden_size"]) * model_bytes_per_param
    return (
        loaded
        + n_blocks * gated_block_bytes(config, seq_len, model_bytes_per_param)
        + head_grad_bytes(config, seq_len)
        + embeddings
    )
