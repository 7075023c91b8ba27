import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ConfigError, effectiveSchema, loadConfig, resolveConfig } from '../../agent/src/config';
import { inferenceSchema } from '../../agent/src/inference/schema';

const ROOT = path.resolve(__dirname, '../..');
const MAIN = path.join(ROOT, 'agent/src/main.ts');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swy-config-'));
const NO_DEFAULT = path.join(dir, 'does-not-exist.yaml');

function writeYaml(name: string, text: string): string {
  const p = path.join(dir, name);
  fs.writeFileSync(p, text);
  return p;
}

const peerYaml = (extra = '') => `link:
  peers:
    - name: cloud-b
      probe: { kind: http, url: http://127.0.0.1:9102/healthz }
${extra}`;

/** run the real CLI with --check; config errors must exit 2 */
function cli(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', MAIN, ...args], {
    cwd: ROOT,
    env: { ...process.env, SWITCHYARD_CONFIG: '', SWITCHYARD_LISTEN_HOST: '', SWITCHYARD_LISTEN_PORT: '', SWITCHYARD_LOG_LEVEL: '', SWITCHYARD_PUBLISH_INTERVAL_MS: '', ...env },
    encoding: 'utf8',
    timeout: 20000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const CASES: Array<[string, string, RegExp]> = [
  ['interval too small', peerYaml('      intervalMs: 5'), /^config error: link\.peers\[0\]\.intervalMs: must be >= 10$/m],
  ['missing probe', 'link:\n  peers:\n    - name: cloud-b\n', /^config error: link\.peers\[0\]\.probe: required$/m],
  ['unknown field', peerYaml('      bogus: 1'), /^config error: link\.peers\[0\]\.bogus: unknown field$/m],
  ['unknown top-level field', 'listen: { host: 127.0.0.1, port: 8000 }\nlisten2: {}\n', /^config error: listen2: unknown field$/m],
  ['bad probe kind', 'link:\n  peers:\n    - name: x\n      probe: { kind: icmp, address: "a:1" }\n', /^config error: link\.peers\[0\]\.probe\.kind: must be "http" or "tcp"$/m],
  ['tcp without address', 'link:\n  peers:\n    - name: x\n      probe: { kind: tcp }\n', /^config error: link\.peers\[0\]\.probe\.address: required$/m],
  ['recover > degrade', peerYaml('      degradeThresholdMs: 50\n      recoverThresholdMs: 60'), /^config error: link\.peers\[0\]\.recoverThresholdMs: must be <= degradeThresholdMs/m],
  ['duplicate names', peerYaml() + '    - name: cloud-b\n      probe: { kind: tcp, address: "127.0.0.1:1" }\n', /^config error: link\.peers\[1\]\.name: duplicate peer name "cloud-b"/m],
  ['bad port type', 'listen: { port: "x" }\n', /^config error: listen\.port: must be integer$/m],
  ['bad log level', 'log: { level: loud }\n', /^config error: log\.level: must be one of/m],
  ['inference must be an object', 'inference: 5\n', /^config error: inference: must be object$/m],
  ['yaml syntax', 'link: [\n', /^config error: .*YAML syntax/m],
  ['timeout below the degrade threshold', peerYaml('      timeoutMs: 40\n      degradeThresholdMs: 50'), /^config error: link\.peers\[0\]\.timeoutMs: must be >= degradeThresholdMs/m],
  ['empty file', '', /^config error: .*configures neither link\.peers nor inference\.services/m],
  ['inference peer without a link peer', peerYaml() + 'inference:\n  services: [{ name: llm, peer: cloud-c, kind: vllm, instances: { static: ["10.0.0.1:80"] } }]\n', /^config error: inference\.services\[0\]\.peer: "cloud-c" is not a link peer/m],
];

for (const [name, yaml, re] of CASES) {
  test(`CLI config error exits 2 and names the field: ${name}`, () => {
    const r = cli(['--config', writeYaml(`${name.replace(/\W+/g, '_')}.yaml`, yaml), '--check']);
    assert.equal(r.code, 2, `stderr: ${r.stderr}`);
    assert.match(r.stderr, re);
    assert.equal(r.stdout, '');
  });
}

test('CLI: missing --config file exits 2', () => {
  const r = cli(['--config', path.join(dir, 'nope.yaml'), '--check']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /config error: .*nope\.yaml: cannot read \(ENOENT\)/);
});

test('CLI: invalid env override exits 2 and names the variable', () => {
  const r = cli(['--config', writeYaml('ok.yaml', peerYaml()), '--check'], { SWITCHYARD_LISTEN_PORT: '80x' });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /^config error: listen\.port \(from SWITCHYARD_LISTEN_PORT\): must be integer$/m);
  const r2 = cli(['--config', writeYaml('ok.yaml', peerYaml()), '--check'], { SWITCHYARD_LISTEN_PORT: '70000' });
  assert.equal(r2.code, 2);
  assert.match(r2.stderr, /listen\.port \(from SWITCHYARD_LISTEN_PORT\): must be <= 65535/);
});

