#!/usr/bin/env bash
# The device checks of lib/gpu (docs/gpu.md "Device runs"), run on a machine with a CUDA GPU from
# the repository root, after scripts/device/bundle.sh packed the CUDA build into .dev/ here:
#   1. the device tests (cuda:: operations = their CPU-executed twins; the CUDA trainer = the CPU
#      trainer), 2. `train --device cuda` end to end against `--device cpu` (resumable on the CPU),
#   3. benchmarks beside their CPU path and PyTorch on the same GPU (bench_gpu, bench_train_step,
#      bench/train/torch_train_step.py), 4. compute-sanitizer (memcheck, racecheck) on the kernels,
#   5. analysers (issue 30; not in the default list): each analyser's --device cuda against --device cpu on
#      random-weight Hugging Face models of real configs, at size beside PyTorch on the same GPU
#      (scripts/device/analysers.py; its steps fit 330 s together and it prints where the time went;
#      its table and PyTorch's numbers also go to $OUT/analysers.json),
#   6. passkey (issue 31 acceptance 3; not in the default list): the Runway (Lee & Clark) passkey
#      notebook's three models trained with --device cuda, first its quick mode against the CPU
#      trainer (notebooks_cpp/runway_passkey/device_vs_cpu.py on the real device), then its full mode
#      (3 x 3,500 steps; estimated 1-2 minutes on an H200, docs/gpu.md "Device trainer"); the
#      notebook prints each model's training time; results.json, figures and checkpoints go to
#      $OUT/passkey_full.
# Every section runs under its own time limit and prints its exit code; the log goes to
# $OUT/checks.log (OUT defaults to /tmp/cf_device_out). Usage: scripts/device/run_checks.sh [SECTIONS]
# with SECTIONS a comma list of tests,train,bench,sanitize (default all), gpubench (bench's GPU
# sides only), trainsan (memcheck of the device trainer's tests alone), profile (Nsight Compute's kernel times of two GPT-2-shape steps per kernel name), analysers and passkey (steps 5 and 6).
# `run_checks.sh --dry-run-cpu analysers` runs the analysers step here, without a GPU or a bundle: tiny
# shapes, the tools of CF_DEVICE_BIN (default build/bin) on the emulated device (CF_GPU_EMULATE=1),
# torch on the CPU (the CTest "gpu: analysers device check, dry run on the CPU ...").
set -u
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${OUT:-/tmp/cf_device_out}"
dry=0
[ "${1:-}" = "--dry-run-cpu" ] && { dry=1; shift; }
sections=",${1:-tests,train,bench,sanitize},"
mkdir -p "$out"
exec > >(tee -a "$out/checks.log") 2>&1

analysers() {  # analysers BIN_DIR WORK_DIR [--dry-run-cpu]: the analysers step, under its own time limit
  echo; echo "=== analysers: --device cuda = --device cpu, at size beside PyTorch [$(date -u +%T)]"
  timeout 345 /usr/bin/python3 "$root/scripts/device/analysers.py" run --bin "$1" --work "$2" --budget 330 \
    --summary "$out/analysers.json" "${@:3}"
  local rc=$?
  rm -rf "$2"  # models of up to 13.5 GB
  echo "--- rc=$rc (analysers)"
  return $rc
}
if [ $dry = 1 ]; then
  [ "$sections" = ",analysers," ] || { echo "run_checks.sh: --dry-run-cpu runs the analysers section alone"; exit 2; }
  analysers "${CF_DEVICE_BIN:-$root/build/bin}" "$out/analysers_work" --dry-run-cpu
  exit $?
fi
w=/tmp/cf_device
rm -rf "$w" && mkdir -p "$w"
tar -C "$w" -xJf "$root/.dev/bundle.tar.xz" || { echo "no bundle: run scripts/device/bundle.sh BUILD_DIR first"; exit 2; }
# CUDA libraries of the GPU machine's toolkit (or of its PyTorch wheels)
libdirs="$w/lib"
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcusolver.so.12 libcusparse.so.12 libnvJitLink.so.13; do
  f=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -e "$d/$lib" ] && { f="$d/$lib"; break; }
  done
  [ -z "$f" ] && f=$(find /usr /opt -name "$lib" 2>/dev/null | head -1)
  [ -n "$f" ] && case ":$libdirs:" in *":$(dirname "$f"):"*) ;; *) libdirs="$libdirs:$(dirname "$f")" ;; esac
