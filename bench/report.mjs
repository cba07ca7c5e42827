// The `make bench` table: wisp next to llama.cpp for every model and thread
// count, the ratios, decode's achieved weight bandwidth against the measured
// memory bandwidth, and whether issue 3's targets are met.
// usage: node bench/report.mjs RESULTS.jsonl
import { readFileSync } from "node:fs";

const rows = readFileSync(process.argv[2], "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
const pad = (s, n) => String(s).padStart(n);
const fix = (v, d = 1) => (Number.isFinite(v) ? v.toFixed(d) : "-");
const mark = (ok) => (ok ? "yes" : "NO");

console.log(`kernels: ${rows[0]?.wisp.kernels ?? "?"}; prompt ${rows[0]?.wisp.prompt_tokens} tokens, ` +
    `decode ${rows[0]?.wisp.gen_tokens} tokens, medians of ${rows[0]?.wisp.reps} runs each`);
console.log("");
console.log(["model".padEnd(22), pad("thr", 3), "|", pad("prefill tok/s", 13), pad("llama.cpp", 10), pad("ratio", 6), "|",
    pad("decode tok/s", 12), pad("llama.cpp", 10), pad("ratio", 6), "|", pad("GB/s", 6), pad("roofline", 9), "|",
    pad("cpu", 5)].join(" "));
// The machine's bandwidth per thread count: the median of the copy tests the
// rows ran (each wisp bench measures after decoding). One figure per thread
// count keeps the rows comparable; on a shared VM a single copy test can land
// a quarter above or below the others.
const median = (xs) => {
    const s = [...xs].sort((a, b) => a - b), m = s.length >> 1;
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const copies = new Map();
for (const r of rows)
    if (r.wisp.mem_bandwidth_bytes_s > 0) copies.set(r.threads, [...(copies.get(r.threads) ?? []), r.wisp.mem_bandwidth_bytes_s]);
const machine = new Map([...copies].map(([t, xs]) => [t, median(xs)]));
let failures = [];
for (const r of rows) {
    const w = r.wisp, l = r.llamacpp;
    const pr = w.prefill_tok_s / l.prefill_tok_s, dr = w.decode_tok_s / l.decode_tok_s;
    const bw = machine.get(r.threads) ?? 0;
    const roof = bw > 0 ? w.decode_bandwidth_bytes_s / bw : NaN;
    console.log([r.name.padEnd(22), pad(r.threads, 3), "|", pad(fix(w.prefill_tok_s), 13), pad(fix(l.prefill_tok_s), 10),
        pad(fix(pr, 2), 6), "|", pad(fix(w.decode_tok_s), 12), pad(fix(l.decode_tok_s), 10), pad(fix(dr, 2), 6), "|",
        pad(fix(w.decode_bandwidth_bytes_s / 1e9, 1), 6), pad(fix(100 * roof, 0) + "%", 9), "|",
        pad(fix(100 * w.cpu_share, 0) + "%", 5)].join(" "));
    if (!(dr >= 1.25)) failures.push(`${r.name} t${r.threads}: decode ${fix(dr, 2)}x llama.cpp (target 1.25x)`);
    if (!(pr >= 1.0)) failures.push(`${r.name} t${r.threads}: prefill ${fix(pr, 2)}x llama.cpp (target 1.0x)`);
    if (/q8_0|q4_0/.test(r.name) && !(roof >= 0.8))
        failures.push(`${r.name} t${r.threads}: decode at ${fix(100 * roof, 0)}% of the memory roofline (target 80%)`);
}
console.log("");
for (const [t, xs] of copies)
    console.log(`memory bandwidth (STREAM-like copy, ${t} thread${t > 1 ? "s" : ""}): ${fix(machine.get(t) / 1e9, 1)} GB/s, ` +
        `the median of ${xs.length} tests (${fix(Math.min(...xs) / 1e9, 1)} to ${fix(Math.max(...xs) / 1e9, 1)})`);
console.log("GB/s: weight bytes decode reads per token x decode tok/s; roofline: that over the copy bandwidth;");
console.log("cpu: share of the threads' time wisp actually got while measuring (below 100%: other work was running)");
console.log(failures.length ? `targets missed:\n  ${failures.join("\n  ")}` : "all targets met (decode >= 1.25x, prefill >= 1.0x, Q8_0/Q4_0 decode >= 80% of the roofline)");
