// The local rig: everything Switchyard needs, on this machine.
//
//   cloud-A service ─┐                                   ┌─ agent (probes cloud-B over the line,
//   cloud-A canary  ─┤                                   │    scrapes the inference fleet, runs the
//   cloud-B service ◄── leased line (delay injector) ◄──┤    payment rules, admin API on 8010)
//   inference fleet (4 local, 1 remote over a 2nd line)  └─ proxy: real Envoy if on PATH, else the
//                                                           embedded Proxy-Wasm host, both running
//                                                           envoy/envoy.yaml with the built filter
//
// Ports are the documented ones (docs/contracts.md) unless `ephemeral` is set, in which case every
// component gets a free port and the configuration files are rewritten to match (tests use that,
// so they never collide with a running `npm start`).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as net from 'node:net';
import { startCloudService } from '../sim/cloud-service';
import { startLeasedLine, type LeasedLine } from '../sim/leased-line';
import { startInferenceServer, type InferenceServerHandle } from '../sim/inference-server';
import { spawnAgent, type SpawnedAgent } from '../agent/src/spawn';
import { EnvoyProxy } from '../host/src/proxy';

export const ROOT = path.resolve(__dirname, '..');

/** The inference fleet of the rig: heterogeneous speeds, one instance in the other cloud. */
export const FLEET = [
  { port: 9201, speed: 1.0, seed: 1 },
  { port: 9202, speed: 1.0, seed: 2 },
  { port: 9203, speed: 0.6, seed: 3 },
  { port: 9204, speed: 0.35, seed: 4 },
  { port: 9205, speed: 1.0, seed: 5, remoteVia: 9112, control: 9113 },
];
export const PORTS = { proxy: 10000, admin: 9901, agent: 8000, cloudA: 9001, cloudACanary: 9003, cloudB: 9002, line: 9102, lineControl: 9103, rulesAdmin: 8010 };
/** The rig's local state: the rules admin token (generated once, mode 0600) and the admin API's URL. */
export const RIG_DIR = path.join(ROOT, '.rig');
export const TOKEN_FILE = path.join(RIG_DIR, 'admin-token');
export const ADMIN_URL_FILE = path.join(RIG_DIR, 'admin-url');

/** The rig's admin token: read from .rig/admin-token, generated there on first use. */
export function rigAdminToken(): string {
  fs.mkdirSync(RIG_DIR, { recursive: true, mode: 0o700 });
  try {
    const t = fs.readFileSync(TOKEN_FILE, 'utf8').trim();
    if (t.length >= 16) return t;
  } catch { /* first run */ }
  const token = randomBytes(24).toString('hex');
  fs.writeFileSync(TOKEN_FILE, token + '\n', { mode: 0o600 });
  return token;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}
export const PAYMENT_AUTHORITY = 'payment-service.prod.svc.cluster.local';
export const INFERENCE_AUTHORITY = 'inference.prod.svc.cluster.local';

export interface RigOptions {
  ephemeral?: boolean;
  /** 'auto' (Envoy if on PATH), 'embedded' or 'envoy' */
  proxy?: 'auto' | 'embedded' | 'envoy';
  initialRttMs?: number;
  /** agent stdout/stderr lines */
  onAgentLine?: (line: string) => void;
  /** filter log lines (embedded proxy) */
  onFilterLog?: (line: string) => void;
  /** override the agent config text after port rewriting */
  agentConfigText?: (text: string) => string;
  /** override the plugin configuration JSON (embedded proxy only) */
  pluginConfig?: (cfg: Record<string, unknown>) => Record<string, unknown>;
}

export interface Rig {
  proxyUrl: string;
  proxyKind: 'envoy' | 'embedded';
  agentUrl: string;
  adminUrl: string | undefined;
  /** the agent's rules admin API (flags, overrides) and its bearer token */
  rulesAdminUrl: string;
  rulesAdminToken: string;
  /** Sets the round-trip time the leased lines add (both lines). */
  setLineRtt(ms: number): void;
  lineRtt(): number;
  embedded: EnvoyProxy | undefined;
  agent: SpawnedAgent;
  fleet: InferenceServerHandle[];
  /** Kills the agent process (SIGKILL): the filter must fall back to its fail mode. */
  killAgent(): Promise<void>;
  stop(): Promise<void>;
}

function hasEnvoy(): boolean {
  return spawnSync('sh', ['-c', 'command -v envoy'], { stdio: 'ignore' }).status === 0;
}

