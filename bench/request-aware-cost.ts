// Per-request cost of request-aware choice (issue 10 §5): the real filter in the embedded host
// reading an OpenAI chat body (headers held, body buffered, parsed, prompt hashed in 64-byte
// blocks, prefix index looked up and recorded, request-aware scoring) against the body-blind
// choice on the same requests with the same body, at 4 KiB and 64 KiB prompts; beside it, the
// round trip an out-of-process picker costs (ext_proc style: the body POSTed to an in-process
// HTTP/1.1 server on loopback that parses it and answers an endpoint); and wasm memory under a
// stream of distinct prompts (bounded by the prefix index's configured entries).
//
//   tsx bench/request-aware-cost.ts [--quick]     quick: 10 rounds × 200, 10^5 distinct prompts (full: 30 × 1000, 10^6)
import * as path from 'node:path';
import * as http from 'node:http';
import { ProxyWasmHost } from '../host/src';
import { encodeSnapshot, type InstanceRecord } from '../agent/src/snapshot/codec';

const ROOT = path.resolve(__dirname, '..');
const QUICK = process.argv.includes('--quick');
const ROUNDS = QUICK ? 10 : 30;
const BATCH = QUICK ? 200 : 1000;
const DISTINCT = QUICK ? 100_000 : 1_000_000;
const N_INSTANCES = 16;
const AUTH = 'inference.example';

function instances(n: number): InstanceRecord[] {
  return Array.from({ length: n }, (_, i) => ({ service: 'llm', addr: `10.0.0.${i + 1}:8000`, peer: '', healthy: true, reason: 'ok' as const,
    rho: 0.2 + 0.6 * ((i * 37) % 100) / 100, esMs: 80, es2Ms2: 80 * 80 * 2.7, lambdaPerS: 10, queueDepth: i % 5, p50Ms: 60, p99Ms: 300,
    baselineP99Ms: 250, gpuUtil: 0.5, dataAgeMs: 100, slots: 4 }));
}

async function hostFor(requestAware: boolean): Promise<ProxyWasmHost> {
  const body = encodeSnapshot({ seq: 1, generatedAtMs: 1_000_000, peers: [], instances: instances(N_INSTANCES) });
  const svc: Record<string, unknown> = { authorities: [AUTH], service: 'llm', stalenessMs: 600000 };
  if (requestAware) svc.request = { allowOnHeadersStopIteration: true };
  const host = await ProxyWasmHost.create({
    wasm: path.join(ROOT, 'build/switchyard.wasm'), workers: 1, mainThread: false, canary: false, clock: 'manual', startTimeMs: 1_000_000,
    allowOnHeadersStopIteration: true,
    pluginConfig: JSON.stringify({ agent: { cluster: 'switchyard_agent', longPollMs: 0, pollMs: 10 }, link: { services: [] }, loadAware: { services: [svc] } }),
    clusters: { switchyard_agent: { handler: () => ({ status: 200, body }) } },
  });
  for (let i = 0; i < 10; i++) await host.advance(20);
  if ((host.metric('switchyard.snapshot.updates') ?? 0) < 1) throw new Error('snapshot not adopted');
  return host;
}

const HEADERS = { ':method': 'POST', ':path': '/v1/chat/completions', ':authority': AUTH, ':scheme': 'http', 'content-type': 'application/json' };
function chat(system: string, user: string): string {
  return JSON.stringify({ model: 'llama-3-8b', messages: [{ role: 'system', content: system }, { role: 'user', content: user }], max_tokens: 128, stream: true });
}
function prompt(bytes: number, seed: string): string {
  const unit = `${seed} You are a helpful assistant; answer precisely, cite the documents given. `;
  return unit.repeat(Math.ceil(bytes / unit.length)).slice(0, bytes);
}

const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const q = (xs: number[], p: number): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };

function timeBatch(host: ProxyWasmHost, bodies: string[]): number {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < BATCH; i++) host.requestSync(HEADERS, { body: bodies[i % bodies.length] });
  return Number(process.hrtime.bigint() - t0) / 1000 / BATCH;
}

/** ext_proc-style: the body to an out-of-process picker over loopback HTTP/1.1 (keep-alive), which parses it and answers an endpoint. */
async function extProcRoundTrip(bodies: string[]): Promise<number[]> {
  const fleet = instances(N_INSTANCES);
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const b = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      let best = 0;
      for (let i = 1; i < fleet.length; i++) if (fleet[i].queueDepth < fleet[best].queueDepth) best = i;
      res.writeHead(200, { 'x-gateway-destination-endpoint': fleet[best].addr, 'x-model': String(b.model) });
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const once = (body: string) => new Promise<void>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/pick', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => { res.resume(); res.on('end', () => resolve()); });
    req.on('error', reject);
    req.end(body);
  });
  const n = Math.max(50, BATCH / 3);
  for (let i = 0; i < n; i++) await once(bodies[i % bodies.length]);
  const samples: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await once(bodies[i % bodies.length]);
    samples.push(Number(process.hrtime.bigint() - t0) / 1000 / n);
  }
  agent.destroy();
  await new Promise<void>((r) => server.close(() => r()));
  return samples;
}

