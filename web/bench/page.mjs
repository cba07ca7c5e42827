// One measurement in the browser, chosen by the query string:
//   ?engine=wisp|wllama&model=/models/x.gguf&n=64&prompt=...&ctx=512&threads=N[&finetune=steps][&wllama={paths}]
// Both engines run N threads (the page is cross-origin isolated), each in
// its own worker; the threads each really ran on are recorded. Figures are taken
// the same way for both: the engine's own prefill and decode timings, and
// time to first token as the page sees it. The result lands in window.__bench.
const q = new URLSearchParams(location.search);
const engine = q.get('engine');
const model = q.get('model');
const nGen = Number(q.get('n') || 64);
const ctx = Number(q.get('ctx') || 512);
const prompt = q.get('prompt');
const threads = Number(q.get('threads') || 1);
const out = document.getElementById('out');
// Each figure is the best of RUNS runs of the same prompt, each evaluating
// the whole prompt again (the machine may be shared; both engines get the
// same treatment).
const RUNS = 3;
function best(runs) {
  return {
    prefillTps: Math.max(...runs.map((x) => x.prefill)), decodeTps: Math.max(...runs.map((x) => x.decode)),
    ttftMs: Math.min(...runs.map((x) => x.ttft)), runs,
  };
}

async function wisp() {
  const w = await import('/src/index.mjs');
  const t0 = performance.now();
  const m = await w.loadModel(model, { worker: true, ctx, threads });
  const loadMs = performance.now() - t0;
  await m.complete('Hello', { temperature: 0, maxTokens: 4 }); // warm-up
  const runs = [];
  for (let i = 0; i < RUNS; i++) {
    const t1 = performance.now();
    let first = 0;
    for await (const piece of m.generate(prompt, { temperature: 0, maxTokens: nGen, cachePrompt: false })) if (!first && piece) first = performance.now();
    runs.push({ ...m.lastStats, ttft: (first || performance.now()) - t1 });
  }
  const r = {
    engine: 'wisp', loadMs, kernels: m.info.kernels, threads: m.threads, whyNotThreaded: m.whyNotThreaded, promptTokens: runs[0].evaluatedPromptTokens, generated: runs[0].generatedTokens,
    ...best(runs.map((x) => ({ prefill: x.prefillTokensPerSecond, decode: x.tokensPerSecond, ttft: x.ttft }))),
    wasmMemory: m.memoryBytes, arena: m.memoryPlan.total,
  };
  const steps = Number(q.get('finetune') || 0);
  if (steps) {
    const text = await (await fetch('/data/tinyshakespeare.txt')).text();
    const opts = JSON.parse(q.get('ftopts') || '{}');
    const progress = [];
    const ftPlan = await m.plan({ finetune: opts });
    await m.finetune(text.slice(0, 200000), { ...opts, steps, onProgress: (p) => progress.push(p) });
    const last = progress.at(-1);
    r.finetune = { ...opts, steps, trainArena: ftPlan.total, tokensPerSecond: last.averageTokensPerSecond,
      losses: progress.map((p) => p.loss), wasmMemory: last.memoryBytes };
  }
  await m.dispose();
  return r;
}

async function wllama() {
  const { Wllama } = await import('/wllama/index.js');
  const w = new Wllama(JSON.parse(q.get('wllama') || '{"default":"/wllama/wasm/wllama.wasm"}'), { suppressNativeLog: !q.has('log') });
  const t0 = performance.now();
  await w.loadModelFromUrl(new URL(model, location.href).href, { n_ctx: ctx, n_threads: threads, n_gpu_layers: 0 });
  const loadMs = performance.now() - t0;
  // No extra warm-up: loading already runs llama.cpp's warm-up decode. (A
  // second prompt could also crash it: wllama fails on generated text that is
  // not valid UTF-8, which random-weight models produce; the driver picks a
  // prompt whose continuation is clean.)
  const sampling = { temperature: 0, temp: 0, ignore_eos: true };
  const runs = [];
  for (let i = 0; i < RUNS; i++) {
    const t1 = performance.now();
    let first = 0;
    let timings = null;
    await w.createCompletion({
      prompt, max_tokens: nGen, ...sampling, stream: true, cache_prompt: false,
      onData: (chunk) => {
        if (!first && chunk.choices?.[0]?.text) first = performance.now();
        if (chunk.timings) timings = chunk.timings;
      },
    });
    runs.push({ ...timings, ttft: (first || performance.now()) - t1 });
  }
  const r = {
    engine: 'wllama', loadMs, threads: w.getNumThreads(), multithread: w.isMultithread(), promptTokens: runs[0].prompt_n,
    generated: runs[0].predicted_n,
    ...best(runs.map((x) => ({ prefill: x.prompt_per_second, decode: x.predicted_per_second, ttft: x.ttft }))),
  };
  await w.exit();
  return r;
}

try {
  const r = engine === 'wisp' ? await wisp() : await wllama();
  out.textContent = JSON.stringify(r, null, 2);
  window.__bench = { ok: true, result: r };
} catch (e) {
  out.textContent = String(e?.stack ?? e);
  window.__bench = { ok: false, error: String(e?.message ?? e) };
}
