#!/usr/bin/env bash
# A deterministic PROXY for ARM performance (there is no ARM hardware here): guest instructions
# executed per token, and bytes loaded per decoded token, under qemu-aarch64 with a TCG
# counting plugin, for our engine and for llama.cpp 0c1e570 built for the same ISA level.
# Instructions are not time: qemu does not model caches, pipelines or memory bandwidth.
#
#   scripts/bench/arm-proxy-bench.sh [build]        build only (qemu + plugin, llama-bench, ours)
#   scripts/bench/arm-proxy-bench.sh                build, run and print the table
#
# Steps (all builds and runs cached outside the repository, in ~/.cache/local-llm: qemu-plugins,
# llama.cpp, arm-proxy):
#   1. apt: Debian's qemu source package (a deb-src line for the archive the deb lines use is
#      added) and the few build dependencies of a user-mode-only qemu; aarch64 gcc/g++; Debian's
#      rustc-web with its std source. qemu-aarch64 is configured with --enable-plugins only for
#      the aarch64-linux-user target; scripts/bench/arm-proxy/icount.c is the counting plugin.
#   2. llama.cpp (sources of the llama-cpp-python==0.3.36 sdist) cross-built statically:
#      llama-bench with -march=armv8.2-a+dotprod+fp16 (dotprod) and
#      -march=armv8.6-a+dotprod+i8mm+fp16 (i8mm), GGML_NATIVE=OFF, no OpenMP. Only the llama-bench
#      target, in one build tree: -march reaches ggml-cpu alone (GGML_CPU_ARM_ARCH), so the second
#      level recompiles ggml-cpu's dozen files and relinks; llama, common and ggml-base compile once.
#   3. ours: `local-llm` (release profile, no debug info; symbols kept) for
#      aarch64-unknown-linux-gnu, std built from source, in ~/.cache/local-llm/arm-proxy/target.
#   4. runs, 1 thread: level dotprod on qemu's neoverse-n1 CPU (dotprod, no i8mm), level i8mm on
#      qemu's max CPU; ours with LOCAL_LLM_SIMD=<level>. Per-token numbers are differences of
#      two runs with different token counts divided by the tokens added (load, warm-up and
#      start-up cancel): pp = (pp$PP2 - pp$PP1), tg = (tg$TG2 - tg$TG1). llama-bench runs with
#      -r 1 --no-warmup (one timed run); our bench always adds a warm-up, so with -r 1 each
#      test runs twice and the difference is divided by twice the tokens.
#      Load bytes (plugin loads=on, tg runs only) count every load: weights, activations,
#      KV cache and stack; the weight bytes column is computed from the GGUF (the matmul
#      tensors and output head each decoded token reads once).
#
# Environment: PP1 PP2 TG1 TG2 (default 32 64 8 16), LEVELS (default "dotprod i8mm"),
# MODELS (default: SmolLM2 Q4_1 and Gemma 3 Q4_K_M in ~/.cache/local-llm/models),
# ARM_PROXY_BLOCKS=N (default 300; 0: off): the plugin also records the N hottest translated
# blocks of each run (an inline add per block, cheap), and
# ~/.cache/local-llm/arm-proxy/runs/hot-<model>-<test>-<level>-<tool>.txt lists the functions they
# belong to (the second run of each pair). Runs are cached in ~/.cache/local-llm/arm-proxy/runs
# under the hash of the executable and plugin and the plugin options: a rebuilt binary is
# measured again, an unchanged one is not.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}"
QCACHE="$CACHE/qemu-plugins"
LCACHE="$CACHE/llama.cpp"
TRIPLE=aarch64-unknown-linux-gnu
OURS_TARGET="$CACHE/arm-proxy/target"
OURS="$OURS_TARGET/$TRIPLE/release/local-llm"
WORK="$CACHE/arm-proxy/runs"
PP1=${PP1:-32} PP2=${PP2:-64} TG1=${TG1:-8} TG2=${TG2:-16}
read -r -a LEVELS <<<"${LEVELS:-dotprod i8mm}"
read -r -a MODELS <<<"${MODELS:-$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf $CACHE/models/gemma-3-270m-q4_k_m.gguf}"
declare -A MARCH=([dotprod]=armv8.2-a+dotprod+fp16 [i8mm]=armv8.6-a+dotprod+i8mm+fp16)
declare -A CPU=([dotprod]=neoverse-n1 [i8mm]=max)
JOBS=2
START=$SECONDS
step() { echo "---- arm-proxy: $* ($((SECONDS - START)) s elapsed)" >&2; }