done
export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
py=python3
sec() { echo; echo "=== $* [$(date -u +%T)]"; }
run() {  # run LIMIT_S CMD...: the command under a time limit, then its exit code
  local lim="$1"; shift
  timeout "$lim" "$@"; local rc=$?
  echo "--- rc=$rc (${CF_GPU_ATTENTION:+CF_GPU_ATTENTION=$CF_GPU_ATTENTION }$*)"
}

sec "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
echo "cpu: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
$py -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())' 2>&1 | tail -1
missing=$(ldd "$w"/bin/* | grep "not found" | sort -u)
[ -n "$missing" ] && { echo "missing libraries:"; echo "$missing"; exit 3; }

if [[ $sections == *,tests,* ]]; then
  sec "device tests"
  run 180 "$w/bin/test_gpu_device" -d yes
  run 240 "$w/bin/test_gpu_train_device" -d yes
fi

if [[ $sections == *,train,* ]]; then
  sec "train --device cuda = train --device cpu, end to end (tests/gpu/train_device_emu.sh with a real device)"
  CF_TRAIN_DEVICE_EMULATE=0 run 120 bash "$root/tests/gpu/train_device_emu.sh" "$w/bin/train" "$root/README.md" /tmp/cf_train_dev
  CF_TRAIN_DEVICE_EMULATE=0 run 120 bash "$root/tests/gpu/train_device_emu_variants.sh" "$w/bin/train" \
    "$w/bin/train_variant_start" "$root/README.md" /tmp/cf_train_dev_variants
  CF_TRAIN_DEVICE_EMULATE=0 run 120 bash "$root/tests/gpu/train_device_emu_attn.sh" "$w/bin/train" \
    "$w/bin/train_variant_start" "$root/README.md" /tmp/cf_train_dev_attn
  CF_TRAIN_DEVICE_EMULATE=0 run 120 bash "$root/tests/gpu/train_device_emu_precision.sh" "$w/bin/train" \
    "$root/README.md" /tmp/cf_train_dev_precision
fi

if [[ $sections == *,bench,* || $sections == *,gpubench,* ]]; then
  cpu2=(taskset -c 0,1 env OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE)
  # gpubench: the GPU sides only (device trainer and PyTorch), no CPU path and no analysers
  [[ $sections == *,bench,* ]] || cpu2=(true)
  tpy=(env CF_TORCH_DEVICE=cuda "$py" "$root/bench/train/torch_train_step.py")
  sec "bench: config (a) 4 x 256, T 256, B 8, bytes: device trainer, PyTorch on the GPU, the CPU path on 2 cores"
  CF_GPU_ATTENTION=generic run 60 "$w/bin/bench_gpu" train 4 256 4 256 8 256 20 3
  # each precision policy on both sides (docs/gpu.md "Precision policies"): tf32 / bf16 against
  # PyTorch's TF32 matmuls / bf16 autocast in the same run
  for prec in fp32 tf32 bf16; do
    run 60 "$w/bin/bench_gpu" train 4 256 4 256 8 256 20 3 full $prec
    run 90 "${tpy[@]}" 4 256 4 256 8 256 20 3 --precision $prec
    CF_TORCH_SDPA=1 run 90 "${tpy[@]}" 4 256 4 256 8 256 20 3 --precision $prec
  done
  run 90 "${cpu2[@]}" "$w/bin/bench_train_step" 4 256 4 256 8 256 3 1
  sec "bench: GPT-2 124M shape, T 1024: device trainer (B 8 and B 1), PyTorch on the GPU (B 8), the CPU path on 2 cores (B 1)"
  CF_GPU_ATTENTION=generic run 120 "$w/bin/bench_gpu" train 12 768 12 1024 8 50257 10 2
  run 60 "$w/bin/bench_gpu" train 12 768 12 1024 1 50257 10 2
  for prec in fp32 tf32 bf16; do
    run 120 "$w/bin/bench_gpu" train 12 768 12 1024 8 50257 10 2 full $prec
    run 120 "${tpy[@]}" 12 768 12 1024 8 50257 10 2 --precision $prec
    CF_TORCH_SDPA=1 run 120 "${tpy[@]}" 12 768 12 1024 8 50257 10 2 --precision $prec
  done
  run 120 "${cpu2[@]}" "$w/bin/bench_train_step" 12 768 12 1024 1 50257 2 1
  sec "bench: attention cost follows the mask on the device (4 x 256, T 4096, B 1)"
  for s in full swa; do
    run 60 "$w/bin/bench_gpu" train 4 256 4 4096 1 256 5 1 "$s"
    CF_GPU_ATTENTION=generic run 60 "$w/bin/bench_gpu" train 4 256 4 4096 1 256 5 1 "$s"
  done
  sec "bench: attention kernels alone in the same run: flash fp32, flash tf32 and bf16 (tensor cores), the reference (plain) kernels (GPT-2 heads: B 8, H 12, dh 64)"
  # the tensor-core kernels' correctness beside their timing (the tests section runs it too)
  [[ $sections == *,tests,* ]] || run 60 "$w/bin/test_gpu_device" "device: tensor-core flash attention*"
  for s in full swa; do
    run 60 "$w/bin/bench_gpu" attention 1024 64 8 12 20 "$s"
  done
  run 60 "$w/bin/bench_gpu" attention 1024 128 8 6 20 full
  [[ $sections == *,bench,* ]] && {
  sec "bench: structured rollout step (12 heads, 12 steps = one 12-layer rollout), device vs the CPU path (1 thread)"
  run 60 "$w/bin/bench_gpu" rollout 20 12 12
  run 120 "$w/bin/bench_gpu" rollout 24 12 12
  sec "bench: spectral per-head cores, 144 symmetric 128 x 128 eigendecompositions (cuSOLVER vs Eigen on the CPU)"
  run 60 env OMP_NUM_THREADS=2 "$w/bin/bench_gpu" eig 128 144 5
  }
fi

if [[ $sections == *,sanitize,* ]]; then
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  sec "compute-sanitizer ($cs)"
  if [ -n "$cs" ]; then
    run 200 "$cs" --tool memcheck --error-exitcode 9 "$w/bin/test_gpu_device"
    run 200 "$cs" --tool memcheck --error-exitcode 9 "$w/bin/test_gpu_train_device"
    run 150 "$cs" --tool racecheck --error-exitcode 9 "$w/bin/test_gpu_device" "device: tiled attention*"
    run 150 "$cs" --tool synccheck --error-exitcode 9 "$w/bin/test_gpu_device" "device: tiled attention*"
  fi
fi
if [[ $sections == *,trainsan,* ]]; then
  sec "compute-sanitizer memcheck of the device trainer's tests (every mask family, both fusions)"
  run 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$w/bin/test_gpu_train_device"
fi

if [[ $sections == *,passkey,* ]]; then
  sec "passkey: the Runway (Lee & Clark) passkey notebook's three models on the device trainer"
  export CF_NPM_DIR="$w/npm"  # the Brown corpus the bundle carries (the notebook's filler)
  CF_PASSKEY_EMULATE=0 run 90 "$py" "$root/notebooks_cpp/runway_passkey/device_vs_cpu.py" \
    "$w/bin/nb_runway_passkey_01" /tmp/cf_passkey_quick
  run 330 "$w/bin/nb_runway_passkey_01" --mode full --device cuda --out "$out/passkey_full"
  rm -f "$out"/passkey_full/train_task.*  # the 16,000 training rows (regenerated by the notebook)
  grep -h -E '^(trained|mode)' "$out/checks.log" | tail -4
fi

if [[ $sections == *,analysers,* ]]; then
  analysers "$w/bin" /tmp/cf_analysers  # not under $OUT, which comes back
fi

if [[ $sections == *,profile,* ]]; then
  sec "profile: GPU time per kernel, GPT-2 124M shape, T 1024, B 8, two steps (ncu gpu__time_duration; clocks locked to base)"
  timeout 300 ncu --metrics gpu__time_duration.sum --csv "$w/bin/bench_gpu" train 12 768 12 1024 8 50257 1 1 \
    >"$out/ncu_gpt2_b8.csv" 2>"$out/ncu_stderr.txt"
  echo "--- rc=$? (ncu)"
  $py - "$out/ncu_gpt2_b8.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; k = head.index("Kernel Name"); v = head.index("Metric Value"); u = head.index("Metric Unit")
tot = collections.Counter(); cnt = collections.Counter()
for r in rows[1:]:
    if r[v] in ("", "n/a"): continue
    scale = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0}.get(r[u], 1e-9)
    name = r[k].split("(")[0][:90]
    tot[name] += float(r[v].replace(",", "")) * scale; cnt[name] += 1
all_s = sum(tot.values())
print(f"kernels: {sum(cnt.values())} launches, {all_s*1e3:.1f} ms of GPU time (two steps)")
for name, t in tot.most_common(25):
    print(f"{t*1e3:9.2f} ms {100*t/all_s:5.1f}% {cnt[name]:5d}x  {name}")
PY
fi
sec "done"
