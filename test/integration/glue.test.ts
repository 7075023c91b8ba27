// The filter's plugin glue (filter/assembly/plugin/*) where the decision modules' specs cannot
// reach: what the ABI layer reads from and writes to the host. Each test pins one behaviour a
// user or operator would notice — the ORCA headers a client must not see, an upstream 5xx counted
// as an error, the RTT a remote instance is priced with, the poll period of plain polling, the
// names of the per-rule counters, one log line per refused rule decision. Written against the
// mutants of docs/mutation.md that these paths let survive.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeSnapshot, type InstanceRecord, type PeerRecord, type Snapshot } from '../../agent/src/snapshot/codec';
import type { RuleDecision } from '../../agent/src/rules/engine';
import { ProxyWasmHost, type RequestResult, type UpstreamReply } from '../../host/src';
import { WASM, header, pluginConfig, sleep, startHost, until } from './helpers';

const AUTH = 'inference.example';
const T0 = 1_000_000;

function inst(addr: string, over: Partial<InstanceRecord> = {}): InstanceRecord {
  return { service: 'llm', addr, peer: '', healthy: true, reason: 'ok', rho: 0.2, esMs: 10, es2Ms2: 200, lambdaPerS: 10, queueDepth: 0,
    p50Ms: 10, p99Ms: 40, baselineP99Ms: 40, gpuUtil: 0.3, dataAgeMs: 0, slots: 1, ...over };
}

interface Bed {
  host: ProxyWasmHost;
  serve(s: Omit<Snapshot, 'seq' | 'generatedAtMs'>): Promise<void>;
  /** Serve an encoded snapshot and let the VM adopt it (two ticks). */
  serveBody(b: Buffer): Promise<void>;
  request(response?: { status?: number; headers?: Record<string, string>; reset?: boolean }): Promise<RequestResult>;
}

let seq = 1;
/** One worker VM on a manual clock, fed by an in-process agent answering what the test serves. */
async function bed(loadAware: Record<string, unknown> = {}, over: Record<string, unknown> = {}): Promise<Bed> {
  let body: Buffer = Buffer.alloc(0);
  const host = await ProxyWasmHost.create({
    wasm: WASM, workers: 1, mainThread: false, canary: false, clock: 'manual', startTimeMs: T0,
    pluginConfig: JSON.stringify({
      agent: { cluster: 'switchyard_agent', longPollMs: 0, pollMs: 10 }, refreshMs: 10, leaseMs: 200,
      link: { stalenessMs: 60000, services: [] },
      loadAware: { services: [{ authorities: [AUTH], service: 'llm', stalenessMs: 60000, debug: true, ...loadAware }] },
      ...over,
    }),
    clusters: { switchyard_agent: { handler: () => ({ status: 200, body }) } },
  });
  return {
    host,
    serve: async (s) => {
      body = encodeSnapshot({ seq: ++seq, generatedAtMs: host.clock.nowMs(), ...s } as Snapshot);
      for (let i = 0; i < 8; i++) await host.advance(10);
    },
    serveBody: async (b) => {
      body = b;
      await host.advance(10);
      await host.advance(10);
    },
    request: (response) => host.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH },
      response ? { response } : {}),
  };
}

const peer = (over: Partial<PeerRecord> = {}): PeerRecord => ({ name: 'cloud-b', state: 'normal', lastRttMs: 10, avgRttMs: 10, recoverStreak: 10, lastSampleAtMs: T0, ...over });

/** An ORCA load report (xds.data.orca.v3.OrcaLoadReport) with cpu_utilization 0.5, base64. */
function orcaBin(): string {
  const b = Buffer.alloc(9);
  b[0] = 0x09; // field 1, fixed64
  b.writeDoubleLE(0.5, 1);
  return b.toString('base64');
}

test('the ORCA headers never reach the client, whichever of the two an upstream sends', async () => {
  const b = await bed();
  try {
    await b.serve({ peers: [], instances: [inst('10.0.0.1:80')] });
    const cases: Record<string, string>[] = [
      { 'endpoint-load-metrics-bin': orcaBin() },
      { 'endpoint-load-metrics': 'TEXT cpu_utilization=0.5' },
      { 'endpoint-load-metrics': 'TEXT cpu_utilization=0.5', 'endpoint-load-metrics-bin': orcaBin() },
    ];
    for (const h of cases) {
      const r = await b.request({ status: 200, headers: { ...h, 'x-upstream': 'kept' } });
      assert.deepEqual(header(r.responseHeaders, 'endpoint-load-metrics'), [], `text header of ${Object.keys(h)}`);
      assert.deepEqual(header(r.responseHeaders, 'endpoint-load-metrics-bin'), [], `binary header of ${Object.keys(h)}`);
      assert.deepEqual(header(r.responseHeaders, 'x-upstream'), ['kept']);
    }
    // ORCA reading off: still the filter's input, still stripped
  } finally {
    await b.host.close();
  }
  const off = await bed({ inband: { orca: false } });
  try {
    await off.serve({ peers: [], instances: [inst('10.0.0.1:80')] });
    const r = await off.request({ status: 200, headers: { 'endpoint-load-metrics-bin': orcaBin(), 'endpoint-load-metrics': 'TEXT cpu_utilization=0.5' } });
    assert.deepEqual(header(r.responseHeaders, 'endpoint-load-metrics-bin'), []);
    assert.deepEqual(header(r.responseHeaders, 'endpoint-load-metrics'), []);
  } finally {
    await off.host.close();
  }
});

