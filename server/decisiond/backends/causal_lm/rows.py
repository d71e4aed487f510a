"""Running prompt rows through a decoder: shared prefixes once, each question in its own row.

A *prefix* (system text and state, ``P`` tokens) is run once and its key-value cache kept as one
tensor ``[layers, 2, heads, P, head_dim]``. Question *rows* (the rest of each prompt, ``S`` tokens)
of any number of requests then run together: each row gets its own copy of its request's prefix
cache, left-aligned and padded to the longest prefix of the chunk, and its own ids, right-padded.
The attention mask opens a row's prefix positions and its own tokens only, and position ids
continue from the row's own prefix length, so a row computes exactly what the whole prompt alone
would (Kev's "run the state once, copy its cache, each question a right-padded row after it").
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from transformers import DynamicCache


def _chunks(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Indices sorted by length, cut into chunks whose padded size (count × longest) fits ``budget``."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    chunks: list[list[int]] = []
    for index in order:
        if chunks and (len(chunks[-1]) + 1) * lengths[index] <= budget:
            chunks[-1].append(index)
        else:
            chunks.append([index])
    return chunks


class RowRunner:
    """The decoder of a causal LM, run over prefixes and rows.

    Args:
        decoder (nn.Module): the model without its vocabulary head (``model.get_decoder()``), taking
            ``input_ids``, ``attention_mask``, ``position_ids``, ``cache``.
        pad_id (int): id written in padding (never attended to).
        forward_tokens (int): padded tokens per forward call, prefix caches included (a memory bound).
    """

    def __init__(self, decoder: nn.Module, *, pad_id: int, forward_tokens: int) -> None:
        self.decoder = decoder
        self.pad_id = pad_id
        self.forward_tokens = forward_tokens

    @property
    def device(self) -> torch.device:
        """Where the decoder's weights are."""
        return next(self.decoder.parameters()).device

    def _run(
        self, rows: Sequence[Sequence[int]], pasts: Sequence[torch.Tensor | None], *, keep_cache: bool
    ) -> tuple[torch.Tensor, DynamicCache | None]:
        """One forward over ``R`` right-padded rows after their (possibly empty) prefix caches.

        Returns:
            tuple: ``[R, S, d]`` last hidden states of the row tokens, and the cache when ``keep_cache``.
        """
        count, longest = len(rows), max(len(row) for row in rows)
        prefix_lengths = [0 if past is None else past.shape[3] for past in pasts]
        widest = max(prefix_lengths)
        ids = torch.full((count, longest), self.pad_id, dtype=torch.int64)
        mask = torch.zeros((count, widest + longest), dtype=torch.int64)
        positions = torch.zeros((count, longest), dtype=torch.int64)
        for i, (row, prefix) in enumerate(zip(rows, prefix_lengths, strict=True)):
            ids[i, : len(row)] = torch.tensor(row, dtype=torch.int64)
            mask[i, :prefix] = 1
            mask[i, widest : widest + len(row)] = 1
            positions[i] = torch.arange(prefix, prefix + longest)
        cache = DynamicCache() if keep_cache else None
        if widest:
            first = next(past for past in pasts if past is not None)
            layers, _, heads, _, head_dim = first.shape
            kv = first.new_zeros((layers, 2, count, heads, widest, head_dim))  # [L, 2, R, H, P, D]
            for i, past in enumerate(pasts):
                if past is not None:
                    kv[:, :, i, :, : past.shape[3]] = past
            cache = DynamicCache(ddp_cache_data=[(kv[layer, 0], kv[layer, 1]) for layer in range(layers)])
        out = self.decoder(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=positions.to(self.device),
            cache=cache,
            use_cache=cache is not None,
        )
        return out.last_hidden_state, (out.cache if keep_cache else None)

    def prefixes(self, prefixes: Sequence[Sequence[int]]) -> list[torch.Tensor]:
        """Key-value caches of ``B`` prefixes, run right-padded in chunks.

        Returns:
            list[torch.Tensor]: ``B`` tensors ``[layers, 2, heads, P_b, head_dim]`` in the decoder's dtype.
        """
        caches: list[torch.Tensor | None] = [None] * len(prefixes)
        for chunk in _chunks([len(p) for p in prefixes], self.forward_tokens):
            _, cache = self._run([prefixes[i] for i in chunk], [None] * len(chunk), keep_cache=True)
            assert cache is not None
            for row, index in enumerate(chunk):
                size = len(prefixes[index])
                caches[index] = torch.stack(
                    [torch.stack([layer.keys[row, :, :size], layer.values[row, :, :size]]) for layer in cache.layers]
                )
        return [c for c in caches if c is not None]

    def read(
        self, rows: Sequence[Sequence[int]], pasts: Sequence[torch.Tensor | None], reads: Sequence[Sequence[int]]
    ) -> torch.Tensor:
        """Hidden states at the read positions of every row.

        Args:
            rows (Sequence[Sequence[int]]): ``R`` rows of token ids (each non-empty).
            pasts (Sequence[torch.Tensor | None]): each row's prefix cache ``[L, 2, H, P_r, D]``, or None.
            reads (Sequence[Sequence[int]]): positions within each row whose hidden state is read.

        Returns:
            torch.Tensor: ``[Σ reads, d]`` hidden states, row after row, read after read.
        """
        offsets = [0]
        for positions in reads:
            offsets.append(offsets[-1] + len(positions))
        out: torch.Tensor | None = None
        padded = [len(row) + (0 if past is None else past.shape[3]) for row, past in zip(rows, pasts, strict=True)]
        for chunk in _chunks(padded, self.forward_tokens):
            hidden, _ = self._run([rows[i] for i in chunk], [pasts[i] for i in chunk], keep_cache=False)
            row_index = torch.tensor([r for r, i in enumerate(chunk) for _ in reads[i]], dtype=torch.int64)
            position = torch.tensor([p for i in chunk for p in reads[i]], dtype=torch.int64)
            picked = hidden[row_index.to(hidden.device), position.to(hidden.device)]  # [reads of chunk, d]
            if out is None:
                out = hidden.new_empty((offsets[-1], hidden.shape[-1]))
            target = torch.tensor([offsets[i] + k for i in chunk for k in range(len(reads[i]))], dtype=torch.int64)
            out[target.to(out.device)] = picked
        assert out is not None
        return out
