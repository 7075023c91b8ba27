// Bundle the agent into one file: npx tsx agent/build.ts  ->  build/agent.js
import { build } from 'esbuild';
import * as path from 'node:path';

const root = path.resolve(__dirname, '..');
build({
  entryPoints: [path.join(root, 'agent/src/main.ts')],
  outfile: path.join(root, 'build/agent.js'),
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  sourcemap: true,
  legalComments: 'none',
  logLevel: 'info',
}).catch(() => process.exit(1));
