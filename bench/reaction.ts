// Reaction time of the link status: from slowing the leased line (10 ms -> 200 ms RTT) to the
// first request the filter marks `degraded`, over many trials. Real components: the delay
// injector, the agent probing every 100 ms (degrade at >= 50 ms, K = 1), the filter in the
// embedded host with two worker VMs and the shipped plugin configuration (the writer long-polls
// the agent; every VM re-reads shared data every refreshMs = 20 ms).
//
//   tsx bench/reaction.ts [--trials 25]
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startHost, startLinkBed, statusFor, statusAll, until, PAYMENT } from '../test/integration/helpers';
import { cli, int } from './cli';

const { trials } = cli('npx tsx bench/reaction.ts', 'Reaction time of x-cross-cloud-status to a link change, end to end.', { trials: int(25, 'trials', 1) });

function pct(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)];
}

async function main(): Promise<void> {
  const bed = await startLinkBed(10);
  // the shipped plugin configuration (envoy/plugin-config.json: refreshMs 20, long poll 500 ms)
  const config = fs.readFileSync(path.join(__dirname, '../envoy/plugin-config.json'), 'utf8');
  const host = await startHost(config, bed.agent.port, { workers: 2 });
  const first: number[] = [];
  const all: number[] = [];
  try {
    for (let t = 0; t < trials; t++) {
      bed.line.setDelay({ rttMs: 10 });
      await until(async () => (await statusAll(host)) === 'normal', 10000, 'normal before the trial', 10);
      // start at a random phase of the 100 ms probe cycle
      await new Promise((r) => setTimeout(r, Math.random() * 100));
      bed.line.setDelay({ rttMs: 200 });
      const t0 = performance.now();
      let firstAt = NaN;
      let w = 0;
      for (;;) {
        const s = await statusFor(host, PAYMENT, {}, w);
        w = (w + 1) % host.workers.length;
        if (s.join() === 'degraded' && Number.isNaN(firstAt)) firstAt = performance.now() - t0;
        if (!Number.isNaN(firstAt) && (await statusAll(host)) === 'degraded') break;
        if (performance.now() - t0 > 5000) throw new Error('no reaction within 5 s');
        await new Promise((r) => setTimeout(r, 1));
      }
      first.push(firstAt);
      all.push(performance.now() - t0);
      process.stdout.write(`trial ${String(t + 1).padStart(2)}: first degraded after ${firstAt.toFixed(1)} ms, every worker after ${all[all.length - 1].toFixed(1)} ms\n`);
    }
  } finally {
    await host.close();
    await bed.stop();
  }
  console.log(`\nReaction time over ${trials} trials (line 10 -> 200 ms RTT, probing every 100 ms, degrade threshold 50 ms):`);
  console.log(`  first request marked degraded: p50 ${pct(first, 0.5).toFixed(1)} ms, p99 ${pct(first, 0.99).toFixed(1)} ms, max ${Math.max(...first).toFixed(1)} ms`);
  console.log(`  every worker VM degraded:      p50 ${pct(all, 0.5).toFixed(1)} ms, p99 ${pct(all, 0.99).toFixed(1)} ms`);
  console.log(`  target p99 <= 200 ms: ${pct(first, 0.99) <= 200 ? 'MET' : 'NOT MET'}`);
}

main().catch((e) => { console.error(e); process.exit(1); });
