"""Which image a ``box`` question is about (spec/wire.md §8: a box is asked about exactly one image).

Images are counted in wire order (:func:`decisiond.media.image_names`): the ``images`` array first,
then the ``assets`` map. A box question is about

* the one image whose asset placeholder its instructions contain, when they contain exactly one;
* otherwise the request's only image, when it carries exactly one (the official SDK's
  ``Box(instructions="the dog")`` with the photo as the state).

Anything else is refused with 400 naming the question: no image at all, instructions that name
several images, or several images of which the instructions name none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .errors import ApiUsageError
from .render import Question, to_text
from .wire import describe_id


def box_image(question_id: str, question: Question, names: Sequence[str | None]) -> int:
    """The index of the image box question ``question_id`` is about.

    Args:
        question_id (str): the caller's id, for the message only.
        question (Question): a box question.
        names (Sequence[str | None]): each image's placeholder in wire order (None: no placeholder).

    Raises:
        ApiUsageError: no image, several images named, or several images and none named (400).
    """
    text = to_text(question.instructions)
    named = [i for i, name in enumerate(names) if name and name in text]
    where = f"question {describe_id(question_id)} is a box question"
    if len(named) == 1:
        return named[0]
    if len(named) > 1:
        raise ApiUsageError(f"{where} whose instructions name {len(named)} images; a box is asked about exactly one")
    if len(names) == 1:
        return 0
    if not names:
        raise ApiUsageError(f"{where}, but the request carries no image; send the image to search")
    raise ApiUsageError(
        f"{where}, and the request carries {len(names)} images but its instructions name none of them; "
        "a box is asked about exactly one image: put that image's placeholder in the instructions"
    )


def with_box_images(
    ids: Sequence[str], questions: Sequence[Question], names: Sequence[str | None]
) -> tuple[Question, ...]:
    """``questions`` with :attr:`Question.image` set on every box question (pure).

    Raises:
        ApiUsageError: see :func:`box_image`, for the first box question that has no single image.
    """
    return tuple(
        replace(q, image=box_image(qid, q, names)) if q.kind == "box" else q
        for qid, q in zip(ids, questions, strict=True)
    )
