// The llama.cpp side of `make bench`: the same measurement as `wisp bench`
// (same token ids, same prompt and decode lengths, same thread count, one
// warm-up and the median of the repetitions), run through node-llama-cpp's
// prebuilt llama.cpp. Prints one JSON object.
//
// usage: node bench/llamacpp_bench.mjs --peer DIR -m MODEL [-t N] [-p N] [-n N] [-r N]
//   DIR holds node_modules/node-llama-cpp (make bench installs it there).
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { median, parseArgs } from "./peer_args.mjs";

// Same sequence as wisp bench (cli/cmd_bench.c).
const benchToken = (i, nVocab) => 3 + ((i * 7919 + 13) % (nVocab - 3));

const o = parseArgs(process.argv, "--peer", "peer");
const entry = pathToFileURL(join(resolve(o.peer), "node_modules", "node-llama-cpp", "dist", "index.js")).href;
const { getLlama, LlamaLogLevel } = await import(entry);

// build "never": only the prebuilt binaries, nothing is downloaded or compiled
const llama = await getLlama({ gpu: false, build: "never", maxThreads: o.threads, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: resolve(o.model), gpuLayers: 0, useMmap: true });
const nVocab = model.tokens.nVocab ?? model.fileInsights.tokens?.nVocab;
const context = await model.createContext({
    contextSize: o.prompt + o.gen + 8,
    batchSize: Math.max(1, Math.min(o.prompt, 512)),
    threads: { ideal: o.threads, min: o.threads },
    sequences: 1,
});
const seq = context.getSequence();
const tokens = Array.from({ length: o.prompt + o.gen }, (_, i) => benchToken(i, nVocab));
// logits for the last token of each step, as wisp computes them; greedy pick (cheap)
const last = { generateNext: { token: true, options: { temperature: 0 } } };

const prefill = [], decode = [];
for (let r = -1; r < o.reps; r++) { // r = -1: warm-up
    await seq.clearHistory();
    const t0 = performance.now();
    if (o.prompt > 0) {
        const items = tokens.slice(0, o.prompt).map((t, i) => (i === o.prompt - 1 ? [t, last] : t));
        await seq.controlledEvaluate(items);
    }
    const t1 = performance.now();
    for (let i = 0; i < o.gen; i++) await seq.controlledEvaluate([[tokens[o.prompt + i], last]]);
    const t2 = performance.now();
    if (r >= 0) {
        prefill.push(o.prompt ? (o.prompt * 1000) / (t1 - t0) : 0);
        decode.push(o.gen ? (o.gen * 1000) / (t2 - t1) : 0);
    }
}
console.log(JSON.stringify({
    model: o.model, peer: "llama.cpp (node-llama-cpp prebuilt)", threads: o.threads, prompt_tokens: o.prompt,
    gen_tokens: o.gen, reps: o.reps, prefill_tok_s: median(prefill), decode_tok_s: median(decode),
    prefill_tok_s_runs: prefill, decode_tok_s_runs: decode,
}));
await context.dispose();
await model.dispose();
await llama.dispose();
