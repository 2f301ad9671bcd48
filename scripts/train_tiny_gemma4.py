"""Train the bundled tiny Gemma 4 to speak the Gemma 4 protocol, from scratch, on the CPU.

    python scripts/train_tiny_gemma4.py [--seed 0] [--mix-scale 0.7] [--out assets/tiny-gemma4]  # ~65 min, 2 cores
    python scripts/train_tiny_gemma4.py --resume      # continue from the last checkpoint (out/train-checkpoint.pt)
    python scripts/train_tiny_gemma4.py --init-from out/train-checkpoint.pt --seed 1  # a further stage, fresh data
    python scripts/train_tiny_gemma4.py --init-from out/stage14-checkpoint.pt --layers 6 --seed 16
                                                      # a further stage on a deeper model (see grow_layers)
    python scripts/train_tiny_gemma4.py --device cuda # the same on a GPU
    python scripts/train_tiny_gemma4.py --eval [--out assets/tiny-gemma4]  # held-out behaviour, greedy
    python scripts/train_tiny_gemma4.py --checkpoint out/stage1-checkpoint.pt --carry checkpoints/stage1.pt
                                                      # weights and progress, to commit (see checkpoints/)

Training builds the model from `build_tiny_gemma4.tiny_config` (random init, seeded), first
learns to copy on a task of its own (see CopyTask), then trains on the synthetic conversations
of `synthetic_data.py` (the loss covers only what the model writes: thoughts, calls, answers
and their stop tokens) with copy rows in every step, and saves the weights in bfloat16 with
the bundle's generation config. The tokenizer, processor and template files are the bundle's
and are never rewritten; with `--out` elsewhere they are copied there first. Seeded: the same
seed gives the same data, order and initialisation.

`--eval` drives the saved model the way the app does (`LocalEngine` + `TurnRunner`, greedy)
on city names, expressions and time zones that never occur in the training data, and on the
example media, and reports exact argument copies, answers that quote the tool's result,
thoughts exactly when asked for, media acknowledged, and replies that end cleanly; also for
other requests (`HELD_OUT_REQUESTS`), and again for every third case with the prompt a
server renders (`served_spec`).

Status (4 layers, 4.1 M parameters, 7.8 MB): the bundle is stage 14, 647.8 min on the run's
counter on 2 cores (the commands, and each stage's figures: checkpoints/README.md). On held-out
phrasing families (greedy): weather arguments exact 29/101, calculator 12/40, units 9/30, time
19/30; a needed tool that is off named 4/48; other requests end cleanly without a call 171/240;
media 7/8.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import shutil
import sys
import threading
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts import synthetic_data  # noqa: E402
from scripts.build_tiny_gemma4 import DEFAULT_LAYERS, DEFAULT_OUT, generation_config, tiny_config  # noqa: E402

THREADS = 2
LEARNING_RATE = 2e-3
FINAL_LEARNING_RATE_FRACTION = 0.05
WARMUP_STEPS = 40
WEIGHT_DECAY = 0.01
GRADIENT_CLIP = 1.0
TOKENS_PER_STEP = 10_000  # real (unpadded) tokens per optimizer step
MICRO_BATCH_TOKENS = 4_096  # padded tokens per forward pass
LOG_EVERY = 20
COPY_WARMUP_STEPS = 900  # at most, on the copy task alone, before the conversations (see CopyTask)
COPY_WARMUP_MIN_STEPS = 300
COPY_WARMUP_DONE = 0.97  # copy accuracy (mean of the last LOG_EVERY steps) that ends the warm-up early
COPY_LEARNING_RATE = 3e-3  # copying appears suddenly after ~350 steps, and only while the rate is high
COPY_BATCH = 24  # rows per copy batch, one per step in the warm-up and in the main loop
COPY_SPAN_TOKENS = (3, 20)
COPY_MAX_GAP = 24
COPY_ANY_TOKEN_SHARE = 0.3  # copy spans of random vocabulary pieces (see CopyTask.span)
CHECKPOINT_EVERY = 50  # main-loop steps between checkpoints (the warm-up saves when it ends)
POST_NORM_SCALE = 0.3  # initial scale of the norms on each block's output (see initialise_for_copying)
COPY_WEIGHT = 0.5  # the copy loss's weight next to the conversations' in the main loop
MEDIA_KEYS = ("pixel_values", "image_position_ids", "pixel_values_videos", "video_position_ids",
              "num_frames_per_video", "input_features", "input_features_mask")


# --- batching ------------------------------------------------------------------------------


def plan_micro_batches(examples: list, rng: random.Random) -> list[list[int]]:
    """Text examples of similar length share a padded forward pass; an example with media
    goes alone (its images, clips and frames differ in shape)."""
    batches = [[i] for i, e in enumerate(examples) if e.media]
    text = [i for i, e in enumerate(examples) if not e.media]
    rng.shuffle(text)
    text.sort(key=lambda i: len(examples[i]) // 32)  # stable: random order within a length band
    batch: list[int] = []
    for index in text:
        longest = max([len(examples[i]) for i in batch] + [len(examples[index])])
        if batch and longest * (len(batch) + 1) > MICRO_BATCH_TOKENS:
            batches.append(batch)
            batch = []
        batch.append(index)
    if batch:
        batches.append(batch)
    rng.shuffle(batches)
    return batches


def plan_steps(examples: list, rng: random.Random) -> list[list[list[int]]]:
    """Micro-batches grouped into optimizer steps of about TOKENS_PER_STEP real tokens."""
    steps, step, tokens = [], [], 0
    for batch in plan_micro_batches(examples, rng):
        step.append(batch)
        tokens += sum(len(examples[i]) for i in batch)
        if tokens >= TOKENS_PER_STEP:
            steps.append(step)
            step, tokens = [], 0
    if step:
        steps.append(step)
    return steps


def collate(examples: list, pad_id: int) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """Model inputs, right-padded, and the ids and target mask to score. No attention mask:
    under causal attention no real token sees the padding after it, and without a mask
    PyTorch's attention runs its causal kernel (more than twice as fast here)."""
    longest = max(len(e) for e in examples)
    ids = torch.full((len(examples), longest), pad_id, dtype=torch.long)
    target = torch.zeros((len(examples), longest), dtype=torch.bool)
    for row, example in enumerate(examples):
        ids[row, :len(example)] = example.input_ids
        target[row, :len(example)] = example.target
    inputs = {"input_ids": ids}
    if examples[0].media:  # media examples come alone
        media = examples[0].media
        inputs["mm_token_type_ids"] = media["mm_token_type_ids"]
        for key in MEDIA_KEYS:
            if key in media:
                value = media[key]
                inputs[key] = value.float() / 255 if value.dtype == torch.uint8 else value
    return inputs, ids, target


