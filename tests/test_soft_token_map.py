"""The soft-token pictures: their geometry and counts against the processor's real output."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT
from PIL import Image
from test_inspector import counts_for, make_audio, make_image

from gemma4_ui.config import IMAGE_BUDGETS
from gemma4_ui.inspector import soft_token_map
from gemma4_ui.media.decoding import load_media

SIZES = [(640, 480), (480, 800), (1600, 300), (37, 911), (2000, 2000), (50, 40)]


@pytest.mark.parametrize("size", SIZES)
def test_image_grid_is_the_processors_patch_grid(processor, size):
    """Per budget: the patch grid the processor really made (`image_position_ids` holds each
    patch's column and row, padding is -1), its patch size (`pixel_values`) and its count."""
    image = Image.new("RGB", size, (10, 200, 30))
    for budget in IMAGE_BUDGETS:
        grid = soft_token_map.image_grid(processor, *size, budget)
        out = processor.image_processor([image], max_soft_tokens=budget, return_tensors="pt")
        positions = out["image_position_ids"][0]
        real = positions[(positions >= 0).all(dim=-1)]
        assert int(real[:, 0].max()) + 1 == grid.patch_columns
        assert int(real[:, 1].max()) + 1 == grid.patch_rows
        assert len(real) == grid.patch_columns * grid.patch_rows
        assert out["pixel_values"].shape[-1] == grid.patch**2 * 3
        assert int(out["num_soft_tokens_per_image"][0]) == grid.soft_tokens <= budget
        assert grid.patch_columns % grid.pool == 0 and grid.patch_rows % grid.pool == 0


@pytest.mark.parametrize("budget", [70, 560])
def test_image_map_counts_equal_the_counts_table(processor, tmp_path, budget):
    media = [make_image(tmp_path / "wide.png", (1600, 300)), make_image(tmp_path / "tall<b>.png", (300, 900))]
    inputs, counts, _ = counts_for(processor, media, budget=budget)
    html = soft_token_map.maps_html(processor, media, counts, budget)
    drawn = [int(n) for n in re.findall(r"data-soft-tokens='(\d+)'", html)]
    assert drawn == [image.soft_tokens for image in counts.images]
    image_id = processor.tokenizer.convert_tokens_to_ids("<|image|>")
    assert sum(drawn) == inputs["input_ids"][0].tolist().count(image_id)
    # One hoverable cell per soft token, and the file name escaped.
    assert html.count("<title>soft token ") == sum(drawn)
    assert "tall&lt;b&gt;.png" in html and "tall<b>" not in html


def test_audio_map_marks_the_frames_and_the_cut(processor, tmp_path):
    short, long = make_audio(tmp_path / "short.wav", 2.0), make_audio(tmp_path / "long.wav", 45)
    inputs, counts, _ = counts_for(processor, [short, long])
    html = soft_token_map.maps_html(processor, [short, long], counts, 280)
    drawn = [int(n) for n in re.findall(r"data-soft-tokens='(\d+)'", html)]
    assert drawn == [clip.soft_tokens for clip in counts.audio] == [50, processor.audio_seq_length]
    short_figure, long_figure = html.split("<figure")[1:]
    assert "stm-cut" not in short_figure and "not heard" not in short_figure
    assert "stm-cut" in long_figure and "cut at 30 s of 45.0 s" in long_figure
    # One shaded band every other frame: the bands count the soft tokens.
    bands = re.search(r"<path d='([^']*)' class='stm-frame'", short_figure).group(1)
    assert bands.count("M") == (50 + 1) // 2


def test_video_strip_shows_each_sampled_frame_with_its_timestamp(processor):
    item = load_media(str(ROOT / "assets" / "examples" / "bouncing_ball.mp4"))
    inputs, counts, _ = counts_for(processor, [item])
    (video,) = counts.videos
    html = soft_token_map.maps_html(processor, [item], counts, 280)
    captions = re.findall(r"<figcaption><b>(\d\d:\d\d)</b> · (\d+)</figcaption>", html)
    assert [stamp for stamp, _ in captions] == video.timestamps
    assert len(captions) == len(item.video_metadata.frames_indices) == video.frames
    assert sum(int(n) for _, n in captions) == video.soft_tokens
    assert f"data-soft-tokens='{video.soft_tokens}'" in html
