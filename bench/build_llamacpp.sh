#!/usr/bin/env bash
# The fair speed peer for `make bench` (issue 21): llama.cpp built natively
# (Release, -DGGML_NATIVE=ON) from the source snapshot in ../shared/peers.
# Extracts and builds once under DEST and reuses the result; prints the
# folder holding llama-bench on stdout and exits 0 when it is there.
# Exits 2, saying why on stderr, when the snapshot is missing (the caller
# then falls back to node-llama-cpp alone), 1 when the build fails.
# Environment: TARBALL (the snapshot), DEST (the build folder, inside the
# project's build/; never committed), JOBS (default 2).
set -u
: "${TARBALL:?}" "${DEST:?}"
JOBS=${JOBS:-2}
bin=$DEST/build/bin
if [ -x "$bin/llama-bench" ] && [ -x "$bin/llama-quantize" ]; then
    echo "$bin"
    exit 0
fi
if [ ! -f "$TARBALL" ]; then
    echo "the native llama.cpp peer is not available: $TARBALL is missing; comparing against node-llama-cpp only" >&2
    exit 2
fi
command -v cmake >/dev/null || { echo "building the native llama.cpp peer needs cmake (apt-get install cmake)" >&2; exit 1; }
mkdir -p "$DEST"
if [ ! -f "$DEST/CMakeLists.txt" ]; then
    echo "extracting $TARBALL into $DEST" >&2
    tar -xzf "$TARBALL" -C "$DEST" --strip-components=1 || { echo "could not extract $TARBALL" >&2; exit 1; }
fi
echo "building llama.cpp natively in $DEST (about 10 minutes on 2 cores; once)" >&2
{
    cmake -S "$DEST" -B "$DEST/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_SERVER=OFF &&
    nice -n 10 cmake --build "$DEST/build" -j"$JOBS" --target llama-bench llama-cli llama-quantize
} > "$DEST/build.log" 2>&1 || { echo "the llama.cpp build failed:" >&2; tail -n 20 "$DEST/build.log" >&2; exit 1; }
[ -x "$bin/llama-bench" ] || { echo "the llama.cpp build made no $bin/llama-bench" >&2; exit 1; }
echo "$bin"
