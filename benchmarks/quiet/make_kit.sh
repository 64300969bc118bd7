#!/bin/bash
# Build the kit that runs the benchmarks on the quiet machine (`device`), which reaches no package registry:
# wheels of every pinned dependency for CPython 3.12 x86_64, this machine's sshd, ssh-keygen and ssh with the
# libraries the machine there may lack, mtail, and the tree of BASE_REV to measure beside the working tree.
#   bash benchmarks/quiet/make_kit.sh [BASE_REV]     (from the repository root; writes .devkit/, kept out of git)
# Then one `run` of the device tool with carry [".devkit"]:  bash benchmarks/quiet/ab.sh
set -euo pipefail
base=${1:-HEAD}
grep -qx '/.devkit/' .git/info/exclude 2>/dev/null || echo '/.devkit/' >> .git/info/exclude
rm -rf .devkit && mkdir -p .devkit/whl .devkit/bin .devkit/lib
grep -E '^[a-z]' constraints.txt | awk '{print $1}' > .devkit/requirements.txt
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64 \
  --platform manylinux_2_24_x86_64 --platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 \
  -d .devkit/whl -r .devkit/requirements.txt orjson
command -v mtail >/dev/null || apt-get install -y -qq mtail >/dev/null
cp /usr/sbin/sshd /usr/bin/ssh-keygen /usr/bin/ssh "$(command -v mtail)" .devkit/bin/
for b in .devkit/bin/sshd .devkit/bin/ssh-keygen .devkit/bin/ssh; do ldd "$b" | awk '$3 ~ /^\// {print $3}'; done |
  sort -u | grep -v -E '/(libc|libresolv|libm|libpthread|libdl)\.so|ld-linux' | xargs -I{} cp -L {} .devkit/lib/
git archive -o .devkit/base.tar "$base" watchdog benchmarks tests/sshd_server.py tests/fixtures/corpus/sglang pyproject.toml
cp benchmarks/quiet/setup.sh .devkit/setup.sh
du -sh .devkit
