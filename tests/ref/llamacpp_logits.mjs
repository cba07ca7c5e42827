// llama.cpp's logits for the cases of a logits JSON file (the schema of
// ../shared/golden/logits), through the node-llama-cpp package: the same
// tokens are fed (BOS included), with optional LoRA adapters, and the output
// uses the same schema so tests/tools/compare_logits can compare it.
//
// usage: node llamacpp_logits.mjs NODE_MODULES_DIR MODEL.gguf CASES.json [--lora FILE[:SCALE]]... [--greedy] > OUT.json
// --greedy also computes the 32-token greedy continuation of each case.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const [modulesDir, modelPath, casesPath, ...rest] = process.argv.slice(2);
const loras = [];
let withGreedy = false;
for (let i = 0; i < rest.length; i++) {
    if (rest[i] === "--greedy") { withGreedy = true; continue; }
    if (rest[i] !== "--lora" || i + 1 >= rest.length) throw new Error(`unexpected argument ${rest[i]}`);
    const spec = rest[++i], colon = spec.lastIndexOf(":");
    const scale = colon > 0 ? Number(spec.slice(colon + 1)) : NaN;
    loras.push(Number.isFinite(scale) ? { filePath: spec.slice(0, colon), scale } : { filePath: spec, scale: 1 });
}
const require = createRequire(path.join(path.resolve(modulesDir), "node_modules", "x.js"));
const { getLlama, LlamaLogLevel } = await import(require.resolve("node-llama-cpp"));

const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const input = JSON.parse(readFileSync(casesPath, "utf8"));
const nVocab = input.n_vocab;

const out = { model: path.basename(modelPath), n_vocab: nVocab, cases: [] };
for (const c of input.cases) {
    const context = await model.createContext({
        contextSize: 256, batchSize: 256, threads: 1,
        lora: loras.length ? { adapters: loras } : undefined,
    });
    const seq = context.getSequence();
    const items = c.tokens.map((t) => [t, { generateNext: { logits: true, token: true } }]);
    const results = await seq.controlledEvaluate(items);
    const logits = results.map((r) => {
        const row = new Array(nVocab).fill(0);
        for (const [tok, v] of r.next.logits) row[tok] = v;
        return row;
    });
    // greedy continuation: argmax of the last logits, fed back one token at a time
    const greedy = [];
    let last = logits[logits.length - 1];
    for (let k = 0; withGreedy && k < 32; k++) {
        let best = 0;
        for (let t = 1; t < nVocab; t++) if (last[t] > last[best]) best = t;
        greedy.push(best);
        if (k === 31) break;
        const [r] = await seq.controlledEvaluate([[best, { generateNext: { logits: true } }]]);
        last = new Array(nVocab).fill(0);
        for (const [tok, v] of r.next.logits) last[tok] = v;
    }
    out.cases.push({ prompt: c.prompt, tokens: c.tokens, logits, greedy });
    await context.dispose();
}
process.stdout.write(JSON.stringify(out) + "\n");
await model.dispose();
await llama.dispose();
