// INSTANCES section size and TypeScript encode/decode time at 16, 64 and 256 instances.
//   npx tsx bench/snapshot-size.ts
import { decodeSnapshot, encodeSnapshot, type InstanceRecord } from '../agent/src/snapshot/codec';
import { encodeInstancesSection } from '../agent/src/inference/encode';

function records(n: number): InstanceRecord[] {
  return Array.from({ length: n }, (_, i) => ({
    service: `llm-${i % 4}.prod`,
    addr: `10.244.${(i >> 8) & 255}.${i & 255}:8000`,
    peer: i % 2 ? 'cloud-b' : '',
    healthy: i % 7 !== 0,
    reason: i % 7 !== 0 ? 'ok' : 'unreachable',
    rho: 0.3 + (i % 10) / 20,
    esMs: 80 + i,
    es2Ms2: 2 * (80 + i) ** 2,
    lambdaPerS: 4 + (i % 5),
    queueDepth: i % 6,
    p50Ms: 60,
    p99Ms: 400 + i,
    baselineP99Ms: 380,
    gpuUtil: (i % 3) / 3,
    dataAgeMs: 120,
    slots: 4,
  }));
}

function median(xs: number[]): number {
  const v = xs.slice().sort((a, b) => a - b);
  return v[v.length >> 1];
}

function time(f: () => void, reps: number): number {
  for (let i = 0; i < Math.min(200, reps); i++) f(); // warm-up
  const runs: number[] = [];
  for (let k = 0; k < 7; k++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < reps; i++) f();
    runs.push(Number(process.hrtime.bigint() - t0) / reps / 1000);
  }
  return median(runs); // µs per call
}

const peers = [{ name: 'cloud-b', state: 'normal' as const, lastRttMs: 3.2, avgRttMs: 3.1, recoverStreak: 10, lastSampleAtMs: Date.now() }];
console.log('instances  section_bytes  bytes/instance  document_bytes  encode_us  decode_us (TS, whole document)');
for (const n of [16, 64, 256]) {
  const recs = records(n);
  const section = encodeInstancesSection(recs);
  const snap = { seq: 1, generatedAtMs: Date.now(), peers, instances: recs };
  const doc = encodeSnapshot(snap);
  const reps = n <= 16 ? 20000 : n <= 64 ? 5000 : 1500;
  const enc = time(() => encodeSnapshot(snap), reps);
  const dec = time(() => decodeSnapshot(doc), reps);
  const back = decodeSnapshot(doc).instances!;
  if (back.length !== n) throw new Error('round trip failed');
  console.log(
    `${String(n).padStart(9)}  ${String(section.length).padStart(13)}  ${((section.length - 4) / n).toFixed(1).padStart(14)}  ${String(doc.length).padStart(14)}  ${enc.toFixed(1).padStart(9)}  ${dec.toFixed(1).padStart(9)}`,
  );
}
