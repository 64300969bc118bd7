#!/bin/sh
# The GPU side of the llama.cpp captures: build llama-server with CUDA for sm_90 and capture the CUDA scenarios
# (llamacpp.py --device cuda). Run on a machine with nvcc, cmake and python3 with numpy, from a folder CARRY
# that holds llama-src.tgz (the llama.cpp source tree without build/ and models/), gpu_hog.cu, capture.py,
# tiny_gguf.py and llamacpp.py:
#     sh llamacpp_cuda.sh CARRY OUTDIR [llamacpp.py options, e.g. --only ready killed-loading]
# OUTDIR gets cap.tgz (the captures), build.log and env.txt.
set -u
CARRY=$(cd "$1" && pwd); OUT=$2; W=/tmp/llw; shift 2
mkdir -p "$W" "$OUT"
{ nvidia-smi; nvcc --version; cmake --version; python3 --version; nproc; free -g; } > "$OUT/env.txt" 2>&1
tar xzf "$CARRY/llama-src.tgz" -C "$W" || exit 1
cd "$W/llama.cpp" || exit 1
t0=$(date +%s)
cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
  cmake --build build --target llama-server -j"$(nproc)" >> "$OUT/build.log" 2>&1
rc=$?; echo "BUILD_RC=$rc in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/build.log"
[ $rc -eq 0 ] || { tail -40 "$OUT/build.log"; exit 1; }
nvcc -O2 -o "$W/gpu_hog" "$CARRY/gpu_hog.cu" || exit 1
mkdir -p "$W/cap"
python3 "$CARRY/llamacpp.py" --device cuda --server "$W/llama.cpp/build/bin/llama-server" --hog "$W/gpu_hog" \
    --models "$W/models" --gguf-py "$W/llama.cpp/gguf-py" --out "$W/cap" "$@" 2>&1 | tee "$OUT/run.txt"
tar czf "$OUT/cap.tgz" -C "$W" cap