test('CLI: --check prints the effective config with env overrides applied', () => {
  const file = writeYaml('env.yaml', 'listen: { host: 127.0.0.1, port: 8000 }\nlog: { level: info }\n' + peerYaml());
  const r = cli(['--config', file, '--check'], {
    SWITCHYARD_LISTEN_HOST: '0.0.0.0',
    SWITCHYARD_LISTEN_PORT: '8123',
    SWITCHYARD_LOG_LEVEL: 'debug',
    SWITCHYARD_PUBLISH_INTERVAL_MS: '100',
  });
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.source, file);
  assert.deepEqual(out.config.listen, { host: '0.0.0.0', port: 8123, maxConnections: 256, headersTimeoutMs: 10_000 });
  assert.equal(out.config.log.level, 'debug');
  assert.equal(out.config.publishIntervalMs, 100);
  assert.equal(out.config.link.peers[0].intervalMs, 100, 'defaults filled');
});

test('CLI: unknown argument is a usage error (exit 2)', () => {
  const r = cli(['--frobnicate']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /unknown argument --frobnicate/);
});

test('defaults: no file -> built-in defaults (loopback:8000, peer cloud-b via the rig injector)', () => {
  const { config, source } = loadConfig({ env: {}, defaultPath: NO_DEFAULT });
  assert.equal(source, undefined);
  assert.deepEqual(config.listen, { host: '127.0.0.1', port: 8000, maxConnections: 256, headersTimeoutMs: 10_000 });
  assert.equal(config.publishIntervalMs, 250);
  assert.equal(config.log.level, 'info');
  assert.equal(config.link.peers.length, 1);
  const p = config.link.peers[0];
  assert.deepEqual(p.probe, { kind: 'http', url: 'http://127.0.0.1:9102/healthz' });
  assert.deepEqual(
    [p.intervalMs, p.timeoutMs, p.maxInFlight, p.degradeThresholdMs, p.degradeAfter, p.recoverThresholdMs, p.recoverAfter, p.initialState],
    [100, 1000, 4, 50, 1, 40, 10, 'degraded'],
  );
});

test('default path is used when present; SWITCHYARD_CONFIG selects a file; env beats file', () => {
  const file = writeYaml('default.yaml', 'listen: { port: 8001 }\npublishIntervalMs: 500\ninference:\n  services: [{ name: llm, kind: vllm, instances: { static: ["10.0.0.1:8000"] } }]\n');
  const a = loadConfig({ env: {}, defaultPath: file });
  assert.equal(a.source, file);
  assert.equal(a.config.listen.port, 8001);
  assert.deepEqual(a.config.link.peers, [], 'a file without link has no peers');
  const b = loadConfig({ env: { SWITCHYARD_CONFIG: file, SWITCHYARD_LISTEN_PORT: '9000' }, defaultPath: NO_DEFAULT });
  assert.equal(b.source, file);
  assert.equal(b.config.listen.port, 9000);
  assert.equal(b.config.publishIntervalMs, 500);
});

