#!/usr/bin/env -S node --import tsx
// `npm start`: the whole system on this machine. Starts the rig (rig/rig.ts), drives traffic,
// slows the leased line from ~10 ms to 200 ms and back, and shows live what the agent measures,
// what the filter decides and where requests go. Ctrl-C ends it cleanly.
//
//   tsx rig/main.ts [--once] [--proxy auto|embedded|envoy] [--ephemeral] [--no-llm]
//   --once: one scenario cycle, then a verdict (exit 0 if routing behaved, 1 if not)
//   --no-llm: without the inference demo (rig/llm.ts: shared-prefix traffic, hit rate and TTFT per policy)
// Keys (on a terminal): m toggles maintenance_mode_on, c toggles canary_release_active (the
// payment rules of envoy/agent.yaml), q stops; from another shell: npm run flag -- <flag> on|off.
import { startRig, type Rig } from './rig';
import { setFlag } from './flag';
import { Traffic, quantile, type WindowStats } from './traffic';
import { judgeOnce, judgeLlm, type Verdict } from './verdict';
import { spawnLlmDemo, llmLine, type LlmDemoProcess } from './llm';

interface Phase { name: string; rttMs: number; seconds: number }
const PHASES: Phase[] = [
  { name: 'normal', rttMs: 10, seconds: 6 },
  { name: 'slow', rttMs: 200, seconds: 6 },
  { name: 'restored', rttMs: 10, seconds: 8 },
];

function args(): { once: boolean; proxy: 'auto' | 'embedded' | 'envoy'; ephemeral: boolean; llm: boolean } {
  const a = process.argv.slice(2);
  const proxy = a.includes('--proxy') ? a[a.indexOf('--proxy') + 1] : 'auto';
  if (!['auto', 'embedded', 'envoy'].includes(proxy)) { process.stderr.write(`--proxy: auto|embedded|envoy, got ${proxy}\n`); process.exit(2); }
  return { once: a.includes('--once'), proxy: proxy as 'auto', ephemeral: a.includes('--ephemeral'), llm: !a.includes('--no-llm') };
}

async function agentView(rig: Rig): Promise<{ state: string; rtt: number; instances: number }> {
  try {
    const j = (await (await fetch(`${rig.agentUrl}/v1/snapshot?format=json`)).json()) as any;
    const p = (j.peers ?? [])[0] ?? {};
    return { state: String(p.state ?? '?'), rtt: Number(p.avgRttMs ?? NaN), instances: (j.instances ?? []).length };
  } catch {
    return { state: 'agent-down', rtt: NaN, instances: 0 };
  }
}

interface RulesView { line: string; flags: Record<string, boolean> }

/** The active rule of every set, since when and why (the agent's /status?format=json). */
async function rulesView(rig: Rig, nowMs: number): Promise<RulesView> {
  try {
    const j = (await (await fetch(`${rig.agentUrl}/status?format=json`)).json()) as any;
    const r = j.rules;
    if (!r) return { line: 'rules: not configured', flags: {} };
    const flags: Record<string, boolean> = {};
    for (const v of r.variables ?? []) if (v.kind === 'flag') flags[v.name] = Boolean(v.value);
    const sets = (r.sets ?? []).map((s: any) => {
      const d = s.decision;
      const why = d.override ? `override by ${d.override.author}: ${d.override.reason}` : (d.because ?? []).map((b: any) => `${b.name}=${b.value ? 1 : 0}`).join(' ') || 'TRUE';
      const pending = s.pending ? ` (pending ${s.pending.ruleId}: ${s.pending.waitingFor})` : '';
      return `${d.set}: ${d.ruleId} v${d.version} for ${((nowMs - d.sinceMs) / 1000).toFixed(0)}s because ${why}${pending}`;
    });
    const fl = Object.entries(flags).map(([k, v]) => `${k}=${v ? 'on' : 'off'}`).join(' ');
    return { line: `rules: ${sets.join(' | ')} | flags: ${fl}`, flags };
  } catch {
    return { line: 'rules: agent-down', flags: {} };
  }
}