def summed_loss(model, inputs: dict, ids: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Summed cross-entropy over the target tokens. The LM head runs only where a token is
    scored: most positions are prompt, and the head is a large share of the compute."""
    inputs = {k: v.to(model.device) if torch.is_tensor(v) else v for k, v in inputs.items()}
    ids, target = ids.to(model.device), target.to(model.device)
    hidden = model.model(**inputs, use_cache=False).last_hidden_state
    return torch.nn.functional.cross_entropy(scored_logits(model, hidden, target), ids[:, 1:][target[:, 1:]],
                                             reduction="sum")


def scored_logits(model, hidden: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Soft-capped next-token logits at the positions whose next token is scored."""
    logits = model.lm_head(hidden[:, :-1][target[:, 1:]])
    cap = model.config.get_text_config().final_logit_softcapping
    return (torch.tanh(logits / cap) * cap).float()


def initialise_for_copying(model) -> None:
    """Two changes to the random init that let copying (induction heads) appear early.

    Gemma 4 scores attention as q·k with RMS-normed q and k and no 1/sqrt(d) factor (the
    norms' learned scales set the temperature). Initialised at 1, those scales give logits
    with a standard deviation of sqrt(head_dim): near one-hot, random attention whose
    gradients vanish. Starting each scale at head_dim^-1/4 gives unit-variance logits.

    Each block's output passes a norm initialised to unit size, added to embeddings of about
    0.3 (0.02 * sqrt(hidden)): after one layer the token's own identity is mostly drowned,
    and copying needs it. Those output norms start at POST_NORM_SCALE instead."""
    with torch.no_grad():
        for layer in model.model.language_model.layers:
            attention = layer.self_attn
            attention.q_norm.weight.fill_(attention.head_dim ** -0.25)
            if not attention.is_kv_shared_layer:
                attention.k_norm.weight.fill_(attention.head_dim ** -0.25)
            for name in ("post_attention_layernorm", "post_feedforward_layernorm", "post_per_layer_input_norm"):
                norm = getattr(layer, name, None)
                if norm is not None and getattr(norm, "with_scale", False):
                    norm.weight.fill_(POST_NORM_SCALE)


class CopyTask:
    """Rows `<bos> noise <|"|> span <|"|> noise <|"|> span` of random tokens (the noise, 0 to
    16 and 0 to COPY_MAX_GAP of them) around spans made of what tool arguments and answers
    are made of (`synthetic_data.copy_payload`: made-up names, numbers, times, expressions).
    Only the second span is scored, so the sole way to lower the loss is to find the first
    one and copy it token by token.

    Every call argument and every value an answer quotes is such a copy, but in the
    conversations those tokens are a small share of the loss and this small model never found
    the copying circuit (induction heads) there. Here it finds one (0.8 of the tokens copied
    after 500 steps), though it carries over to conversations only in part. The random gap matters: with the two spans at a fixed distance the model learned to copy by
    position, which does not carry over to a conversation."""

    def __init__(self, tokenizer, seed: int):
        self.tokenizer = tokenizer
        self.rng = random.Random(f"copy-{seed}")
        self.bos, self.quote = tokenizer.convert_tokens_to_ids(["<bos>", '<|"|>'])
        self.vocab = range(len(tokenizer.added_tokens_decoder), len(tokenizer))  # specials come first

    def span(self) -> list[int]:
        """Mostly argument-like text; otherwise random pieces of the whole vocabulary, so that
        every piece is copied in training, also one that the conversations never show: a
        held-out name can be a single piece ("Lima", "Oslo"), and a model that never wrote
        that piece garbles it."""
        if self.rng.random() < COPY_ANY_TOKEN_SHARE:
            return [self.rng.randrange(self.vocab.start, self.vocab.stop) for _ in range(self.rng.randint(1, 8))]
        while True:
            ids = self.tokenizer.encode(synthetic_data.copy_payload(self.rng), add_special_tokens=False)
            if len(ids) >= COPY_SPAN_TOKENS[0]:
                return ids[:self.rng.randint(COPY_SPAN_TOKENS[0], COPY_SPAN_TOKENS[1])]

    def noise(self, most: int) -> list[int]:
        return [self.rng.randrange(self.vocab.start, self.vocab.stop) for _ in range(self.rng.randint(0, most))]

    def batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        rows, spans = [], []
        for _ in range(COPY_BATCH):
            span = self.span()
            rows.append([self.bos, *self.noise(16), self.quote, *span, self.quote, *self.noise(COPY_MAX_GAP),
                         self.quote, *span])
            spans.append(len(span))
        ids = torch.full((len(rows), max(map(len, rows))), self.tokenizer.pad_token_id, dtype=torch.long)
        target = torch.zeros_like(ids, dtype=torch.bool)
        for index, (row, span) in enumerate(zip(rows, spans)):
            ids[index, :len(row)] = torch.tensor(row)
            target[index, len(row) - span:len(row)] = True
        return ids, target

    def loss(self, model) -> tuple[torch.Tensor, float]:
        """Mean cross-entropy over a fresh batch, and the share of tokens copied right."""
        ids, target = (t.to(model.device) for t in self.batch())
        hidden = model.model.language_model(input_ids=ids, use_cache=False).last_hidden_state
        logits = scored_logits(model, hidden, target)
        expected = ids[:, 1:][target[:, 1:]]
        accuracy = (logits.argmax(-1) == expected).float().mean().item()
        return torch.nn.functional.cross_entropy(logits, expected), accuracy


def copy_warmup(model, task: CopyTask, max_steps: int = COPY_WARMUP_STEPS) -> int:
    """Learn to copy before the conversations (see CopyTask), at a constant high rate, until
    the copy accuracy reaches COPY_WARMUP_DONE (or COPY_WARMUP_STEPS). Returns the steps run."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=COPY_LEARNING_RATE, betas=(0.9, 0.95), weight_decay=0.0)
    started = time.perf_counter()
    recent: list[float] = []
    for step in range(max_steps):
        for group in optimizer.param_groups:
            group["lr"] = COPY_LEARNING_RATE * min(1.0, (step + 1) / WARMUP_STEPS)
        loss, accuracy = task.loss(model)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRADIENT_CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        recent = (recent + [accuracy])[-LOG_EVERY:]
        if (step + 1) % LOG_EVERY == 0:
            print(f"copy warm-up {step + 1}/{max_steps}  loss {loss.item():.3f}  "
                  f"copied {sum(recent) / len(recent):.3f}  elapsed {(time.perf_counter() - started) / 60:.1f} min",
                  flush=True)
            if step + 1 >= COPY_WARMUP_MIN_STEPS and sum(recent) / len(recent) >= COPY_WARMUP_DONE:
                return step + 1
    return max_steps


def learning_rate(step: int, total: int, peak: float = LEARNING_RATE) -> float:
    if step < WARMUP_STEPS:
        return peak * (step + 1) / WARMUP_STEPS
    progress = (step - WARMUP_STEPS) / max(1, total - WARMUP_STEPS)
    floor = peak * FINAL_LEARNING_RATE_FRACTION
    return floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * progress))


# --- training --------------------------------------------------------------------------------


def train(seed: int, out: Path, epochs: int, mix: dict[str, int], threads: int, checkpoint: Path,
          resume: bool, device: str, copy_warmup_steps: int = COPY_WARMUP_STEPS, init_from: Path | None = None,
          peak_learning_rate: float = LEARNING_RATE, max_steps: int | None = None,
          layers: int | None = None, loose_share: float = synthetic_data.phrasing.LOOSE_SHARE) -> None:
    from transformers import AutoProcessor, Gemma4ForConditionalGeneration

    started = time.perf_counter()
    torch.set_num_threads(threads)
    processor = AutoProcessor.from_pretrained(DEFAULT_OUT)

    # 1. The data, generated and tokenised before the clock that matters starts.
    examples = synthetic_data.build_dataset(
        DEFAULT_OUT, seed, mix, workers=threads,
        progress=lambda done, total: print(f"data {done}/{total} episodes", flush=True), loose_share=loose_share)
    tokens = sum(len(e) for e in examples)
    trained = sum(int(e.target.sum()) for e in examples)
    print(f"data: {len(examples)} sequences, {tokens} tokens ({trained} trained) in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    print("mix:", ", ".join(f"{c} {n}" for c, n in synthetic_data.category_counts(examples).items()), flush=True)

    # 2. The model, from the bundle's config with a seeded random init, trained in float32.
    #    Its depth is the checkpoint's it goes on from, unless `layers` asks for more.
    start = checkpoint if resume and checkpoint.exists() else init_from
    start_state = torch.load(start, weights_only=False, map_location=device) if start else None
    layers = layers or (layer_count(start_state["model"]) if start_state else DEFAULT_LAYERS)
    torch.manual_seed(seed)
    model = Gemma4ForConditionalGeneration(tiny_config(processor.tokenizer, layers)).float()
    initialise_for_copying(model)
    model.to(device)
    model.train()
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters", flush=True)
    copy_task = CopyTask(processor.tokenizer, seed)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2 or "embed" in n]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=LEARNING_RATE, betas=(0.9, 0.95), eps=1e-8)

    # 3. A fixed plan: every epoch reshuffles with the seeded generator.
    order = random.Random(seed + 1)
    plan = [step for _ in range(epochs) for step in plan_steps(examples, order)][:max_steps]
    print(f"plan: {len(plan)} steps of ~{TOKENS_PER_STEP} tokens, {epochs} epoch(s)", flush=True)

    # 4. Copying first (or where a checkpoint left off: the plan is the same for the same seed).
    first_step, warmup_steps, minutes_before, rewarm_from = 0, 0, 0.0, None
    if resume and checkpoint.exists():
        state = start_state
        model.load_state_dict(state["model"])
        if state["optimizer"] is not None:
            optimizer.load_state_dict(state["optimizer"])
        else:  # a carried checkpoint (--carry): Adam's moments start afresh
            rewarm_from = state["step"]
        copy_task.rng.setstate(state["copy_rng"])
        first_step, warmup_steps, minutes_before = state["step"], state["warmup_steps"], state["minutes"]
        print(f"resumed from {checkpoint} at step {first_step}", flush=True)
    elif init_from is not None:
        # A further stage: the weights of an earlier run (which did the copy warm-up), fresh
        # data from this seed, a fresh schedule.
        state = start_state
        if layer_count(state["model"]) < layers:
            print(f"growing {layer_count(state['model'])} layers to {layers}", flush=True)
            state["model"] = grow_layers(state["model"], layers)
        model.load_state_dict(state["model"])
        minutes_before, warmup_steps = state["minutes"], state["warmup_steps"]
        print(f"continuing from the weights in {init_from} ({minutes_before:.1f} min of training)", flush=True)
        save_checkpoint(checkpoint, model, None, copy_task, 0, warmup_steps, minutes_before)
    else:
        warmup_steps = copy_warmup(model, copy_task, copy_warmup_steps)
        save_checkpoint(checkpoint, model, None, copy_task, 0, warmup_steps, (time.perf_counter() - started) / 60)

    # 5. The loop: accumulate summed losses over the step's micro-batches, then normalise by
    #    the number of scored tokens so steps of different sizes weigh the same.
    pad_id = processor.tokenizer.pad_token_id
    train_started = time.perf_counter()
    seen_tokens, window_loss, window_scored, final_loss, copied = 0, 0.0, 0, float("nan"), float("nan")
    for step in range(first_step, len(plan)):
        micro_batches = plan[step]
        rate = learning_rate(step, len(plan), peak_learning_rate)
        if rewarm_from is not None:  # fresh moments: a short warm-up, as at the start
            rate *= min(1.0, (step - rewarm_from + 1) / WARMUP_STEPS)
        for group in optimizer.param_groups:
            group["lr"] = rate
        scored_in_step = sum(int(examples[i].target[1:].sum()) for batch in micro_batches for i in batch)
        for batch in micro_batches:
            inputs, ids, target = collate([examples[i] for i in batch], pad_id)
            loss = summed_loss(model, inputs, ids, target)
            (loss / scored_in_step).backward()
            window_loss += loss.item()
            seen_tokens += sum(len(examples[i]) for i in batch)
        window_scored += scored_in_step
        copy_loss, copied = copy_task.loss(model)  # keeps the copying sharp while the rest is learned
        (COPY_WEIGHT * copy_loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRADIENT_CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if (step + 1) % LOG_EVERY == 0 or step + 1 == len(plan):
            elapsed = time.perf_counter() - train_started
            final_loss = window_loss / window_scored
            print(f"step {step + 1}/{len(plan)}  loss {final_loss:.4f}  "
                  f"copied {copied:.2f}  lr {learning_rate(step, len(plan), peak_learning_rate):.2e}  {seen_tokens / elapsed:.0f} tokens/s  "
                  f"elapsed {elapsed / 60:.1f} min", flush=True)
            window_loss, window_scored = 0.0, 0
        if (step + 1) % CHECKPOINT_EVERY == 0:
            save_checkpoint(checkpoint, model, optimizer, copy_task, step + 1, warmup_steps,
                            minutes_before + (time.perf_counter() - started) / 60)

    # 6. Save in bfloat16 next to the bundle's own tokenizer, processor and template; the last
    #    checkpoint (float32) is what a further stage starts from (--init-from).
    total_minutes = minutes_before + (time.perf_counter() - started) / 60
    save_checkpoint(checkpoint, model, optimizer, copy_task, len(plan), warmup_steps, total_minutes)
    summary = {"seed": seed, "epochs": epochs, "copy_warmup_steps": warmup_steps, "steps": len(plan),
               "sequences": len(examples), "tokens": tokens, "final_loss": round(final_loss, 4),
               "final_copy_accuracy": round(copied, 3), "total_minutes": round(total_minutes, 1),
               "parameters": sum(p.numel() for p in model.parameters()),
               "continued_from": str(init_from) if init_from else None, "peak_learning_rate": peak_learning_rate}
    print(f"final loss {final_loss:.4f}; total {summary['total_minutes']} min", flush=True)
    save(model, processor, out, summary)


LAYERS_KEY = "model.language_model.layers."
PER_LAYER_KEYS = ("model.language_model.embed_tokens_per_layer.weight",  # (vocab, layers × width): columns
                  "model.language_model.per_layer_model_projection.weight")  # (layers × width, hidden): rows
SILENT_NORMS = ("post_attention_layernorm", "post_feedforward_layernorm", "post_per_layer_input_norm")


def layer_count(state: dict) -> int:
    return len({key[len(LAYERS_KEY):].split(".")[0] for key in state if key.startswith(LAYERS_KEY)})


def grow_layers(state: dict, layers: int) -> dict:
    """A deeper model that computes exactly what `state` computes: new (sliding, full) pairs
    go in the middle, each a copy of the old pair of its kind with the norms on its outputs at
    zero, so every new layer adds nothing to the residual stream until training opens it.
    More depth without starting over (what earlier stages learned stays)."""
    old = layer_count(state)
    if layers <= old or (layers - old) % 2:
        raise ValueError(f"can grow {old} layers by pairs only, not to {layers}")
    middle = old // 2 - old // 2 % 2  # after a whole (sliding, full) pair
    order = list(range(middle)) + [i % 2 for i in range(layers - old)] + list(range(middle, old))
    new_ones = set(range(middle, middle + layers - old))
    grown = {key: value for key, value in state.items() if not key.startswith(LAYERS_KEY)}
    for target, source in enumerate(order):
        prefix = f"{LAYERS_KEY}{source}."
        for key, value in state.items():
            if key.startswith(prefix):
                name = key[len(prefix):]
                value = value.clone()
                if target in new_ones and name.split(".")[0] in SILENT_NORMS:
                    value.zero_()
                grown[f"{LAYERS_KEY}{target}.{name}"] = value
    width = state[PER_LAYER_KEYS[0]].shape[1] // old
    columns = torch.cat([torch.arange(s * width, (s + 1) * width) for s in order])
    grown[PER_LAYER_KEYS[0]] = state[PER_LAYER_KEYS[0]][:, columns].clone()
    grown[PER_LAYER_KEYS[1]] = state[PER_LAYER_KEYS[1]][columns].clone()
    return grown


def save_checkpoint(path: Path, model, optimizer, copy_task: CopyTask, step: int, warmup_steps: int,
                    minutes: float) -> None:
    """Everything a resumed run needs; written to a temporary name first, so a run killed
    while saving keeps the previous checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict() if optimizer else None,
                "copy_rng": copy_task.rng.getstate(), "step": step, "warmup_steps": warmup_steps,
                "minutes": minutes}, partial)
    partial.replace(path)
    print(f"checkpoint: step {step} -> {path}", flush=True)


