#!/usr/bin/python3
"""train --resume keeps the learning-rate schedule (issue 29), checked against the nanoGPT warm-up +
cosine formula written out here (not causalflow's lr_schedule):
  lr(s) = lr (s+1)/warmup for s < warmup; min_lr for s >= max_steps;
          min_lr + (1 + cos(pi (s - warmup) / (max_steps - warmup))) / 2 (lr - min_lr) otherwise.
1. a resumed run states on stderr the schedule it continues with and the rate at its step;
2. --resume with another --steps exits 2 naming both lengths, the jump and --replan-schedule;
3. with --replan-schedule it trains on the re-planned cosine (statement and log.csv's lr column);
4. --replan-schedule without --resume, or with the checkpoint's own --steps, exits 2.
Usage: resume_schedule.py TRAIN CORPUS WORKDIR. Needs only the standard library.
"""
import csv
import math
import os
import re
import shutil
import subprocess
import sys

train, corpus, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
base = [train, "--text", corpus, "--n-layer", "1", "--d-model", "16", "--n-head", "2", "--seq-len", "16",
        "--block-size", "16", "--batch", "2", "--threads", "1", "--eval-interval", "1000", "--log-every", "1000"]
LR, MIN, WARM = 1e-3, 1e-4, 2
fails = []


def lr_at(s, max_steps, warmup=WARM, lr=LR, mn=MIN):
    if s < warmup:
        return lr * (s + 1) / warmup
    if s >= max_steps:
        return mn
    return mn + 0.5 * (1 + math.cos(math.pi * (s - warmup) / max(1, max_steps - warmup))) * (lr - mn)


def run(args, want):
    p = subprocess.run(base + args, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != want:
        fails.append(f"{' '.join(args)}: exit {p.returncode}, expected {want}: {p.stderr.strip()}")
    return p.stderr


def close(name, got, want):
    ok = abs(got - want) <= 5e-3 * abs(want)  # stderr prints 3 significant digits
    print(f"{name}: {got:.6g} vs formula {want:.6g} {'ok' if ok else 'MISMATCH'}")
    if not ok:
        fails.append(name)


# a full 8-step run, then a stopped one continued on its own schedule
run(["--lr", str(LR), "--min-lr", str(MIN), "--warmup", str(WARM), "--steps", "8", "--quiet", "--out-dir",
     f"{work}/full"], 0)
run(["--lr", str(LR), "--min-lr", str(MIN), "--warmup", str(WARM), "--steps", "8", "--stop-after", "4", "--quiet",
     "--out-dir", f"{work}/half"], 0)
# --replan-schedule where there is nothing to re-plan
err = run(["--resume", f"{work}/half/last.h5", "--out-dir", f"{work}/half", "--steps", "8", "--replan-schedule"], 2)
if "--replan-schedule: --steps 8 is the checkpoint's own schedule length" not in err:
    fails.append(f"--replan-schedule with the same --steps: {err!r}")
err = run(["--resume", f"{work}/half/last.h5", "--out-dir", f"{work}/half"], 0)
m = re.search(r"resuming at step 4 on the schedule: warm-up 2, cosine from 0.001 to 0.0001 ending at step 8; "
              r"learning rate (\S+) now\n", err)
if not m:
    fails.append(f"no schedule statement for a plain --resume: {err!r}")
else:
    close("plain --resume: rate at step 4 of 8", float(m.group(1)), lr_at(4, 8))
# another --steps without --replan-schedule: refused, naming the jump
err = run(["--resume", f"{work}/full/last.h5", "--out-dir", f"{work}/full", "--steps", "16"], 2)
m = re.search(r"--steps 16 differs from the 8 steps the cosine schedule of --resume '[^']*' was planned for: the "
              r"learning rate at step 8 would jump from (\S+) to (\S+); add --replan-schedule", err)
if not m:
    fails.append(f"refusal message: {err!r}")
else:
    close("refusal: rate at step 8 of the 8-step schedule", float(m.group(1)), lr_at(8, 8))
    close("refusal: rate at step 8 of a 16-step schedule", float(m.group(2).rstrip(";")), lr_at(8, 16))
# with --replan-schedule: trains on the re-planned cosine
err = run(["--resume", f"{work}/full/last.h5", "--out-dir", f"{work}/full", "--steps", "16", "--stop-after", "10",
           "--replan-schedule"], 0)
m = re.search(r"ending at step 16; learning rate (\S+) now \(--replan-schedule: re-planned from 8 steps, where it "
              r"was (\S+)\)", err)
if not m:
    fails.append(f"no re-planned statement: {err!r}")
else:
    close("--replan-schedule: rate at step 8 of 16", float(m.group(1)), lr_at(8, 16))
    close("--replan-schedule: rate it was at step 8 of 8", float(m.group(2)), lr_at(8, 8))
rows = {int(r["step"]): r for r in csv.DictReader(open(f"{work}/full/log.csv"))}
for step in (9, 10):  # log.csv step s is the update of index s - 1
    if step not in rows:
        fails.append(f"log.csv has no step {step}")
    else:
        close(f"log.csv lr at step {step} (re-planned over 16)", float(rows[step]["lr"]), lr_at(step - 1, 16))
err = run(["--steps", "4", "--replan-schedule", "--quiet", "--out-dir", f"{work}/new"], 2)
if "--replan-schedule is only used with --resume" not in err:
    fails.append(f"--replan-schedule without --resume: {err!r}")
for f in fails:
    print("FAIL:", f)
print("resume schedule ok" if not fails else "resume schedule FAILED")
sys.exit(1 if fails else 0)
