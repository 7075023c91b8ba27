// Prometheus metrics (prom-client), one Registry per agent instance so several agents can
// run in one process (tests, rig).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface AgentMetrics {
  registry: Registry;
  probeRtt: Histogram<'peer' | 'outcome'>;
  probes: Counter<'peer' | 'outcome'>;
  samples: Counter<'peer' | 'result'>;
  inFlight: Gauge<'peer'>;
  skipped: Counter<'peer'>;
  peerState: Gauge<'peer'>;
  peerAvgRtt: Gauge<'peer'>;
  transitions: Counter<'peer' | 'to'>;
  snapshotSeq: Gauge;
  publishes: Counter<'reason'>;
  waiters: Gauge;
}

export function createMetrics(opts: { defaultMetrics?: boolean; waiterCount?: () => number } = {}): AgentMetrics {
  const registry = new Registry();
  if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    probeRtt: new Histogram({
      name: 'switchyard_probe_rtt_seconds',
      help: 'RTT of completed probes (including late completions of probes already counted as slow)',
      labelNames: ['peer', 'outcome'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5, 5],
      registers,
    }),
    probes: new Counter({
      name: 'switchyard_probes_total',
      help: 'Finished probes by outcome (ok, error, http_error, timeout)',
      labelNames: ['peer', 'outcome'],
      registers,
    }),
    samples: new Counter({
      name: 'switchyard_probe_samples_total',
      help: 'Probe samples by result (ok, slow, error, http_error, timeout; starved = not counted by the Schmitt trigger, the agent itself was late); one per probe',
      labelNames: ['peer', 'result'],
      registers,
    }),
    inFlight: new Gauge({ name: 'switchyard_probes_in_flight', help: 'Probes in flight', labelNames: ['peer'], registers }),
    skipped: new Counter({
      name: 'switchyard_probe_skipped_total',
      help: 'Probe ticks skipped because maxInFlight probes were in flight',
      labelNames: ['peer'],
      registers,
    }),
    peerState: new Gauge({ name: 'switchyard_peer_state', help: 'Link state per peer: 0 normal, 1 degraded', labelNames: ['peer'], registers }),
    peerAvgRtt: new Gauge({ name: 'switchyard_peer_rtt_avg_seconds', help: 'EWMA (alpha 0.2) of successful probe RTTs', labelNames: ['peer'], registers }),
    transitions: new Counter({
      name: 'switchyard_peer_state_transitions_total',
      help: 'Link state transitions per peer, by new state',
      labelNames: ['peer', 'to'],
      registers,
    }),
    snapshotSeq: new Gauge({ name: 'switchyard_snapshot_seq', help: 'seq of the current snapshot', registers }),
    publishes: new Counter({
      name: 'switchyard_snapshot_publishes_total',
      help: 'Snapshots published, by reason (initial, periodic, state_change, manual)',
      labelNames: ['reason'],
      registers,
    }),
    waiters: new Gauge({
      name: 'switchyard_longpoll_waiters',
      help: 'Long-poll requests currently held',
      registers,
      collect() {
        if (opts.waiterCount) this.set(opts.waiterCount());
      },
    }),
  };
}
