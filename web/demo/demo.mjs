// The demo page: everything runs in a worker-backed wisp model, so the page
// stays responsive while the model loads, generates and trains.
import { loadAdapter, loadModel, plan } from '../src/index.mjs';

const $ = (id) => document.getElementById(id);
const state = { model: null, adapter: null, adapterOn: false, busy: null, losses: [], memory: [] };
window.wispDemo = state; // for tests and curious users

function setState(s) { document.body.dataset.state = s; }
function status(el, text, error = false) {
  $(el).textContent = text;
  $(el).classList.toggle('error', error);
}
function fail(el, e) {
  console.error(e);
  status(el, `${e.name === 'AbortError' ? 'Stopped' : 'Error'}: ${e.message}`, e.name !== 'AbortError');
}
function mib(n) {
  if (n === undefined) return '?';
  if (n < 1024) return `${n} B`;
  if (n < 1048576) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1048576).toFixed(n < 10485760 ? 2 : 1)} MiB`;
}
const ms = (t) => (t < 10 ? t.toFixed(1) : t.toFixed(0));
const num = (id) => Number($(id).value);

function noteMemory(where) {
  if (!state.model) return;
  state.memory.push({ where, bytes: state.model.memoryBytes });
  $('mem-status').textContent = `wasm memory ${mib(state.model.memoryBytes)} · kernels ${state.model.info.kernels} · ` +
    `threads ${state.model.threads} · ` +
    `arena ${mib(state.model.memoryPlan.total)} (planned) + model ${mib(state.model.memoryPlan.fileBytes)}`;
}

function showPlan(p) {
  const rows = [['model', p.name ?? ''], ['file', mib(p.fileBytes)], ['weights (used in place)', mib(p.weights)]];
  for (const [part, bytes] of Object.entries(p.parts)) if (bytes) rows.push([`arena: ${part}`, mib(bytes)]);
  rows.push(['arena total', mib(p.total)], ['wasm memory needed', mib(p.wasmBytes)],
    ['layers × dim', `${p.model.nLayers} × ${p.model.dim}`], ['vocabulary', String(p.model.nVocab)],
    ['context', String(p.config.ctx)]);
  const body = $('plan-table').tBodies[0];
  body.replaceChildren(...rows.map(([k, v]) => {
    const tr = document.createElement('tr');
    tr.innerHTML = '<td></td><td class="num"></td>';
    tr.cells[0].textContent = k;
    tr.cells[1].textContent = v;
    return tr;
  }));
  $('plan-details').open = true;
}

function enable(ready) {
  for (const id of ['chat-send', 'ft-start', 'adapter-file']) $(id).disabled = !ready;
  const hasAdapter = ready && !!state.adapter;
  for (const id of ['adapter-on', 'adapter-scale', 'compare', 'dl-gguf', 'dl-peft']) $(id).disabled = !hasAdapter;
}

async function load(source, label) {
  if (state.busy) return;
  enable(false);
  setState('loading');
  state.adapter = null;
  state.adapterOn = false;
  $('adapter-on').checked = false;
  if (state.model) await state.model.dispose();
  state.model = null;
  // room for a whole conversation as the prompt (about 4 bytes per token)
  const options = { ctx: num('opt-ctx'), kvType: $('opt-kv').value, maxTextBytes: Math.max(4096, num('opt-ctx') * 8) };
  try {
    status('model-status', `Reading the header of ${label}…`);
    const p = await plan(source, options);
    showPlan(p);
    if (p.fitsWasm === false) throw new Error(`this model needs ${mib(p.wasmBytes)} of wasm memory; wasm32 allows 4 GiB`);
    const bar = $('load-progress');
    bar.hidden = false;
    bar.value = 0;
    const t0 = performance.now();
    state.model = await loadModel(source, {
      ...options,
      worker: true,
      onProgress: ({ loaded, total, from }) => {
        bar.value = total ? loaded / total : 0;
        status('model-status', `Loading ${label}${from === 'cache' ? ' from the browser cache' : ''}: ${mib(loaded)}${total ? ` of ${mib(total)}` : ''}`);
      },
    });
    bar.hidden = true;
    const m = state.model;
    status('model-status', `Loaded ${m.info.name} (${m.info.architecture}) in ${((performance.now() - t0) / 1000).toFixed(2)} s — ` +
      `context ${m.memoryPlan.config.ctx}, kernels ${m.info.kernels}, ` +
      `${m.threads > 1 ? `${m.threads} threads` : `one thread (${m.whyNotThreaded})`}.`);
    noteMemory('load');
    enable(true);
    setState('ready');
  } catch (e) {
    fail('model-status', e);
    setState('error');
  }
}

$('model-file').addEventListener('change', (ev) => {
  const f = ev.target.files[0];
  if (f) load(f, f.name);
});
$('model-url-load').addEventListener('click', () => {
  const url = $('model-url').value.trim();
  if (url) load(url, url);
});

// ---- chat ----

let transcript = '';
function appendTranscript(cls, text) {
  const span = document.createElement('span');
  span.className = cls;
  span.textContent = text;
  $('transcript').append(span);
  $('transcript').scrollTop = $('transcript').scrollHeight;
  return span;
}

function genOptions(signal) {
  const o = { maxTokens: num('gen-max'), temperature: num('gen-temp'), topK: num('gen-topk'), topP: num('gen-topp'),
    seed: num('gen-seed'), signal };
  const schema = $('json-schema').value.trim(); // the engine reports a malformed or unsupported schema by name
  if (schema) o.jsonSchema = schema;
  return o;
}

async function stream(prompt, out, signal) {
  const m = state.model;
  let text = '';
  for await (const piece of m.generate(prompt, genOptions(signal))) {
    text += piece;
    out.textContent += piece;
    $('transcript').scrollTop = $('transcript').scrollHeight;
  }
  const s = m.lastStats;
  status('gen-stats', `${s.generatedTokens} tokens · ${s.tokensPerSecond.toFixed(1)} tokens/s · prompt ${s.promptTokens} tokens ` +
    `(${s.evaluatedPromptTokens} evaluated) in ${ms(s.prefillMs)} ms · first token after ${ms(s.ttftMs)} ms · ` +
    `stopped: ${s.stopReason}${state.adapterOn ? ' · with adapter' : ''}`);
  noteMemory('generate');
  return text;
}

// Chat formats: the conversation as messages, rendered by the chat template.
let messages = [];
async function streamChat(user, out, signal) {
  const m = state.model;
  const format = $('chat-format').value;
  const system = $('chat-system').value.trim();
  if (messages.length === 0 && system) messages.push({ role: 'system', content: system });
  messages.push({ role: 'user', content: user });
  const template = format === 'model' ? undefined : format;
  let text = '';
  try {
    $('template-text').textContent = await m.applyTemplate(messages, { template });
    for await (const piece of m.chat(messages, { ...genOptions(signal), template })) {
      text += piece;
      out.textContent += piece;
      $('transcript').scrollTop = $('transcript').scrollHeight;
    }
  } catch (e) {
    messages.pop(); // the message got no answer (a template may refuse it): it leaves the conversation
    throw e;
  }
  messages.push({ role: 'assistant', content: text }); // a stopped answer stays, as far as it got
  const s = m.lastStats;
  status('gen-stats', `${s.generatedTokens} tokens · ${s.tokensPerSecond.toFixed(1)} tokens/s · conversation ${s.promptTokens} tokens ` +
    `(${s.evaluatedPromptTokens} new, the rest from the cache) in ${ms(s.prefillMs)} ms · stopped: ${s.stopReason}` +
    `${state.adapterOn ? ' · with adapter' : ''}`);
  noteMemory('generate');
  return text;
}

$('chat-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  if (!state.model || state.busy) return;
  const user = $('chat-input').value;
  if (!user.trim()) return;
  if ($('chat-format').value) {
    const controller = new AbortController();
    state.busy = controller;
    setState('generating');
    $('chat-send').disabled = true;
    $('chat-stop').disabled = false;
    $('transcript').classList.add('bubbles');
    appendTranscript('user', user);
    const out = appendTranscript(state.adapterOn ? 'model lora' : 'model', '');
    $('chat-input').value = '';
    try {
      await streamChat(user, out, controller.signal);
    } catch (e) {
      fail('gen-stats', e);
    } finally {
      state.busy = null;
      $('chat-send').disabled = false;
      $('chat-stop').disabled = true;
      setState('ready');
    }
    return;
  }
  const keep = $('chat-continue').checked;
  const prompt = keep ? transcript + user : user;
  const controller = new AbortController();
  state.busy = controller;
  setState('generating');
  $('chat-send').disabled = true;
  $('chat-stop').disabled = false;
  const separate = $('transcript').childElementCount > 0 && !(keep && transcript);
  appendTranscript('user', (separate ? '\n\n' : '') + user);
  const out = appendTranscript(state.adapterOn ? 'model lora' : 'model', '');
  try {
    const text = await stream(prompt, out, controller.signal);
    transcript = prompt + text;
  } catch (e) {
    fail('gen-stats', e);
  } finally {
    state.busy = null;
    $('chat-send').disabled = false;
    $('chat-stop').disabled = true;
    setState('ready');
  }
});
$('chat-stop').addEventListener('click', () => state.busy?.abort());
$('chat-format').addEventListener('change', () => { // another format starts another conversation
  messages = [];
  transcript = '';
  $('transcript').replaceChildren();
  $('transcript').classList.toggle('bubbles', $('chat-format').value !== '');
  $('template-text').textContent = '';
});
$('chat-clear').addEventListener('click', () => {
  messages = [];
  $('template-text').textContent = '';
  transcript = '';
  $('transcript').replaceChildren();
});
$('chat-input').addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey) {
    ev.preventDefault();
    $('chat-form').requestSubmit();
  }
});

// ---- training text: paste or drop ----

const zone = $('drop-zone');
zone.addEventListener('dragover', (ev) => { ev.preventDefault(); zone.classList.add('over'); });
zone.addEventListener('dragleave', () => zone.classList.remove('over'));
zone.addEventListener('drop', async (ev) => {
  ev.preventDefault();
  zone.classList.remove('over');
  const f = ev.dataTransfer.files[0];
  if (f) $('train-text').value = await f.text();
  else $('train-text').value = ev.dataTransfer.getData('text/plain');
});
$('train-file').addEventListener('change', async () => { // a text or a conversations (.jsonl) file
  const f = $('train-file').files[0];
  if (f) $('train-text').value = await f.text();
});

// ---- loss chart ----

function drawLoss() {
  const c = $('loss-chart');
  const dpr = window.devicePixelRatio || 1;
  const w = c.clientWidth * dpr;
  const h = c.clientHeight * dpr;
  if (c.width !== w || c.height !== h) { c.width = w; c.height = h; }
  const g = c.getContext('2d');
  g.clearRect(0, 0, w, h);
  const L = state.losses;
  const pad = 34 * dpr;
  g.font = `${11 * dpr}px system-ui`;
  g.fillStyle = '#5c6578';
  if (L.length === 0) { g.fillText('loss per step appears here while training', pad, h / 2); return; }
  const steps = Math.max(state.totalSteps ?? L.length, 2);
  const hi = Math.max(...L.map((p) => p.loss));
  const lo = Math.min(...L.map((p) => p.loss));
  const span = hi - lo || 1;
  const x = (s) => pad + (w - pad * 1.5) * (s - 1) / (steps - 1);
  const y = (v) => h - pad * 0.8 - (h - pad * 1.4) * (v - lo) / span;
  g.strokeStyle = '#dde1ea';
  g.beginPath(); g.moveTo(pad, y(lo)); g.lineTo(w - pad / 2, y(lo)); g.moveTo(pad, y(hi)); g.lineTo(w - pad / 2, y(hi)); g.stroke();
  g.fillText(hi.toFixed(3), 2, y(hi) + 4 * dpr);
  g.fillText(lo.toFixed(3), 2, y(lo) + 4 * dpr);
  g.strokeStyle = '#3656d6';
  g.lineWidth = 2 * dpr;
  g.beginPath();
  L.forEach((p, i) => (i ? g.lineTo(x(p.step), y(p.loss)) : g.moveTo(x(p.step), y(p.loss))));
  g.stroke();
  g.fillStyle = '#3656d6';
  for (const p of L) { g.beginPath(); g.arc(x(p.step), y(p.loss), 2.5 * dpr, 0, 7); g.fill(); }
}
window.addEventListener('resize', drawLoss);
drawLoss();

// ---- fine-tuning ----

async function setAdapter(adapter, on) {
  const m = state.model;
  if (state.adapter && state.adapter !== adapter && state.adapterOn) await m.removeAdapter(state.adapter);
  state.adapter = adapter;
  state.adapterOn = on;
  $('adapter-on').checked = on;
  if (on) await m.useAdapter(adapter, Number($('adapter-scale').value));
  enable(true);
}

$('ft-start').addEventListener('click', async () => {
  if (!state.model || state.busy) return;
  const text = $('train-text').value;
  if (!text.trim()) { status('ft-status', 'Paste or drop some training text first.', true); return; }
  const controller = new AbortController();
  state.busy = controller;
  setState('training');
  enable(false);
  $('ft-stop').disabled = false;
  state.losses = [];
  state.totalSteps = num('ft-steps');
  drawLoss();
  const bar = $('ft-progress');
  bar.value = 0;
  try {
    if (state.adapterOn) await state.model.removeAdapter(state.adapter);
    state.adapterOn = false;
    // JSONL (a record per line: prompt/completion, instruction/output, or conversations {"messages": [...]},
    // rendered with the model's chat template and scored on the assistant turns) or plain text
    const jsonl = text.trim().split('\n').every((l) => !l.trim() || l.trim().startsWith('{'));
    const template = $('ft-template').value;
    const method = $('ft-method').value;
    const dpo = method === 'dpo';
    const virtual = method === 'prompt' || method === 'prefix'; // virtual positions instead of LoRA pairs
    // DPO takes the pairs as records; the other methods the text as it is
    const data = dpo ? text.split('\n').filter((l) => l.trim()).map((l, i) => {
      try { return JSON.parse(l); } catch { throw new Error(`DPO pairs: line ${i + 1} is not JSON`); }
    }) : text;
    const adapter = await state.model.finetune(data, {
      method, ...(dpo ? {} : { format: jsonl ? 'jsonl' : 'text' }),
      ...(jsonl && template && !dpo ? { template } : {}), ...(jsonl && $('ft-packing').checked && !dpo ? { packing: true } : {}),
      ...(virtual ? { numVirtualTokens: num('ft-virtual') } : { rank: num('ft-rank'), alpha: num('ft-alpha') }),
      steps: num('ft-steps'), ctx: num('ft-ctx'), batch: num('ft-batch'),
      lr: num('ft-lr'), seed: num('ft-seed'), signal: controller.signal,
      onProgress: (p) => {
        state.losses.push(p);
        bar.value = p.step / p.steps;
        state.memory.push({ where: `train step ${p.step}`, bytes: p.memoryBytes });
        const rewards = dpo ? ` · reward accuracy ${p['rewards/accuracies'].toFixed(2)} · margin ${p['rewards/margins'].toFixed(3)}` : '';
        status('ft-status', `step ${p.step}/${p.steps} · loss ${p.loss.toFixed(4)}${rewards} · ${p.tokensPerSecond.toFixed(0)} tokens/s`);
        drawLoss();
      },
    });
    const last = state.losses.at(-1);
    const d = adapter.info.data;
    state.trainingData = d;
    // JSONL: what the records became, truncation included (never silent)
    const report = jsonl && d && !dpo ? ` Data: ${d.records} records in ${d.windows} windows${$('ft-packing').checked ? ' (packed)' : ''}, ` +
      `${d.scoredTokens} scored tokens, ${d.truncated} cut to the context, ${d.unscored} left with nothing to score.` : '';
    const what = virtual ? `${adapter.info.numVirtualTokens} virtual ${method === 'prefix' ? 'key/value positions' : 'tokens'}`
      : `${adapter.info.pairs} projections at rank ${adapter.info.rank} (${$('ft-method').selectedOptions[0].textContent.split(' ')[0]})`;
    status('ft-status', `Trained ${what}: loss ${state.losses[0]?.loss.toFixed(4)} → ` +
      `${last?.loss.toFixed(4)} in ${state.losses.length} steps (${last?.tokensPerSecond.toFixed(0)} tokens/s). The adapter is on.${report}`);
    await setAdapter(adapter, true);
    noteMemory('finetune');
    setState('trained');
  } catch (e) {
    fail('ft-status', e);
    setState('ready');
  } finally {
    state.busy = null;
    $('ft-stop').disabled = true;
    enable(!!state.model);
  }
});
$('ft-stop').addEventListener('click', () => state.busy?.abort());

// ---- adapter controls ----

$('adapter-on').addEventListener('change', async (ev) => {
  try {
    if (ev.target.checked) await state.model.useAdapter(state.adapter, Number($('adapter-scale').value));
    else await state.model.removeAdapter(state.adapter);
    state.adapterOn = ev.target.checked;
    status('adapter-status', state.adapterOn ? 'Adapter on.' : 'Adapter off: the base model answers.');
  } catch (e) {
    ev.target.checked = state.adapterOn;
    fail('adapter-status', e);
  }
});
$('adapter-scale').addEventListener('input', (ev) => { $('adapter-scale-out').value = Number(ev.target.value).toFixed(2); });
$('adapter-scale').addEventListener('change', async (ev) => {
  if (!state.adapterOn) return;
  try {
    await state.model.useAdapter(state.adapter, Number(ev.target.value));
  } catch (e) {
    fail('adapter-status', e);
  }
});
$('adapter-file').addEventListener('change', async (ev) => {
  const files = [...ev.target.files];
  if (files.length === 0 || !state.model || state.busy) return;
  const name = files.map((f) => f.name).join(' + ');
  try {
    const a = await loadAdapter(state.model, files.length === 1 ? files[0] : files, { name });
    await setAdapter(a, true);
    status('adapter-status', `Loaded ${name}: ${a.info.pairs} projections, rank ${a.info.rank}. The adapter is on.`);
    noteMemory('adapter');
  } catch (e) {
    fail('adapter-status', e);
  }
});

$('compare').addEventListener('click', async () => {
  if (!state.model || state.busy || !state.adapter) return;
  const prompt = $('chat-input').value.trim() || 'Once upon a time';
  const controller = new AbortController();
  state.busy = controller;
  setState('comparing');
  const wasOn = state.adapterOn;
  try {
    $('cmp-base').textContent = prompt;
    $('cmp-lora').textContent = prompt;
    if (wasOn) await state.model.removeAdapter(state.adapter);
    state.adapterOn = false;
    await stream(prompt, $('cmp-base'), controller.signal);
    await state.model.useAdapter(state.adapter, Number($('adapter-scale').value));
    state.adapterOn = true;
    await stream(prompt, $('cmp-lora'), controller.signal);
    if (!wasOn) {
      await state.model.removeAdapter(state.adapter);
      state.adapterOn = false;
    }
    status('adapter-status', 'Same prompt, same seed: only the adapter differs.');
  } catch (e) {
    fail('adapter-status', e);
  } finally {
    state.busy = null;
    setState(state.adapter ? 'trained' : 'ready');
  }
});

function download(bytes, name, type) {
  const url = URL.createObjectURL(new Blob([bytes], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

$('dl-gguf').addEventListener('click', async () => {
  try {
    const bytes = await state.adapter.toGGUF();
    download(bytes, 'wisp-lora.gguf', 'application/octet-stream');
    status('adapter-status', `Saved wisp-lora.gguf (${bytes.length} bytes, llama.cpp's GGUF LoRA format).`);
  } catch (e) {
    fail('adapter-status', e);
  }
});
$('dl-peft').addEventListener('click', async () => {
  try {
    const { config, safetensors } = await state.adapter.toPEFT();
    download(config, 'adapter_config.json', 'application/json');
    download(safetensors, 'adapter_model.safetensors', 'application/octet-stream');
    status('adapter-status', `Saved adapter_config.json and adapter_model.safetensors (${safetensors.length} bytes) for PEFT.`);
  } catch (e) {
    fail('adapter-status', e);
  }
});

setState('empty');
