// Which leader an agent follows per pool (agent/src/mesh/follow.ts) and the leader heartbeat
// (message.ts): one sender at a time, another only after the follow window of silence or a
// goodbye; the windows derived from the heartbeat interval; a malformed heartbeat refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { followWindowMs, LeaderFollow, takeoverWindowMs, TAKEOVER_BEATS } from '../../agent/src/mesh/follow';
import { decodeHeartbeat, encodeHeartbeat } from '../../agent/src/mesh/message';

const beat = (heartbeatMs = 100, resigned = false) => ({ heartbeatMs, resigned });

test('follow: the windows derive from the heartbeat (takeover 3 beats, follow one less)', () => {
  assert.equal(TAKEOVER_BEATS, 3);
  assert.equal(takeoverWindowMs(100), 300);
  assert.equal(followWindowMs(100), 200);
  // a new leader's first message comes a full takeover window after the old one's last: never refused for it
  assert.ok(followWindowMs(100) < takeoverWindowMs(100));
});

test('follow: the first sender is followed; another is refused while the followed one talks', () => {
  const f = new LeaderFollow(100);
  assert.equal(f.hear(1, 0, beat()), 'switched');
  assert.deepEqual([f.id, f.reason, f.changes], [1, 'first', 0]);
  // the leader talks every heartbeat, even late ones: a standby's messages are refused throughout
  for (let t = 100; t <= 1000; t += 150) {
    assert.equal(f.hear(1, t, beat()), 'ok');
    assert.equal(f.hear(2, t + 199, beat()), 'not_leader', `t=${t}`);
  }
  assert.deepEqual([f.id, f.changes], [1, 0]);
});

test('follow: after the follow window of silence the next sender is followed, once; the old one is refused then', () => {
  const f = new LeaderFollow(100);
  f.hear(1, 0, beat());
  assert.equal(f.silent(199), false);
  assert.equal(f.hear(2, 199), 'not_leader');
  assert.equal(f.silent(200), true);
  assert.equal(f.hear(2, 200), 'switched');
  assert.deepEqual([f.id, f.reason, f.changes], [2, 'silence', 1]);
  // the old leader back (a paused process): refused while the new one talks -- no flap
  for (let t = 250; t < 1000; t += 100) {
    assert.equal(f.hear(2, t, beat()), 'ok');
    assert.equal(f.hear(1, t + 10, beat()), 'not_leader');
  }
  assert.deepEqual([f.id, f.changes], [2, 1]);
});

test('follow: a goodbye hands over at once; the window follows the slower of the two heartbeat settings', () => {
  const f = new LeaderFollow(100);
  f.hear(1, 0, beat());
  f.hear(1, 50, beat(100, true));
  assert.equal(f.hear(2, 51, beat()), 'switched');
  assert.deepEqual([f.id, f.reason, f.changes], [2, 'resigned', 1]);
  // a leader configured with 500 ms heartbeats is not left after our 200 ms, but after its 1000 ms
  const g = new LeaderFollow(100);
  g.hear(7, 0, beat(500));
  assert.equal(g.windowMs(), 1000);
  assert.equal(g.hear(8, 999), 'not_leader');
  assert.equal(g.hear(8, 1000), 'switched');
  // pool states (no heartbeat) from a leader without heartbeats (a round-7 collector): followed, the own window applies
  const h = new LeaderFollow(100);
  assert.equal(h.hear(3, 0), 'switched');
  assert.equal(h.hear(4, 1000), 'switched', 'a pool state a scrape interval later: the old leader is long silent');
});

test('heartbeat: 12 bytes round trip; anything else is refused', () => {
  const b = encodeHeartbeat({ leaderId: 0xfedcba98, heartbeatMs: 100, resigned: true });
  assert.equal(b.length, 12);
  assert.deepEqual(decodeHeartbeat(b), { leaderId: 0xfedcba98, heartbeatMs: 100, resigned: true });
  assert.deepEqual(decodeHeartbeat(encodeHeartbeat({ leaderId: 5, heartbeatMs: 250, resigned: false })), { leaderId: 5, heartbeatMs: 250, resigned: false });
  assert.throws(() => decodeHeartbeat(b.subarray(0, 11)), /11 bytes/);
  const bad = Buffer.from(b);
  bad[0] ^= 1;
  assert.throws(() => decodeHeartbeat(bad), /magic/);
  const v2 = Buffer.from(b);
  v2[4] = 2;
  assert.throws(() => decodeHeartbeat(v2), /version 2/);
  assert.throws(() => decodeHeartbeat(encodeHeartbeat({ leaderId: 0, heartbeatMs: 100, resigned: false })), /zero/);
  assert.throws(() => decodeHeartbeat(Buffer.from('not a pool message')), /bytes/);
});