/** Replaces every 127.0.0.1:PORT of a documented port with the actual one. */
function rewritePorts(text: string, map: Map<number, number>): string {
  return text.replace(/127\.0\.0\.1:(\d+)/g, (m, p) => (map.has(Number(p)) ? `127.0.0.1:${map.get(Number(p))}` : m))
    .replace(/port: (\d+)/g, (m, p) => (map.has(Number(p)) ? `port: ${map.get(Number(p))}` : m));
}

export async function startRig(opts: RigOptions = {}): Promise<Rig> {
  const eph = opts.ephemeral ?? false;
  const want = (port: number): number => (eph ? 0 : port);
  const rtt = opts.initialRttMs ?? 10;
  const cleanups: (() => Promise<unknown> | void)[] = [];
  const portMap = new Map<number, number>();
  try {
    const cloudA = await startCloudService({ cloud: 'cloud-a', port: want(PORTS.cloudA) });
    cleanups.push(() => cloudA.close());
    const canary = await startCloudService({ cloud: 'cloud-a-canary', port: want(PORTS.cloudACanary) });
    cleanups.push(() => canary.close());
    const cloudB = await startCloudService({ cloud: 'cloud-b', port: want(PORTS.cloudB) });
    cleanups.push(() => cloudB.close());
    portMap.set(PORTS.cloudA, cloudA.port).set(PORTS.cloudACanary, canary.port).set(PORTS.cloudB, cloudB.port);
    const rulesAdminPort = eph ? await freePort() : PORTS.rulesAdmin;
    portMap.set(PORTS.rulesAdmin, rulesAdminPort);
    const rulesAdminToken = rigAdminToken();
    const lines: LeasedLine[] = [];
    const line = await startLeasedLine({ listenPort: want(PORTS.line), targetPort: cloudB.port, rttMs: rtt, controlPort: want(PORTS.lineControl) });
    lines.push(line);
    cleanups.push(() => line.close());
    portMap.set(PORTS.line, line.port);
    const fleet: InferenceServerHandle[] = [];
    for (const f of FLEET) {
      const s = await startInferenceServer({ port: want(f.port), kind: 'vllm', concurrency: 4, dist: { kind: 'lognormal', meanMs: 80, sigma: 1.0 },
        speed: f.speed, seed: f.seed, name: `llm-${f.port}` });
      fleet.push(s);
      cleanups.push(() => s.stop());
      portMap.set(f.port, s.port);
      if (f.remoteVia) {
        const l = await startLeasedLine({ listenPort: want(f.remoteVia), targetPort: s.port, rttMs: rtt, controlPort: want(f.control!) });
        lines.push(l);
        cleanups.push(() => l.close());
        portMap.set(f.remoteVia, l.port);
      }
    }

    // Agent: the bundled build when present (what ships), else the TypeScript entry.
    let agentConfigPath = path.join(ROOT, 'envoy/agent.yaml');
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-rig-'));
    cleanups.push(() => fs.rmSync(tmp, { recursive: true, force: true }));
    let agentText = fs.readFileSync(agentConfigPath, 'utf8');
    if (eph) agentText = rewritePorts(agentText, portMap).replace(/port: 8000/, 'port: 0');
    if (opts.agentConfigText) agentText = opts.agentConfigText(agentText);
    agentConfigPath = path.join(tmp, 'agent.yaml');
    fs.writeFileSync(agentConfigPath, agentText);
    const bundle = path.join(ROOT, 'build/agent.js');
    const agent = await spawnAgent({ configPath: agentConfigPath, entry: fs.existsSync(bundle) ? bundle : undefined, onLine: opts.onAgentLine,
      env: { SWITCHYARD_ADMIN_TOKEN: rulesAdminToken } });
    const rulesAdminUrl = `http://127.0.0.1:${rulesAdminPort}`;
    // for `npm run flag` (the ephemeral rigs of the tests leave the file to `npm start`)
    if (!eph) fs.writeFileSync(ADMIN_URL_FILE, rulesAdminUrl + '\n');
    let agentAlive = true;
    cleanups.push(() => (agentAlive ? agent.stop() : undefined));
    const agentPort = Number(new URL(agent.url).port);
    portMap.set(PORTS.agent, agentPort);

    const kind = opts.proxy === 'envoy' || (opts.proxy !== 'embedded' && !eph && hasEnvoy()) ? 'envoy' : 'embedded';
    let proxyUrl: string;
    let adminUrl: string | undefined;
    let embedded: EnvoyProxy | undefined;
    const wasm = path.join(ROOT, 'build/switchyard.wasm');
    if (kind === 'envoy') {
      const cfg = fs.readFileSync(path.join(ROOT, 'envoy/envoy.yaml'), 'utf8').replace('/etc/switchyard/switchyard.wasm', wasm);
      const cfgPath = path.join(tmp, 'envoy.yaml');
      fs.writeFileSync(cfgPath, cfg);
      const envoy: ChildProcess = spawn('envoy', ['-c', cfgPath, '--log-level', 'warn', '--concurrency', '2'], { stdio: ['ignore', 'inherit', 'inherit'] });
      cleanups.push(() => new Promise<void>((r) => { envoy.once('exit', () => r()); envoy.kill('SIGTERM'); }));
      proxyUrl = `http://127.0.0.1:${PORTS.proxy}`;
      adminUrl = `http://127.0.0.1:${PORTS.admin}`;
      await waitFor(async () => (await fetch(`${adminUrl}/ready`)).ok, 15000, 'envoy did not become ready');
    } else {
      const clusterAddresses: Record<string, { address: string; port: number }[]> = {};
      if (eph) {
        clusterAddresses.switchyard_agent = [{ address: '127.0.0.1', port: agentPort }];
        clusterAddresses.cloud_a = [{ address: '127.0.0.1', port: cloudA.port }];
        clusterAddresses.cloud_a_canary = [{ address: '127.0.0.1', port: canary.port }];
        clusterAddresses.cloud_b = [{ address: '127.0.0.1', port: line.port }];
        if (/name: inference_default\b/.test(fs.readFileSync(path.join(ROOT, 'envoy/envoy.yaml'), 'utf8')))
          clusterAddresses.inference_default = fleet.filter((_, i) => !FLEET[i].remoteVia).map((s) => ({ address: '127.0.0.1', port: s.port }));
      }
      let configText = fs.readFileSync(path.join(ROOT, 'envoy/envoy.yaml'), 'utf8');
      if (opts.pluginConfig) configText = replacePluginConfig(configText, opts.pluginConfig);
      embedded = await EnvoyProxy.start({
        configText, wasmPath: wasm, listenPort: want(PORTS.proxy), adminPort: want(PORTS.admin), workers: 2,
        clusterAddresses: eph ? clusterAddresses : undefined, logLevel: 'info',
        onLog: opts.onFilterLog ? (e) => opts.onFilterLog!(`${e.level} ${e.message}`) : undefined,
      });
      const e = embedded;
      cleanups.push(() => e.close());
      proxyUrl = `http://127.0.0.1:${embedded.listenPort}`;
      adminUrl = embedded.adminPort ? `http://127.0.0.1:${embedded.adminPort}` : undefined;
    }

    return {
      proxyUrl, proxyKind: kind, agentUrl: agent.url, adminUrl, embedded, agent, fleet, rulesAdminUrl, rulesAdminToken,
      setLineRtt: (ms: number) => { for (const l of lines) l.setDelay({ rttMs: ms }); },
      lineRtt: () => line.getDelay().rttMs,
      killAgent: async () => {
        if (!agentAlive) return;
        agentAlive = false;
        const exited = new Promise<void>((r) => agent.child.once('exit', () => r()));
        agent.child.kill('SIGKILL');
        await exited;
      },
      stop: async () => { await runCleanups(cleanups); },
    };
  } catch (err) {
    await runCleanups(cleanups);
    throw err;
  }
}

