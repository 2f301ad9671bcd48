"""Token accounting and the three layers, checked against the real processor's output."""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pytest
import soundfile
from PIL import Image

from gemma4_ui.config import MediaLimits
from gemma4_ui.core.conversation import Conversation, UserTurn
from gemma4_ui.core.prompt import model_inputs, template_text
from gemma4_ui.inspector import layers as inspector
from gemma4_ui.media.decoding import load_media
from gemma4_ui.tools.registry import default_registry
from gemma4_ui.turns import ChatOptions, build_spec


def make_image(path, size):
    Image.new("RGB", size, (120, 30, 200)).save(path)
    return load_media(str(path))


def make_audio(path, seconds, limits=MediaLimits()):
    rate = 16000
    t = np.arange(int(seconds * rate)) / rate
    soundfile.write(path, (0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), rate)
    return load_media(str(path), limits)


def counts_for(processor, media, text="Describe.", budget=280, tools=None, thinking=False):
    conversation = Conversation([UserTurn(text, media)])
    options = ChatOptions(image_budget=budget, enabled_tools=tools or [], thinking=thinking)
    spec = build_spec(conversation, options, default_registry())
    inputs = model_inputs(processor, spec)
    counts = inspector.count_tokens(processor, inputs, conversation.media(), budget, 131072)
    return inputs, counts, spec


def id_counts(processor, inputs):
    ids = inputs["input_ids"][0].tolist()
    types = inputs["mm_token_type_ids"][0].tolist()
    special = set(processor.tokenizer.all_special_ids)
    image_id = processor.tokenizer.convert_tokens_to_ids("<|image|>")
    audio_id = processor.tokenizer.convert_tokens_to_ids("<|audio|>")
    video_id = processor.tokenizer.convert_tokens_to_ids("<|video|>")
    return {
        "total": len(ids),
        "image": ids.count(image_id),
        "audio": ids.count(audio_id),
        "video": ids.count(video_id),
        "control": sum(1 for i, t in zip(ids, types) if i in special and t == 0),
        "types": {k: types.count(k) for k in (1, 2, 3)},
    }


def assert_consistent(processor, inputs, counts):
    expected = id_counts(processor, inputs)
    assert counts.total == expected["total"]
    assert counts.image_tokens == expected["image"] == expected["types"][1]
    assert counts.video_tokens == expected["video"] == expected["types"][2]
    assert counts.audio_tokens == expected["audio"] == expected["types"][3]
    # Each video frame's <|image> … <image|> pair counts on the video's row, not as control tokens.
    frames = sum(int(n) for n in inputs.get("num_frames_per_video", []))
    assert counts.control == expected["control"] - 2 * frames
    markers = sum(v.markers for v in counts.videos)
    assert (counts.text + counts.control + counts.image_tokens + counts.audio_tokens + counts.video_tokens + markers
            == counts.total)


def test_text_only(processor):
    inputs, counts, _ = counts_for(processor, [], text="Hello there, how are you?", tools=["calculator"],
                                   thinking=True)
    assert_consistent(processor, inputs, counts)
    assert counts.text > 0 and counts.control > 0 and not counts.images


