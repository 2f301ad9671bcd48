"""Draw, speak and animate the sample media in `assets/examples/`, from nothing we download.

    python scripts/make_example_media.py [--out assets/examples] [--seed 0]

What it writes (about 220 KB in all):
  1. `shapes.png`, 640x480: a red circle, a blue square, a green triangle and a yellow star
     on a pale grid, the kind of picture one asks "what shapes and colours do you see?";
  2. `street.jpg`, 480x800 (portrait, so the soft-token count differs from the first): a
     street at dusk with houses, lit windows, a low sun, a tree, a red car and a red light;
  3. `speech.wav`, 16 kHz mono 16-bit: "The weather in Paris is sunny today." spoken by
     `espeak-ng` (en-us); without espeak-ng, a rising then falling tone sequence instead,
     so the script still runs anywhere (the committed file is the spoken one);
  4. `bouncing_ball.mp4`, 4 s, 480x270, 24 fps, H.264 (yuv420p, `faststart`: what
     Chromium, Firefox and Safari all play), encoded by the libx264 that PyAV's wheels
     bundle: an orange ball bouncing off the floor, with a running clock in the corner so
     the frames' mm:ss timestamps can be checked by eye.

Seeded: the same seed draws the same pictures (espeak-ng's voice is deterministic too).
"""

import argparse
import math
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "assets" / "examples"

SENTENCE = "The weather in Paris is sunny today."
SAMPLING_RATE = 16_000  # Gemma 4's audio rate, so the clip goes in without resampling


def draw_shapes(path: Path) -> None:
    from PIL import Image, ImageDraw

    # Drawn at twice the size and scaled down: Pillow draws without anti-aliasing.
    scale = 2
    image = Image.new("RGB", (640 * scale, 480 * scale), (246, 244, 238))
    draw = ImageDraw.Draw(image)
    for x in range(0, image.width, 40 * scale):
        draw.line([(x, 0), (x, image.height)], fill=(225, 222, 214), width=scale)
    for y in range(0, image.height, 40 * scale):
        draw.line([(0, y), (image.width, y)], fill=(225, 222, 214), width=scale)

    def box(x0: int, y0: int, x1: int, y1: int) -> list[int]:
        return [x0 * scale, y0 * scale, x1 * scale, y1 * scale]

    outline = {"outline": (40, 40, 40), "width": 3 * scale}
    draw.ellipse(box(60, 60, 260, 260), fill=(220, 40, 40), **outline)
    draw.rectangle(box(370, 60, 570, 260), fill=(40, 90, 220), **outline)
    draw.polygon([(160 * scale, 290 * scale), (60 * scale, 450 * scale), (260 * scale, 450 * scale)],
                 fill=(40, 170, 70), **outline)
    star = [
        ((470 + r * math.sin(k * math.pi / 5)) * scale, (370 - r * math.cos(k * math.pi / 5)) * scale)
        for k, r in zip(range(10), [90, 38] * 5)
    ]
    draw.polygon(star, fill=(245, 200, 30), **outline)
    image.resize((640, 480), Image.Resampling.LANCZOS).save(path, optimize=True)