async function runCleanups(cleanups: (() => Promise<unknown> | void)[]): Promise<void> {
  for (const c of cleanups.reverse()) {
    try { await c(); } catch { /* keep stopping the rest */ }
  }
  cleanups.length = 0;
}

/** Rewrites the plugin configuration JSON inside envoy.yaml's StringValue block. */
function replacePluginConfig(yamlText: string, edit: (cfg: Record<string, unknown>) => Record<string, unknown>): string {
  // Lazy import: yaml is only needed for this override.
  const YAML = require('yaml') as typeof import('yaml');
  const doc = YAML.parseDocument(yamlText);
  const filters = doc.getIn(['static_resources', 'listeners', 0, 'filter_chains', 0, 'filters', 0, 'typed_config', 'http_filters']) as any;
  const wasm = filters.items.find((f: any) => f.get('name') === 'envoy.filters.http.wasm');
  const value = wasm.getIn(['typed_config', 'config', 'configuration', 'value']) as string;
  wasm.setIn(['typed_config', 'config', 'configuration', 'value'], JSON.stringify(edit(JSON.parse(value))));
  return doc.toString();
}

export async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try { if (await check()) return; } catch { /* not yet */ }
    if (Date.now() > deadline) throw new Error(what);
    await new Promise((r) => setTimeout(r, 20));
  }
}
