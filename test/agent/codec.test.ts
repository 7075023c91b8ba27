import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as zlib from 'node:zlib';
import * as promClient from 'prom-client';
import {
  crc32,
  crc32Portable,
  decodeInstancesSection,
  decodeSection,
  decodeSnapshot,
  encodeDocument,
  encodeInstancesSection,
  encodePeersSection,
  encodeSection,
  encodeSnapshot,
  HEADER,
  INSTANCES_SECTION,
  SECTION_HEADER_LENGTH,
  PEERS_SECTION,
  snapshotToJson,
  SnapshotDecodeError,
  type InstanceRecord,
  type Snapshot,
} from '../../agent/src/snapshot/codec';
import { SnapshotPublisher } from '../../agent/src/snapshot/publisher';

const peers = [
  { name: 'cloud-b', state: 'degraded' as const, lastRttMs: 201.25, avgRttMs: 57.5, recoverStreak: 3, lastSampleAtMs: 1_764_000_000_123 },
  { name: 'cloud-c', state: 'normal' as const, lastRttMs: NaN, avgRttMs: NaN, recoverStreak: 70000, lastSampleAtMs: 0 },
];
const inst: InstanceRecord = {
  service: 'payment-service.prod.svc.cluster.local',
  addr: '10.0.0.7:8080',
  peer: '',
  healthy: true,
  reason: 'ok',
  rho: 0.75,
  esMs: 12.5,
  es2Ms2: 200.25,
  lambdaPerS: 60,
  queueDepth: 3,
  p50Ms: 10,
  p99Ms: 80.1,
  baselineP99Ms: 40,
  gpuUtil: NaN,
  dataAgeMs: 1234,
  slots: 8,
};
const snap: Snapshot = { seq: 1_764_000_000_000_000 + 7, generatedAtMs: 1_764_000_000_456, peers, instances: [inst, { ...inst, addr: '10.1.0.9:8080', peer: 'cloud-b', healthy: false, reason: 'stale', gpuUtil: 0.5 }] };

test('header fields sit at the HEADER offsets (the byte-exact layout is pinned by test/fixtures/snapshot/)', () => {
  const buf = encodeSnapshot({ seq: 5, generatedAtMs: 1000, bootId: 0xdeadbeef, peers: [peers[0]] });
  assert.equal(buf.subarray(HEADER.magic, HEADER.magic + 4).toString('ascii'), 'SWY1');
  assert.equal(buf.readUInt16LE(HEADER.version), 1);
  assert.equal(buf.readUInt16LE(HEADER.headerLength), HEADER.length);
  assert.equal(buf.readUInt32LE(HEADER.totalLength), buf.length);
  assert.equal(buf.readUInt32LE(HEADER.crc), zlib.crc32(buf.subarray(HEADER.crcFrom)) >>> 0);
  assert.equal(buf.readBigUInt64LE(HEADER.seq), 5n);
  assert.equal(buf.readBigUInt64LE(HEADER.generatedAtMs), 1000n);
  assert.equal(buf.readUInt16LE(HEADER.sectionCount), 1);
  assert.equal(buf.readUInt16LE(34), 0, 'bytes 34..35 stay reserved');
  assert.equal(buf.readUInt32LE(HEADER.bootId), 0xdeadbeef);
  assert.equal(decodeSnapshot(buf).bootId, 0xdeadbeef);
  assert.equal(decodeSnapshot(encodeSnapshot({ seq: 5, generatedAtMs: 1000, peers: [] })).bootId, 0, 'bootId defaults to 0');
});

test('a section codec is a write/read pair: encodeSection and decodeSection round trip each type', () => {
  const p = encodeSection(PEERS_SECTION, peers);
  assert.deepEqual(decodeSection(PEERS_SECTION, p).map((x) => x.name), ['cloud-b', 'cloud-c']);
  assert.equal(encodePeersSection(peers).toString('hex'), p.toString('hex'));
  const recs = snap.instances!;
  const i = encodeInstancesSection(recs);
  assert.deepEqual(decodeInstancesSection(i).map((x) => [x.addr, x.reason, x.slotsSource]), [['10.0.0.7:8080', 'ok', 'inferred'], ['10.1.0.9:8080', 'stale', 'inferred']]);
  // encodeSnapshot is the sections framed by encodeDocument
  const doc = encodeDocument(snap, [{ type: PEERS_SECTION.type, payload: p }, { type: INSTANCES_SECTION.type, payload: i }]);
  assert.equal(doc.toString('hex'), encodeSnapshot(snap).toString('hex'));
});