def draw_street(path: Path, rng: np.random.Generator) -> None:
    from PIL import Image, ImageDraw

    width, height, horizon = 480, 800, 520
    image = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(image)
    for y in range(horizon):  # dusk sky: deep blue above, orange at the horizon
        t = y / horizon
        draw.line([(0, y), (width, y)], fill=(int(30 + 215 * t), int(40 + 110 * t), int(110 - 40 * t)))
    draw.ellipse([395, 105, 455, 165], fill=(255, 220, 120))  # low sun above the right-hand roof

    # Houses along the street, each with a roof and a grid of windows, some lit.
    x = 0
    for house_width, house_height, wall in [(150, 300, (150, 90, 70)), (170, 380, (200, 180, 150)),
                                            (160, 260, (110, 120, 140))]:
        top = horizon - house_height
        draw.rectangle([x, top, x + house_width, horizon], fill=wall, outline=(30, 30, 30), width=2)
        draw.polygon([(x - 6, top), (x + house_width // 2, top - 60), (x + house_width + 6, top)], fill=(90, 40, 40))
        for wy in range(top + 30, horizon - 70, 70):
            for wx in range(x + 20, x + house_width - 40, 50):
                lit = rng.random() < 0.5
                draw.rectangle([wx, wy, wx + 30, wy + 40], fill=(255, 214, 110) if lit else (50, 60, 80),
                               outline=(30, 30, 30), width=2)
        x += house_width

    # Pavement, road and dashed centre line.
    draw.rectangle([0, horizon, width, horizon + 40], fill=(170, 170, 165))
    draw.rectangle([0, horizon + 40, width, height], fill=(60, 60, 65))
    for lx in range(10, width, 90):
        draw.rectangle([lx, 680, lx + 50, 690], fill=(240, 240, 240))

    # A tree on the pavement, a traffic light, a red car.
    draw.rectangle([395, 420, 410, 545], fill=(100, 70, 40))
    draw.ellipse([350, 330, 455, 440], fill=(40, 120, 50))
    draw.rectangle([30, 380, 38, 545], fill=(50, 50, 50))
    draw.rectangle([18, 330, 50, 410], fill=(30, 30, 30))
    for i, colour in enumerate([(230, 40, 40), (80, 60, 20), (30, 80, 40)]):  # red lit, others dark
        draw.ellipse([24, 336 + 24 * i, 44, 356 + 24 * i], fill=colour)
    draw.rectangle([150, 600, 350, 660], fill=(200, 30, 30))
    draw.polygon([(185, 600), (210, 560), (290, 560), (320, 600)], fill=(200, 30, 30))
    draw.polygon([(200, 598), (218, 568), (282, 568), (305, 598)], fill=(170, 210, 230))
    for wheel_x in (190, 310):
        draw.ellipse([wheel_x - 22, 640, wheel_x + 22, 684], fill=(20, 20, 20))
    image.save(path, quality=85, optimize=True)


def speak(path: Path) -> None:
    """espeak-ng's voice resampled to 16 kHz; a tone sequence when espeak-ng is missing."""
    import soundfile

    espeak = shutil.which("espeak-ng")
    if espeak is None:
        samples = tone_sequence()
    else:
        import librosa

        with tempfile.TemporaryDirectory() as tmp:
            spoken = Path(tmp) / "spoken.wav"
            subprocess.run([espeak, "-v", "en-us", "-s", "150", "-w", str(spoken), SENTENCE], check=True)
            samples, _ = librosa.load(spoken, sr=SAMPLING_RATE, mono=True)
        samples = 0.9 * samples / np.abs(samples).max()
    soundfile.write(path, samples, SAMPLING_RATE, subtype="PCM_16")


def tone_sequence() -> np.ndarray:
    notes_hz = [262, 330, 392, 523, 392, 330, 262]  # C major up and down, 0.4 s each
    t = np.arange(int(0.4 * SAMPLING_RATE)) / SAMPLING_RATE
    envelope = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.02)  # 20 ms fades: no clicks
    return np.concatenate([0.5 * envelope * np.sin(2 * np.pi * hz * t) for hz in notes_hz])


def animate_ball(path: Path) -> None:
    import av
    import cv2

    width, height, fps, seconds = 480, 270, 24, 4
    floor, radius = 240, 22
    with av.open(str(path), "w", options={"movflags": "+faststart"}) as container:
        stream = container.add_stream("libx264", rate=fps, options={"crf": "23", "preset": "medium"})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for index in range(fps * seconds):
            t = index / fps
            frame = np.full((height, width, 3), (235, 225, 215), np.uint8)  # BGR: pale blue-grey
            cv2.rectangle(frame, (0, floor), (width, height), (90, 130, 90), -1)
            # Bounces every second, drifting right; |sin| gives the hop, the floor the contact.
            x = int(40 + (width - 80) * t / seconds)
            y = int(floor - radius - 150 * abs(math.sin(math.pi * t)))
            cv2.ellipse(frame, (x, floor + 4), (radius, 5), 0, 0, 360, (60, 90, 60), -1)  # shadow
            cv2.circle(frame, (x, y), radius, (0, 140, 255), -1, cv2.LINE_AA)  # orange
            cv2.putText(frame, f"{t:0.2f} s", (12, 30), cv2.FONT_HERSHEY_SIMPLEX, 0.8, (40, 40, 40), 2, cv2.LINE_AA)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="bgr24")))
        container.mux(stream.encode(None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)

    draw_shapes(args.out / "shapes.png")
    draw_street(args.out / "street.jpg", rng)
    speak(args.out / "speech.wav")
    animate_ball(args.out / "bouncing_ball.mp4")
    for path in sorted(args.out.iterdir()):
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}  {path.stat().st_size / 1024:.0f} KB")


if __name__ == "__main__":
    main()
