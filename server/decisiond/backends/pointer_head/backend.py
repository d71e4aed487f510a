"""The ``pointer_head`` backend: Kev, OpenJev and strands-decider checkpoints.

A request is rendered once (:mod:`.render`) into the state's ids and one branch per question.
The trunk reads them with one of three isolation forms, each giving every question the same
hidden states as if it were asked alone (spec/pointer-head.md, "Isolation"):

* ``packed`` (attention-only bases): one sequence per request, state then every branch, with a
  block mask (a token sees the state and its own branch) and positions restarting at ``S`` for
  each branch; a micro-batch's requests are right-padded rows of one forward.
* ``rows``: one row per question, state + branch, right-padded; no cache.
* ``prefix`` (default on hybrid bases): the state once per distinct state (kept in a small LRU),
  its cache deep-copied for each use (recurrent states are mutated in place) and repeated over
  the request's questions, each question a right-padded row after it.

Hidden states at every query and key of the micro-batch are gathered, the head projects them
once, and the backend returns one raw logit per slot; the readout divides by the temperature of
each question's type.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from cachetools import LRUCache

from ...config import Settings
from ...errors import MaxTokensExceeded
from ...manifest import Manifest
from ...render import Kind
from ..base import Backend, Prepared, TokenLimits, Work
from .families import Isolation, parse_options
from .head import PointerHead
from .loading import load_checkpoint
from .render import DECIDE, NO_OPTION, DelimitedRenderer, Layout, Renderer, StrandsRenderer


class PointerHeadBackend(Backend):
    """Trunk + pointer head over rendered layouts.

    Args:
        trunk (torch.nn.Module): a decoder returning ``last_hidden_state`` ``[B, T, d]`` (after
            its final norm), in the serving dtype.
        head (PointerHead): float32.
        renderer (Renderer): the family's rendering.
        hybrid (bool): the trunk has recurrent layers (packed isolation refused).
        isolation (Isolation, optional): see the module docstring. Defaults to ``auto``: packed
            on attention-only bases, prefix on hybrid or sliding-window ones.
        sliding (bool, optional): the trunk has sliding-window layers, whose window a packed
            block mask would replace (packed isolation refused). Defaults to False.
        option_isolation (bool, optional): the renderer lays options side by side (Kev's
            ``option_isolation``); only the packed form has the per-option mask. Defaults to False.
        temperatures (dict[str, float], optional): per question type. Defaults to 1 for each.
        family_limits (dict[str, int], optional): max_state_tokens, max_branch_tokens,
            max_prompt_tokens the checkpoint declares.
        pad_id (int, optional): the id right-padding uses. Defaults to 0.
        prefix_cache_entries (int, optional): state caches kept between requests. Defaults to 8.
        **kwargs: device, dtype, limits for :class:`Backend`.

    Raises:
        ValueError: packed isolation on a hybrid or sliding-window base; option isolation in
            another form than packed.
    """

    family = "pointer_head"

    def __init__(
        self,
        trunk: torch.nn.Module,
        head: PointerHead,
        renderer: Renderer,
        *,
        hybrid: bool,
        isolation: Isolation = "auto",
        temperatures: dict[str, float] | None = None,
        family_limits: dict[str, int] | None = None,
        pad_id: int = 0,
        prefix_cache_entries: int = 8,
        sliding: bool = False,
        option_isolation: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if isolation == "auto":
            isolation = "prefix" if (hybrid or sliding) and not option_isolation else "packed"
        if option_isolation and isolation != "packed":
            raise ValueError(
                f'option_isolation needs isolation "packed" (its per-option mask), not {isolation!r}; '
                "serve the checkpoint on an attention-only base without a sliding window"
            )
        if isolation == "packed" and hybrid:
            raise ValueError(
                'isolation "packed" needs an attention-only base; a hybrid base\'s recurrent layers ignore masks '
                '(use isolation "prefix" or "rows")'
            )
        if isolation == "packed" and sliding:
            raise ValueError(
                'isolation "packed" would replace the sliding window of this base\'s sliding-window layers with '
                'one block mask (use isolation "prefix" or "rows")'
            )
        self.isolation: Isolation = isolation
        self.hybrid = hybrid
        self.trunk = trunk.to(self.device, self.dtype).eval()
        self.head = head.to(self.device).float().eval()
        self.renderer = renderer
        self.temperatures = temperatures or {"noul": 1.0, "choice": 1.0, "score": 1.0}
        self.family_limits = family_limits or {}
        self.pad_id = pad_id
        self.prefix_cache_entries = prefix_cache_entries
        self._prefixes: LRUCache[tuple[int, ...], Any] = LRUCache(maxsize=max(prefix_cache_entries, 1))
        self.prefix_hits = 0
        self.prefix_misses = 0

    @classmethod
    def from_manifest(
        cls,
        manifest: Manifest,
        *,
        device: torch.device,
        dtype: torch.dtype,
        limits: TokenLimits,
        settings: Settings,
    ) -> PointerHeadBackend:
        """Load the checkpoint the manifest points at (never a download).

        Raises:
            ManifestError: see :func:`.loading.load_checkpoint`.
            ValueError: invalid options.
        """
        options = parse_options(manifest.backend_options, source=str(manifest.source or manifest.name))
        folder = manifest.weights_path()
        loaded = load_checkpoint(folder, options.family, options, dtype=dtype)
        renderer: Renderer
        if options.family == "strands":
            fit = loaded.limits.get("max_prompt_tokens") if options.strands_window == "fit" else None
            renderer = StrandsRenderer(loaded.tokenizer, options.strands, fit_window=fit)
        else:
            renderer = DelimitedRenderer(loaded.tokenizer, options.delimiters, option_isolation=loaded.option_isolation)
        pad = loaded.tokenizer.pad_token_id
        return cls(
            loaded.trunk,
            loaded.head,
            renderer,
            hybrid=loaded.hybrid,
            isolation=options.isolation,
            temperatures=loaded.temperatures,
            family_limits=loaded.limits,
            pad_id=int(pad) if pad is not None else 0,
            prefix_cache_entries=options.prefix_cache_entries,
            sliding=loaded.sliding,
            option_isolation=loaded.option_isolation,
            device=device,
            dtype=dtype,
            limits=limits,
        )

    def temperature(self, kind: Kind) -> float:
        """The checkpoint's temperature for questions of ``kind`` (manifest overrides applied)."""
        return self.temperatures[kind]

    # ---------------------------------------------------------------- CPU stage

    def _check_family_limits(self, layout: Layout) -> None:
        state = len(layout.state)
        longest = max((len(b.ids) for b in layout.branches), default=0)
        checks = (
            ("max_state_tokens", state, "the state is {n} tokens; this model reads at most {m} (shorten the state)"),
            (
                "max_branch_tokens",
                longest,
                "a question is {n} tokens; this model reads at most {m} per question "
                "(shorten its instructions or options)",
            ),
            (
                "max_prompt_tokens",
                state + longest,
                "the state and a question are {n} tokens; this model reads at most {m} (shorten the state)",
            ),
        )
        for key, n, message in checks:
            limit = self.family_limits.get(key)
            if limit is not None and n > limit:
                raise MaxTokensExceeded(message.format(n=n, m=limit))

    def prepare(self, work: Work) -> Prepared:
        """Render and tokenize; check the server's and the checkpoint's token limits.

        Raises:
            MaxTokensExceeded: over a budget.
            ApiUsageError: an option without a token of its own (strands).
        """
        layout = self.renderer.layout(work)
        state = len(layout.state)
        branches = sum(len(b.ids) for b in layout.branches)
        self.limits.check(state, state + branches)
        self._check_family_limits(layout)
        cost = state * len(layout.branches) + branches if self.isolation == "rows" else state + branches
        extra = {"x_window_fit": {f"{part}_tokens_dropped": n for part, n in layout.dropped.items()}}
        return Prepared(
            work, input_tokens=state + branches, cost=cost, features=layout, extra=extra if layout.dropped else {}
        )

    # ---------------------------------------------------------------- model stage

    def _pad(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded ids ``[B, T]`` and their 0/1 mask."""
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.int64)
        mask = torch.zeros((len(rows), width), dtype=torch.int64)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row, dtype=torch.int64)
            mask[i, : len(row)] = 1
        return ids.to(self.device), mask.to(self.device)

    def _hidden(self, **inputs: Any) -> tuple[torch.Tensor, Any]:
        out = self.trunk(**inputs)
        return out.last_hidden_state, out.get("cache")

    def _packed(self, layouts: Sequence[Layout]) -> tuple[torch.Tensor, list[int], list[int]]:
        """One row per request; returns hidden ``[B·T, d]`` and flat query/key indices into it."""
        rows, segments, positions, spans = [], [], [], []
        queries: list[int] = []
        keys: list[int] = []
        for layout in layouts:
            s = len(layout.state)
            seg, pos, span = [0] * s, list(range(s)), [NO_OPTION] * s
            offset = s
            for number, branch in enumerate(layout.branches, start=1):
                seg += [number] * len(branch.ids)
                pos += [s + p for p in branch.positions] if branch.positions else range(s, s + len(branch.ids))
                span += branch.spans or [NO_OPTION] * len(branch.ids)
                queries.append(offset + branch.query)
                keys.extend(offset + k for k in branch.keys)
                offset += len(branch.ids)
            rows.append(layout.sequence())
            segments.append(seg)
            positions.append(pos)
            spans.append(span)
        ids, _ = self._pad(rows)
        width = ids.shape[1]
        seg_t = torch.full(ids.shape, -1, dtype=torch.int64)
        pos_t = torch.zeros(ids.shape, dtype=torch.int64)
        for i, (seg, pos) in enumerate(zip(segments, positions, strict=True)):
            seg_t[i, : len(seg)] = torch.tensor(seg)
            pos_t[i, : len(pos)] = torch.tensor(pos)
        seg_t, pos_t = seg_t.to(self.device), pos_t.to(self.device)
        causal = torch.ones(width, width, dtype=torch.bool, device=self.device).tril()  # [T, T]
        seg_q, seg_k = seg_t.unsqueeze(2), seg_t.unsqueeze(1)  # [B, T, 1], [B, 1, T]
        allowed = causal & (seg_k >= 0) & ((seg_k == 0) | (seg_k == seg_q))  # [B, T, T]
        if any(b.spans for layout in layouts for b in layout.branches):
            allowed &= self._option_mask(spans, ids.shape)
        allowed |= torch.eye(width, dtype=torch.bool, device=self.device)  # padding rows see themselves
        mask = torch.zeros(allowed.shape, dtype=self.dtype, device=self.device)
        mask.masked_fill_(~allowed, torch.finfo(self.dtype).min)
        hidden, _ = self._hidden(input_ids=ids, attention_mask=mask.unsqueeze(1), position_ids=pos_t, use_cache=False)
        flat = hidden.reshape(-1, hidden.shape[-1])  # [B·T, d]
        starts = [i * width for i in range(len(layouts))]
        owner_q = [starts[r] for r, layout in enumerate(layouts) for _ in layout.branches]
        owner_k = [starts[r] for r, layout in enumerate(layouts) for b in layout.branches for _ in b.keys]
        return (
            flat,
            [o + q for o, q in zip(owner_q, queries, strict=True)],
            [o + k for o, k in zip(owner_k, keys, strict=True)],
        )

    def _option_mask(self, spans: list[list[int]], shape: torch.Size) -> torch.Tensor:
        """Kev's option isolation (``kev/model.py`` ``branch_mask_batch``): a token may read an option
        token only if it is in the same option or is the decide token. ``[B, T, T]`` bool."""
        option = torch.full(shape, NO_OPTION, dtype=torch.int64)
        for i, span in enumerate(spans):
            option[i, : len(span)] = torch.tensor(span)
        option = option.to(self.device)
        query, key = option.unsqueeze(2), option.unsqueeze(1)  # [B, T, 1], [B, 1, T]
        return (key < 0) | (query == DECIDE) | (query == key)

    def _rows(self, layouts: Sequence[Layout]) -> tuple[torch.Tensor, list[int], list[int]]:
        """One row per question (state + branch), no cache."""
        rows: list[list[int]] = []
        queries: list[int] = []
        keys: list[int] = []
        for layout in layouts:
            s = len(layout.state)
            for branch in layout.branches:
                rows.append([*layout.state, *branch.ids])
                queries.append(s + branch.query)
                keys.extend(s + k for k in branch.keys)
        ids, mask = self._pad(rows)
        hidden, _ = self._hidden(input_ids=ids, attention_mask=mask, use_cache=False)
        width = ids.shape[1]
        row_of_key = [
            r for r, layout_branch in enumerate(b for lay in layouts for b in lay.branches) for _ in layout_branch.keys
        ]
        flat = hidden.reshape(-1, hidden.shape[-1])
        return (
            flat,
            [r * width + q for r, q in enumerate(queries)],
            [r * width + k for r, k in zip(row_of_key, keys, strict=True)],
        )

    def _state_cache(self, state: tuple[int, ...]) -> Any:
        """The state's cache (batch 1), from the LRU or one forward; never handed out itself."""
        cached = self._prefixes.get(state) if self.prefix_cache_entries else None
        if cached is not None:
            self.prefix_hits += 1
            return cached
        self.prefix_misses += 1
        ids = torch.tensor([state], dtype=torch.int64, device=self.device)
        _, cache = self._hidden(input_ids=ids, use_cache=True)
        if self.prefix_cache_entries:
            self._prefixes[state] = cache
        return cache

    def _prefix(self, layouts: Sequence[Layout]) -> tuple[torch.Tensor, list[int], list[int]]:
        """Per request: the state's cache, deep-copied and repeated, then the questions as rows."""
        chunks: list[torch.Tensor] = []
        queries: list[int] = []
        keys: list[int] = []
        base = 0
        for layout in layouts:
            s = len(layout.state)
            cache = copy.deepcopy(self._state_cache(layout.state))  # recurrent states mutate in place
            count = len(layout.branches)
            cache.reorder_cache(torch.zeros(count, dtype=torch.int64, device=self.device))
            ids, _ = self._pad([list(b.ids) for b in layout.branches])
            width = ids.shape[1]
            positions = torch.arange(s, s + width, device=self.device).unsqueeze(0).expand(count, -1)
            hidden, _ = self._hidden(input_ids=ids, position_ids=positions, cache=cache, use_cache=True)
            chunks.append(hidden.reshape(-1, hidden.shape[-1]))
            for r, branch in enumerate(layout.branches):
                queries.append(base + r * width + branch.query)
                keys.extend(base + r * width + k for k in branch.keys)
            base += count * width
        return torch.cat(chunks), queries, keys

    @torch.inference_mode()
    def forward(self, batch: Sequence[Prepared]) -> torch.Tensor:
        """Trunk over the micro-batch in the configured isolation form, then the head once.

        Returns:
            torch.Tensor: ``[N]`` float32 raw logits ``(k_j · q) / sqrt(dp)``, slot after slot.
        """
        layouts: list[Layout] = [p.features for p in batch]
        run = {"packed": self._packed, "rows": self._rows, "prefix": self._prefix}[self.isolation]
        flat, queries, keys = run(layouts)
        device = flat.device
        h_query = flat[torch.tensor(queries, dtype=torch.int64, device=device)]  # [Q, d]
        h_keys = flat[torch.tensor(keys, dtype=torch.int64, device=device)]  # [N, d]
        sizes = [len(b.keys) for layout in layouts for b in layout.branches]
        owner = torch.repeat_interleave(torch.arange(len(sizes), device=device), torch.tensor(sizes, device=device))
        return self.head(h_query, h_keys, owner)  # [N]

    def cache_stats(self) -> dict[str, dict[str, int]]:
        """State-prefix cache counters (prefix isolation)."""
        return {
            "state_prefix": {
                "entries": len(self._prefixes),
                "max_entries": self.prefix_cache_entries,
                "hits": self.prefix_hits,
                "misses": self.prefix_misses,
            }
        }