apt_packages() {
    step "apt packages"
    local src=/etc/apt/sources.list.d/local-llm-deb-src.sources
    if ! apt-cache showsrc qemu >/dev/null 2>&1 || ! apt-cache showsrc qemu | grep -q '^Package:'; then
        # The same archive and suites as the deb lines (deb822 files or sources.list).
        local deb
        deb=$(grep -hs -v '^#' /etc/apt/sources.list.d/*.sources | sed 's/^Types: deb$/Types: deb-src/' |
            awk 'BEGIN{RS="";ORS="\n\n"} /Types: deb-src/ && /debian/')
        if [[ -z $deb ]]; then
            deb=$(grep -hs '^deb ' /etc/apt/sources.list | grep debian | sed 's/^deb /deb-src /')
            src=/etc/apt/sources.list.d/local-llm-deb-src.list
        fi
        echo "$deb" >"$src"
        apt-get -o DPkg::Lock::Timeout=600 -qq update
    fi
    "$ROOT/scripts/setup/apt-install.sh" dpkg-dev ninja-build meson libglib2.0-dev pkg-config flex bison \
        gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu \
        rustc-web cargo-web rust-web-src cmake python3
}

# The unpacked qemu source directory, if any.
qemu_src() {
    local dirs=("$QCACHE"/qemu-*/)
    [[ -d ${dirs[0]} ]] && echo "${dirs[0]%/}"
}

build_qemu() {
    QEMU="$QCACHE/bin/qemu-aarch64"
    PLUGIN="$QCACHE/bin/libicount.so"
    mkdir -p "$QCACHE/bin"
    if [[ ! -x $QEMU ]]; then
        step "qemu-aarch64 with plugins (Debian's qemu source package)"
        (
            cd "$QCACHE"
            qemu_src || apt-get source -qq qemu
            cd "$(qemu_src)"
            mkdir -p build && cd build
            [[ -f build.ninja ]] || nice -n 5 ../configure --target-list=aarch64-linux-user \
                --enable-plugins --disable-docs --disable-tools --disable-system --disable-werror \
                --disable-capstone --disable-gnutls --disable-nettle --disable-gcrypt >/dev/null
            nice -n 5 ninja -j"$JOBS" qemu-aarch64 >/dev/null
            cp qemu-aarch64 "$QEMU.tmp" && mv "$QEMU.tmp" "$QEMU"
        )
    fi
    local inc
    inc="$(qemu_src)/include/qemu"
    if [[ ! -f $PLUGIN || $ROOT/scripts/bench/arm-proxy/icount.c -nt $PLUGIN ]]; then
        # shellcheck disable=SC2046 # pkg-config prints several flags
        gcc -O2 -Wall -Wextra -Wno-unused-parameter -shared -fPIC -I "$inc" \
            $(pkg-config --cflags glib-2.0) -o "$PLUGIN" "$ROOT/scripts/bench/arm-proxy/icount.c"
    fi
}

build_llama() {
    local level=$1 bin="$LCACHE/bin-aarch64-$1/llama-bench"
    LLAMA[$level]=$bin
    [[ -x $bin ]] && return
    step "llama-bench for aarch64, $level (-march=${MARCH[$level]})"
    (
        cd "$LCACHE"
        flock 8
        if [[ ! -d src ]]; then
            local sdist=llama_cpp_python-0.3.36.tar.gz
            [[ -f $sdist ]] || python3 -m pip download -q --no-deps --no-binary=llama-cpp-python \
                llama-cpp-python==0.3.36 -d .
            rm -rf src.tmp && mkdir src.tmp
            tar xzf "$sdist" -C src.tmp --strip-components=3 llama_cpp_python-0.3.36/vendor/llama.cpp
            mv src.tmp src
        fi
    ) 8>"$LCACHE/.lock-src"
    (
        # One build tree for both levels: only ggml-cpu's objects depend on -march, so the
        # second level recompiles those alone.
        cd "$LCACHE"
        flock 9
        nice -n 5 cmake -S src -B build-aarch64 -DCMAKE_BUILD_TYPE=Release \
            -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
            -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ \
            -DGGML_NATIVE=OFF "-DGGML_CPU_ARM_ARCH=${MARCH[$level]}" -DGGML_OPENMP=OFF \
            -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
            -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF -DCMAKE_EXE_LINKER_FLAGS=-static >/dev/null
        nice -n 5 cmake --build build-aarch64 --target llama-bench -j "$JOBS" >/dev/null
        mkdir -p "bin-aarch64-$level"
        cp build-aarch64/bin/llama-bench "$bin.tmp" && mv "$bin.tmp" "$bin"
    ) 9>"$LCACHE/.lock-aarch64"
}

build_ours() {
    step "ours: local-llm for $TRIPLE (release, std from source)"
    (
        export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1
        export CARGO_PROFILE_RELEASE_DEBUG=0 # faster build and link; symbols stay for symbolize.py
        export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
        export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
        cd "$ROOT"
        nice -n 5 /usr/bin/cargo build --release --locked -j "$JOBS" -Zbuild-std=std,panic_unwind \
            --target "$TRIPLE" --target-dir "$OURS_TARGET" -p local-llm-cli
    )
}

# exe TOOL LEVEL: the executable a run uses.
exe() { if [[ $1 == ours ]]; then echo "$OURS"; else echo "${LLAMA[$2]}"; fi; }

