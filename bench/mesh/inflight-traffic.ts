// NATS traffic of the mesh in-flight exchange (docs/mesh.md "Mesh-wide in-flight", Traffic): N agents
// running the real exchange (agent/src/mesh/inflight-exchange.ts, shipped inflight defaults) over a
// real nats-server on loopback, each with its own connection, its own aggregation and one busy
// proxy reporting every 50 ms (counts on `--instances` instances that change at every report, the
// worst case for "only when changed"); agent 0 leads the pool in leader mode.
//
//   npx tsx bench/mesh/inflight-traffic.ts [--agents 4,16,64] [--instances 100] [--seconds 3] [--modes leader,all]
//
// Prints, per mode and N: messages and bytes per second published by all agents (into NATS) and
// delivered to them (out of NATS), and per agent received.
import { connect, type NatsConnection } from 'nats';
import { InflightAggregator, encodeInflight, KIND_REPORT } from '../../agent/src/mesh/inflight';
import { InflightExchange } from '../../agent/src/mesh/inflight-exchange';
import { INFLIGHT_DEFAULTS } from '../../agent/src/mesh/inflight-schema';
import { startNats } from '../../test/mesh/servers';
import { cli, int, list, num, nums } from '../cli';


interface Row { mode: string; agents: number; instances: number; pubPerS: number; pubBytesPerS: number; inPerS: number; inBytesPerS: number; perAgentInPerS: number; perAgentInBytesPerS: number }

async function run(url: string, mode: 'leader' | 'all', n: number, instances: number, seconds: number): Promise<Row> {
  const addrs = Array.from({ length: instances }, (_, i) => `10.0.${i >> 8}.${i & 255}:8000`);
  const known = new Set(addrs);
  const conns: NatsConnection[] = [];
  const ex: InflightExchange[] = [];
  const timers: NodeJS.Timeout[] = [];
  const cfg = { ...INFLIGHT_DEFAULTS, exchange: mode };
  for (let g = 0; g < n; g++) {
    const nc = await connect({ servers: url });
    conns.push(nc);
    const agg = new InflightAggregator({ maxProxies: 16, maxInstances: 100000, expireReports: 4, isInstance: (a) => known.has(a) });
    const x = new InflightExchange(agg, cfg, {
      id: g + 1, subjectPrefix: 'switchyard.pool', connection: () => nc, pools: [{ peer: '', service: 'llm' }],
      poolOf: (a) => (known.has(a) ? '_/llm' : undefined), isLeader: () => g === 0,
    });
    ex.push(x);
    let id = 0;
    let k = g;
    // one busy proxy: every report moves every count (the exchange publishes at every interval)
    timers.push(setInterval(() => {
      k++;
      const r = agg.report(encodeInflight(KIND_REPORT, 50, id, Date.now(), addrs.map((a, i) => [a, 1 + ((i + k) % 3)])));
      if (r.ok) id = r.proxyId;
    }, 50));
    x.start();
  }
  // warm-up: the leader's keepalive period, the first totals
  await new Promise((r) => setTimeout(r, 1000));
  const snap = () => ex.map((x) => ({ ...x.stats }));
  const a = snap();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const dt = (performance.now() - t0) / 1000;
  const b = snap();
  for (const t of timers) clearInterval(t);
  for (const x of ex) await x.stop();
  for (const c of conns) await c.close();
  const sum = (f: (s: InflightExchange['stats']) => number): number => b.reduce((acc, s, i) => acc + f(s) - f(a[i]), 0);
  // "delivered" = messages the agents received (NATS out), including an agent's own in mode all
  const inMsgs = sum((s) => s.received + s.own + s.rejected + s.totalsIgnored);
  const inBytes = sum((s) => s.bytesIn);
  return {
    mode, agents: n, instances, pubPerS: sum((s) => s.published) / dt, pubBytesPerS: sum((s) => s.bytesOut) / dt,
    inPerS: inMsgs / dt, inBytesPerS: inBytes / dt, perAgentInPerS: inMsgs / dt / n, perAgentInBytesPerS: inBytes / dt / n,
  };
}

async function main(): Promise<void> {
  const o = cli('npx tsx bench/mesh/inflight-traffic.ts', 'NATS traffic of the mesh in-flight exchange against the number of agents.', {
    agents: nums('4,16,64', 'agent counts'),
    instances: int(100, 'instances', 1),
    seconds: num(3, 'seconds per run', 0.1),
    modes: list('leader,all', 'exchange modes'),
  });
  const ns = o.agents, instances = o.instances, seconds = o.seconds;
  for (const m of o.modes) if (m !== 'leader' && m !== 'all') throw new Error(`--modes: leader and/or all, got ${m}`);
  const modes = o.modes as Array<'leader' | 'all'>;
  const nats = await startNats();
  const rows: Row[] = [];
  try {
    for (const mode of modes) for (const n of ns) {
      const r = await run(nats.url, mode, n, instances, seconds);
      rows.push(r);
      console.log(`${mode} N=${n}: published ${r.pubPerS.toFixed(0)} msg/s, delivered ${r.inPerS.toFixed(0)} msg/s (${(r.inBytesPerS / 1e6).toFixed(2)} MB/s)`);
    }
  } finally {
    await nats.dispose();
  }
  console.log(`\nMesh in-flight exchange over a real nats-server, ${instances} busy instances, one proxy per agent reporting every 50 ms, inflight defaults (exchangeMs ${INFLIGHT_DEFAULTS.exchangeMs}), ${seconds} s measured:\n`);
  console.log('| exchange | agents N | msgs/s into NATS (all agents) | bytes/s into NATS | msgs/s out of NATS (delivered) | bytes/s out of NATS | received per agent: msgs/s | bytes/s |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.mode} | ${r.agents} | ${r.pubPerS.toFixed(0)} | ${(r.pubBytesPerS / 1000).toFixed(0)} kB | ${r.inPerS.toFixed(0)} | ${(r.inBytesPerS / 1000).toFixed(0)} kB | ${r.perAgentInPerS.toFixed(1)} | ${(r.perAgentInBytesPerS / 1000).toFixed(1)} kB |`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