test('empty YAML file is refused: nothing to probe or scrape (/status would say healthy)', () => {
  const file = writeYaml('empty.yaml', '');
  assert.throws(() => loadConfig({ path: file, env: {} }), (e: unknown) => e instanceof ConfigError && e.problems[0] === `${file}: configures neither link.peers nor inference.services (empty or truncated file?)`);
  // programmatic configs without peers stay allowed (tests, embedding)
  assert.deepEqual(resolveConfig({}).link.peers, []);
});

test('link thresholds: recover == degrade is accepted (no mid band), recover > degrade is not; timeoutMs >= degradeThresholdMs', () => {
  const peer = (x: Record<string, number>) => ({ link: { peers: [{ name: 'a', probe: { kind: 'tcp' as const, address: 'h:1' }, ...x }] } });
  const eq = resolveConfig(peer({ degradeThresholdMs: 50, recoverThresholdMs: 50 }));
  assert.equal(eq.link.peers[0].recoverThresholdMs, eq.link.peers[0].degradeThresholdMs);
  assert.throws(() => resolveConfig(peer({ degradeThresholdMs: 50, recoverThresholdMs: 51 })), /recoverThresholdMs: must be <= degradeThresholdMs \(51 > 50\)/);
  assert.equal(resolveConfig(peer({ degradeThresholdMs: 50, timeoutMs: 50 })).link.peers[0].timeoutMs, 50);
  assert.throws(() => resolveConfig(peer({ degradeThresholdMs: 50, timeoutMs: 49 })), /link\.peers\[0\]\.timeoutMs: must be >= degradeThresholdMs \(49 < 50: a probe could never be slow, only time out\)/);
});

test('inference services of a peer that is not a link peer are refused, naming the peers', () => {
  const svc = (peer: string) => ({ name: 'llm', peer, kind: 'vllm', instances: { static: ['10.0.0.1:8000'] } });
  const link = { peers: [{ name: 'cloud-b', probe: { kind: 'tcp' as const, address: 'h:1' } }] };
  assert.equal(resolveConfig({ link, inference: { services: [svc(''), svc('cloud-b')] } }).link.peers.length, 1);
  assert.throws(
    () => resolveConfig({ link, inference: { services: [svc(''), svc('cloud-c')] } }),
    (e: unknown) => e instanceof ConfigError && e.problems[0] === 'inference.services[1].peer: "cloud-c" is not a link peer (link.peers: "cloud-b"); its link state would be unknown',
  );
  assert.throws(() => resolveConfig({ inference: { services: [svc('cloud-b')] } }), /is not a link peer \(link\.peers: none\)/);
});

test('inference key is optional and validated by the sub-schema from agent/src/inference/schema.ts', () => {
  assert.deepEqual((effectiveSchema().properties as any).inference, JSON.parse(JSON.stringify(inferenceSchema)));
  assert.equal(resolveConfig({}).inference, undefined);
  const c = resolveConfig({ inference: {} });
  assert.equal(typeof c.inference, 'object');
  assert.throws(() => resolveConfig({ inference: 5 as any }), /config error: inference: must be object$/);
});

test('resolveConfig throws ConfigError with field-named problems', () => {
  assert.throws(
    () => resolveConfig({ link: { peers: [{ name: 'a', probe: { kind: 'tcp', address: 'h:99999' } }] } }),
    (e: unknown) => e instanceof ConfigError && /^link\.peers\[0\]\.probe\.address: port must be 1\.\.65535$/.test(e.problems[0]),
  );
  assert.throws(() => resolveConfig({ link: { peers: [{ name: 'bad name!', probe: { kind: 'tcp', address: 'h:1' } }] } }), /link\.peers\[0\]\.name: must match/);
  assert.throws(() => resolveConfig({ link: { peers: [{ name: 'a', probe: { kind: 'http', url: 'ftp://x/' } }] } }), /link\.peers\[0\]\.probe\.url: must match/);
  assert.throws(() => resolveConfig({ publishIntervalMs: 1 }), /publishIntervalMs: must be >= 10/);
  assert.throws(() => resolveConfig({ link: { peers: [{ name: 'a', probe: { kind: 'tcp', address: 'h:1' }, degradeAfter: 0 }] } }), /degradeAfter: must be >= 1/);
});
