// Which leader of a pool an agent listens to (docs/mesh.md "Leader election"), as pure state:
// every agent follows exactly one sender per pool, so two leaders' messages never interleave at a
// subscriber, even for the moment a paused old leader and its successor both talk.
//   - the first sender heard is followed;
//   - a message of the followed leader refreshes it;
//   - another sender is followed instead only once the followed one has been silent for the
//     follow window (or said goodbye: a graceful stop), else its message is refused.
// The windows derive from the heartbeat interval: a standby takes over after TAKEOVER_BEATS
// heartbeats of silence (takeoverWindowMs); a listener switches after one heartbeat less
// (followWindowMs), so that the new leader's first message -- sent a full takeover window after
// the old leader's last one -- is never refused for arriving a little early, while a leader that
// is alive and talking (a message every heartbeat) is never left for another sender.

/** heartbeats of silence after which a standby takes a pool over */
export const TAKEOVER_BEATS = 3;

export function takeoverWindowMs(heartbeatMs: number): number {
  return TAKEOVER_BEATS * heartbeatMs;
}

export function followWindowMs(heartbeatMs: number): number {
  return (TAKEOVER_BEATS - 1) * heartbeatMs;
}

/** why the followed leader is followed: the first heard, its predecessor silent, or its predecessor's goodbye */
export type FollowReason = 'first' | 'silence' | 'resigned';

export type Heard = 'ok' | 'switched' | 'not_leader';

export class LeaderFollow {
  id?: number;
  lastAt = -Infinity;
  since?: number;
  reason?: FollowReason;
  resigned = false;
  /** the followed leader's own heartbeat interval (ms), from its heartbeats; undefined: none heard */
  statedMs?: number;
  changes = 0;

  /** `heartbeatMs`: this agent's own setting; the window uses the larger of it and the leader's */
  constructor(private readonly heartbeatMs: number) {}

  windowMs(): number {
    return followWindowMs(Math.max(this.heartbeatMs, this.statedMs ?? 0));
  }

  /**
   * A message (pool state or heartbeat) of `sender` at `now`; `beat`: a heartbeat's interval and
   * goodbye flag. Returns whether it is the followed leader's ('ok'), makes `sender` the followed
   * leader ('switched', counted in changes unless it is the first), or is refused ('not_leader').
   */
  hear(sender: number, now: number, beat?: { heartbeatMs: number; resigned: boolean }): Heard {
    if (this.id !== sender) {
      if (this.id !== undefined && !this.resigned && now - this.lastAt < this.windowMs()) return 'not_leader';
      this.reason = this.id === undefined ? 'first' : this.resigned ? 'resigned' : 'silence';
      if (this.id !== undefined) this.changes++;
      this.id = sender;
      this.since = now;
      this.statedMs = undefined;
      this.resigned = false;
      this.lastAt = now;
      this.take(beat);
      return 'switched';
    }
    this.lastAt = now;
    this.take(beat);
    return 'ok';
  }

  private take(beat?: { heartbeatMs: number; resigned: boolean }): void {
    if (!beat) return;
    this.statedMs = beat.heartbeatMs;
    if (beat.resigned) this.resigned = true;
  }

  /** the followed leader has been silent for the window (or resigned): its data is no longer its successor's to wait for */
  silent(now: number): boolean {
    return this.id === undefined || this.resigned || now - this.lastAt >= this.windowMs();
  }
}