test('round trip peers + instances (f32 precision, NaN preserved)', () => {
  const buf = encodeSnapshot(snap);
  const d = decodeSnapshot(buf);
  assert.equal(d.seq, snap.seq);
  assert.equal(d.generatedAtMs, snap.generatedAtMs);
  assert.equal(d.peers.length, 2);
  assert.deepEqual(d.peers[0], { ...peers[0], lastRttMs: Math.fround(201.25), avgRttMs: Math.fround(57.5) });
  assert.ok(Number.isNaN(d.peers[1].lastRttMs) && Number.isNaN(d.peers[1].avgRttMs));
  assert.equal(d.peers[1].recoverStreak, 65535, 'recoverStreak saturates at u16');
  assert.equal(d.instances?.length, 2);
  const i0 = d.instances![0];
  assert.equal(i0.service, inst.service);
  assert.equal(i0.addr, inst.addr);
  assert.equal(i0.peer, '');
  assert.equal(i0.healthy, true);
  assert.equal(i0.reason, 'ok');
  assert.equal(i0.p99Ms, Math.fround(80.1));
  assert.ok(Number.isNaN(i0.gpuUtil));
  assert.equal(i0.dataAgeMs, 1234);
  const i1 = d.instances![1];
  assert.equal(i0.slots, 8);
  assert.deepEqual([i1.peer, i1.healthy, i1.reason, i1.gpuUtil], ['cloud-b', false, 'stale', 0.5]);
  assert.deepEqual(d.unknownSections, []);
});

test('no instances -> no INSTANCES section; JSON view maps NaN to null', () => {
  const buf = encodeSnapshot({ seq: 1, generatedAtMs: 2, peers });
  assert.equal(buf.readUInt16LE(32), 1);
  const d = decodeSnapshot(buf);
  assert.equal(d.instances, undefined);
  const j = snapshotToJson(d) as any;
  assert.equal(j.peers[1].lastRttMs, null);
  assert.equal(j.peers[0].state, 'degraded');
  assert.equal(j.seq, 1);
  assert.equal('instances' in j, false);
  const ji = snapshotToJson(snap) as any;
  assert.equal(ji.instances[0].gpuUtil, null);
  assert.equal(ji.instances[1].reason, 'stale');
});

test('CRC covers bytes [16,total) and matches zlib.crc32; portable CRC agrees', () => {
  const buf = encodeSnapshot(snap);
  assert.equal(buf.readUInt32LE(12), zlib.crc32(buf.subarray(16)) >>> 0);
  for (const s of [Buffer.alloc(0), Buffer.from('123456789'), buf]) assert.equal(crc32Portable(s), zlib.crc32(s) >>> 0);
  assert.equal(crc32(Buffer.from('123456789')), 0xcbf43926);
  // any flipped bit after the CRC field is detected
  for (const off of [16, 24, 32, 40, 50, buf.length - 1]) {
    const bad = Buffer.from(buf);
    bad[off] ^= 0x01;
    assert.throws(() => decodeSnapshot(bad), /CRC mismatch/, `flip at ${off}`);
  }
});

test('every truncation is rejected', () => {
  const buf = encodeSnapshot(snap);
  for (let n = 0; n < buf.length; n++) assert.throws(() => decodeSnapshot(buf.subarray(0, n)), SnapshotDecodeError, `length ${n}`);
});

test('garbage, bad magic, bad version, length mismatch are rejected', () => {
  const buf = encodeSnapshot(snap);
  let seed = 42;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) & 0xff);
  for (let i = 0; i < 200; i++) {
    const g = Buffer.alloc(40 + (i % 60), 0).map(() => rnd());
    assert.throws(() => decodeSnapshot(g), SnapshotDecodeError);
  }
  const badMagic = Buffer.from(buf);
  badMagic[0] = 0x58;
  assert.throws(() => decodeSnapshot(badMagic), /bad magic/);
  const badVer = Buffer.from(buf);
  badVer.writeUInt16LE(2, 4);
  assert.throws(() => decodeSnapshot(badVer), /version/);
  assert.throws(() => decodeSnapshot(Buffer.concat([buf, Buffer.from([0])])), /total length/);
});

