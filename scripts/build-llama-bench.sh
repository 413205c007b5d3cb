#!/usr/bin/env bash
# Build llama.cpp's llama-bench (commit 0c1e570, vendored by the PyPI source package
# llama-cpp-python==0.3.36) for side-by-side benchmarks. Cached: prints the binary's path.
set -euo pipefail
cache="${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}/llama.cpp"
bin="$cache/bin/llama-bench"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
mkdir -p "$cache"
cd "$cache"
sdist=llama_cpp_python-0.3.36.tar.gz
if [ ! -f "$sdist" ]; then
    python3 -m pip download -q --no-deps --no-binary=llama-cpp-python llama-cpp-python==0.3.36 -d . >&2
fi
if ! command -v cmake >/dev/null; then
    python3 -m pip install -q cmake >&2
fi
rm -rf src && mkdir src
tar xzf "$sdist" -C src --strip-components=3 llama_cpp_python-0.3.36/vendor/llama.cpp
cmake -S src -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DBUILD_SHARED_LIBS=OFF >&2
cmake --build build --target llama-bench -j "$(nproc)" >&2
mkdir -p bin && cp build/bin/llama-bench "$bin"
rm -rf src build
echo "$bin"
