#!/usr/bin/env -S node --import tsx
// Embedded Envoy stand-in: loads an Envoy bootstrap YAML and serves it with the Proxy-Wasm host.
//
//   tsx host/bin/proxy.ts --config envoy/envoy.yaml [--wasm build/filter.wasm] [--port 10000]
//     [--admin-port 9901] [--cluster NAME=HOST:PORT]... [--workers 2] [--log-level info]
//     [--no-strict-imports] [--no-route-refresh] [--quiet]

import { LOG_LEVELS, LogLevelName } from '../src/abi';
import { EnvoyProxy } from '../src/proxy';
import type { LogEntry } from '../src/vm';

function usage(msg?: string): never {
  if (msg) process.stderr.write(`error: ${msg}\n`);
  process.stderr.write(
    'usage: proxy --config FILE [--wasm FILE] [--port N] [--listen-address ADDR] [--admin-port N]\n' +
    '             [--cluster NAME=HOST:PORT[,HOST:PORT...]]... [--workers N] [--log-level LEVEL]\n' +
    '             [--no-strict-imports] [--no-route-refresh] [--quiet]\n');
  process.exit(msg ? 2 : 0);
}

function parseArgs(argv: string[]) {
  const o: {
    config?: string; wasm?: string; port?: number; address?: string; adminPort?: number;
    clusters: Record<string, { address: string; port: number }[]>; workers?: number; logLevel?: LogLevelName;
    strict: boolean; routeRefresh: boolean; quiet: boolean;
  } = { clusters: {}, strict: true, routeRefresh: true, quiet: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      const v = argv[++i];
      if (v === undefined) usage(`${a} needs a value`);
      return v;
    };
    const num = (v: string) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0) usage(`${a}: not a number: ${v}`);
      return n;
    };
    switch (a) {
      case '--config': case '-c': o.config = next(); break;
      case '--wasm': o.wasm = next(); break;
      case '--port': o.port = num(next()); break;
      case '--listen-address': o.address = next(); break;
      case '--admin-port': o.adminPort = num(next()); break;
      case '--workers': case '--concurrency': o.workers = num(next()); break;
      case '--log-level': case '-l': {
        const l = next();
        if (!(LOG_LEVELS as readonly string[]).includes(l)) usage(`unknown log level ${l}`);
        o.logLevel = l as LogLevelName;
        break;
      }
      case '--cluster': {
        const v = next();
        const m = /^([^=]+)=(.+)$/.exec(v);
        if (!m) usage(`--cluster expects NAME=HOST:PORT, got ${v}`);
        o.clusters[m[1]] = m[2].split(',').map((hp) => {
          const i2 = hp.lastIndexOf(':');
          if (i2 < 0) usage(`--cluster ${v}: missing port`);
          return { address: hp.slice(0, i2), port: num(hp.slice(i2 + 1)) };
        });
        break;
      }
      case '--no-strict-imports': o.strict = false; break;
      case '--no-route-refresh': o.routeRefresh = false; break;
      case '--quiet': case '-q': o.quiet = true; break;
      case '--help': case '-h': usage(); break;
      default: usage(`unknown argument ${a}`);
    }
  }
  if (!o.config) usage('--config is required');
  return o;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const print = (e: LogEntry) => {
    if (o.quiet && e.level < 3) return;
    const t = new Date(e.time).toISOString();
    process.stderr.write(`[${t}][${e.levelName}][${e.source === 'wasm' ? 'wasm' : 'host'}] ${e.vm}${e.contextId ? ` #${e.contextId}` : ''}: ${e.message}\n`);
  };
  const proxy = await EnvoyProxy.start({
    configPath: o.config, wasmPath: o.wasm, listenPort: o.port, listenAddress: o.address, adminPort: o.adminPort,
    clusterAddresses: o.clusters, workers: o.workers, logLevel: o.logLevel, strictImports: o.strict,
    routeRefresh: o.routeRefresh, onLog: print,
  });
  process.stderr.write(`proxy listening on ${proxy.config.listener.address}:${proxy.listenPort}` +
    (proxy.adminPort !== undefined ? `, admin on :${proxy.adminPort}` : '') +
    (proxy.host ? ` (wasm vm_id "${proxy.host.vmId}", ${proxy.host.workers.length} workers)` : '') + '\n');
  let closing = false;
  const stop = async () => {
    if (closing) return;
    closing = true;
    await proxy.close();
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