test('an upstream 500 or a reset counts as an in-band error, a 200 or a 404 does not', async () => {
  const b = await bed();
  try {
    await b.serve({ peers: [], instances: [inst('10.0.0.1:80')] });
    const errors = async () => { await b.host.advance(20); return b.host.metric('switchyard.inband.errors') ?? 0; };
    for (let i = 0; i < 3; i++) await b.request({ status: 200 });
    await b.request({ status: 404 });
    assert.equal(await errors(), 0, 'no error for 200 and 404');
    await b.request({ status: 500 });
    assert.equal(await errors(), 1, 'status 500 (every digit read, 0 included)');
    await b.request({ status: 503 });
    assert.equal(await errors(), 2);
    await b.request({ status: 599 }); // a 9 is a digit too
    assert.equal(await errors(), 3);
    // a reset before any answer is an error too (recorded at the end of the stream)
    await b.request({ reset: true });
    assert.equal(await errors(), 4);
  } finally {
    await b.host.close();
  }
});

test('an invalid ORCA report is counted once, not again at every tick', async () => {
  const b = await bed();
  try {
    await b.serve({ peers: [], instances: [inst('10.0.0.1:80')] });
    await b.request({ status: 200, headers: { 'endpoint-load-metrics-bin': 'not base64!' } });
    for (let i = 0; i < 5; i++) await b.host.advance(20);
    assert.equal(b.host.metric('switchyard.inband.orca_invalid'), 1);
    await b.request({ status: 200, headers: { 'endpoint-load-metrics-bin': orcaBin() } });
    for (let i = 0; i < 5; i++) await b.host.advance(20);
    assert.equal(b.host.metric('switchyard.inband.orca_reports'), 1);
    assert.equal(b.host.metric('switchyard.inband.orca_invalid'), 1);
  } finally {
    await b.host.close();
  }
});

test('an answer arriving after its instance\'s slot went to another address is not learnt for that address', async () => {
  const b = await bed();
  try {
    await b.serve({ peers: [], instances: [inst('10.0.0.1:80')] });
    let release: ((r: UpstreamReply) => void) | undefined;
    const pending = b.host.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH },
      { response: () => new Promise<UpstreamReply>((res) => { release = res; }) });
    for (let i = 0; i < 3 && !release; i++) await b.host.advance(10);
    assert.ok(release, 'the request reached the upstream');
    // 10.0.0.1 leaves the fleet; past the slot grace (10 s) its slot is freed, and 10.0.0.3 takes it
    await b.serve({ peers: [], instances: [inst('10.0.0.2:80')] });
    for (let i = 0; i < 120; i++) await b.host.advance(100);
    await b.serve({ peers: [], instances: [inst('10.0.0.2:80'), inst('10.0.0.3:80')] });
    release!({ status: 500 });
    for (let i = 0; i < 3; i++) await b.host.advance(1);
    const r = await pending;
    assert.deepEqual(header(r.upstreamHeaders, 'x-switchyard-endpoint'), ['10.0.0.1:80']);
    await b.host.advance(20);
    assert.equal(b.host.metric('switchyard.inband.errors') ?? 0, 0, 'the late 500 is not charged to 10.0.0.3');
    // the same 500 from a live instance is
    await b.request({ status: 500 });
    await b.host.advance(20);
    assert.equal(b.host.metric('switchyard.inband.errors'), 1);
  } finally {
    await b.host.close();
  }
});

