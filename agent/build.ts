// Bundle the agent into one file: npx tsx agent/build.ts  ->  build/agent.js
import { build, type Plugin } from 'esbuild';
import * as fs from 'node:fs';
import * as path from 'node:path';

const root = path.resolve(__dirname, '..');

// etcd3 reads its gRPC definitions at run time from `${__dirname}/../proto/rpc.proto`; in the
// bundle __dirname is build/, so the .proto files travel next to it in build/etcd3-proto/.
const ETCD3_PROTO = 'etcd3-proto';
const etcd3Proto: Plugin = {
  name: 'etcd3-proto',
  setup(b) {
    b.onLoad({ filter: /etcd3[\\/]lib[\\/]connection-pool\.js$/ }, (args) => {
      const src = fs.readFileSync(args.path, 'utf8');
      const from = '`${__dirname}/../proto/rpc.proto`';
      if (!src.includes(from)) throw new Error(`etcd3 changed: ${from} not found in ${args.path}`);
      return { contents: src.replace(from, `require('path').join(__dirname, '${ETCD3_PROTO}', 'rpc.proto')`), loader: 'js' };
    });
    b.onEnd(() => {
      const dir = path.join(root, 'build', ETCD3_PROTO);
      fs.mkdirSync(dir, { recursive: true });
      const srcDir = path.join(path.dirname(require.resolve('etcd3/package.json')), 'proto');
      for (const f of fs.readdirSync(srcDir)) if (f.endsWith('.proto')) fs.copyFileSync(path.join(srcDir, f), path.join(dir, f));
    });
  },
};

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
  plugins: [etcd3Proto],
}).catch(() => process.exit(1));
