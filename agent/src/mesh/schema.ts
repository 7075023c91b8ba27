// JSON Schema of the agent config key `mesh` (pool collectors over etcd + NATS, docs/mesh.md),
// its resolved type and the checks ajv cannot express. Plugged into the agent's effective schema
// at `properties.mesh` (agent/src/config.ts), like `inference` and `rules`.
//   local       (default, or no `mesh` key): the agent scrapes every instance itself (as before)
//   collector   scrapes the pools; per service, the etcd lease leader publishes the pool on NATS
//   subscriber  serves the pools it receives on NATS; scrapes itself only while the mesh is unavailable

import { takeoverWindowMs } from './follow';

export type MeshMode = 'local' | 'collector' | 'subscriber';

export interface MeshConfig {
  mode: MeshMode;
  nats?: {
    servers: string[];
    subjectPrefix: string;
    reconnectWaitMs: number;
    pingIntervalMs: number;
    tokenFile?: string;
    tls?: { caFile?: string; certFile?: string; keyFile?: string };
  };
  etcd?: { endpoints: string[]; prefix: string; leaseTtlS: number; dialTimeoutMs: number };
  fallbackAfterMs: number;
  /** the leader's heartbeat per pool on NATS; a standby takes over after 3 silent heartbeats (follow.ts) */
  heartbeatMs: number;
}

const SUBJECT = '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$';

export const meshSchema: Record<string, unknown> = {
  description: 'Pool collectors (docs/mesh.md): a few collector agents scrape each inference service, the etcd lease leader publishes its pool state on NATS, every other agent subscribes. Absent: mode local.',
  type: 'object',
  additionalProperties: false,
  properties: {
    mode: { enum: ['local', 'collector', 'subscriber'], default: 'local', description: 'local: scrape every instance itself; collector: scrape and, when leader of a service, publish it; subscriber: serve what the leaders publish, scrape itself only while the mesh is unavailable' },
    nats: {
      type: 'object',
      additionalProperties: false,
      required: ['servers'],
      properties: {
        servers: { type: 'array', minItems: 1, maxItems: 32, items: { type: 'string', pattern: '^(nats|tls)://[^\\s]+$' }, description: 'NATS server URLs, e.g. nats://nats.switchyard-system:4222' },
        subjectPrefix: { type: 'string', pattern: SUBJECT, maxLength: 128, default: 'switchyard.pool', description: 'a service publishes on <prefix>.<peer or _>.<service>' },
        reconnectWaitMs: { type: 'integer', minimum: 50, maximum: 60000, default: 250, description: 'wait between reconnection attempts' },
        pingIntervalMs: { type: 'integer', minimum: 100, maximum: 600000, default: 2000, description: 'client ping; 2 unanswered pings = disconnected (a silent partition)' },
        tokenFile: { type: 'string', minLength: 1, description: 'file holding the NATS auth token (production: a mounted Secret)' },
        tls: {
          type: 'object',
          additionalProperties: false,
          properties: { caFile: { type: 'string', minLength: 1 }, certFile: { type: 'string', minLength: 1 }, keyFile: { type: 'string', minLength: 1 } },
          description: 'TLS to the NATS servers (client certificate optional)',
        },
      },
    },
    etcd: {
      type: 'object',
      additionalProperties: false,
      required: ['endpoints'],
      properties: {
        endpoints: { type: 'array', minItems: 1, maxItems: 16, items: { type: 'string', pattern: '^https?://[^\\s]+$' } },
        prefix: { type: 'string', pattern: '^/[!-~]*/$', maxLength: 256, default: '/switchyard/mesh/', description: 'election keys live under <prefix>pools/<peer or _>/<service>/' },
        leaseTtlS: { type: 'integer', minimum: 1, maximum: 60, default: 1, description: 'a crashed leader\'s lease expires this long after its last keepalive (etcd raises TTLs below its own minimum, 1.5 x election timeout rounded up: run etcd with --election-timeout <= 500 for 1 s)' },
        dialTimeoutMs: { type: 'integer', minimum: 50, maximum: 60000, default: 1000 },
      },
    },
    heartbeatMs: { type: 'integer', minimum: 20, maximum: 10000, default: 100, description: 'the pool leader publishes a 12-byte heartbeat per pool this often on <pool subject>.leader; a standby collector that hears none from the leader for 3 heartbeats (300 ms) takes the pool over through etcd, ahead of the lease expiry, and every agent follows the new leader once the old one has been silent for 2 heartbeats (docs/mesh.md "Leader election")' },
    fallbackAfterMs: { type: 'integer', minimum: 100, maximum: 600000, default: 3000, description: 'subscriber: no pool message for a service this long (or NATS disconnected) and the agent scrapes the service itself until messages return' },
  },
};

/** Problems ajv cannot express; `scrapeIntervalMs` and `services` are the resolved inference config's. */
export function checkMeshConfig(m: MeshConfig, inference: { scrapeIntervalMs?: number; services?: unknown[] } | undefined, base = 'mesh'): string[] {
  const problems: string[] = [];
  if (m.mode === 'local') return problems;
  if (!m.nats) problems.push(`${base}.nats: required when mode is "${m.mode}"`);
  if (m.mode === 'collector' && !m.etcd) problems.push(`${base}.etcd: required when mode is "collector" (the leader is elected through an etcd lease)`);
  if ((inference?.services ?? []).length === 0) problems.push(`${base}.mode: "${m.mode}" needs inference.services (the pools it collects or subscribes to)`);
  const scrape = inference?.scrapeIntervalMs ?? 1000;
  // a pool message is due every scrape interval: a shorter silence is no outage
  if (m.fallbackAfterMs <= 2 * scrape) problems.push(`${base}.fallbackAfterMs: must be > 2 x inference.scrapeIntervalMs (${m.fallbackAfterMs} <= ${2 * scrape}: a late message would look like an outage)`);
  // a takeover by silence must end before the subscribers give the mesh up, and come before the
  // lease expiry, or the heartbeat buys nothing
  const takeover = takeoverWindowMs(m.heartbeatMs);
  if (2 * takeover >= m.fallbackAfterMs) problems.push(`${base}.heartbeatMs: the takeover window (3 x heartbeatMs = ${takeover} ms) must be < fallbackAfterMs / 2 (${m.fallbackAfterMs / 2} ms: a failover would look like an outage)`);
  if (m.mode === 'collector' && m.etcd && takeover >= m.etcd.leaseTtlS * 1000) problems.push(`${base}.heartbeatMs: the takeover window (3 x heartbeatMs = ${takeover} ms) must be < etcd.leaseTtlS (${m.etcd.leaseTtlS * 1000} ms), or the lease expiry always comes first`);
  return problems;
}

/** NATS subject of one pool: the peer ("" = local, written "_": a peer name cannot be "_") then the service. */
export function poolSubject(prefix: string, peer: string, service: string): string {
  return `${prefix}.${peer === '' ? '_' : peer}.${service}`;
}

/** The key of a pool in maps and in etcd: peer ("_" = local) / service. */
export function poolKey(peer: string, service: string): string {
  return `${peer === '' ? '_' : peer}/${service}`;
}
