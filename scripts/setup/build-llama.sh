#!/usr/bin/env bash
# Build llama.cpp tools (commit 0c1e570, vendored by the PyPI source package
# llama-cpp-python==0.3.36) as oracles and benchmark baselines. Cached outside the repo.
#
#   scripts/setup/build-llama.sh TOOL [VARIANT]    prints the path of the built binary
#
# TOOL: a llama.cpp CMake target (llama-bench, llama-perplexity, llama-quantize, ...).
# VARIANT: native (default: -march=native), avx2 (AVX2+FMA+F16C, no AVX-512; the second build
# whose disagreement with the first measures llama.cpp's own numerical floor).
# Builds of one variant are serialised with a lock, so parallel callers share one build tree.
set -euo pipefail
tool="${1:?usage: build-llama.sh TOOL [native|avx2]}"
variant="${2:-native}"
cache="${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}/llama.cpp"
bin="$cache/bin-$variant/$tool"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
case "$variant" in
    native) flags=(-DGGML_NATIVE=ON) ;;
    avx2) flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                 -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF
                 -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF -DGGML_BMI2=ON) ;;
    *) echo "build-llama.sh: unknown variant '$variant'" >&2; exit 2 ;;
esac
mkdir -p "$cache"
exec 9>"$cache/.lock-$variant"
flock 9
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
cd "$cache"
sdist=llama_cpp_python-0.3.36.tar.gz
(
    flock 8
    if [ ! -f "$sdist" ]; then
        python3 -m pip download -q --no-deps --no-binary=llama-cpp-python llama-cpp-python==0.3.36 -d . >&2
    fi
    if [ ! -d src ]; then
        rm -rf src.tmp && mkdir src.tmp
        tar xzf "$sdist" -C src.tmp --strip-components=3 llama_cpp_python-0.3.36/vendor/llama.cpp
        mv src.tmp src
    fi
) 8>"$cache/.lock-src"
if ! command -v cmake >/dev/null; then
    python3 -m pip install -q cmake >&2
fi
cmake -S src -B "build-$variant" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=OFF \
    -DBUILD_SHARED_LIBS=OFF "${flags[@]}" >&2
cmake --build "build-$variant" --target "$tool" -j "$(nproc)" >&2
mkdir -p "bin-$variant"
cp "build-$variant/bin/$tool" "$bin.tmp" && mv "$bin.tmp" "$bin"
echo "$bin"
