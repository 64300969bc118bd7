# On the quiet machine, from the repository root (the device tool's command, carry [".devkit"]):
#   SECS=25 bash benchmarks/quiet/ab.sh     replay, the daemon (local, SSH) for the kit's base and this tree, 2,000 launches
set -u
bash .devkit/setup.sh > $OUT/setup.txt 2>&1 || { cat $OUT/setup.txt; exit 1; }
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
printf '#!/bin/sh\nexec python3 -m watchdog.cli "$@"\n' > /tmp/site/bin/watchdog; chmod +x /tmp/site/bin/watchdog
NEW=$PWD; BASE=/tmp/base; mkdir -p $BASE && tar -xf .devkit/base.tar -C $BASE
L=$OUT/ab.txt
{ echo "nproc $(nproc); $(uptime)"; python3 -V; } | tee -a $L
python3 benchmarks/gen_verbose_log.py --lines 1000000 --out /tmp/verbose.log >/dev/null
for r in 1 2; do for side in BASE NEW; do d=${!side}; echo "== replay $side round $r" | tee -a $L
  (cd $d && taskset -c 3 python3 benchmarks/replay_bench.py --log /tmp/verbose.log --runs 3 $([ $r = 2 ] && echo --no-mtail) 2>&1 | tail -8) | tee -a $L; done; done
for mode in "--local" "--pin"; do for side in BASE NEW; do d=${!side}; echo "== daemon $mode $side" | tee -a $L
  (cd $d && timeout 200 python3 benchmarks/daemon_bench.py $mode --seconds ${SECS:-30} --quiet-seconds 15 --no-anchor 2>&1 | tail -25) | tee -a $L; done; done
echo "== 2000 launches over SSH, NEW" | tee -a $L
timeout 240 python3 benchmarks/daemon_bench.py --pin --launches 2000 --hosts 20 --seconds 30 --quiet-seconds 10 --no-anchor 2>&1 | tail -25 | tee -a $L
uptime | tee -a $L
