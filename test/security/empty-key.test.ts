// Issue 24 #8: a configuration key "" was refused as ": unknown field" (the filter) or
// "link.: unknown field" (the agent): the message named no field. It is named `<empty key>` at
// its path, in the plugin configuration and in the agent's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { ProxyWasmHost } from '../../host/src';
import { ConfigError, resolveConfig } from '../../agent/src/config';

const ROOT = path.resolve(__dirname, '..', '..');
const wasm = readFileSync(path.join(ROOT, 'build/switchyard.wasm'));

async function filterError(cfg: string): Promise<string> {
  try {
    const host = await ProxyWasmHost.create({ wasm, pluginConfig: cfg, clock: 'manual', workers: 1, mainThread: false, canary: false, logLevel: 'critical' });
    await host.close();
    return '';
  } catch (e) {
    const m = /invalid plugin configuration: (.*)/.exec((e as Error).message);
    return m ? m[1] : (e as Error).message;
  }
}

test('issue 24 #8: the filter names a key "" as <empty key> at its path', async () => {
  const plugin = JSON.parse(readFileSync(path.join(ROOT, 'envoy/plugin-config.json'), 'utf8'));
  assert.equal(await filterError(JSON.stringify({ ...plugin, '': 1 })), '<empty key>: unknown field');
  assert.equal(await filterError(JSON.stringify({ ...plugin, link: { ...plugin.link, '': 1 } })), 'link.<empty key>: unknown field');
  const svc = { ...plugin.loadAware.services[0], '': true };
  assert.equal(await filterError(JSON.stringify({ ...plugin, loadAware: { ...plugin.loadAware, services: [svc] } })),
    'loadAware.services[0].<empty key>: unknown field');
});

test('issue 24 #8: the agent names a key "" as <empty key> at its path', () => {
  const peers = [{ name: 'cloud-b', probe: { kind: 'http', url: 'http://127.0.0.1:9102/healthz' } }];
  const problems = (cfg: unknown): string[] => {
    try { resolveConfig(cfg); return []; } catch (e) { assert.ok(e instanceof ConfigError, String(e)); return e.problems; }
  };
  assert.deepEqual(problems({ link: { peers }, '': 1 }), ['<empty key>: unknown field']);
  assert.deepEqual(problems({ link: { peers, '': 1 } }), ['link.<empty key>: unknown field']);
  assert.deepEqual(problems({ link: { peers: [{ ...peers[0], '': 1 }] } }), ['link.peers[0].<empty key>: unknown field']);
});
