"""A reply with real structure (paragraphs, lists, code blocks) from the bundled model: its
random weights write noise, so the benchmark holds `generate` to the tokens of a prepared
markdown text. The model still runs every step (the forward passes, the streamer, the
app's parser and display are all real); only the choice of the next token is fixed, with
transformers' own `prefix_allowed_tokens_fn`.

The same text makes a long chat to stream into: answers with code blocks, as a chat about
code has.
"""

from __future__ import annotations

SECTION = '''Here is step {n}: a function that reads the file and counts words.

```python
def count_words(path: str) -> dict[str, int]:
    """Count each word in the file at `path`."""
    counts: dict[str, int] = {{}}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            for word in line.split():
                counts[word.lower()] = counts.get(word.lower(), 0) + 1
    return counts
```

It reads the file **line by line**, so a large file never sits in memory at once:

- `line.split()` cuts at any whitespace;
- `word.lower()` makes *Word* and *word* the same key;
- `counts.get(word, 0)` starts a new word at zero.

'''


def markdown_text(sections: int, start: int = 1) -> str:
    return "".join(SECTION.format(n=n) for n in range(start, start + sections))


def reply_tokens(tokenizer, count: int) -> list[int]:
    """Exactly `count` token ids of the markdown text (as many sections as it takes)."""
    ids: list[int] = []
    sections = 1
    while len(ids) < count:
        sections *= 2
        ids = tokenizer.encode(markdown_text(sections), add_special_tokens=False)
    return ids[:count]


# The scripted reply does not depend on the prompt, so the model reads only its last tokens:
# on the CPU the bundled model needs ~40 s to read a 40-message chat (19k tokens) and then
# writes ~13 tokens/s, which would make the browser figures the model's, not the display's.
PROMPT_TAIL = 64


def hold_to_script(model, tokenizer, count: int) -> None:
    """Make every `generate` on `model` write the first `count` tokens of the markdown text,
    from the last PROMPT_TAIL tokens of the prompt (the app's own prompt, its counts and
    stats unchanged: only what the model reads is cut)."""
    script = reply_tokens(tokenizer, count)
    generate = model.generate

    def scripted_generate(*args, **kwargs):
        full_length = kwargs["input_ids"].shape[-1]
        for name, value in list(kwargs.items()):  # input_ids, attention_mask, token type ids...
            if getattr(value, "ndim", 0) == 2 and value.shape[-1] == full_length:
                kwargs[name] = value[:, -PROMPT_TAIL:]
        prompt_length = kwargs["input_ids"].shape[-1]

        def allowed(_batch, ids):
            step = ids.shape[-1] - prompt_length
            return [script[step % len(script)]]

        kwargs["prefix_allowed_tokens_fn"] = allowed
        return generate(*args, **kwargs)

    model.generate = scripted_generate


def long_chat(messages: int, max_new_tokens: int = 1024):
    """A conversation of `messages` messages (user and assistant in turn), the answers about
    code with code blocks, as the app saves it (for its "Load a conversation"), with its
    settings: loading it sets the reply length to `max_new_tokens`."""
    from gemma4_ui.core.conversation import AssistantTurn, Conversation, UserTurn
    from gemma4_ui.core.transcript import dumps
    from gemma4_ui.turns import ChatOptions

    turns = []
    for n in range(messages // 2):
        turns.append(UserTurn(f"Question {n + 1}: how do I count the words in a file, step {n + 1}?"))
        turns.append(AssistantTurn(content=markdown_text(2, start=n + 1).strip()))
    return dumps(Conversation(turns), ChatOptions(max_new_tokens=max_new_tokens))
