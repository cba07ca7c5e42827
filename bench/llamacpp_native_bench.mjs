// The natively built llama.cpp side of `make bench` (issue 21's fair peer):
// runs its llama-bench with the same prompt length, decoded tokens, thread
// count and repetitions as `wisp bench`, and prints one JSON object shaped
// like llamacpp_bench.mjs's (medians of the repetitions; llama-bench warms
// up first, as wisp bench does).
// llama-bench measures prefill (pp) and decode (tg) as separate tests: its
// decode starts from an empty context, wisp's follows the prompt. At 128
// tokens of context that attention is well under 1% of a step's work on the
// shapes of make bench.
//
// usage: node bench/llamacpp_native_bench.mjs --bin DIR -m MODEL [-t N] [-p N] [-n N] [-r N]
//   DIR holds llama-bench (bench/build_llamacpp.sh prints it).
import { execFileSync } from "node:child_process";
import { join, resolve } from "node:path";
import { median, parseArgs } from "./peer_args.mjs";

const o = parseArgs(process.argv, "--bin", "bin");
const args = ["-m", resolve(o.model), "-t", String(o.threads), "-r", String(o.reps), "-o", "json"];
// each test alone: "-p 0" would also ask for a zero-length test
args.push("-p", String(o.prompt), "-n", String(o.gen));
let out;
try {
    out = execFileSync(join(resolve(o.bin), "llama-bench"), args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"],
        maxBuffer: 1 << 24 });
} catch (e) {
    // one line for the table's notes: llama-bench's own error (for a family
    // the snapshot predates, "failed to load model")
    const why = String(e.stderr ?? "").split("\n").filter((l) => /error/i.test(l)).pop() ?? e.message.split("\n")[0];
    console.error(`llama-bench: ${why.replace(/^main: error: /, "").replace(/ '[^']*'$/, "")}`);
    process.exit(1);
}
const tests = JSON.parse(out);
const pick = (pp) => tests.find((t) => (pp ? t.n_prompt > 0 && t.n_gen === 0 : t.n_prompt === 0 && t.n_gen > 0));
const pp = o.prompt ? pick(true) : null, tg = o.gen ? pick(false) : null;
if ((o.prompt && !pp) || (o.gen && !tg)) throw new Error(`llama-bench printed no ${!pp ? "prompt" : "decode"} test: ${out}`);
const first = pp ?? tg;
console.log(JSON.stringify({
    // (llama.cpp's build_commit is the enclosing git checkout's when built inside one: not named here)
    model: o.model, peer: `llama.cpp built natively (${first.cpu_info}, ${first.backends})`, threads: o.threads,
    prompt_tokens: o.prompt, gen_tokens: o.gen, reps: o.reps,
    prefill_tok_s: pp ? median(pp.samples_ts) : 0, decode_tok_s: tg ? median(tg.samples_ts) : 0,
    prefill_tok_s_runs: pp ? pp.samples_ts : [], decode_tok_s_runs: tg ? tg.samples_ts : [],
}));
