import { test } from 'node:test';
import assert from 'node:assert/strict';
import { classify, initialSchmitt, run, step, type SchmittConfig } from '../../agent/src/link/schmitt';

const cfg: SchmittConfig = { degradeThresholdMs: 50, degradeAfter: 3, recoverThresholdMs: 40, recoverAfter: 4 };
const states = (xs: Array<number | null>, c = cfg, init = initialSchmitt('normal')) => run(xs, c, init).map((s) => s.state[0]).join('');

test('classify: >= degrade is high, < recover is low, in between is mid, failure is high', () => {
  assert.equal(classify(50, cfg), 'high');
  assert.equal(classify(49.9, cfg), 'mid');
  assert.equal(classify(40, cfg), 'mid');
  assert.equal(classify(39.9, cfg), 'low');
  assert.equal(classify(null, cfg), 'high');
  assert.equal(classify(NaN, cfg), 'high');
});

test('initial state is degraded with zero streaks (safe default)', () => {
  assert.deepEqual(initialSchmitt(), { state: 'degraded', degradeStreak: 0, recoverStreak: 0, lastChangeAtMs: -Infinity });
  // it takes exactly N good samples to become normal
  assert.equal(states([1, 1, 1, 1, 1], cfg, initialSchmitt()), 'dddnn');
  const r = run([1, 1, 1], cfg, initialSchmitt());
  assert.equal(r[2].state, 'degraded');
  assert.equal(r[2].recoverStreak, 3);
});

test('degrades only after K consecutive high samples', () => {
  assert.equal(states([60, 60]), 'nn');
  assert.equal(states([60, 60, 60]), 'nnd');
  assert.equal(states([null, 60, 1000]), 'nnd');
  // a low sample breaks the run
  assert.equal(states([60, 60, 10, 60, 60]), 'nnnnn');
  assert.equal(states([60, 60, 10, 60, 60, 60]), 'nnnnnd');
});

test('K = 1 degrades on the first high sample', () => {
  assert.equal(states([60], { ...cfg, degradeAfter: 1 }), 'd');
  assert.equal(states([null], { ...cfg, degradeAfter: 1 }), 'd');
});

test('recovers only after N consecutive low samples', () => {
  const d = initialSchmitt('degraded');
  assert.equal(states([1, 1, 1], cfg, d), 'ddd');
  assert.equal(states([1, 1, 1, 1], cfg, d), 'dddn');
  // a high sample resets the recover streak
  assert.equal(states([1, 1, 1, 60, 1, 1, 1, 1], cfg, d), 'dddddddn');
});

test('in-between samples reset the recover streak and do not count toward degrade', () => {
  const d = initialSchmitt('degraded');
  // mid resets the recover streak
  assert.equal(states([1, 1, 1, 45, 1, 1, 1], cfg, d), 'ddddddd');
  assert.equal(states([1, 1, 1, 45, 1, 1, 1, 1], cfg, d), 'dddddddn');
  const r = run([1, 1, 1, 45], cfg, d);
  assert.equal(r[3].recoverStreak, 0);
  // mid samples never degrade, however many
  assert.equal(states(Array(100).fill(45)), 'n'.repeat(100));
  // mid breaks a run of high samples (K consecutive >= threshold)
  assert.equal(states([60, 60, 45, 60, 60]), 'nnnnn');
  // mid while degraded keeps degraded
  assert.equal(states(Array(10).fill(45), cfg, d), 'd'.repeat(10));
});

test('hysteresis: a sample between thresholds does not flip either way', () => {
  const toDegraded = run([60, 60, 60], cfg, initialSchmitt('normal'));
  assert.equal(toDegraded[2].state, 'degraded');
  const s = step(toDegraded[2], 45, cfg);
  assert.equal(s.next.state, 'degraded');
  assert.equal(s.changed, false);
  assert.equal(s.sampleClass, 'mid');
});

