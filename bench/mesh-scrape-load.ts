// Scrapes per second on each inference instance against the number of agents, mode local vs the
// mesh (2 collectors + N subscribers, real etcd and NATS), and the mesh's NATS messages and bytes
// per second. Shipped settings (scrape 1 s, fallbackAfterMs 3 s, lease TTL 1 s).
//   npx tsx bench/mesh-scrape-load.ts [--agents 1,4,16] [--instances 8] [--seconds 6]
import pino from 'pino';
import { startAgent, type AgentHandle } from '../agent/src';
import { startCountedInstance, startMeshEtcd, startNats, type CountedInstance } from '../test/mesh/servers';
import { cli, int, num, nums } from './cli';

const opts = cli('npx tsx bench/mesh-scrape-load.ts', 'Scrapes per second per instance against the number of agents, local vs the mesh.', {
  agents: nums('1,4,16', 'agent counts'),
  instances: int(8, 'inference instances', 1),
  seconds: num(6, 'seconds per run', 1),
});
const AGENTS = opts.agents;
const N_INST = opts.instances;
const SECONDS = opts.seconds;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = pino({ level: 'silent' });

async function counter(a: AgentHandle, name: string, labels: string): Promise<number> {
  const text = await a.metrics.registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

async function main(): Promise<void> {
  const [etcd, nats] = await Promise.all([startMeshEtcd(), startNats()]);
  const insts: CountedInstance[] = await Promise.all(Array.from({ length: N_INST }, (_, i) => startCountedInstance(i + 1)));
  const inference = { services: [{ name: 'llm', kind: 'vllm', fetchModels: false, models: ['llama'], instances: { static: insts.map((i) => i.addr) } }] };
  const cfg = (mesh?: Record<string, unknown>) => ({ listen: { host: '127.0.0.1', port: 0 }, link: { peers: [] }, inference, ...(mesh ? { mesh } : {}) }) as never;
  const rows: string[] = [];
  try {
    for (const mode of ['local', 'mesh'] as const) {
      for (const n of AGENTS) {
        const agents: AgentHandle[] = [];
        const collectors: AgentHandle[] = [];
        if (mode === 'mesh') for (let i = 0; i < 2; i++) collectors.push(await startAgent(cfg({ mode: 'collector', nats: { servers: [nats.url] }, etcd: { endpoints: [etcd.clientUrl] } }), { logger: log, defaultMetrics: false }));
        for (let i = 0; i < n; i++) agents.push(await startAgent(cfg(mode === 'mesh' ? { mode: 'subscriber', nats: { servers: [nats.url] } } : undefined), { logger: log, defaultMetrics: false }));
        await sleep(2500); // warm: first scrapes, first messages
        const s0 = insts.map((i) => i.scrapes());
        const pub0 = await Promise.all(collectors.map((c) => counter(c, 'switchyard_mesh_messages_total', 'direction="published",result="ok"')));
        const pb0 = await Promise.all(collectors.map((c) => counter(c, 'switchyard_mesh_message_bytes_total', 'direction="published"')));
        const rx0 = await Promise.all(agents.map((a) => (mode === 'mesh' ? counter(a, 'switchyard_mesh_messages_total', 'direction="received",result="ok"') : 0)));
        const rb0 = await Promise.all(agents.map((a) => (mode === 'mesh' ? counter(a, 'switchyard_mesh_message_bytes_total', 'direction="received"') : 0)));
        const t0 = performance.now();
        await sleep(SECONDS * 1000);
        const secs = (performance.now() - t0) / 1000;
        const rates = insts.map((i, k) => (i.scrapes() - s0[k]) / secs);
        const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
        const pub = (sum(await Promise.all(collectors.map((c) => counter(c, 'switchyard_mesh_messages_total', 'direction="published",result="ok"')))) - sum(pub0)) / secs;
        const pb = (sum(await Promise.all(collectors.map((c) => counter(c, 'switchyard_mesh_message_bytes_total', 'direction="published"')))) - sum(pb0)) / secs;
        const rx = (sum(await Promise.all(agents.map((a) => (mode === 'mesh' ? counter(a, 'switchyard_mesh_messages_total', 'direction="received",result="ok"') : 0)))) - sum(rx0)) / secs;
        const rb = (sum(await Promise.all(agents.map((a) => (mode === 'mesh' ? counter(a, 'switchyard_mesh_message_bytes_total', 'direction="received"') : 0)))) - sum(rb0)) / secs;
        const fallback = agents.filter((a) => (a.mesh?.status() as { fallback?: boolean } | undefined)?.fallback).length;
        const row = mode === 'local'
          ? `| local | ${n} | ${n} | ${Math.min(...rates).toFixed(2)}–${Math.max(...rates).toFixed(2)} | – | – | – | – | – |`
          : `| mesh | ${n} | ${n + 2} | ${Math.min(...rates).toFixed(2)}–${Math.max(...rates).toFixed(2)} | ${pub.toFixed(2)} | ${pb.toFixed(0)} | ${rx.toFixed(2)} | ${rb.toFixed(0)} | ${fallback} |`;
        rows.push(row);
        console.log(row);
        for (const a of [...agents, ...collectors]) await a.stop();
      }
    }
  } finally {
    for (const i of insts) await i.stop();
    await nats.dispose();
    await etcd.dispose();
  }
  console.log(`\n${N_INST} instances, scrape 1 s, ${SECONDS} s measured per row\n`);
  console.log('| mode | agents serving filters | agents scraping or subscribed | scrapes/s per instance (min–max) | NATS msgs/s published | bytes/s published | msgs/s received (all agents) | bytes/s received (all agents) | agents in fallback |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(r);
}

main().catch((e) => { console.error(e); process.exit(1); });