test('a remote instance is priced with the last RTT when the agent has no RTT average yet', async () => {
  const b = await bed();
  try {
    const remote = [inst('10.0.1.1:80', { peer: 'cloud-b' })];
    // the average when there is one (not the last sample)
    await b.serve({ peers: [peer({ lastRttMs: 50, avgRttMs: 30 })], instances: remote });
    assert.match(header((await b.request()).responseHeaders, 'x-switchyard-debug')[0], /^instance=10\.0\.1\.1:80 w_ms=40\.0 /);
    await b.serve({ peers: [peer({ lastRttMs: 30, avgRttMs: NaN })], instances: remote });
    assert.match(header((await b.request()).responseHeaders, 'x-switchyard-debug')[0], /^instance=10\.0\.1\.1:80 w_ms=40\.0 /);
    // an average of 0 is no average either
    await b.serve({ peers: [peer({ lastRttMs: 30, avgRttMs: 0 })], instances: remote });
    assert.match(header((await b.request()).responseHeaders, 'x-switchyard-debug')[0], /^instance=10\.0\.1\.1:80 w_ms=40\.0 /);
    // neither known: priced as local
    await b.serve({ peers: [peer({ lastRttMs: NaN, avgRttMs: NaN })], instances: remote });
    assert.match(header((await b.request()).responseHeaders, 'x-switchyard-debug')[0], /^instance=10\.0\.1\.1:80 w_ms=10\.0 /);
  } finally {
    await b.host.close();
  }
});

const decision = (over: Partial<RuleDecision> = {}): RuleDecision => ({
  set: 'payments', authorities: [AUTH], routeHeader: 'x-switchyard-route', version: 1, ruleId: 'dc1-primary', sinceMs: T0,
  action: { kind: 'route', target: 'dc1' }, because: [], ...over,
} as RuleDecision);

test('per-rule counters: set and rule id become one metric-name segment each, [A-Za-z0-9_] kept', async () => {
  const b = await bed();
  try {
    await b.serve({ peers: [], instances: [inst('10.0.0.1:80')], rules: [decision({ set: 'AZaz09_-.x', ruleId: 'Zz-Aa.09_' })] });
    const r = await b.request();
    assert.deepEqual(header(r.upstreamHeaders, 'x-switchyard-route'), ['dc1']);
    await b.host.advance(20);
    assert.equal(b.host.metric('switchyard.rule.applied.AZaz09___x.Zz_Aa_09_'), 1);
  } finally {
    await b.host.close();
  }
});

test('a rule keeps its own counter through any number of re-plans (one counter per set and rule, not per plan)', async () => {
  const b = await bed();
  try {
    const body = (v: number) => encodeSnapshot({ seq: ++seq, generatedAtMs: b.host.clock.nowMs(), peers: [], instances: [inst('10.0.0.1:80')],
      rules: [decision(), decision({ set: 'other', authorities: ['other.example'], version: v })] } as Snapshot);
    // more re-plans than the counter bound (MAX_RULE_COUNTERS = 256): another set's decision changes each time
    for (let v = 1; v <= 270; v++) {
      await b.serveBody(body(v));
    }
    assert.ok((b.host.metric('switchyard.snapshot.updates') ?? 0) >= 270, 'every version adopted');
    const r = await b.request();
    assert.deepEqual(header(r.upstreamHeaders, 'x-switchyard-route'), ['dc1']);
    await b.host.advance(20);
    assert.equal(b.host.metric('switchyard.rule.applied.payments.dc1_primary'), 1);
    assert.equal(b.host.metric('switchyard.rule.applied.overflow') ?? 0, 0);
  } finally {
    await b.host.close();
  }
});

test('per-rule counters are bounded: the 257th distinct rule of a VM counts in the overflow counter', async () => {
  const b = await bed();
  try {
    for (let v = 1; v <= 257; v++) {
      await b.serveBody(encodeSnapshot({ seq: ++seq, generatedAtMs: b.host.clock.nowMs(), peers: [], instances: [inst('10.0.0.1:80')],
        rules: [decision({ ruleId: `r${v}`, version: v })] } as Snapshot));
    }
    const r = await b.request();
    assert.deepEqual(header(r.upstreamHeaders, 'x-switchyard-route'), ['dc1']);
    await b.host.advance(20);
    assert.equal(b.host.metric('switchyard.rule.applied.overflow'), 1);
    assert.equal(b.host.metric('switchyard.rule.applied.payments.r257'), undefined);
    assert.notEqual(b.host.metric('switchyard.rule.applied.payments.r256'), undefined, 'the 256th has its own counter');
  } finally {
    await b.host.close();
  }
});

test('the per-service choice counter names the service with [A-Za-z0-9-] kept, anything else as _', async () => {
  const svc = 'AZaz09-x.y';
  const b = await bed({ service: svc });
  try {
    await b.serve({ peers: [], instances: [inst('10.0.0.1:80', { service: svc })] });
    assert.deepEqual(header((await b.request()).upstreamHeaders, 'x-switchyard-endpoint'), ['10.0.0.1:80']);
    await b.host.advance(20);
    assert.equal(b.host.metric('switchyard.lb.choice.AZaz09-x_y'), 1);
  } finally {
    await b.host.close();
  }
});