/** Keys m / c flip the rig's flags through the admin API (raw terminal only). */
function keyboard(rig: Rig, flags: () => Record<string, boolean>, stop: () => void): void {
  if (!process.stdin.isTTY) return;
  process.stdin.setRawMode(true);
  process.stdin.resume();
  process.stdin.on('data', (b: Buffer) => {
    const k = b.toString();
    if (k === 'q' || k === '\u0003') return stop();
    const name = k === 'm' ? 'maintenance_mode_on' : k === 'c' ? 'canary_release_active' : undefined;
    if (!name) return;
    const verb = flags()[name] ? 'off' : 'on';
    setFlag(rig.rulesAdminUrl, rig.rulesAdminToken, name, verb, 'rig keyboard').then(
      (r) => process.stdout.write(`>>> ${name} ${verb}: ${r.status === 200 ? 'accepted' : `refused ${r.status} ${r.body.trim()}`}\n`),
      (e) => process.stdout.write(`>>> ${name} ${verb}: ${(e as Error).message}\n`),
    );
  });
}

function pct(n: number, total: number): string {
  return total === 0 ? '  -' : `${Math.round((100 * n) / total)}%`.padStart(4);
}

function line(t: number, phase: Phase, rtt: number, view: { state: string; rtt: number }, w: WindowStats): string {
  const p = w.payment;
  const status = Object.entries(p.byStatus).sort((a, b) => b[1] - a[1]).map(([k]) => k)[0] ?? '-';
  const inst = Object.entries(w.inference.byInstance).sort().map(([k, v]) => `${k.replace('127.0.0.1:', '')}:${pct(v, w.inference.total)}`).join(' ');
  return `${t.toFixed(1).padStart(5)}s ${phase.name.padEnd(8)} line=${String(rtt).padStart(3)}ms ` +
    `agent: ${view.state.padEnd(8)} rtt=${Number.isFinite(view.rtt) ? view.rtt.toFixed(1).padStart(6) : '     -'}ms | ` +
    `payment ${String(p.total).padStart(3)} rq status=${status.padEnd(8)} cloud-a ${pct(p.byCloud['cloud-a'] ?? 0, p.total)} cloud-b ${pct(p.byCloud['cloud-b'] ?? 0, p.total)} ` +
    `canary ${pct(p.byCloud['cloud-a-canary'] ?? 0, p.total)} local-reply ${pct(p.byCloud['local-reply'] ?? 0, p.total)} ` +
    `p50=${quantile(p.latencyMs, 0.5).toFixed(0).padStart(3)}ms | inference ${String(w.inference.total).padStart(3)} rq ${inst}`;
}

