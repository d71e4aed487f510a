"""The pointer head: one logit per option from the trunk's query and key hidden states.

spec/pointer-head.md, "Readout":

    q   = W_q · N(h_q) + b_q          # [dp]
    k_j = W_k · N(h_j) + b_k          # [dp]
    z_j = (k_j · q) / sqrt(dp)        # the readout then divides by the temperature T

``N`` is the identity for Kev and OpenJev and a shared ``LayerNorm(d)`` for strands-decider. The
head runs in float32 over a whole micro-batch: every query and key is projected in one matmul
each, and the dot products come out as one flat ``[N]`` tensor (slot after slot).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import nn

from ...manifest import ManifestError

#: Tensor names of a pointer head, without and with the strands-decider LayerNorm.
PROJECTIONS = ("q.weight", "q.bias", "k.weight", "k.bias")
NORM = ("norm.weight", "norm.bias")


def expected_shapes(hidden: int, head_dim: int, *, norm: bool) -> dict[str, tuple[int, ...]]:
    """Names and shapes a head of width ``head_dim`` over hidden size ``hidden`` must have."""
    shapes: dict[str, tuple[int, ...]] = {
        "q.weight": (head_dim, hidden),
        "q.bias": (head_dim,),
        "k.weight": (head_dim, hidden),
        "k.bias": (head_dim,),
    }
    if norm:
        shapes |= {"norm.weight": (hidden,), "norm.bias": (hidden,)}
    return shapes


class PointerHead(nn.Module):
    """``q``/``k`` projections (and an optional shared LayerNorm), always float32.

    Args:
        hidden (int): d, the trunk's hidden size.
        head_dim (int): dp, the projection size.
        norm (bool, optional): apply a shared ``LayerNorm(d)`` first (strands-decider).
            Defaults to False.
        eps (float, optional): the LayerNorm's epsilon. Defaults to 1e-5 (PyTorch's).
    """

    def __init__(self, hidden: int, head_dim: int, *, norm: bool = False, eps: float = 1e-5) -> None:
        super().__init__()
        self.hidden = hidden
        self.head_dim = head_dim
        self.norm = nn.LayerNorm(hidden, eps=eps) if norm else None
        self.q = nn.Linear(hidden, head_dim)
        self.k = nn.Linear(hidden, head_dim)

    @classmethod
    def from_tensors(
        cls, tensors: Mapping[str, torch.Tensor], *, hidden: int, head_dim: int, norm: bool, source: str
    ) -> PointerHead:
        """A float32 head from its saved tensors, after checking names and shapes.

        Args:
            tensors (Mapping[str, torch.Tensor]): ``q.weight`` [dp, d], ``q.bias`` [dp],
                ``k.weight`` [dp, d], ``k.bias`` [dp] (and ``norm.weight``/``norm.bias`` [d]).
            hidden (int): d, from the trunk's config.
            head_dim (int): dp, from the checkpoint's metadata.
            norm (bool): whether the family has the LayerNorm.
            source (str): the file, for messages.

        Raises:
            ManifestError: a missing or extra tensor, or a shape that does not match.
        """
        expected = expected_shapes(hidden, head_dim, norm=norm)
        names = set(tensors)
        if names != set(expected):
            raise ManifestError(
                f"{source}: the pointer head has tensors {sorted(names)}, expected exactly {sorted(expected)}; "
                "this is not a pointer head of this family (check the checkpoint or the manifest's `family`)"
            )
        for name, shape in expected.items():
            got = tuple(tensors[name].shape)
            if got != shape:
                raise ManifestError(
                    f"{source}: tensor {name} has shape {list(got)}, expected {list(shape)} (head_dim {head_dim}, "
                    f"hidden size {hidden}); the head does not belong to this base or head_dim is wrong"
                )
        head = cls(hidden, head_dim, norm=norm)
        head.load_state_dict({name: t.float() for name, t in tensors.items()})
        return head.float().eval()

    def forward(self, h_query: torch.Tensor, h_keys: torch.Tensor, owner: torch.Tensor) -> torch.Tensor:
        """Raw slot logits (temperature not applied).

        Args:
            h_query (torch.Tensor): ``[Q, d]`` hidden states at the questions' query positions.
            h_keys (torch.Tensor): ``[N, d]`` hidden states at the options' key positions.
            owner (torch.Tensor): ``[N]`` int64, the question of each key.

        Returns:
            torch.Tensor: ``[N]`` float32, ``(k_j · q) / sqrt(dp)``.
        """
        hq, hk = h_query.float(), h_keys.float()
        if self.norm is not None:
            hq, hk = self.norm(hq), self.norm(hk)
        q = self.q(hq)  # [Q, dp]
        k = self.k(hk)  # [N, dp]
        return (k * q[owner]).sum(dim=1) / math.sqrt(self.head_dim)  # [N]