/** re-seal a modified document: fix total length and CRC */
function reseal(doc: Buffer): Buffer {
  doc.writeUInt32LE(doc.length, 8);
  doc.writeUInt32LE(zlib.crc32(doc.subarray(16)) >>> 0, 12);
  return doc;
}

test('structural errors with a valid CRC are rejected', () => {
  const buf = encodeSnapshot({ seq: 1, generatedAtMs: 2, peers });
  // section payload length beyond the document
  const over = Buffer.from(buf);
  const payloadLen = HEADER.length + 4; // u16 type, u16 reserved, u32 payloadLength
  over.writeUInt32LE(over.readUInt32LE(payloadLen) + 1, payloadLen);
  assert.throws(() => decodeSnapshot(reseal(over)), /truncated/);
  // section count larger than present
  const cnt = Buffer.from(buf);
  cnt.writeUInt16LE(2, HEADER.sectionCount);
  assert.throws(() => decodeSnapshot(reseal(cnt)), /truncated/);
  // peer count larger than the payload holds
  const pc = Buffer.from(buf);
  pc.writeUInt16LE(3, HEADER.length + SECTION_HEADER_LENGTH);
  assert.throws(() => decodeSnapshot(reseal(pc)), /truncated/);
  // trailing bytes after the declared sections
  assert.throws(() => decodeSnapshot(reseal(Buffer.concat([buf, Buffer.from([0, 0])]))), /trailing/);
  // bad state byte
  const st = Buffer.from(buf);
  st[HEADER.length + SECTION_HEADER_LENGTH + 4 + 1 + 'cloud-b'.length] = 9;
  assert.throws(() => decodeSnapshot(reseal(st)), /bad state/);
});

test('unknown section types are skipped by length', () => {
  const buf = encodeSnapshot({ seq: 9, generatedAtMs: 10, peers });
  const unknown = Buffer.alloc(8 + 5);
  unknown.writeUInt16LE(77, 0);
  unknown.writeUInt32LE(5, 4);
  const doc = Buffer.concat([buf.subarray(0, HEADER.length), unknown, buf.subarray(HEADER.length)]);
  doc.writeUInt16LE(2, HEADER.sectionCount);
  const d = decodeSnapshot(reseal(doc));
  assert.deepEqual(d.unknownSections, [77]);
  assert.equal(d.peers.length, 2);
  assert.equal(d.peers[0].name, 'cloud-b');
});

test('encoder rejects values that do not fit or break the structure', () => {
  assert.throws(() => encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [{ ...peers[0], name: 'x'.repeat(256) }] }), /255 bytes/);
  assert.throws(() => encodeSnapshot({ seq: -1, generatedAtMs: 1, peers }), /seq/);
  assert.throws(() => encodeSnapshot({ seq: 2 ** 53, generatedAtMs: 1, peers }), /seq/);
  assert.throws(() => encodeSnapshot({ seq: 1, generatedAtMs: 1, bootId: 2 ** 32, peers }), /bootId/);
  assert.throws(() => encodeSnapshot({ ...snap, instances: [{ ...inst, reason: 'nope' as any }] }), /reason/);
  assert.throws(() => encodeSnapshot({ ...snap, instances: [{ ...inst, slotsSource: 'guessed' as any }] }), /slotsSource/);
  for (const addr of ['', '10.0.0.7', 'llm:80', '10.0.0.7:0', '[fe80::1%eth0]:80', '10.0.0.7:80\r\nx: y']) {
    assert.throws(() => encodeSnapshot({ ...snap, instances: [{ ...inst, addr }] }), /addr: .* is not ip:port/, JSON.stringify(addr));
  }
  assert.throws(() => encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [{ ...peers[0], name: '' }] }), /name: must not be empty/);
  const many = Array.from({ length: 20000 }, (_, i) => ({ ...inst, service: 's'.repeat(200), addr: `10.0.${i >> 8}.${i & 255}:80` }));
  assert.throws(() => encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], instances: many }), /1 MiB/);
});

const CASES: [string, number][] = [['NaN', NaN], ['+Inf', Infinity], ['-Inf', -Infinity], ['0', 0], ['negative', -1], ['denormal', 1e-40], ['huge', 1e30]];
const FIELDS = ['rho', 'esMs', 'es2Ms2', 'lambdaPerS', 'queueDepth', 'p50Ms', 'p99Ms', 'baselineP99Ms', 'gpuUtil', 'slots'] as const;
/** contracts.md "Snapshot values": which (field, case) pairs are still a healthy instance */
const STAYS_HEALTHY = new Set(['rho 0', 'lambdaPerS 0', 'queueDepth 0', 'p50Ms 0', 'p99Ms 0', 'baselineP99Ms 0', 'gpuUtil 0', 'p50Ms NaN', 'p99Ms NaN', 'baselineP99Ms NaN', 'gpuUtil NaN']);

