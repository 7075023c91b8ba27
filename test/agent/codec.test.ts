import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as zlib from 'node:zlib';
import {
  crc32,
  crc32Portable,
  decodeSnapshot,
  encodeSnapshot,
  snapshotToJson,
  SnapshotDecodeError,
  type InstanceRecord,
  type Snapshot,
} from '../../agent/src/snapshot/codec';

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

test('layout matches contracts.md byte for byte (hand-built expected document)', () => {
  const s: Snapshot = { seq: 5, generatedAtMs: 1000, peers: [{ name: 'ab', state: 'degraded', lastRttMs: 1.5, avgRttMs: 2, recoverStreak: 7, lastSampleAtMs: 999 }] };
  const peer = Buffer.alloc(1 + 2 + 1 + 4 + 4 + 2 + 8);
  let o = 0;
  o = peer.writeUInt8(2, o);
  o += peer.write('ab', o, 'ascii');
  o = peer.writeUInt8(1, o);
  o = peer.writeFloatLE(1.5, o);
  o = peer.writeFloatLE(2, o);
  o = peer.writeUInt16LE(7, o);
  peer.writeBigUInt64LE(999n, o);
  const payload = Buffer.concat([Buffer.from([1, 0, 0, 0]), peer]); // count=1, reserved
  const sec = Buffer.alloc(8);
  sec.writeUInt16LE(1, 0);
  sec.writeUInt16LE(0, 2);
  sec.writeUInt32LE(payload.length, 4);
  const hdr = Buffer.alloc(40);
  hdr.write('SWY1', 0, 'ascii');
  hdr.writeUInt16LE(1, 4);
  hdr.writeUInt16LE(40, 6);
  const total = 40 + 8 + payload.length;
  hdr.writeUInt32LE(total, 8);
  hdr.writeBigUInt64LE(5n, 16);
  hdr.writeBigUInt64LE(1000n, 24);
  hdr.writeUInt16LE(1, 32);
  const doc = Buffer.concat([hdr, sec, payload]);
  doc.writeUInt32LE(zlib.crc32(doc.subarray(16)) >>> 0, 12);
  assert.equal(encodeSnapshot(s).toString('hex'), doc.toString('hex'));
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
  over.writeUInt32LE(over.readUInt32LE(44) + 1, 44);
  assert.throws(() => decodeSnapshot(reseal(over)), /truncated/);
  // section count larger than present
  const cnt = Buffer.from(buf);
  cnt.writeUInt16LE(2, 32);
  assert.throws(() => decodeSnapshot(reseal(cnt)), /truncated/);
  // peer count larger than the payload holds
  const pc = Buffer.from(buf);
  pc.writeUInt16LE(3, 48);
  assert.throws(() => decodeSnapshot(reseal(pc)), /truncated/);
  // trailing bytes after the declared sections
  assert.throws(() => decodeSnapshot(reseal(Buffer.concat([buf, Buffer.from([0, 0])]))), /trailing/);
  // bad state byte
  const st = Buffer.from(buf);
  st[52 + 'cloud-b'.length + 1] = 9;
  assert.throws(() => decodeSnapshot(reseal(st)), /bad state/);
});

test('unknown section types are skipped by length', () => {
  const buf = encodeSnapshot({ seq: 9, generatedAtMs: 10, peers });
  const unknown = Buffer.alloc(8 + 5);
  unknown.writeUInt16LE(77, 0);
  unknown.writeUInt32LE(5, 4);
  const doc = Buffer.concat([buf.subarray(0, 40), unknown, buf.subarray(40)]);
  doc.writeUInt16LE(2, 32);
  const d = decodeSnapshot(reseal(doc));
  assert.deepEqual(d.unknownSections, [77]);
  assert.equal(d.peers.length, 2);
  assert.equal(d.peers[0].name, 'cloud-b');
});

test('encoder rejects values that do not fit', () => {
  assert.throws(() => encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [{ ...peers[0], name: 'x'.repeat(256) }] }), /255 bytes/);
  assert.throws(() => encodeSnapshot({ seq: -1, generatedAtMs: 1, peers }), /seq/);
  assert.throws(() => encodeSnapshot({ ...snap, instances: [{ ...inst, reason: 'nope' as any }] }), /reason/);
  assert.throws(() => encodeSnapshot({ ...snap, instances: [{ ...inst, slots: 0.5 }] }), /slots: must be >= 1/);
  assert.throws(() => encodeSnapshot({ ...snap, instances: [{ ...inst, addr: '' }] }), /addr: must not be empty/);
  assert.throws(() => encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [{ ...peers[0], name: '' }] }), /name: must not be empty/);
  const many = Array.from({ length: 20000 }, (_, i) => ({ ...inst, service: 's'.repeat(200), addr: `10.0.${i >> 8}.${i & 255}:80` }));
  assert.throws(() => encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], instances: many }), /1 MiB/);
});

test('INSTANCES record layout matches contracts.md (slots last, default 1)', () => {
  const { slots: _omit, ...noSlots } = inst;
  const buf = encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], instances: [{ ...noSlots, service: 's', addr: '1.2.3.4:5', peer: 'p' }] });
  // peers section: 8 + 4 bytes; instances section header at 52, payload at 60
  assert.equal(buf.readUInt16LE(52), 2);
  const rec = 64; // after u16 count + u16 reserved
  const expected = Buffer.alloc(2 + 1 + 10 + 1 + 1 + 1 + 1 + 9 * 4 + 4 + 4);
  let o = 0;
  o = expected.writeUInt8(1, o);
  o += expected.write('s', o);
  o = expected.writeUInt8(9, o);
  o += expected.write('1.2.3.4:5', o);
  o = expected.writeUInt8(1, o);
  o += expected.write('p', o);
  o = expected.writeUInt8(1, o); // flags: healthy
  o = expected.writeUInt8(0, o); // reason ok
  for (const v of [inst.rho, inst.esMs, inst.es2Ms2, inst.lambdaPerS, inst.queueDepth, inst.p50Ms, inst.p99Ms, inst.baselineP99Ms, inst.gpuUtil]) o = expected.writeFloatLE(v, o);
  o = expected.writeUInt32LE(1234, o);
  o = expected.writeFloatLE(1, o); // slots default
  assert.equal(buf.subarray(rec).toString('hex'), expected.subarray(0, o).toString('hex'));
  assert.equal(buf.readUInt32LE(56), 4 + o);
  assert.equal(decodeSnapshot(buf).instances![0].slots, 1);
});
