// `npm run bench`: every benchmark, one after the other (they would disturb each other in parallel).
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { cli, flag } from './cli';

const { quick } = cli('npm run bench --', 'Every benchmark, one after the other.', { quick: flag('each in its quick mode') });
const runs: [string, string[]][] = [
  ['bench/request-cost.ts', quick ? ['--rounds', '8'] : []],
  ['bench/request-aware-cost.ts', quick ? ['--quick'] : []],
  ['bench/reaction.ts', quick ? ['--trials', '20'] : ['--trials', '30']],
  ['bench/link-flap.ts', quick ? ['--quick'] : []],
  ['bench/snapshot-size.ts', []],
  ['bench/rules-eval.ts', quick ? ['--quick'] : []],
  ['bench/routing/run.ts', quick ? ['--quick'] : []],
  ['bench/routing/inband.ts', quick ? ['--quick'] : []],
  ['bench/robustness/run.ts', quick ? ['--quick'] : []],
  ['bench/mesh/proxies.ts', quick ? ['--quick'] : []],
  ['bench/request-parse.ts', quick ? ['--quick'] : []],
  ['bench/llm-routing/run.ts', quick ? ['--quick'] : []],
  ['bench/llm-routing/matrix.ts', quick ? ['--quick'] : []],
  ['bench/llm-routing/cold-burst-run.ts', quick ? ['--seeds', '1', '--n', '512'] : []],
  ['bench/hostile-authorities.ts', quick ? ['--requests', '100000', '--large', '500'] : []],
  ['bench/churn-tick.ts', []],
  ['bench/agent-scrape-load.ts', quick ? ['--seconds', '3'] : []],
  ['bench/mesh-scrape-load.ts', quick ? ['--agents', '1,4', '--seconds', '3'] : []],
  ['bench/fuzz.ts', quick ? ['--quick'] : []],
];
let failed = 0;
for (const [file, args] of runs) {
  process.stdout.write(`\n=== ${file} ${args.join(' ')}\n`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(__dirname, '..', file), ...args], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