test('a refused rule decision is logged once, not at every re-plan, and again when its reason changes', async () => {
  const b = await bed();
  try {
    // the filter declares only x-switchyard-route: a decision for another header is refused
    const refused = decision({ routeHeader: 'x-undeclared' });
    const logged = () => b.host.logs().filter((l) => /rule decision refused/.test(l.message)).length;
    // new snapshots with the same decisions: not re-planned, counted once (docs/rules.md: each time the decisions change)
    for (let i = 0; i < 3; i++) await b.serve({ peers: [], instances: [inst('10.0.0.1:80')], rules: [refused] });
    assert.equal(b.host.metric('switchyard.rule.refused'), 1);
    assert.equal(logged(), 1);
    // another set's decision changes at every snapshot, so the rules are re-planned each time
    for (let v = 1; v <= 4; v++) {
      await b.serve({ peers: [], instances: [inst('10.0.0.1:80')], rules: [refused, decision({ set: 'other', authorities: ['other.example'], version: v })] });
    }
    assert.equal(logged(), 1);
    assert.equal(b.host.metric('switchyard.rule.refused'), 5, 'counted at every plan');
    await b.serve({ peers: [], instances: [inst('10.0.0.1:80')], rules: [decision({ routeHeader: 'x-other-undeclared', version: 2 })] });
    assert.equal(logged(), 2);
  } finally {
    await b.host.close();
  }
});

test('plain polling (longPollMs 0) asks the agent every pollMs, not at every tick', async () => {
  let polls = 0;
  const body = encodeSnapshot({ seq: 1, generatedAtMs: Date.now(), peers: [] } as Snapshot);
  const host = await startHost(pluginConfig({ agent: { cluster: 'switchyard_agent', pollMs: 250, longPollMs: 0, timeoutMs: 200 } }, { stalenessMs: 60000 }),
    undefined, { workers: 1, clusters: { switchyard_agent: { handler: () => { polls++; return { status: 200, body }; } } } });
  try {
    await until(() => polls >= 1, 3000, 'first poll');
    const from = polls;
    await sleep(1000);
    const n = polls - from;
    // 4 polls a second at pollMs 250 (a poll every 10 ms tick would be ~100)
    assert.ok(n >= 2 && n <= 8, `${n} polls in 1 s at pollMs 250`);
  } finally {
    await host.close();
  }
});

test('the queue read from a wait subtracts the requests we had in flight when the request was sent, not those sent after it', async () => {
  // 10.0.0.1: c = 1, E[S] = 10 ms (a wait of 25 ms: 2.5 requests ahead); 10.0.0.2 costs 50 ms;
  // picker band 0 takes the cheapest
  const b = await bed({ picker: 'band', band: 0 });
  try {
    await b.serve({ peers: [], instances: [inst('10.0.0.1:80'), inst('10.0.0.2:80', { esMs: 50, es2Ms2: 5000 })] });
    const to = (r: RequestResult): string => header(r.upstreamHeaders, 'x-switchyard-endpoint')[0];
    // one answer without a wait: the unqueued time to headers of 10.0.0.1
    assert.equal(to(await b.request({ status: 200 })), '10.0.0.1:80');
    const held: Array<(r: UpstreamReply) => void> = [];
    const hold = (): Promise<RequestResult> => b.host.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH },
      { response: () => new Promise<UpstreamReply>((res) => { held.push(res); }) });
    // the first request is sent with none of ours in flight there; three more follow it (10, 20,
    // 30, 40 ms: all to 10.0.0.1)
    const first = hold();
    for (let i = 0; i < 3 && held.length < 1; i++) await b.host.advance(1);
    const rest = [hold(), hold(), hold()];
    for (let i = 0; i < 3 && held.length < 4; i++) await b.host.advance(1);
    assert.equal(held.length, 4, 'all four reached an upstream');
    await b.host.advance(25);
    held[0]({ status: 200 }); // its headers after a 25 ms wait: 1 − 1 + 2.5 = 2.5 others were there
    await b.host.advance(1);
    assert.equal(to(await first), '10.0.0.1:80');
    // 10.0.0.1 now: 2.5 others + our 3 still in flight ahead, 10 + 5.5 · 10 = 65 ms > 50 ms. With
    // our count at its headers (4, three of them sent after it) the others would read as none:
    // 10 + 3 · 10 = 40 ms, and 10.0.0.1 would still be taken
    assert.equal(to(await b.request({ status: 200 })), '10.0.0.2:80');
    for (let k = 1; k < 4; k++) held[k]({ status: 200 });
    await b.host.advance(1);
    await Promise.all(rest);
  } finally {
    await b.host.close();
  }
});
