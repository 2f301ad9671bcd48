"""Token probabilities: what the local engine records equals softmax(scores) of a bare
`generate` with the same inputs and settings; with an MTP drafter, one probability per emitted
token, equal to the one recorded without it; and nothing of generate's scores kept alive."""

from __future__ import annotations

import threading

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    AutoModelForMultimodalLM,
    AutoProcessor,
    LogitsProcessor,
    LogitsProcessorList,
    StoppingCriteriaList,
)

from gemma4_ui.config import BUNDLED_MODEL
from gemma4_ui.core.events import Done, TokenProbability
from gemma4_ui.core.prompt import PromptSpec, model_inputs
from gemma4_ui.engines import probabilities as token_probabilities
from gemma4_ui.engines.backports import backport_mtp_kv_sharing
from gemma4_ui.engines.base import GenerationRequest
from gemma4_ui.engines.drafting import DraftCounts
from gemma4_ui.engines.loading import resolve_model
from gemma4_ui.engines.local.device import generate_on_device, register
from gemma4_ui.engines.local.engine import LocalEngine, _sampling
from gemma4_ui.inspector import probabilities_view
from scripts.build_tiny_checkpoints import build_drafter


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
    steps = token_probabilities.RecordedSteps(ids, [0.5] * len(ids), [[i] for i in ids], [[0.5]] * len(ids))
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


def test_a_step_recorded_for_another_token_labels_nothing_from_there(processor):
    ids = processor.tokenizer("Hello there, sea", add_special_tokens=False)["input_ids"]
    assert len(ids) >= 3
    recorded = [ids[0], ids[1] + 1, *ids[2:]]
    steps = token_probabilities.RecordedSteps(recorded, [0.5] * len(ids), [[i] for i in ids], [[0.5]] * len(ids))
    assert [t.id for t in token_probabilities.from_generate(processor.tokenizer, ids, steps)] == ids[:1]

# -- with an MTP drafter: a verification pass emits several tokens at once ---------------------------

class ZeroEveryOtherToken(LogitsProcessor):
    """Token 0 becomes the target's greedy choice at every other position, a little ahead of
    its own best, so that its probability still differs from position to position. A drafter
    that always proposes token 0 then has a draft kept in most verification passes."""

    def __call__(self, input_ids, scores):
        scores = scores.clone()
        if input_ids.shape[-1] % 2 == 0:
            scores[:, 0] = scores.max(dim=-1).values + 0.5
        return scores


@pytest.fixture(scope="module")
def drafter_path(tmp_path_factory):
    return build_drafter(BUNDLED_MODEL, tmp_path_factory.mktemp("drafter") / "drafter")


def zero_output(model):
    """All-zero output weights: the model always picks token 0."""
    with torch.no_grad():
        model.get_output_embeddings().weight.zero_()
    return model


@pytest.fixture(scope="module")
def proposes_zero(drafter_path):
    return zero_output(AutoModelForCausalLM.from_pretrained(drafter_path, dtype=torch.float32).eval())