@pytest.mark.parametrize("budget", [70, 280, 1120])
def test_images_of_different_aspect_ratios(processor, tmp_path, budget):
    sizes = [(640, 480), (480, 800), (1600, 300)]
    media = [make_image(tmp_path / f"i{n}.png", size) for n, size in enumerate(sizes)]
    inputs, counts, _ = counts_for(processor, media, budget=budget)
    assert_consistent(processor, inputs, counts)
    assert [i.name for i in counts.images] == ["i0.png", "i1.png", "i2.png"]
    for image in counts.images:
        width, height = image.resized
        assert width % 48 == 0 and height % 48 == 0
        assert image.soft_tokens == (width // 16) * (height // 16) // 9 <= budget
    if budget == 280:
        assert counts.images[0].soft_tokens == 266  # the protocol doc's 640x480 example


@pytest.mark.parametrize("count", [1, 2])
def test_one_or_two_images(processor, tmp_path, count):
    media = [make_image(tmp_path / f"i{n}.png", (300 + 100 * n, 300)) for n in range(count)]
    inputs, counts, _ = counts_for(processor, media)
    assert_consistent(processor, inputs, counts)
    assert len(counts.images) == count


@pytest.mark.parametrize("seconds,tokens,cut", [(0.5, 13, False), (10, 250, False), (45, 750, True)])
def test_audio_clips(processor, tmp_path, seconds, tokens, cut):
    item = make_audio(tmp_path / "a.wav", seconds)
    inputs, counts, _ = counts_for(processor, [item])
    assert_consistent(processor, inputs, counts)
    (clip,) = counts.audio
    assert clip.soft_tokens == tokens
    assert bool(clip.warning) == cut


def test_video(processor):
    from conftest import ROOT

    item = load_media(str(ROOT / "assets" / "examples" / "bouncing_ball.mp4"))
    inputs, counts, _ = counts_for(processor, [item])
    assert_consistent(processor, inputs, counts)
    (video,) = counts.videos
    assert video.frames == len(item.video_metadata.frames_indices)
    assert video.soft_tokens == video.frames * video.tokens_per_frame
    expanded = inspector.expanded_layer(processor, inputs)
    assert "00:00 <|image>[<|video|> × " in expanded
    # The video's row holds its timestamps and frame markers: exactly the tokens the processor
    # wrote for it, one `mm:ss` per frame, from 00:00 to the last sampled frame's time.
    tokenizer = processor.tokenizer
    frame = f"{tokenizer.boi_token}{'<|video|>' * video.tokens_per_frame}{tokenizer.eoi_token}"
    written = " ".join(f"{stamp} {frame}" for stamp in video.timestamps)
    assert written in tokenizer.decode(inputs["input_ids"][0], skip_special_tokens=False)
    assert len(tokenizer(written, add_special_tokens=False)["input_ids"]) == video.tokens
    last = item.video_metadata.frames_indices[-1] / item.video_metadata.fps
    assert video.timestamps[0] == "00:00" and video.timestamps[-1] == f"{int(last // 60):02d}:{int(last % 60):02d}"
    assert video.timestamps == sorted(video.timestamps) and len(video.timestamps) == video.frames


def test_highlighted_template_equals_the_raw_text(processor, tmp_path):
    media = [make_image(tmp_path / "i.png", (64, 64))]
    _, _, spec = counts_for(processor, media, tools=["get_current_weather"], thinking=True)
    raw = template_text(processor, spec)
    spans = inspector.template_spans(processor, spec, raw)
    assert "".join(text for text, _ in spans) == raw
    kinds = {kind for _, kind in spans if kind}
    assert {"turn", "thinking", "tool", "string", "media"} <= kinds


def test_expanded_layer_collapses_runs_and_can_show_ids(processor, tmp_path):
    inputs, counts, _ = counts_for(processor, [make_image(tmp_path / "i.png", (640, 480))])
    text = inspector.expanded_layer(processor, inputs)
    assert "<|image>[<|image|> × 266]<image|>" in text
    with_ids = inspector.expanded_layer(processor, inputs, show_ids=True)
    image_id = processor.tokenizer.convert_tokens_to_ids("<|image|>")
    assert f"[<|image|> × 266 | id {image_id}]" in with_ids


def test_messages_layer_shows_media_as_descriptors(processor, tmp_path):
    item = make_image(tmp_path / "photo.png", (640, 480))
    _, _, spec = counts_for(processor, [item])
    data = json.loads(inspector.messages_layer(spec, [item]))
    part = data["messages"][0]["content"][0]
    assert part["type"] == "image" and part["image"]["name"] == "photo.png" and part["image"]["width"] == 640
    assert data["enable_thinking"] is False


def test_counts_html_has_the_meter(processor):
    _, counts, _ = counts_for(processor, [])
    html = inspector.counts_html(counts)
    assert "ctx-meter" in html and "131,072" in html


def test_the_meter_measures_against_the_apps_prompt_limit_where_it_is_below_the_context(processor, tiny_engine):
    from dataclasses import replace

    _, counts, _ = counts_for(processor, [])
    html = inspector.counts_html(replace(counts, prompt_limit=8192))
    assert f"{counts.total:,} / 8,192 tokens ({counts.total / 8192:.2%}) of this app&#x27;s prompt limit; the " \
           "model&#x27;s context is 131,072" in html
    assert f"width:{counts.total / 8192 * 100:.2f}%" in html
    assert tiny_engine.prompt_limit == 8192, "on the CPU, by default"


def test_counts_table_has_a_details_column_only_when_a_part_has_details(processor, tmp_path):
    import re

    def columns(html: str) -> set[int]:
        return {len(re.findall(r"<t[dh]", row)) for row in re.findall(r"<tr>(.*?)</tr>", html)}

    assert columns(inspector.counts_html(counts_for(processor, [])[1])) == {2}
    with_image = inspector.counts_html(counts_for(processor, [make_image(tmp_path / "p.png", (640, 480))])[1])
    assert columns(with_image) == {3} and "<th>Details</th>" in with_image and "640×480" in with_image


def test_the_inspectors_cached_counting_equals_the_real_processor(processor, tmp_path):
    """The inspector counts with a copy of the processor that expands each medium once; its
    ids must equal the real processor's, token for token, for every kind of media, twice."""
    from conftest import ROOT

    media = [make_image(tmp_path / "a.png", (640, 480)), make_image(tmp_path / "b.png", (300, 900)),
             make_audio(tmp_path / "short.wav", 0.7), make_audio(tmp_path / "long.wav", 4.2),
             load_media(str(ROOT / "assets" / "examples" / "bouncing_ball.mp4"))]
    counting = inspector.counting_processor(processor)
    conversation = Conversation([UserTurn("Compare these.", media)])
    for budget in (70, 280, 280):
        spec = build_spec(conversation, ChatOptions(image_budget=budget), default_registry())
        real, cached = model_inputs(processor, spec), model_inputs(counting, spec)
        assert cached["input_ids"].tolist() == real["input_ids"].tolist()
        assert cached["mm_token_type_ids"].tolist() == real["mm_token_type_ids"].tolist()
        assert list(cached["num_frames_per_video"]) == list(real["num_frames_per_video"])


def test_expanded_view_colours_every_token_by_kind(processor, tmp_path):
    import re

    from gemma4_ui.inspector import expanded_view

    media = [make_image(tmp_path / "i.png", (640, 480)), make_audio(tmp_path / "a.wav", 0.2)]
    inputs, counts, _ = counts_for(processor, media, text="Look <b>here</b>")
    view = expanded_view.expanded_html(processor, inputs)
    image_id = processor.tokenizer.convert_tokens_to_ids("<|image|>")
    # The image's run is folded into one line; the short audio run (5 tokens) is not.
    assert re.search(rf"<details class='xv-run xv-image'><summary title='id {image_id} [^']*'>"
                     rf"&lt;\|image\|&gt; × 266</summary>", view)
    assert view.count("class='xv xv-audio' title=") == counts.audio_tokens
    assert view.count("class='xv xv-control' title=") == counts.control and "<b>" not in view
    shown = sum(1 for _ in re.finditer(r"class='xv xv-(text|control|audio)' title='id \d+", view))
    assert shown + counts.image_tokens == counts.total


def one_element_each(pieces: list[str]) -> bool:
    """Each piece parses to exactly one element and nothing beside it (tail_patched_html's
    script counts the page's nodes by pieces)."""
    from html.parser import HTMLParser

    class Depth(HTMLParser):
        def __init__(self):
            super().__init__()
            self.depth, self.tops, self.loose_text = 0, 0, False

        def handle_starttag(self, tag, attrs):
            self.tops += self.depth == 0
            self.depth += 1

        def handle_endtag(self, tag):
            self.depth -= 1

        def handle_data(self, data):
            self.loose_text |= self.depth == 0

    def single(piece: str) -> bool:
        parser = Depth()
        parser.feed(piece)
        return parser.tops == 1 and parser.depth == 0 and not parser.loose_text

    return all(single(piece) for piece in pieces)


def test_layer_one_is_its_json_one_line_a_piece_coloured_and_escaped(processor, tmp_path):
    from gemma4_ui.inspector.pieces import SEPARATOR

    media = [make_image(tmp_path / "i.png", (320, 240))]
    _, _, spec = counts_for(processor, media, text='Look </div><script>alert("x")</script> & 1.5 "quoted"')
    text = inspector.messages_layer(spec, media)
    pieces = inspector.messages_html(text).split(SEPARATOR)
    assert len(pieces) == len(text.splitlines()) and one_element_each(pieces)
    # the pieces read as the JSON, line for line: text and entities only, no markup of the user's
    assert "\n".join(html.unescape(re.sub(r"<[^>]*>", "", piece)) for piece in pieces) == text
    assert "<script>" not in "".join(pieces) and "&lt;/div&gt;&lt;script&gt;" in "".join(pieces)
    key = next(piece for piece in pieces if "enable_thinking" in piece)
    assert "<span class='jk'>&quot;enable_thinking&quot;</span>" in key and "<span class='jc'>" in key


def test_layers_two_and_three_are_pieces_of_one_element_each(processor, tmp_path):
    from gemma4_ui.inspector import expanded_view
    from gemma4_ui.inspector.pieces import SEPARATOR

    media = [make_image(tmp_path / "i.png", (320, 240))]
    inputs, _, spec = counts_for(processor, media, text="Look <b>here</b> & <|turn> there")
    spans = inspector.template_spans(processor, spec, template_text(processor, spec))
    template = inspector.template_html(spans).split(SEPARATOR)
    assert len(template) == len(spans) and one_element_each(template)
    shown = "".join(template)
    assert "<b>" not in shown and "Look &lt;b&gt;here&lt;/b&gt; &amp; &lt;|turn&gt; there" in shown
    assert one_element_each(expanded_view.expanded_html(processor, inputs).split(SEPARATOR))


def test_a_long_prompt_is_coloured_from_a_cut_that_moves_in_whole_blocks(processor):
    from gemma4_ui.inspector import expanded_view
    from gemma4_ui.inspector.expanded_view import CUT_BLOCK, MAX_COLOURED, coloured_from
    from gemma4_ui.inspector.pieces import SEPARATOR

    assert coloured_from(MAX_COLOURED) == 0
    for count in (MAX_COLOURED + 1, 12_345, 20_000, 20_001):
        cut = coloured_from(count)
        assert cut % CUT_BLOCK == 0 and MAX_COLOURED - CUT_BLOCK < count - cut <= MAX_COLOURED
    # typing a draft (a few tokens more) leaves the cut where it was, almost always
    moved = sum(coloured_from(n + 8) != coloured_from(n) for n in range(5_000, 25_000))
    assert moved / 20_000 <= 8 / CUT_BLOCK

    text = " ".join(f"word{i}" for i in range(1500))
    inputs = processor(text=text, return_tensors="pt")
    pieces = expanded_view.expanded_html(processor, inputs).split(SEPARATOR)
    total = inputs["input_ids"].shape[1]
    assert total > MAX_COLOURED and len(pieces) - 1 == total - coloured_from(total)
    early, first = pieces[0], pieces[1]
    shown_from = int(re.search(r"position (\d+)'", first).group(1))
    assert early.startswith("<details class='xv-early'>") and f"{shown_from:,} tokens" in early
    assert shown_from == coloured_from(total)  # text only: one element per token
