"""One-class (Deep SVDD) evaluation embedding for alpha-precision and beta-recall.

Reference: A. M. Alaa, B. van Breugel, E. Saveliev, M. van der Schaar, "How Faithful is your
Synthetic Data? Sample-level Metrics for Evaluating and Auditing Generative Models", ICML 2022
(Section 4: the evaluation embedding ``Phi`` squeezes the real data into a hypersphere around
a centre ``c_r``), built on L. Ruff et al., "Deep One-Class Classification", ICML 2018.

What the authors' code (``representations/OneClass.py``) effectively trains, and what we train:

* a **bias-free MLP** (``Linear(bias=False)`` + activation, repeated, then a linear map to
  ``rep_dim``): without biases the network cannot output the constant ``c`` for every input,
  the trivial minimiser of the objective (Ruff et al., Prop. 2);
* the **hard-boundary Deep SVDD objective** ``mean_i ||f(x_i) - c||^2``: the authors'
  ``SoftBoundaryLoss`` computes a radius term and then overwrites it, so their effective loss
  is this one scaled by ``1 / nu``; a constant scale does not change the minimiser;
* a **fixed centre** ``c`` that is not trained. The authors set it by hand (``10 * ones`` for
  images, ``ones`` or ``10 * ones`` for tabular data; synthcity uses ``10 * ones``). By default
  we take Ruff et al.'s data-driven choice: the mean output of the freshly initialised network
  on the real data, with coordinates closer than 0.1 to zero pushed to +-0.1, so the network
  does not have to inflate its weights to reach an arbitrary point. ``center=10.0`` gives the
  authors' image configuration.

Differences from the authors' code, on purpose: inputs are standardised with the real mean
and standard deviation (stored in the module, so it maps raw features); training is seeded
and uses its own :class:`torch.Generator` for the initial weights and the minibatch order
(the authors rely on ``torch.manual_seed(1)`` at import time and full-batch AdamW for 2,000
epochs); a few minibatch epochs of Adam replace the 2,000 full-batch epochs so that the
embedding of 10k x 2,048 features trains in seconds on a CPU.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Union

import torch
from torch import Tensor, nn

from lightning_prd.functional.engine.devices import to_compute_device
from lightning_prd.functional.engine.inputs import as_features, check_positive_int, check_real, check_seed
from lightning_prd.functional.engine.precision import score_precision

#: Coordinates of the data-driven centre closer to 0 than this are pushed to +-this value.
_CENTER_EPS = 0.1


class OneClassEmbedding(nn.Module):
    """Standardisation followed by a bias-free MLP; ``center`` is the fixed hypersphere centre.

    Attributes:
        input_mean, input_scale: real-feature mean and standard deviation (buffers).
        net: the bias-free MLP.
        center: ``[rep_dim]`` fixed centre ``c`` of the one-class objective (buffer).
    """

    input_mean: Tensor
    input_scale: Tensor
    center: Tensor

    def __init__(self, in_dim: int, rep_dim: int, hidden: int, num_layers: int) -> None:
        super().__init__()
        widths = [in_dim] + [hidden] * (num_layers - 1) + [rep_dim]
        layers = []
        for i, (w_in, w_out) in enumerate(zip(widths[:-1], widths[1:])):
            # skip_init: no weights drawn from the global RNG; train_oneclass draws them
            layers.append(nn.utils.skip_init(nn.Linear, w_in, w_out, bias=False))
            if i < num_layers - 1:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)
        self.register_buffer("input_mean", torch.zeros(in_dim))
        self.register_buffer("input_scale", torch.ones(in_dim))
        self.register_buffer("center", torch.zeros(rep_dim))

    def forward(self, x: Tensor) -> Tensor:
        x = x.to(self.input_mean.dtype)
        return self.net((x - self.input_mean) / self.input_scale)


def _init_weights(model: OneClassEmbedding, generator: torch.Generator) -> None:
    """Kaiming-uniform weights (ReLU gain, linear gain for the output layer) from ``generator``."""
    linears = [m for m in model.net if isinstance(m, nn.Linear)]
    with torch.no_grad():
        for i, lin in enumerate(linears):
            gain2 = 2.0 if i < len(linears) - 1 else 1.0
            bound = math.sqrt(3.0 * gain2 / lin.in_features)
            lin.weight.uniform_(-bound, bound, generator=generator)


@score_precision()
def train_oneclass(
    real: Any,
    *,
    rep_dim: int = 32,
    hidden: int = 128,
    num_layers: int = 3,
    epochs: int = 20,
    batch_size: int = 256,
    lr: float = 1e-3,
    weight_decay: float = 1e-6,
    center: Optional[Union[float, Tensor]] = None,
    seed: int = 0,
) -> nn.Module:
    r"""Train the one-class (Deep SVDD) embedding of Alaa et al. (2022) on real features.

    Minimises :math:`\frac1N \sum_i \lVert f(x_i) - c \rVert^2` over the weights of a
    bias-free MLP ``f`` with the centre ``c`` fixed (see the module docstring for the centre
    choice and how this relates to the authors' soft-boundary loss). Inputs are standardised
    with the real mean and standard deviation first (constant features are left unscaled).
    Training uses Adam on minibatches for a fixed number of epochs, in float32, on the device
    of ``real``. It is deterministic for a given ``seed`` on a given machine and thread count,
    and never touches the global RNG: a private :class:`torch.Generator` draws the initial
    weights and the minibatch order.

    Note:
        An embedding fitted to the very real samples it then evaluates against overfits them
        when ``N`` is small compared with ``D``: those samples land closer to ``c`` than fresh
        samples of the same distribution, so alpha-precision drops even for a perfect model
        (measured with i.i.d. Gaussian real and generated sets: 0.17 at 2,000 x 256 and 0.09
        at 4,000 x 512, against 0.97 and 0.98 when the embedding is trained on a separate
        real split). The paper and the authors' code train on the evaluation real set, as
        ``embedding="oneclass"`` does; where real data allow it, train on a held-out split
        and pass the model: ``alpha_precision_beta_recall(real, fake,
        embedding=train_oneclass(real_train))``.

    Args:
        real: ``[N, D]`` real features (the embedding is fitted to the real data only).
        rep_dim: output dimension (32 in the authors' image configuration).
        hidden: width of the hidden layers (128 in the authors' image configuration).
        num_layers: number of ``Linear`` layers (``num_layers - 1`` hidden ReLU layers).
        epochs: passes over the real data.
        batch_size: minibatch size (clipped to ``N``).
        lr: Adam learning rate.
        weight_decay: Adam (L2) weight decay, as in Ruff et al.
        center: None for the data-driven centre (mean initial output, Ruff et al.); a number
            ``v`` for ``v * ones(rep_dim)`` (the authors use 10); or a ``[rep_dim]`` tensor.
        seed: seed of the private generator.

    Returns:
        The trained :class:`OneClassEmbedding` in eval mode, parameters frozen, mapping raw
        ``[n, D]`` features to ``[n, rep_dim]`` embeddings, with attribute ``center``.

    Example:
        >>> import torch
        >>> real = torch.randn(64, 8, generator=torch.Generator().manual_seed(0))
        >>> model = train_oneclass(real, rep_dim=4, hidden=16, epochs=2, seed=0)
        >>> model(real).shape, model.center.shape, model.training
        (torch.Size([64, 4]), torch.Size([4]), False)
    """
    rep_dim = check_positive_int(rep_dim, "rep_dim")
    hidden = check_positive_int(hidden, "hidden")
    num_layers = check_positive_int(num_layers, "num_layers")
    epochs = check_positive_int(epochs, "epochs")
    batch_size = check_positive_int(batch_size, "batch_size")
    seed = check_seed(seed)
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    weight_decay = check_real(weight_decay, "weight_decay", low=0.0)
    real = to_compute_device(as_features(real, "real"))  # the centre is a float64 mean
    n, dim = real.shape
    dev = real.device

    # Works under torch.inference_mode / no_grad (e.g. inside a validation loop): the
    # training tensors are created as ordinary autograd-capable tensors.
    with torch.inference_mode(False), torch.enable_grad():
        x = real.detach().to(torch.float32).clone()
        mean = x.mean(0)
        std = x.std(0, unbiased=False)
        std = torch.where(std > 0, std, torch.ones_like(std))
        gen = torch.Generator(device=dev).manual_seed(seed)
        model = OneClassEmbedding(dim, rep_dim, hidden, num_layers).to(dev)
        _init_weights(model, gen)
        model.input_mean.copy_(mean)
        model.input_scale.copy_(std)
        model.center.copy_(_make_center(model, x, center, rep_dim))

        opt = torch.optim.Adam(model.parameters(), lr=float(lr), weight_decay=float(weight_decay))
        model.train()
        bs = min(batch_size, n)
        c = model.center
        for _ in range(epochs):
            order = torch.randperm(n, generator=gen, device=dev)
            for s in range(0, n, bs):
                batch = x[order[s : s + bs]]
                loss = (model(batch) - c).pow(2).sum(1).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
    model.eval()
    model.requires_grad_(False)
    return model


def _make_center(model: OneClassEmbedding, x: Tensor, center: Any, rep_dim: int) -> Tensor:
    """The fixed centre: data-driven (Ruff et al.) when ``center`` is None, else as given."""
    if center is None:
        with torch.no_grad():
            total = torch.zeros(rep_dim, dtype=torch.float64, device=x.device)
            for s in range(0, x.shape[0], 8192):
                total += model(x[s : s + 8192]).to(torch.float64).sum(0)
            c = (total / x.shape[0]).to(torch.float32)
        small = c.abs() < _CENTER_EPS
        return torch.where(small, torch.where(c < 0, -_CENTER_EPS, _CENTER_EPS), c)
    if isinstance(center, (int, float)) and not isinstance(center, bool):
        if not math.isfinite(center):
            raise ValueError(f"Expected argument `center` to be finite, but got {center!r}")
        return torch.full((rep_dim,), float(center), device=x.device)
    if isinstance(center, Tensor):
        if center.shape != (rep_dim,) or not bool(torch.isfinite(center).all()):
            raise ValueError(
                f"Expected argument `center` to be a finite tensor of shape ({rep_dim},), "
                f"but got shape {tuple(center.shape)}"
            )
        return center.to(device=x.device, dtype=torch.float32)
    raise ValueError(f"Expected argument `center` to be None, a number or a tensor, but got {type(center).__name__}")


#: Rows embedded per forward call of an embedding.
_EMBED_CHUNK = 8192


def check_embedding(embedding: Any) -> Any:
    """``embedding`` is None, ``"oneclass"``, or a module / callable mapping features."""
    if embedding is None or callable(embedding):
        return embedding
    if isinstance(embedding, str):
        if embedding == "oneclass":
            return embedding
        raise ValueError(f"Expected argument `embedding` to be None, 'oneclass' or a callable, but got {embedding!r}")
    raise TypeError(
        f"Expected argument `embedding` to be None, 'oneclass' or a callable, but got {type(embedding).__name__}"
    )


def embed_features(fn: Callable[[Tensor], Tensor], x: Tensor, name: str) -> Tensor:
    """Apply an embedding in chunks without gradients; check it returns ``[n, D']`` features.

    A module with parameters gets each chunk on the device of its first parameter, and its outputs come
    back to ``x``'s device (e.g. a module on Apple's MPS, features on the CPU where the scores are computed:
    :func:`~lightning_prd.functional.engine.devices.compute_device`)."""
    first = next(fn.parameters(), None) if isinstance(fn, nn.Module) else None
    home = x.device if first is None else first.device
    parts = []
    with torch.no_grad():
        for s in range(0, x.shape[0], _EMBED_CHUNK):
            out = fn(x[s : s + _EMBED_CHUNK].to(home))
            out = out.to(x.device) if isinstance(out, Tensor) else out
            if not isinstance(out, Tensor) or out.ndim != 2 or out.shape[0] != x[s : s + _EMBED_CHUNK].shape[0]:
                shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
                raise ValueError(
                    "Expected argument `embedding` to map [n, D] features to an [n, D'] tensor, "
                    f"but it returned {shape}"
                )
            parts.append(out.detach())
    return as_features(torch.cat(parts), f"embedding({name})")


def embedding_center(fn: Any, real_emb: Tensor) -> Optional[Tensor]:
    """The embedding's ``center`` attribute (one-class centre) as float64, or None (use the mean)."""
    centre = getattr(fn, "center", None)
    if centre is None:
        return None
    centre = torch.as_tensor(centre)
    if centre.shape != (real_emb.shape[1],) or not bool(torch.isfinite(centre).all()):
        raise ValueError(
            f"Expected the `center` of argument `embedding` to be a finite vector of length {real_emb.shape[1]}, "
            f"but got shape {tuple(centre.shape)}"
        )
    return centre.to(device=real_emb.device, dtype=torch.float64)