test('encoder: each number field x {NaN, +Inf, -Inf, 0, negative, denormal, huge} (D1), counted through onInvalid', () => {
  for (const field of FIELDS) {
    for (const [name, v] of CASES) {
      const seen: string[] = [];
      const rec = { ...inst, [field]: v };
      const buf = encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], instances: [rec, { ...rec, addr: '10.0.0.8:8080', healthy: false, reason: 'unreachable' }] }, (i) => seen.push(`${i.addr} ${i.field}`));
      const [healthy, unhealthy] = decodeSnapshot(buf).instances!;
      const label = `${field} ${name}`;
      if (STAYS_HEALTHY.has(label)) {
        assert.deepEqual([healthy.healthy, healthy.reason, seen], [true, 'ok', []], label);
      } else {
        assert.deepEqual([healthy.healthy, healthy.reason], [false, 'invalid_data'], label);
        assert.deepEqual(seen, [`10.0.0.7:8080 ${field}`], `${label}: reported once, for the healthy instance only`);
      }
      assert.equal(unhealthy.reason, 'unreachable', `${label}: an unhealthy instance keeps its reason`);
      if (field === 'slots' && !STAYS_HEALTHY.has(label)) assert.deepEqual([healthy.slots, unhealthy.slots], [1, 1], `${label}: bad slots carried as 1`);
    }
  }
});

test('encoder: peer RTTs outside [0, 3.6e6] ms are carried as NaN (no usable sample)', () => {
  for (const [name, v] of CASES) {
    const d = decodeSnapshot(encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [{ ...peers[0], lastRttMs: v, avgRttMs: v }] }));
    const usable = name === '0';
    assert.equal(Number.isNaN(d.peers[0].lastRttMs), !usable, `lastRttMs ${name}`);
    assert.equal(Number.isNaN(d.peers[0].avgRttMs), !usable, `avgRttMs ${name}`);
  }
});

test('slotsSource (flags bits 1-2) round trips and shows in the JSON view; default inferred', () => {
  const recs = (['inferred', 'configured', 'exporter'] as const).map((slotsSource, i) => ({ ...inst, addr: `10.0.0.${i + 1}:80`, slotsSource }));
  const buf = encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], instances: [...recs, { ...inst, slotsSource: undefined }] });
  const d = decodeSnapshot(buf);
  assert.deepEqual(d.instances!.map((r) => r.slotsSource), ['inferred', 'configured', 'exporter', 'inferred']);
  const j = snapshotToJson(d) as { instances: { slotsSource: string }[] };
  assert.deepEqual(j.instances.map((r) => r.slotsSource), ['inferred', 'configured', 'exporter', 'inferred']);
});

test('publisher: boot id per publisher, rules applied before the JSON view, invalid numbers counted', async () => {
  const registry = new promClient.Registry();
  let instances: InstanceRecord[] = [inst];
  const pub = new SnapshotPublisher({ publishIntervalMs: 1000, collectPeers: () => peers, collectInstances: () => instances, registry, now: () => 1_764_000_000_000 });
  const other = new SnapshotPublisher({ publishIntervalMs: 1000, collectPeers: () => peers, now: () => 1_764_000_000_000 });
  assert.ok(pub.bootId >= 1 && pub.bootId <= 0xffffffff);
  assert.notEqual(pub.bootId, other.bootId);
  assert.equal(decodeSnapshot(pub.current.binary).bootId, pub.bootId);
  instances = [{ ...inst, esMs: 0 }];
  const p = pub.publish('manual');
  assert.deepEqual([p.snapshot.instances![0].healthy, p.snapshot.instances![0].reason], [false, 'invalid_data']);
  assert.equal(JSON.parse(p.json).instances[0].reason, 'invalid_data');
  assert.equal(decodeSnapshot(p.binary).instances![0].reason, 'invalid_data');
  const m = await registry.getSingleMetric('switchyard_agent_snapshot_invalid_numbers_total')!.get();
  assert.deepEqual(m.values.map((v) => [v.labels.field, v.value]), [['esMs', 1]]);
  pub.stop();
  other.stop();
});
