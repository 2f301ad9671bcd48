"""Token probabilities: what the local engine records equals softmax(scores) of a bare
`generate` with the same inputs and settings."""

from __future__ import annotations

import threading

import pytest
import torch

from gemma4_ui.core.events import Done, TokenProbability
from gemma4_ui.core.prompt import PromptSpec, model_inputs
from gemma4_ui.engines import probabilities as token_probabilities
from gemma4_ui.engines.base import GenerationRequest
from gemma4_ui.engines.local.engine import _sampling
from gemma4_ui.inspector import probabilities_view


def reply(engine, request) -> Done:
    return next(e for e in engine.stream(request, threading.Event()) if isinstance(e, Done))


@pytest.mark.parametrize("temperature,top_k,top_p", [(0.0, 64, 0.95), (0.8, 20, 0.9)])
def test_recorded_probabilities_are_softmax_of_generates_scores(tiny_engine, temperature, top_k, top_p):
    spec = PromptSpec([{"role": "user", "content": "Tell me about the sea."}])
    request = GenerationRequest(spec, max_new_tokens=16, temperature=temperature, top_k=top_k, top_p=top_p,
                                token_probabilities=True)
    torch.manual_seed(1234)
    tokens = reply(tiny_engine, request).token_probabilities

    torch.manual_seed(1234)
    inputs = model_inputs(tiny_engine.processor, spec)
    out = tiny_engine.model.generate(**inputs, **_sampling(request), output_scores=True, return_dict_in_generate=True)
    generated = out.sequences[0, inputs["input_ids"].shape[-1]:].tolist()

    tokenizer = tiny_engine.processor.tokenizer
    assert [t.id for t in tokens] == generated and len(tokens) == len(out.scores)
    for token, scores in zip(tokens, out.scores):
        probabilities = scores[0].float().softmax(dim=-1)
        assert token.probability == pytest.approx(probabilities[token.id].item(), rel=1e-5, abs=1e-9)
        top = probabilities.topk(token_probabilities.TOP_ALTERNATIVES)
        assert [p for _, p in token.alternatives] == pytest.approx(top.values.tolist(), rel=1e-5, abs=1e-9)
        assert [text for text, _ in token.alternatives] == [
            tokenizer.decode([i], skip_special_tokens=False) for i in top.indices.tolist()]
        assert token.text == tokenizer.decode([token.id], skip_special_tokens=False)
    if temperature == 0:  # greedy: the chosen token is the most probable one
        assert all(t.alternatives[0][0] == t.text for t in tokens)


def test_nothing_is_recorded_unless_asked(tiny_engine):
    spec = PromptSpec([{"role": "user", "content": "Hi"}])
    assert reply(tiny_engine, GenerationRequest(spec, max_new_tokens=4, temperature=0)).token_probabilities is None


def test_tokens_are_labelled_by_the_part_of_the_reply(processor):
    tokenizer = processor.tokenizer
    parts = [tokenizer.soc_token, "thought", "\n", "hmm", tokenizer.eoc_token, tokenizer.stc_token, "call", ":",
             tokenizer.etc_token, "Hello", tokenizer.eot_token]
    ids = [i for part in parts for i in tokenizer(part, add_special_tokens=False)["input_ids"]]
    steps = token_probabilities.RecordedSteps([0.5] * len(ids), [[i] for i in ids], [[0.5]] * len(ids))
    tokens = token_probabilities.from_generate(tokenizer, ids, steps)
    kinds = {}
    for token in tokens:
        kinds.setdefault(token.kind, "")
        kinds[token.kind] += token.text
    assert kinds["thought"] == "thought\nhmm"
    assert kinds["call"] == "call:"
    assert kinds["answer"] == "Hello"
    assert kinds["control"] == "".join([tokenizer.soc_token, tokenizer.eoc_token, tokenizer.stc_token,
                                         tokenizer.etc_token, tokenizer.eot_token])
    html = probabilities_view.view_html([("Answer", tokens + [TokenProbability(
        None, "<script>x</script>", 0.1, alternatives=[("<img onerror=1>", 0.1)])])])
    assert "<script>" not in html and "<img onerror" not in html
    assert html.count("class='tp tp-") == len(tokens) + 1