def carry(checkpoint: Path, destination: Path) -> None:
    """The checkpoint without the optimizer's state (a third of its size): small enough to
    commit, so that a run goes on on another machine (copied to `out/`, then `--resume`; Adam's
    moments start afresh with a short warm-up) or a further stage starts from it
    (`--init-from DESTINATION`). See checkpoints/README.md."""
    state = torch.load(checkpoint, weights_only=False, map_location="cpu")
    state["optimizer"] = None
    destination.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, destination)
    print(f"{checkpoint} (step {state['step']}, {state['minutes']:.1f} min) -> {destination}, "
          f"{destination.stat().st_size / 1e6:.1f} MB", flush=True)


def save(model, processor, out: Path, summary: dict) -> None:
    """The weights, and training.json: its presence tells the app (status line) and the
    tests that the bundled model is trained."""
    if out.resolve() != DEFAULT_OUT.resolve():
        shutil.copytree(DEFAULT_OUT, out, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("model.safetensors", "training.json"))
    model = model.to("cpu", torch.bfloat16).eval()
    model.generation_config = generation_config(processor.tokenizer)
    model.save_pretrained(out)
    (out / "training.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    size = (out / "model.safetensors").stat().st_size
    print(f"wrote {out} ({size / 2**20:.1f} MB)", flush=True)


# --- held-out evaluation --------------------------------------------------------------------


def run_turn(runner, text: str, tools: list[str], thinking: bool = False, media=(), max_new_tokens: int = 160):
    """One turn through the app's loop, greedy; returns the settled assistant turn."""
    from gemma4_ui.core.conversation import Conversation, UserTurn
    from gemma4_ui.core.options import ChatOptions

    options = ChatOptions(enabled_tools=tools, thinking=thinking, temperature=0.0, max_new_tokens=max_new_tokens)
    *_, last = runner.run(Conversation([UserTurn(text, list(media))]), options, threading.Event())
    return last.conversation.turns[-1]


def copied(turn, name: str, expected: dict) -> bool:
    """Exactly one call, to `name`, with exactly the `expected` arguments (a weather call may
    leave out the default unit)."""
    calls = [c for r in turn.rounds for c in r.calls]
    if len(calls) != 1 or calls[0].name != name:
        return False
    arguments = dict(calls[0].arguments or {})
    if name == "get_current_weather" and "unit" not in expected and arguments.get("unit") == "celsius":
        arguments.pop("unit")
    return arguments == expected


def answer_uses_result(turn, values) -> bool:
    """The final answer quotes every value the tool returned that the answer is about."""
    return bool(turn.rounds) and all(str(value) in turn.content for value in values(turn.rounds[0].results[0]))


def ended_cleanly(turn, max_new_tokens: int) -> bool:
    """Every round ended by `<|tool_response>`, the answer by `<turn|>`, well before the limit
    and with nothing the parser had to report."""
    stats = [r.stats for r in turn.rounds] + [turn.stats]
    return (not turn.notice and all(r.stats.stop_reason == "tool_call" for r in turn.rounds)
            and turn.stats.stop_reason == "stop" and all(s.generated_tokens < max_new_tokens * 0.8 for s in stats))


def thought_as_asked(turn, thinking: bool) -> bool:
    """With thinking on, a short non-empty thought before the call (or the answer) and before
    the answer; with it off, no thought at all."""
    thoughts = [r.reasoning for r in turn.rounds] + [turn.reasoning]
    if not thinking:
        return not any(t.strip() for t in thoughts)
    return all(0 < len(t.strip()) <= 400 for t in thoughts)


def show_samples(runner) -> None:
    """Raw greedy outputs (special tokens kept) of a few turns, round by round."""
    from gemma4_ui.media.decoding import load_media

    examples = ROOT / "assets" / "examples"
    samples = [
        ("weather, thinking on", "What's the weather in Ouagadougou?", ["get_current_weather"], True, [], 160),
        ("image", "What did I send?", [], False, [load_media(str(examples / "shapes.png"))], 160),
        ("long story", "Write a long story.", [], False, [], 1024),
    ]
    for title, text, tools, thinking, media, limit in samples:
        turn = run_turn(runner, text, tools, thinking, media, limit)
        print(f"--- {title}: {text}")
        for index, round_ in enumerate(turn.rounds):
            print(f"[round {index + 1} raw] {round_.raw}")
            print(f"[tool response] {round_.results[0].response}")
        raw = turn.raw if len(turn.raw) < 400 else f"{turn.raw[:200]} [...] ({turn.stats.generated_tokens} tokens)"
        print(f"[final raw] {raw}", flush=True)


TOOL_VALUES = {  # what an answer must quote from each tool's response
    "get_current_weather": lambda result: (result.response["temperature"], result.response["weather"]),
    "calculator": lambda result: (result.response["result"],),
    "current_time": lambda result: (result.response["time"],),
    "convert_units": lambda result: (result.response["result"],),
}
KINDS = {"get_current_weather": "weather", "calculator": "calculator", "current_time": "time",
         "convert_units": "units"}


def held_out_cases(rng: random.Random) -> list[tuple[str, str, str, dict, list[str]]]:
    """(kind, question, tool, expected arguments, enabled tools): names and zones the training
    data never holds, asked in phrasing families it never holds (`phrasing.HELD_OUT`)."""
    from scripts.phrasing import HELD_OUT

    all_tools = list(synthetic_data.BUILTIN_TOOLS)
    zones = synthetic_data.training_time_zones()
    exchanges = [synthetic_data.weather_exchange(rng, city=city, split=HELD_OUT)
                 for city in synthetic_data.HELD_OUT_CITIES + synthetic_data.MORE_HELD_OUT_CITIES]
    exchanges += [synthetic_data.calculator_exchange(rng, HELD_OUT) for _ in range(40)]
    exchanges += [synthetic_data.convert_exchange(rng, HELD_OUT) for _ in range(30)]
    exchanges += [synthetic_data.time_exchange(rng, zones, HELD_OUT, zone=rng.choice((zone, zone_city(zone))))
                  for zone in rng.sample(synthetic_data.held_out_time_zones(), 30)]
    cases = []
    for i, exchange in enumerate(exchanges):
        name, arguments = exchange.calls[0]
        tools = [name] if i % 3 == 0 else all_tools if i % 3 == 1 else sorted(
            {name} | {t for t in all_tools if rng.random() < 0.5})
        cases.append((KINDS[name], exchange.user.text, name, arguments, tools))
    return cases


def zone_city(zone: str) -> str:
    return synthetic_data.zone_city(zone)


def tool_off_cases(rng: random.Random) -> list[tuple[str, str, list[str]]]:
    """(tool, question, enabled tools): a held-out question whose tool is off, others random."""
    from scripts.phrasing import HELD_OUT

    zones = synthetic_data.held_out_time_zones()
    cases = []
    for tool in synthetic_data.BUILTIN_TOOLS:
        for _ in range(12):
            exchange, _ = synthetic_data.tool_missing_exchange(rng, list(zones), HELD_OUT, tool)
            others = [t for t in synthetic_data.BUILTIN_TOOLS if t != tool and rng.random() < 0.5]
            cases.append((tool, exchange.user.text, others))
    return cases


def served_spec(spec):
    """The prompt as an OpenAI-compatible server renders this conversation: no thought kept
    from before a call (the API has no field for it) and each tool response as the JSON text
    of a `tool` message (what `engine_openai` sends)."""
    from dataclasses import replace

    from gemma4_ui.engines.openai import tool_message_content

    def served(message: dict) -> dict:
        if "tool_calls" not in message:
            return message
        message = {key: value for key, value in message.items() if key != "reasoning"}
        message["tool_responses"] = [{**r, "response": tool_message_content(r["response"])}
                                     for r in message["tool_responses"]]
        return message

    return replace(spec, messages=[served(m) for m in spec.messages])


def served_engine(engine):
    """`engine`, prompting with what a server would render (see served_spec)."""
    from dataclasses import replace

    stream = engine.stream
    engine.stream = lambda request, cancel: stream(replace(request, spec=served_spec(request.spec)), cancel)
    return engine


MEDIA_CASES = (  # files from assets/examples and the acknowledgement each must get
    (("shapes.png",), "one image"), (("shapes.png", "street.jpg"), "two images"),
    (("speech.wav",), "an audio clip"), (("bouncing_ball.mp4",), "a video"),
)


def evaluate(out: Path, threads: int, seed: int = 12345) -> None:
    """Greedy, through the app's own engine and tool loop, on what training never showed:
    the share of exact argument copies, of answers that quote the tool's result, of thoughts
    present exactly when asked for, of media acknowledged, and of replies that end cleanly."""
    from gemma4_ui.engines.local.engine import LocalEngine
    from gemma4_ui.media.decoding import load_media
    from gemma4_ui.tools.registry import default_registry
    from gemma4_ui.turns import TurnRunner

    torch.set_num_threads(threads)
    runner = TurnRunner(LocalEngine(str(out), device="cpu").load(), default_registry())
    served = TurnRunner(served_engine(LocalEngine(str(out), device="cpu").load()), default_registry())
    show_samples(runner)
    rng = random.Random(seed)
    results: dict[str, list[bool]] = {}

    def record(kind: str, ok: bool, detail) -> None:
        results.setdefault(kind, []).append(ok)
        if not ok:
            print(f"  miss ({kind}): {detail}", flush=True)

    limit = 160
    for kind, text, name, expected, tools in held_out_cases(rng):
        thinking = rng.random() < 0.5
        turn = run_turn(runner, text, tools, thinking=thinking, max_new_tokens=limit)
        calls = [(c.name, c.arguments) for r in turn.rounds for c in r.calls]
        ok = copied(turn, name, expected)
        record(f"{kind} arguments exact", ok, f"{text!r}: {expected!r} -> {calls or turn.content[:80]}")
        if ok:
            record(f"{kind} answer quotes the result", answer_uses_result(turn, TOOL_VALUES[name]),
                   f"{turn.rounds[0].results[0].response} -> {turn.content[:120]!r}")
        record(f"thinking {'on' if thinking else 'off'}: thought as asked", thought_as_asked(turn, thinking),
               f"{text!r}: {[r.reasoning[:60] for r in turn.rounds] + [turn.reasoning[:60]]}")
        record("ends cleanly", ended_cleanly(turn, limit), f"{text!r}: {turn.notice or turn.stats.stop_reason}")
    for tool, text, tools in tool_off_cases(rng):
        thinking = rng.random() < 0.5
        turn = run_turn(runner, text, tools, thinking=thinking, max_new_tokens=limit)
        record("tool off: says which tool", not turn.rounds and turn.content == synthetic_data.tool_missing_answer(tool),
               f"{text!r} ({tool} off): {[c.name for r in turn.rounds for c in r.calls]} {turn.content[:80]!r}")
        record("ends cleanly", ended_cleanly(turn, limit), f"{text!r}: {turn.notice or turn.stats.stop_reason}")
    # Through a server (the remote engine): every fourth case again, rendered as a server does.
    for kind, text, name, expected, tools in held_out_cases(random.Random(seed))[::4]:
        thinking = rng.random() < 0.5
        turn = run_turn(served, text, tools, thinking=thinking, max_new_tokens=limit)
        if copied(turn, name, expected):
            record(f"served: {kind} answer quotes the result", answer_uses_result(turn, TOOL_VALUES[name]),
                   f"{turn.rounds[0].results[0].response} -> {turn.content[:120]!r}")
        record("served: ends cleanly", ended_cleanly(turn, limit), f"{text!r}: {turn.notice or turn.stats.stop_reason}")
    # Anything else a visitor might type: declined or answered, but ended cleanly and tool-free.
    # Asked with no tool enabled (the app's default) and with every tool on.
    for text in synthetic_data.HELD_OUT_REQUESTS + synthetic_data.HELD_OUT_EVERYDAY:
        for thinking, tools in itertools.product((False, True), ([], list(synthetic_data.BUILTIN_TOOLS))):
            # A decline with its thought is ~135 tokens.
            turn = run_turn(runner, text, tools, thinking=thinking, max_new_tokens=256)
            record("other requests: ends cleanly, no call", ended_cleanly(turn, 256) and not turn.rounds,
                   f"{text!r} ({'thinking' if thinking else 'plain'}): {turn.notice or turn.stats.stop_reason} "
                   f"{[c.name for r in turn.rounds for c in r.calls]} {turn.content[:60]!r}")
            record(f"thinking {'on' if thinking else 'off'}: thought as asked", thought_as_asked(turn, thinking),
                   f"{text!r}: {turn.reasoning[:60]!r}")
    examples = ROOT / "assets" / "examples"
    for files, expected in MEDIA_CASES:
        for thinking in (False, True):
            turn = run_turn(runner, "What did I send?", [], thinking=thinking,
                            media=[load_media(str(examples / f)) for f in files], max_new_tokens=limit)
            # The whole answer: "I received an image and a video." names a video but miscounts.
            record("media acknowledged", turn.content == f"I received {expected}.", f"{files} -> {turn.content[:80]!r}")
            record(f"thinking {'on' if thinking else 'off'}: thought as asked", thought_as_asked(turn, thinking),
                   f"{files}: {turn.reasoning[:60]!r}")
            record("ends cleanly", ended_cleanly(turn, limit), f"{files}: {turn.notice or turn.stats.stop_reason}")
    print("--- held-out behaviour (greedy)", flush=True)
    for kind, oks in results.items():
        print(f"{kind}: {sum(oks)}/{len(oks)} ({100 * sum(oks) / len(oks):.0f}%)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--mix-scale", type=float, default=1.0, help="scale every category's count (quick runs)")
    parser.add_argument("--mix", action="append", default=[], metavar="CATEGORY=N",
                        help="this many episodes of a category, after --mix-scale (repeatable)")
    parser.add_argument("--threads", type=int, default=THREADS, help="CPU threads (and data workers)")
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "out" / "train-checkpoint.pt",
                        help="where progress is saved every few minutes")
    parser.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda where a GPU is available")
    parser.add_argument("--copy-warmup-steps", type=int, default=COPY_WARMUP_STEPS, help="at most (quick runs)")
    parser.add_argument("--init-from", type=Path, help="start from the weights in this checkpoint (a further "
                        "stage of training on fresh data: no copy warm-up, a new schedule)")
    parser.add_argument("--steps", type=int, help="train on the first this many steps of the plan only (the "
                        "schedule fits them; with --resume, a shorter run than the one started)")
    parser.add_argument("--learning-rate", type=float, default=LEARNING_RATE, help="peak learning rate")
    parser.add_argument("--layers", type=int, help="decoder layers (default: the checkpoint's; more than "
                        "--init-from's grows it, see grow_layers)")
    parser.add_argument("--loose-share", type=float, default=synthetic_data.phrasing.LOOSE_SHARE, help="share of the training requests "
                        "in loosened wording (scripts/phrasing.py's loosen)")
    parser.add_argument("--eval", action="store_true", help="evaluate the model at --out instead of training")
    parser.add_argument("--carry", type=Path, metavar="DESTINATION",
                        help="copy --checkpoint without the optimizer's state, to commit and go on elsewhere")
    args = parser.parse_args()
    if args.carry:
        carry(args.checkpoint, args.carry)
    elif args.eval:
        evaluate(args.out, args.threads)
    else:
        mix = {category: max(1, round(n * args.mix_scale)) for category, n in synthetic_data.DEFAULT_MIX.items()}
        for item in args.mix:
            category, _, count = item.rpartition("=")
            if category not in mix or not count.isdigit():
                parser.error(f"--mix {item!r}: expected CATEGORY=N with CATEGORY one of {', '.join(mix)}")
            mix[category] = int(count)
        train(args.seed, args.out, args.epochs, mix, args.threads, args.checkpoint, args.resume, args.device,
              args.copy_warmup_steps, args.init_from, args.learning_rate, args.steps, args.layers,
              args.loose_share)


if __name__ == "__main__":
    main()