async function main(): Promise<void> {
  const blind = await hostFor(false);
  const aware = await hostFor(true);
  const probe = aware.requestSync(HEADERS, { body: chat(prompt(4096, 'probe'), 'q') });
  if (!probe.upstreamHeaders?.some(([k]) => k === 'x-switchyard-endpoint')) throw new Error('request-aware host did not choose');
  aware.requestSync(HEADERS, { body: chat(prompt(4096, 'probe'), 'q') });
  await aware.advance(20);
  if ((aware.metric('switchyard.request.parsed.llm') ?? 0) < 2) throw new Error('request-aware host did not parse');

  console.log(`\nRequest-aware choice: added cost per request in the embedded host (${N_INSTANCES} instances, p2c; ${ROUNDS} interleaved rounds × ${BATCH} requests)`);
  // On a shared machine load spikes hit single rounds: the fastest round of each side is the
  // least disturbed estimate (added = min − min); the median of the paired differences is shown beside it.
  console.log('prompt'.padEnd(34) + 'body-blind µs'.padStart(14) + 'request-aware µs'.padStart(18) + '   added µs: min−min   paired median (p10..p90)   MB/s');
  const results: Record<string, number> = {};
  for (const kb of [4, 64]) {
    for (const kind of ['same prompt (prefix hit)', 'distinct prompts']) {
      const bodies = kind.startsWith('same') ? [chat(prompt(kb * 1024, 'shared'), 'q')]
        : Array.from({ length: 64 }, (_, i) => chat(prompt(kb * 1024, `d${kb}-${i}-${Math.random()}`), 'q'));
      timeBatch(blind, bodies); timeBatch(aware, bodies);
      const a: number[] = [], b: number[] = [];
      for (let r = 0; r < ROUNDS; r++) { b.push(timeBatch(blind, bodies)); a.push(timeBatch(aware, bodies)); }
      const d = a.map((x, i) => x - b[i]);
      const added = Math.min(...a) - Math.min(...b);
      results[`${kb}:${kind}`] = added;
      const mbs = Buffer.byteLength(bodies[0]) / Math.max(added, 0.001);
      console.log(`${kb} KiB, ${kind}`.padEnd(34) + Math.min(...b).toFixed(2).padStart(14) + Math.min(...a).toFixed(2).padStart(18) +
        `   ${added.toFixed(2).padStart(7)}   ${median(d).toFixed(2).padStart(7)} (${q(d, 0.1).toFixed(2)}..${q(d, 0.9).toFixed(2)})`.padEnd(44) + mbs.toFixed(0).padStart(6));
    }
  }
  const w4 = Math.max(results['4:same prompt (prefix hit)'], results['4:distinct prompts']);
  const w64 = Math.max(results['64:same prompt (prefix hit)'], results['64:distinct prompts']);
  console.log(`targets (worse of the two cases): <= 10 µs at 4 KiB: ${w4.toFixed(2)} -> ${w4 <= 10 ? 'MET' : 'NOT MET'}; ` +
    `<= 130 µs at 64 KiB: ${w64.toFixed(2)} -> ${w64 <= 130 ? 'MET' : 'NOT MET'}`);

  console.log('\next_proc-style round trip to an out-of-process picker (HTTP/1.1 keep-alive on loopback, body POSTed, JSON.parse, answer)');
  for (const kb of [4, 64]) {
    const bodies = Array.from({ length: 16 }, (_, i) => chat(prompt(kb * 1024, `x${i}`), 'q'));
    const s = await extProcRoundTrip(bodies);
    console.log(`  ${kb} KiB: fastest round ${Math.min(...s).toFixed(1)} µs per request, median ${median(s).toFixed(1)} (p10..p90 ${q(s, 0.1).toFixed(1)}..${q(s, 0.9).toFixed(1)}) = ` +
      `${(Math.min(...s) / Math.max(0.01, results[`${kb}:distinct prompts`])).toFixed(0)}x the in-filter added cost (fastest vs fastest)`);
  }

  console.log(`\nWasm memory under ${DISTINCT.toLocaleString('en')} distinct 4 KiB prompts (prefix index: 32768 entries by default)`);
  const mem = await hostFor(true);
  const base = prompt(4096, '');
  const marks = new Set([0, 1000, 10_000, Math.floor(DISTINCT / 4), Math.floor(DISTINCT / 2), DISTINCT]);
  const line: string[] = [];
  for (let i = 0; i <= DISTINCT; i++) {
    if (marks.has(i)) line.push(`${i.toLocaleString('en')}: ${(mem.vms[0].memoryBytes() / 1048576).toFixed(2)} MiB`);
    if (i === DISTINCT) break;
    mem.requestSync(HEADERS, { body: chat(`${i.toString(36)}:${base}`, 'q') });
    if (i % 5000 === 4999) await mem.advance(20);
  }
  console.log('  ' + line.join(', '));
  for (const h of [blind, aware, mem]) await h.close();
}

main().catch((e) => { console.error(e); process.exit(1); });