# count TOOL LEVEL MODEL KIND N [PLUGIN_OPTS]: runs one benchmark under qemu (once: the log is
# kept in $WORK, named by the executable's hash and the options) and prints the plugin's log:
# "insns X" [load_bytes Y] [block lines].
count() {
    local tool=$1 level=$2 model=$3 kind=$4 n=$5 opts=${6:-}
    local log bin hash
    bin=$(exe "$tool" "$level")
    hash=$(cat "$bin" "$PLUGIN" | sha256sum | cut -c1-12)
    log="$WORK/$(basename "$model" .gguf)-$tool-$level-$kind$n-${opts//[=,]/_}-$hash.txt"
    if [[ ! -s $log ]]; then
        local p=0 g=0 cmd
        if [[ $kind == pp ]]; then p=$n; else g=$n; fi
        if [[ $tool == ours ]]; then
            # The level reaches the guest through qemu's -E (`env` here is a host program).
            cmd=(-E LOCAL_LLM_SIMD="$level" "$bin" bench -m "$model" -p "$p" -n "$g" -t 1 -r 1)
        else
            cmd=("$bin" -m "$model" -p "$p" -n "$g" -t 1 -r 1 --no-warmup)
        fi
        nice -n 10 "$QEMU" -cpu "${CPU[$level]}" -L /usr/aarch64-linux-gnu \
            -plugin "$PLUGIN${opts:+,$opts}" -d plugin,page -D "$log.tmp" "${cmd[@]}" >"$log.out" 2>&1
        mv "$log.tmp" "$log"
    fi
    cat "$log"
}

value() { awk -v k="$1" '$1 == k { print $2 }'; }
mega() { awk -v x="$1" 'BEGIN { printf "%.2f", x / 1e6 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

run_all() {
    mkdir -p "$WORK"
    local blocks=${ARM_PROXY_BLOCKS:-300} rows=() bytes_rows=()
    for model in "${MODELS[@]}"; do
        local name weights
        name=$(basename "$model" .gguf)
        weights=$(python3 "$ROOT/scripts/bench/arm-proxy/weight-bytes.py" "$model")
        for level in "${LEVELS[@]}"; do
            for kind in pp tg; do
                local n1=$PP1 n2=$PP2 opts=""
                if [[ $kind == tg ]]; then n1=$TG1 n2=$TG2 opts="loads=on"; fi
                ((blocks > 0)) && opts="${opts:+$opts,}blocks=$blocks"
                local -A insns=() loads=()
                for tool in ours llama; do
                    step "$name $kind $level $tool"
                    local a b tokens=$((n2 - n1))
                    a=$(count "$tool" "$level" "$model" "$kind" "$n1" "$opts")
                    b=$(count "$tool" "$level" "$model" "$kind" "$n2" "$opts")
                    [[ $tool == ours ]] && tokens=$((2 * tokens)) # warm-up + 1 repetition
                    insns[$tool]=$((($(value insns <<<"$b") - $(value insns <<<"$a")) / tokens))
                    if [[ $kind == tg ]]; then
                        loads[$tool]=$((($(value load_bytes <<<"$b") - $(value load_bytes <<<"$a")) / tokens))
                    fi
                    if ((blocks > 0)); then
                        python3 "$ROOT/scripts/bench/arm-proxy/symbolize.py" "$(exe "$tool" "$level")" <<<"$b" \
                            >"$WORK/hot-$name-$kind-$level-$tool.txt"
                    fi
                done
                rows+=("| $name | $kind$n2 | $level | $(mega "${insns[ours]}") | $(mega "${insns[llama]}") | $(ratio "${insns[ours]}" "${insns[llama]}") |")
                echo "${rows[-1]}" >&2
                if [[ $kind == tg ]]; then
                    bytes_rows+=("| $name | $level | $(mega "$weights") | $(mega "${loads[ours]}") | $(mega "${loads[llama]}") |")
                fi
                unset insns loads
            done
        done
    done
    echo
    echo "Instructions per token, millions (qemu-aarch64 TCG plugin; 1 thread; pp$PP2 = tokens $PP1..$PP2 of a prompt, tg$TG2 = decoded tokens $TG1..$TG2):"
    echo
    echo "| model | test | level | ours | llama.cpp | ours / llama.cpp |"
    echo "|:--|:--|:--|--:|--:|--:|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "Bytes per decoded token, MB: matmul weights (computed from the GGUF) and all loads (measured):"
    echo
    echo "| model | level | weights | ours: loads | llama.cpp: loads |"
    echo "|:--|:--|--:|--:|--:|"
    printf '%s\n' "${bytes_rows[@]}"
}

apt_packages
build_qemu
declare -A LLAMA=()
for level in "${LEVELS[@]}"; do build_llama "$level"; done
build_ours
[[ ${1:-} == build ]] && exit 0
run_all
step finished