test('step reports changed exactly on transitions and is pure', () => {
  const s0 = initialSchmitt('normal');
  const c1 = { ...cfg, degradeAfter: 1 };
  const r = step(s0, 70, c1);
  assert.equal(r.changed, true);
  assert.equal(r.next.state, 'degraded');
  assert.deepEqual(s0, { state: 'normal', degradeStreak: 0, recoverStreak: 0, lastChangeAtMs: -Infinity }, 'input not mutated');
  assert.equal(step(r.next, 70, c1).changed, false);
});

test('equal thresholds (empty mid band) work', () => {
  const c = { degradeThresholdMs: 50, degradeAfter: 1, recoverThresholdMs: 50, recoverAfter: 2 };
  assert.equal(states([49, 50, 49, 49], c), 'nddn');
});

test('cooldown: no recovery within cooldownMs of degrading (held, then on the first low sample after it); degrading is never held', () => {
  const c = { ...cfg, degradeAfter: 1, recoverAfter: 2, cooldownMs: 1000 };
  let s = initialSchmitt('normal');
  let r = step(s, 80, c, 5000);
  assert.deepEqual([r.changed, r.held, r.next.state, r.next.lastChangeAtMs], [true, false, 'degraded', 5000]);
  s = r.next;
  // recovery streak complete at 5200 but held until 6000 (cooldown from 5000)
  s = step(s, 1, c, 5100).next;
  r = step(s, 1, c, 5200);
  assert.deepEqual([r.changed, r.held, r.next.state, r.next.recoverStreak], [false, true, 'degraded', 2]);
  s = r.next;
  r = step(s, 1, c, 5999);
  assert.deepEqual([r.changed, r.held], [false, true]);
  s = r.next;
  r = step(s, 1, c, 6000);
  assert.deepEqual([r.changed, r.held, r.next.state, r.next.lastChangeAtMs], [true, false, 'normal', 6000]);
  s = r.next;
  // the line slows right after the recovery: degraded at once (never hold the unsafe direction)
  r = step(s, 80, c, 6050);
  assert.deepEqual([r.changed, r.held, r.next.state], [true, false, 'degraded']);
  // a high sample during the hold breaks the recover streak: the hold ends with nothing pending
  s = step(step(r.next, 1, c, 6100).next, 1, c, 6200).next;
  s = step(s, 80, c, 6300).next;
  r = step(s, 1, c, 7100);
  assert.deepEqual([r.changed, r.next.state, r.next.recoverStreak], [false, 'degraded', 1]);
  r = step(r.next, 1, c, 7200);
  assert.deepEqual([r.changed, r.next.state], [true, 'normal']);
});

test('cooldown: a line flapping every sample keeps traffic local at least cooldownMs per cycle (virtual clock)', () => {
  const c = { ...cfg, degradeAfter: 1, recoverAfter: 1, cooldownMs: 1000 };
  const samples = Array.from({ length: 100 }, (_, i) => (i % 2 ? 80 : 1)); // 10 s at 100 ms
  const out = run(samples, c, initialSchmitt('normal'), 100);
  const changes = out.map((x, i) => (x.state !== (i ? out[i - 1].state : 'normal') ? i : -1)).filter((i) => i >= 0);
  for (let k = 0; k + 1 < changes.length; k += 2) {
    assert.equal(out[changes[k]].state, 'degraded');
    assert.ok((changes[k + 1] - changes[k]) * 100 >= 1000, `degraded for ${(changes[k + 1] - changes[k]) * 100} ms`);
  }
  assert.ok(changes.length <= 20, `transitions: ${changes.length}`);
  // without a cooldown every sample flips
  const free = run(samples, { ...c, cooldownMs: 0 }, initialSchmitt('normal'), 100);
  assert.equal(free.filter((x, i) => x.state !== (i ? free[i - 1].state : 'normal')).length, 99);
});

test('the shipped default cooldown is 2000 ms (agent config schema) and the starvation guard is on', async () => {
  const { resolveConfig } = await import('../../agent/src/config');
  const c = resolveConfig({ link: { peers: [{ name: 'p', probe: { kind: 'tcp', address: '127.0.0.1:1' } }] } });
  assert.equal(c.link.peers[0].cooldownMs, 2000);
  assert.equal(c.link.peers[0].starvationGuard, true);
});
