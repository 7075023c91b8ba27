// JSON Schema of the agent config key `inflight` (mesh-wide in-flight, docs/mesh.md "Mesh-wide
// in-flight"): the POST /v1/inflight endpoint the filters report to, its bounds, and the exchange
// of the agent's sums with the other agents over NATS (mesh mode collector or subscriber).
// Plugged into the agent's effective schema at `properties.inflight` (agent/src/config.ts).

export interface InflightConfig {
  /** serve POST /v1/inflight (false: 404, the filters price their own requests only) */
  enabled: boolean;
  maxProxies: number;
  maxInstances: number;
  expireReports: number;
  maxBodyBytes: number;
  /** NATS: the agent's sums are published at most this often (ms), only when changed */
  exchangeMs: number;
  /** NATS: another agent's sums stand this long (ms) after its last message */
  agentExpireMs: number;
  /** NATS: most other agents held */
  maxAgents: number;
  /**
   * NATS: how the agents' sums travel. `leader` (default): every agent publishes its sums to its
   * pool's collector leader, which publishes the mesh-wide totals once per exchangeMs (linear in
   * the agents). `all`: every agent receives every other agent's sums (N² messages; small meshes).
   */
  exchange: 'leader' | 'all';
  /** prefix placements (docs/mesh.md): records taken per report, given per answer, sent per NATS message at most */
  prefixRecords: number;
  /** prefix placements: records the agent's log holds (each proxy is given the others' from it) */
  prefixLog: number;
}

export const INFLIGHT_DEFAULTS: InflightConfig = {
  enabled: true,
  maxProxies: 4096,
  maxInstances: 100000,
  expireReports: 4,
  maxBodyBytes: 1048576,
  exchangeMs: 20,
  agentExpireMs: 1000,
  maxAgents: 4096,
  exchange: 'leader',
  prefixRecords: 4096,
  prefixLog: 65536,
};

export const inflightSchema: Record<string, unknown> = {
  description: 'Mesh-wide in-flight (docs/mesh.md): the filters report their per-instance in-flight counts on POST /v1/inflight; the agent answers with the other proxies\' counts (and, in mesh mode, the other agents\' over NATS).',
  type: 'object',
  additionalProperties: false,
  default: {},
  properties: {
    enabled: { type: 'boolean', default: INFLIGHT_DEFAULTS.enabled, description: 'false: POST /v1/inflight answers 404 (each filter prices its own requests only)' },
    maxProxies: { type: 'integer', minimum: 1, maximum: 1000000, default: INFLIGHT_DEFAULTS.maxProxies, description: 'live proxies (reports) kept; a new one beyond it is answered 503' },
    maxInstances: { type: 'integer', minimum: 1, maximum: 10000000, default: INFLIGHT_DEFAULTS.maxInstances, description: 'addresses summed (beyond the live fleet no address is kept anyway)' },
    expireReports: { type: 'integer', minimum: 2, maximum: 100, default: INFLIGHT_DEFAULTS.expireReports, description: 'a proxy\'s report stands this many of its intervals (at least 100 ms)' },
    maxBodyBytes: { type: 'integer', minimum: 1024, maximum: 16777216, default: INFLIGHT_DEFAULTS.maxBodyBytes, description: 'largest report accepted (413 beyond)' },
    exchangeMs: { type: 'integer', minimum: 10, maximum: 10000, default: INFLIGHT_DEFAULTS.exchangeMs, description: 'mesh mode: the agent\'s sums go on NATS at most this often (about the filters\' tick), only when they changed' },
    agentExpireMs: { type: 'integer', minimum: 100, maximum: 600000, default: INFLIGHT_DEFAULTS.agentExpireMs, description: 'mesh mode: another agent\'s sums stand this long after its last message' },
    maxAgents: { type: 'integer', minimum: 1, maximum: 1000000, default: INFLIGHT_DEFAULTS.maxAgents, description: 'mesh mode: other agents held (the leader: agents summed)' },
    prefixRecords: { type: 'integer', minimum: 0, maximum: 65535, default: INFLIGHT_DEFAULTS.prefixRecords, description: 'prefix placements: records taken from one report, given in one answer, sent in one NATS message at most (0: none exchanged; the filters still report them)' },
    prefixLog: { type: 'integer', minimum: 1, maximum: 16777216, default: INFLIGHT_DEFAULTS.prefixLog, description: 'prefix placements: records the agent keeps for its proxies (a proxy that misses more than this many loses the oldest)' },
    exchange: { type: 'string', enum: ['leader', 'all'], default: INFLIGHT_DEFAULTS.exchange, description: 'mesh mode: leader = every agent sends its sums to the pool\'s collector leader, which publishes the mesh-wide totals (messages linear in the agents); all = every agent receives every other agent\'s sums (N squared; a few node agents)' },
  },
};

/** Problems ajv cannot express. */
export function checkInflightConfig(c: InflightConfig, base = 'inflight'): string[] {
  const problems: string[] = [];
  // a silent agent is dropped only after it missed several exchanges
  if (c.agentExpireMs < 3 * c.exchangeMs) problems.push(`${base}.agentExpireMs: must be >= 3 x inflight.exchangeMs (${c.agentExpireMs} < ${3 * c.exchangeMs})`);
  return problems;
}