async function main(): Promise<void> {
  const o = args();
  process.stdout.write('starting the rig (agent, clouds, leased lines, inference fleet, proxy)…\n');
  const rig = await startRig({ proxy: o.proxy, ephemeral: o.ephemeral });
  process.stdout.write(`proxy: ${rig.proxyKind === 'envoy' ? 'Envoy' : 'embedded Proxy-Wasm host (no envoy on PATH)'} at ${rig.proxyUrl}` +
    `${rig.adminUrl ? `, admin ${rig.adminUrl}` : ''}; agent at ${rig.agentUrl}\n`);
  const traffic = new Traffic(rig.proxyUrl);
  // The inference demo (rig/llm.ts, its own process): shared-prefix chat traffic, three policies.
  let llm: LlmDemoProcess | undefined;
  let llmFailed: string | undefined;
  if (o.llm) {
    try { llm = await spawnLlmDemo(); } catch (e) { llmFailed = (e as Error).message; process.stdout.write(`llm demo did not start: ${llmFailed}\n`); }
  }
  if (llm) {
    process.stdout.write('llm demo: 3 × 4 simulated vLLM servers (small KV caches), 9 shared system prompts, the same requests to each fleet: ' +
      'request-aware (the filter reads the body), body-blind (the filter without it), least-request (Envoy LEAST_REQUEST); ' +
      'hit = prompt tokens served from the prefix cache, ttft = server time to first token\n');
  }
  let stopping = false;
  const stop = async (code: number): Promise<never> => {
    if (stopping) process.exit(code);
    stopping = true;
    await llm?.stop();
    await traffic.stop();
    await rig.stop();
    process.stdout.write('stopped.\n');
    process.exit(code);
  };
  process.on('SIGINT', () => { process.stdout.write('\nCtrl-C: stopping…\n'); void stop(0); });
  let flags: Record<string, boolean> = {};
  keyboard(rig, () => flags, () => { process.stdout.write('\nq: stopping…\n'); void stop(0); });
  process.stdout.write(`rules admin API ${rig.rulesAdminUrl} (token in .rig/admin-token): ` +
    `${process.stdin.isTTY ? 'keys m = maintenance, c = canary, q = quit; or ' : ''}npm run flag -- maintenance_mode_on on|off\n`);
  process.on('SIGTERM', () => void stop(0));

  // The agent starts degraded and needs 10 good probes (~1 s) to trust the line.
  await new Promise((r) => setTimeout(r, 1500));
  traffic.start();
  traffic.take();
  const verdict: Record<string, { cloudB: number; total: number; degraded: number }> = {};
  const t0 = performance.now();
  let llmShown = 0;
  for (let cycle = 0; !stopping; cycle++) {
    for (const phase of PHASES) {
      rig.setLineRtt(phase.rttMs);
      process.stdout.write(`--- ${phase.name}: leased line RTT +${phase.rttMs} ms ---\n`);
      const v = (verdict[phase.name] = { cloudB: 0, total: 0, degraded: 0 });
      for (let i = 0; i < phase.seconds * 2 && !stopping; i++) {
        await new Promise((r) => setTimeout(r, 500));
        const w = traffic.take();
        const view = await agentView(rig);
        process.stdout.write(line((performance.now() - t0) / 1000, phase, rig.lineRtt(), view, w) + '\n');
        const rv = await rulesView(rig, Date.now());
        flags = rv.flags;
        process.stdout.write(`       ${rv.line}\n`);
        const rep = llm?.latest();
        if (rep && rep.seq !== llmShown) {
          // every 2 s: the window since the last report and the totals since start
          llmShown = rep.seq;
          process.stdout.write(`       ${llmLine(rep.window)}\n       since start: ${llmLine(rep.totals)}\n`);
        }
        // Judge each phase after its first second (the reaction time).
        if (i >= 2) {
          v.cloudB += w.payment.byCloud['cloud-b'] ?? 0;
          v.total += w.payment.total;
          v.degraded += w.payment.byStatus.degraded ?? 0;
        }
      }
    }
    if (o.once) break;
  }
  if (o.once) {
    const { ok, problems } = judgeOnce(verdict as Verdict);
    process.stdout.write(`verdict: ${JSON.stringify(verdict)} -> ${ok ? 'OK: traffic crossed the steady line and stayed local while it was slow' : `UNEXPECTED ROUTING: ${problems.join('; ')}`}\n`);
    let llmOk = true;
    if (llmFailed) { llmOk = false; process.stdout.write(`llm verdict: UNEXPECTED: the demo did not start (${llmFailed})\n`); }
    if (llm) {
      const t = llm.latest()?.totals;
      const j = t ? judgeLlm(t) : { ok: false, problems: ['no report from the llm demo'] };
      llmOk = j.ok;
      process.stdout.write(`llm verdict: ${t ? llmLine(t) : '-'} -> ${j.ok ? 'OK: request-aware choice kept prompt families where their prefix is cached' : `UNEXPECTED: ${j.problems.join('; ')}`}\n`);
    }
    await stop(ok && llmOk ? 0 : 1);
  }
}

main().catch((err) => {
  process.stderr.write(`rig failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
