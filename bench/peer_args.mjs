// Shared by the llama.cpp sides of `make bench` (llamacpp_bench.mjs through
// node-llama-cpp, llamacpp_native_bench.mjs through a native llama-bench):
// the same options as `wisp bench`, and the median it reports.

// o: the defaults, including the peer's own option (named by `peerKey`, a
// path); returns o with the command line applied.
export function parseArgs(argv, peerFlag, peerKey) {
    const o = { [peerKey]: null, model: null, threads: 1, prompt: 128, gen: 64, reps: 3 };
    const names = { [peerFlag]: peerKey, "-m": "model", "--model": "model", "-t": "threads", "--threads": "threads",
        "-p": "prompt", "--prompt-tokens": "prompt", "-n": "gen", "--gen-tokens": "gen", "-r": "reps", "--reps": "reps" };
    for (let i = 2; i < argv.length; i += 2) {
        const key = names[argv[i]];
        if (!key || i + 1 >= argv.length) throw new Error(`unknown or incomplete option ${argv[i]}`);
        o[key] = [peerKey, "model"].includes(key) ? argv[i + 1] : Number(argv[i + 1]);
    }
    if (!o[peerKey] || !o.model) throw new Error(`need ${peerFlag} DIR and -m MODEL`);
    return o;
}

export function median(v) {
    if (!v.length) return 0;
    const s = [...v].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}