def load_target():
    backport_mtp_kv_sharing()  # before the target is built: it keeps the key/value states the drafter reads
    return AutoModelForMultimodalLM.from_pretrained(BUNDLED_MODEL, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def target():
    return load_target()


SEA = PromptSpec([{"role": "user", "content": "Tell me about the sea."}])


def greedy_with_zeros(max_new_tokens: int) -> dict:
    return {**_sampling(GenerationRequest(SEA, max_new_tokens=max_new_tokens, temperature=0)),
            "logits_processor": LogitsProcessorList([ZeroEveryOtherToken()])}


def run_on_device(key: str, inputs, generation: dict):
    """The emitted tokens, the draft counts (None without a drafter) and the recorded steps."""
    tokens, counts, steps = [], None, None
    for batch in generate_on_device(key, inputs, generation, record_probabilities=True):
        if isinstance(batch, DraftCounts):
            counts = batch
        elif isinstance(batch, token_probabilities.RecordedSteps):
            steps = batch
        else:
            tokens += [token for token, _ in batch if token is not None]
    return tokens, counts, steps


def test_with_a_drafter_each_emitted_token_has_its_own_probability(processor, target, proposes_zero):
    tokenizer = processor.tokenizer
    inputs = model_inputs(processor, SEA)
    generation = greedy_with_zeros(16)
    plain = register(resolve_model("tiny"), target, tokenizer)
    assisted = register(resolve_model("tiny"), target, tokenizer, proposes_zero)
    tokens, _, steps = run_on_device(plain, inputs, generation)
    tokens_drafted, counts, steps_drafted = run_on_device(assisted, inputs, generation)
    assert counts.accepted > 0, "no draft was kept: no pass emitted several tokens"
    assert tokens_drafted == tokens and len(tokens) == 16

    assert len(steps_drafted.chosen) == len(tokens_drafted)
    assert steps_drafted.ids == tokens_drafted == steps.ids  # each step is the emitted token's own
    without = token_probabilities.from_generate(tokenizer, tokens, steps)
    drafted = token_probabilities.from_generate(tokenizer, tokens_drafted, steps_drafted)
    assert [t.id for t in drafted] == tokens_drafted
    for own, other in zip(drafted, without):
        assert own.probability == pytest.approx(other.probability, rel=1e-4, abs=1e-7)
        assert [text for text, _ in own.alternatives] == [text for text, _ in other.alternatives]
        assert [p for _, p in own.alternatives] == pytest.approx([p for _, p in other.alternatives],
                                                                 rel=1e-4, abs=1e-7)
        assert own.alternatives[0][0] == own.text  # greedy: the emitted token is the likeliest


def test_with_a_drafter_sampled_tokens_keep_their_own_probabilities(processor, target, proposes_zero):
    """Sampling with a drafter verifies by speculative sampling (drafts kept with probability
    p/q, a rejected one drawn again): each token still gets the probability the target gave
    it, never zero (top-k leaves all but 20 of the tokens at zero)."""
    assisted = register(resolve_model("tiny"), target, processor.tokenizer, proposes_zero)
    generation = {**_sampling(GenerationRequest(SEA, max_new_tokens=16, temperature=0.8, top_k=20, top_p=0.9)),
                  "logits_processor": LogitsProcessorList([ZeroEveryOtherToken()])}
    torch.manual_seed(1234)
    tokens, counts, steps = run_on_device(assisted, model_inputs(processor, SEA), generation)
    assert counts.accepted > 0 and len(tokens) == 16
    assert len(steps.chosen) == len(tokens) and steps.ids == tokens
    assert all(p > 0 for p in steps.chosen)
    assert all(tokens[n] in steps.top_ids[n] or p <= steps.top_probabilities[n][-1]
               for n, p in enumerate(steps.chosen))

def test_with_a_drafter_the_engine_labels_every_token(processor, drafter_path):
    """Through the engine: a target and a drafter that agree on every token, so every pass
    emits all its drafts and one more token."""
    target = zero_output(load_target())
    drafter = zero_output(AutoModelForCausalLM.from_pretrained(drafter_path, dtype=torch.float32).eval())
    engine = LocalEngine("tiny", device="cpu").adopt(target, AutoProcessor.from_pretrained(BUNDLED_MODEL), drafter)
    request = GenerationRequest(PromptSpec([{"role": "user", "content": "Hi"}]), max_new_tokens=11, temperature=0,
                                token_probabilities=True)
    done = reply(engine, request)
    assert done.stats.accepted_tokens > 0
    assert len(done.token_probabilities) == done.stats.generated_tokens == 11
    assert all(t.id == 0 for t in done.token_probabilities)


def storages(value, seen=None) -> list:
    """The storages of every tensor `value` holds, through lists, tuples, dicts and attributes."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        return [value.untyped_storage()]
    if isinstance(value, dict):
        return [s for item in value.values() for s in storages(item, seen)]
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in storages(item, seen)]
    if hasattr(value, "__dict__"):
        return storages(vars(value), seen)
    return []


@pytest.mark.parametrize("drafting", [False, True])
def test_recording_keeps_no_scores_alive(processor, target, proposes_zero, drafting):
    """generate keeps every step's scores to return them; the recorder releases each as it reads
    it (a verification pass's steps share one tensor: all of them) and keeps a few numbers."""
    inputs = model_inputs(processor, SEA)
    generation = greedy_with_zeros(12)
    if drafting:
        generation["assistant_model"] = proposes_zero
    recorder = token_probabilities.recorder()
    out = target.generate(**inputs, **generation, output_scores=True, return_dict_in_generate=True,
                          stopping_criteria=StoppingCriteriaList([recorder]))
    assert len(out.scores) == 12
    assert [s.untyped_storage().nbytes() for s in out.scores] == [0] * 12
    one_step = target.config.get_text_config().vocab_size * 4
    assert sum(s.nbytes() for s in storages(recorder)) < one_step
    assert len(recorder.result().chosen) == 12
