"""Kev's option isolation on attention-only bases (``kev/model.py`` ``encode`` and
``branch_mask_batch`` with ``option_isolation=True``): every option span sits at the same positions
after the instructions, the decide token one past the longest span; an option token sees the
state, the instructions and its own span; the decide token sees the whole question."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from decisiond.backends import Work
from decisiond.backends.pointer_head.backend import PointerHeadBackend
from decisiond.backends.pointer_head.render import DECIDE, NO_OPTION
from decisiond.manifest import ManifestError
from decisiond.render import Option, Question
from decisiond.testing.tiny_pointer_head import vocabulary

V = vocabulary()
STATE = "the customer was charged twice"
QUESTION = Question(
    "choice", "which team", (Option("billing", "refund today"), Option("technical", None), Option("other", "none"))
)


@pytest.fixture(scope="module")
def isolated(checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("isolated") / "kev"
    shutil.copytree(checkpoints["kev"], folder)
    meta = torch.load(folder / "head.pt", weights_only=True)
    torch.save(meta | {"option_isolation": True}, folder / "head.pt")
    return folder


def test_options_sit_side_by_side(isolated: Path, load: Callable[..., PointerHeadBackend]) -> None:
    """Positions and spans as Kev's ``encode`` lays them out, written out by hand."""
    backend = load(isolated)
    assert backend.isolation == "packed"
    branch = backend.prepare(Work(STATE, (QUESTION,))).features.branches[0]
    # <q> which team | <o> billing : refund today </o> | <o> technical </o> | <o> other : none </o> | <decide>
    assert branch.spans == (NO_OPTION,) * 3 + (0,) * 6 + (1,) * 3 + (2,) * 5 + (DECIDE,)
    assert branch.positions == (0, 1, 2, *range(3, 9), *range(3, 6), *range(3, 8), 3 + 6)
    assert branch.keys == (8, 11, 16) and branch.query == 17


def test_an_option_reads_only_the_state_the_instructions_and_itself(
    isolated: Path, load: Callable[..., PointerHeadBackend]
) -> None:
    """Each key's hidden state equals a plain causal run of state + instructions + that option alone,
    at the same positions; the other options change nothing."""
    backend = load(isolated)
    layout = backend.prepare(Work(STATE, (QUESTION,))).features
    flat, _, keys = backend._packed([layout])
    branch = layout.branches[0]
    s = len(layout.state)
    for number in range(len(branch.keys)):
        own = [i for i, o in enumerate(branch.spans) if o in (NO_OPTION, number)]
        ids = torch.tensor([[*layout.state, *(branch.ids[i] for i in own)]])
        positions = torch.tensor([[*range(s), *(s + branch.positions[i] for i in own)]])
        alone = backend.trunk(input_ids=ids, position_ids=positions).last_hidden_state[0, -1]
        torch.testing.assert_close(flat[keys[number]], alone, rtol=0, atol=1e-5)


def test_reordering_the_options_reorders_the_logits(isolated: Path, load: Callable[..., PointerHeadBackend]) -> None:
    backend = load(isolated)
    forward = backend.forward([backend.prepare(Work(STATE, (QUESTION,)))])
    reverse = Question("choice", QUESTION.instructions, tuple(reversed(QUESTION.options)))
    backward = backend.forward([backend.prepare(Work(STATE, (reverse,)))])
    torch.testing.assert_close(backward, forward.flip(0), rtol=0, atol=1e-5)
    assert forward.std() > 0.05  # not a comparison of constants


def test_option_isolation_needs_the_packed_form(isolated: Path, load: Callable[..., PointerHeadBackend]) -> None:
    with pytest.raises(ValueError, match='option_isolation needs isolation "packed"'):
        load(isolated, isolation="rows")


def test_option_isolation_on_a_hybrid_base_is_refused(
    checkpoints: dict[str, Path], tmp_path: Path, load: Callable[..., PointerHeadBackend]
) -> None:
    folder = tmp_path / "hybrid"
    shutil.copytree(checkpoints["kev_hybrid"], folder)
    meta = torch.load(folder / "head.pt", weights_only=True)
    torch.save(meta | {"option_isolation": True}, folder / "head.pt")
    with pytest.raises(ManifestError, match=r"head\.pt: option_isolation is true, which a hybrid base"):
        load(folder)
