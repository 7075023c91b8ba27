// One PeerMonitor per configured link peer, with its metrics and logs; state changes are
// handed to the caller (which publishes at once).
import type { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { PeerConfig } from '../config';
import { PeerMonitor, type StateEvent } from '../link/peer-monitor';
import type { AgentMetrics } from '../metrics';
import type { AgentEvents } from '../agent';

export interface PeerWiring {
  metrics: AgentMetrics;
  logger: Logger;
  events: EventEmitter<AgentEvents>;
  /** called on every state change, before the 'state' event is emitted */
  onStateChange(e: StateEvent): void;
}

export function createPeerMonitors(peerConfigs: PeerConfig[], w: PeerWiring): Map<string, PeerMonitor> {
  const { metrics, logger, events } = w;
  const peers = new Map<string, PeerMonitor>();
  for (const pc of peerConfigs) {
    const m = new PeerMonitor(pc);
    peers.set(pc.name, m);
    const peer = pc.name;
    metrics.peerState.set({ peer }, m.state === 'degraded' ? 1 : 0);
    metrics.inFlight.set({ peer }, 0);
    m.on('probe-start', (e) => metrics.inFlight.set({ peer }, e.inFlight));
    m.on('skip', (e) => {
      metrics.skipped.inc({ peer });
      logger.debug({ peer, inFlight: e.inFlight }, 'probe skipped: maxInFlight reached');
    });
    m.on('probe-end', (e) => {
      metrics.inFlight.set({ peer }, m.inFlightCount);
      metrics.probes.inc({ peer, outcome: e.result.outcome });
      metrics.probeRtt.observe({ peer, outcome: e.result.outcome }, e.result.rttMs / 1000);
      if (e.result.outcome === 'ok') metrics.peerAvgRtt.set({ peer }, m.avgRttMs / 1000);
      else logger.debug({ peer, probeId: e.probeId, outcome: e.result.outcome, error: e.result.error, rttMs: e.result.rttMs }, 'probe failed');
      events.emit('probe-end', e);
    });
    m.on('sample', (e) => {
      metrics.samples.inc({ peer, result: e.kind });
      logger.trace(e, 'sample');
      events.emit('sample', e);
    });
    m.on('state', (e) => {
      metrics.peerState.set({ peer }, e.to === 'degraded' ? 1 : 0);
      metrics.transitions.inc({ peer, to: e.to });
      const level = e.to === 'degraded' ? 'warn' : 'info';
      logger[level]({ peer, from: e.from, to: e.to, sample: e.sampleKind, sampleElapsedMs: Math.round(e.sampleElapsedMs * 10) / 10, lastRttMs: m.lastRttMs, avgRttMs: m.avgRttMs }, `peer ${peer} is ${e.to}`);
      w.onStateChange(e);
      events.emit('state', e);
    });
  }
  return peers;
}

/** 'degraded' if any peer is degraded; one peer's state; undefined for an unknown peer. */
export function linkStatus(peers: ReadonlyMap<string, PeerMonitor>, peer?: string): 'healthy' | 'degraded' | undefined {
  if (peer !== undefined) {
    const m = peers.get(peer);
    if (!m) return undefined;
    return m.state === 'degraded' ? 'degraded' : 'healthy';
  }
  for (const m of peers.values()) if (m.state === 'degraded') return 'degraded';
  return 'healthy';
}
