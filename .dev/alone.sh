#!/usr/bin/env bash
# Pause the training lanes, measure alone (roofline both cores / one core, FPS of the preset
# with 4 epochs and with 1, twice in turn), resume the lanes whatever happens.
cd /work/main
pids=$(pgrep -f "train.py --preset pong-fast --seed" | tr '\n' ' ')
echo "pausing: $pids"; date
kill -STOP $pids
trap 'kill -CONT $pids; echo resumed; date' EXIT
sleep 2
uv run benchmarks/roofline.py > runs/roofline-zen3-2cores.txt 2>&1
taskset -c 0 uv run benchmarks/roofline.py > runs/roofline-zen3-1core.txt 2>&1
for rep in 1 2; do
  for e in 4 1; do
    d=runs/fps-alone/e$e-r$rep; rm -rf $d
    uv run train.py --preset pong-fast --seed 0 --mode n-env --set env.backend='"ale"' --set run.precision='"fp32"' \
      --set pqn.epochs=$e --set eval.every=0 --set run.seconds=100 --run-dir $d > $d.log 2>&1
    python3 -c "import json;s=json.load(open('$d/summary.json'));print('$d', s.get('fps'), s.get('fps_after_warmup'))"
  done
done
