# On the quiet machine, from the repository root (the device tool's command, carry [".devkit"]), one part of
# the table per call, each under the tool's 10 minutes:
#   bash benchmarks/quiet/report.sh daemon daemon_ssh alert        -> $OUT/part.json (and the part's table)
#   bash benchmarks/quiet/report.sh replay verdict ssh remote resume shard corpus local
# Then here: python benchmarks/report.py --write-from PART1 PART2
# Parts kept for a later --write-from: benchmarks/quiet/parts/ (each names its tree and host in its `where`).
set -u
bash .devkit/setup.sh > "$OUT/setup.txt" 2>&1 || { cat "$OUT/setup.txt"; exit 1; }
# the scripts import the working tree's watchdog (and the kit's dependencies), as an editable install would
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
printf '#!/bin/sh\nexec python3 -m watchdog.cli "$@"\n' > /tmp/site/bin/watchdog; chmod +x /tmp/site/bin/watchdog
python3 -m compileall -q watchdog
python3 benchmarks/report.py --only "$@" --part-out "$OUT/part.json" --outputs "$OUT/outputs" 2>&1 | tail -40
