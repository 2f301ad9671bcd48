"""Rebuild the bundled tiny Gemma 4 from scratch: every training stage, chained, seeded.

    python scripts/rebuild_tiny_gemma4.py                 # all stages on the CPU (see checkpoints/README.md)
    python scripts/rebuild_tiny_gemma4.py --device cuda   # the same on a GPU
    python scripts/rebuild_tiny_gemma4.py --from-stage 14 # from a carried checkpoint of stage 13
    python scripts/rebuild_tiny_gemma4.py --dry-run       # print the commands only

Each stage is `train_tiny_gemma4.py` with its own seed, mix and schedule, starting from the
weights the stage before it left (`--init-from`). A stage whose output already holds
`training.json` is done and skipped; one with a checkpoint in `out/` resumes from it (`--resume`),
so the command can be stopped and run again at any point. At the end the last stage's weights
are copied into the bundle, `assets/tiny-gemma4/`, and `--eval` measures them.

The stages train on the data generator as it is today, so a rebuild behaves like the bundle
(measured by `--eval`), not bit for bit like it: the earlier stages were first run on earlier
versions of the generator (checkpoints/README.md).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "out"
BUNDLE = ROOT / "assets" / "tiny-gemma4"

# Each stage's own arguments, as run (checkpoints/README.md has what each reached).
STAGES: list[str] = [
    "--seed 0 --mix-scale 0.7",
    "--seed 1 --mix-scale 1.3 --learning-rate 1.5e-3 --steps 480",
    "--seed 2 --mix-scale 1.0 --mix calculator=1400 --mix current_time=800 --learning-rate 1e-3 --steps 360",
    "--seed 3 --mix weather=2600 --mix media=1500 --mix calculator=1000 --mix current_time=700 "
    "--learning-rate 1e-3 --steps 360",
    "--seed 4 --mix weather=3000 --mix media=2000 --mix calculator=1200 --mix current_time=500 "
    "--learning-rate 8e-4 --steps 420",
    "--seed 5 --mix-scale 0.45 --mix weather=1800 --mix media=1100 --mix calculator=450 --mix current_time=250 "
    "--mix 'weather follow-up=150' --learning-rate 8e-4 --steps 300",
    "--seed 6 --mix-scale 0.45 --mix weather=1800 --mix media=1100 --mix calculator=900 --mix current_time=250 "
    "--mix 'weather follow-up=150' --mix 'long story=200' --learning-rate 6e-4 --steps 300",
    "--seed 7 --mix-scale 0.45 --mix weather=1700 --mix media=1100 --mix calculator=900 --mix current_time=250 "
    "--mix chat=700 --mix 'weather follow-up=150' --mix 'long story=200' --learning-rate 5e-4 --steps 300",
    "--seed 8 --mix-scale 0.4 --mix calculator=1600 --mix weather=1200 --mix media=800 --mix current_time=250 "
    "--mix chat=500 --mix 'weather follow-up=100' --mix 'long story=150' --learning-rate 4e-4 --steps 250",
    "--seed 9 --mix-scale 0.3 --mix 'long story=450' --mix media=900 --mix weather=900 --mix calculator=700 "
    "--mix chat=300 --mix current_time=200 --learning-rate 3e-4 --steps 150",
    "--seed 10 --mix-scale 0.35 --mix weather=1300 --mix media=1100 --mix calculator=1100 --mix current_time=300 "
    "--mix chat=400 --mix 'weather follow-up=100' --mix 'long story=200' --learning-rate 5e-4 --steps 300",
    "--seed 11 --mix-scale 0.3 --mix task=700 --mix chat=700 --mix weather=900 --mix media=700 --mix calculator=700 "
    "--mix current_time=250 --mix 'weather follow-up=100' --mix 'long story=200' --learning-rate 5e-4 --steps 300",
    "--seed 12 --mix-scale 0.3 --mix task=600 --mix chat=600 --mix weather=900 --mix media=900 --mix calculator=800 "
    "--mix current_time=250 --mix 'weather follow-up=100' --mix 'long story=150' --learning-rate 5e-4 --steps 300",
    "--seed 13 --mix weather=1300 --mix calculator=1300 --mix convert_units=900 --mix current_time=700 "
    "--mix 'tool missing=700' --mix chat=700 --mix task=400 --mix media=400 --mix 'client tool=200' "
    "--mix repeat=150 --mix 'long story=100' --mix 'weather follow-up=100' --learning-rate 6e-4",
]


def stage_command(number: int, extra: list[str]) -> list[str]:
    import shlex

    checkpoint, out = OUT / f"stage{number}-checkpoint.pt", OUT / f"stage{number}"
    command = [sys.executable, str(ROOT / "scripts" / "train_tiny_gemma4.py"), *shlex.split(STAGES[number - 1]),
               "--checkpoint", str(checkpoint), "--out", str(out), *extra]
    if checkpoint.exists():
        command.append("--resume")
    elif number > 1:
        command += ["--init-from", str(OUT / f"stage{number - 1}-checkpoint.pt")]
    return command


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu, or cuda where a GPU is available")
    parser.add_argument("--threads", type=int, help="CPU threads (and data workers)")
    parser.add_argument("--from-stage", type=int, default=1,
                        help="start here; the stage before must have left out/stage<N-1>-checkpoint.pt "
                             "(cp checkpoints/stage<N-1>.pt there to go on from a carried one)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args()
    extra = ["--device", args.device] + (["--threads", str(args.threads)] if args.threads else [])
    OUT.mkdir(exist_ok=True)
    for number in range(args.from_stage, len(STAGES) + 1):
        if (OUT / f"stage{number}" / "training.json").exists():
            print(f"stage {number}: done (out/stage{number}/training.json)", flush=True)
            continue
        command = stage_command(number, extra)
        print(f"stage {number}: {' '.join(command[1:])}", flush=True)
        if not args.dry_run:
            subprocess.run(command, check=True)
    last = OUT / f"stage{len(STAGES)}"
    if args.dry_run:
        return
    for name in ("config.json", "model.safetensors", "training.json"):  # the config too: a stage may add layers
        shutil.copy2(last / name, BUNDLE / name)
    print(f"the bundle now holds stage {len(STAGES)}'s weights; measuring them:", flush=True)
    subprocess.run([sys.executable, str(ROOT / "scripts" / "train_tiny_gemma4.py"), "--eval", "--out", str(BUNDLE)],
                   check=True)


if __name__ == "__main__":
    main()
