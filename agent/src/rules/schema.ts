// JSON Schema of the agent config key `rules` (state variables, rule sets, admin API, override
// store) and the semantic checks ajv cannot express (conditions compile, one default rule,
// action bounds, peers exist). agent/src/config.ts plugs `rulesSchema` in at
// `properties.rules` and calls checkRulesConfig() from its semantic checks.
import type { ProbeSpec } from '../config';
import type { RuleAction } from './actions';
import { compileRules, RulesConfigError } from './compile';

const NAME = '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$';
const VAR = '^[A-Za-z_][A-Za-z0-9_]{0,63}$';
const ADDR = '^(?:[A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\]):\\d{1,5}$';

const probeSpec = {
  type: 'object',
  required: ['kind'],
  discriminator: { propertyName: 'kind' },
  oneOf: [
    { type: 'object', additionalProperties: false, required: ['kind', 'url'], properties: { kind: { const: 'http' }, url: { type: 'string', minLength: 1, maxLength: 2048 }, host: { type: 'string', minLength: 1, maxLength: 255 } } },
    { type: 'object', additionalProperties: false, required: ['kind', 'address'], properties: { kind: { const: 'tcp' }, address: { type: 'string', pattern: ADDR } } },
  ],
};

const variable = {
  type: 'object',
  required: ['name', 'kind'],
  discriminator: { propertyName: 'kind' },
  oneOf: [
    {
      description: 'health probe of a service: true = healthy',
      type: 'object',
      additionalProperties: false,
      required: ['name', 'kind', 'probe'],
      properties: {
        name: { type: 'string', pattern: VAR },
        description: { type: 'string', maxLength: 500 },
        kind: { const: 'probe' },
        probe: probeSpec,
        intervalMs: { type: 'integer', minimum: 50, maximum: 600000, default: 1000 },
        timeoutMs: { type: 'integer', minimum: 10, maximum: 600000, default: 500, description: 'a probe unanswered after this is a failure' },
        healthyAfter: { type: 'integer', minimum: 1, maximum: 100, default: 2, description: 'consecutive successes to become true' },
        unhealthyAfter: { type: 'integer', minimum: 1, maximum: 100, default: 3, description: 'consecutive failures to become false' },
      },
    },
    {
      description: "a link peer's Schmitt-trigger state",
      type: 'object',
      additionalProperties: false,
      required: ['name', 'kind', 'peer'],
      properties: {
        name: { type: 'string', pattern: VAR },
        description: { type: 'string', maxLength: 500 },
        kind: { const: 'peer' },
        peer: { type: 'string', pattern: NAME, description: 'a link.peers[].name' },
        is: { enum: ['degraded', 'normal'], default: 'degraded', description: 'the variable is true while the peer is in this state' },
      },
    },
    {
      description: "an inference pool's metric against a threshold",
      type: 'object',
      additionalProperties: false,
      required: ['name', 'kind', 'service', 'metric', 'op', 'value'],
      properties: {
        name: { type: 'string', pattern: VAR },
        description: { type: 'string', maxLength: 500 },
        kind: { const: 'pool' },
        service: { type: 'string', minLength: 1, maxLength: 200, description: 'an inference.services[].name' },
        metric: { enum: ['meanRho', 'healthyInstances'], description: 'meanRho: mean utilisation of the healthy instances (no healthy instance = 1); healthyInstances: their count' },
        op: { enum: ['>=', '>', '<=', '<'] },
        value: { type: 'number' },
        intervalMs: { type: 'integer', minimum: 50, maximum: 600000, default: 1000, description: 'how often the pool is read' },
      },
    },
    {
      description: 'an operator flag, set through the admin API or the store',
      type: 'object',
      additionalProperties: false,
      required: ['name', 'kind'],
      properties: {
        name: { type: 'string', pattern: VAR },
        description: { type: 'string', maxLength: 500 },
        kind: { const: 'flag' },
        default: { type: 'boolean', default: false, description: 'value while no operator has set it' },
      },
    },
  ],
};

const action = {
  type: 'object',
  required: ['kind'],
  discriminator: { propertyName: 'kind' },
  oneOf: [
    { type: 'object', additionalProperties: false, required: ['kind', 'target'], properties: { kind: { const: 'route' }, target: { type: 'string' } } },
    { type: 'object', additionalProperties: false, required: ['kind', 'status'], properties: { kind: { const: 'link-status' }, status: { enum: ['normal', 'degraded'] } } },
    {
      type: 'object',
      additionalProperties: false,
      required: ['kind', 'targets'],
      properties: {
        kind: { const: 'split' },
        targets: {
          type: 'array',
          minItems: 1,
          maxItems: 16,
          items: { type: 'object', additionalProperties: false, required: ['target', 'weight'], properties: { target: { type: 'string' }, weight: { type: 'integer' } } },
        },
      },
    },
    {
      type: 'object',
      additionalProperties: false,
      required: ['kind', 'status'],
      properties: {
        kind: { const: 'local-reply' },
        status: { type: 'integer' },
        headers: { type: 'object', default: {}, maxProperties: 16, additionalProperties: { type: 'string' } },
        body: { type: 'string', default: '' },
      },
    },
  ],
};

const rule = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'condition', 'action'],
  properties: {
    id: { type: 'string', pattern: NAME },
    description: { type: 'string', maxLength: 500, default: '' },
    condition: { type: 'string', minLength: 1, maxLength: 4096, description: 'identifiers, TRUE, FALSE, NOT, AND, OR, parentheses; NOT > AND > OR' },
    priority: { type: 'integer', minimum: -1000000, maximum: 1000000, default: 0, description: 'higher first; equal priorities in declared order' },
    action,
  },
};

/** The filter's authority pattern (filter/assembly/lib/authority.ts checkPattern): the RULES section carries these, and the filter refuses a document with any other. */
export const AUTHORITY_PATTERN = '^(\\*\\.)?[a-z0-9_-]+(\\.[a-z0-9_-]+)*$';

const ruleSet = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'authorities', 'rules'],
  properties: {
    name: { type: 'string', pattern: NAME },
    description: { type: 'string', maxLength: 500 },
    authorities: { type: 'array', minItems: 1, maxItems: 64, items: { type: 'string', minLength: 1, maxLength: 253, pattern: AUTHORITY_PATTERN }, description: 'the filter applies this set to requests for these authorities: exact lower-case host names or *.suffix wildcards, without a port (the filter\'s authority patterns, docs/contracts.md)' },
    routeHeader: { type: 'string', default: 'x-switchyard-route', description: 'header a route/split action replaces (stripped by the filter when no rule sets it)' },
    hysteresis: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'a new outcome takes effect once it has held for `evaluations` consecutive evaluations or `holdMs` ms, whichever comes first (0 disables that criterion; both 0 = at once)',
      properties: {
        evaluations: { type: 'integer', minimum: 0, maximum: 1000, default: 0 },
        holdMs: { type: 'integer', minimum: 0, maximum: 3600000, default: 500 },
      },
    },
    cooldownS: { type: 'number', minimum: 0, maximum: 86400, default: 5, description: 'minimum time between two switches driven by rules' },
    evaluateIntervalMs: { type: 'integer', minimum: 10, maximum: 600000, default: 1000, description: 'evaluation heartbeat, on top of one evaluation per variable change' },
    rules: { type: 'array', minItems: 1, maxItems: 1000, items: rule },
  },
};

export const rulesSchema: Record<string, unknown> = {
  description: 'State-driven routing rules (issue 8): state variables, rule sets evaluated by the agent, the authenticated admin API and the shared flag/override store.',
  type: 'object',
  additionalProperties: false,
  properties: {
    variables: { type: 'array', default: [], maxItems: 1000, items: variable },
    sets: { type: 'array', default: [], maxItems: 64, items: ruleSet },
    admin: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        enabled: { type: 'boolean', default: true },
        host: { type: 'string', minLength: 1, default: '127.0.0.1', description: 'bind address; loopback by default' },
        port: { type: 'integer', minimum: 0, maximum: 65535, default: 8010 },
        tokenFile: { type: 'string', minLength: 1, description: 'file holding the bearer token for writes' },
        tokenEnv: { type: 'string', minLength: 1, default: 'SWITCHYARD_ADMIN_TOKEN', description: 'environment variable holding the token when tokenFile is not set' },
        maxOverrideS: { type: 'integer', minimum: 1, maximum: 604800, default: 86400, description: 'upper bound of an override or flag expiry' },
      },
    },
    store: {
      type: 'object',
      default: { kind: 'memory' },
      required: ['kind'],
      discriminator: { propertyName: 'kind' },
      oneOf: [
        { type: 'object', additionalProperties: false, required: ['kind'], properties: { kind: { const: 'memory' } } },
        {
          type: 'object',
          additionalProperties: false,
          required: ['kind', 'endpoints'],
          properties: {
            kind: { const: 'etcd' },
            endpoints: { type: 'array', minItems: 1, maxItems: 16, items: { type: 'string', minLength: 1 } },
            prefix: { type: 'string', pattern: '^/[A-Za-z0-9/_.-]*/$', default: '/switchyard/v1/' },
            dialTimeoutMs: { type: 'integer', minimum: 50, maximum: 60000, default: 1000 },
            healthIntervalMs: { type: 'integer', minimum: 50, maximum: 60000, default: 500, description: 'how often the agent checks etcd is reachable' },
            maxEntries: { type: 'integer', minimum: 1, maximum: 100000, default: 1000, description: 'keys under the prefix beyond this are ignored (counted)' },
          },
        },
      ],
    },
  },
};

export type VariableConfig =
  | { name: string; description?: string; kind: 'probe'; probe: ProbeSpec; intervalMs: number; timeoutMs: number; healthyAfter: number; unhealthyAfter: number }
  | { name: string; description?: string; kind: 'peer'; peer: string; is: 'degraded' | 'normal' }
  | { name: string; description?: string; kind: 'pool'; service: string; metric: 'meanRho' | 'healthyInstances'; op: '>=' | '>' | '<=' | '<'; value: number; intervalMs: number }
  | { name: string; description?: string; kind: 'flag'; default: boolean };

export interface RuleConfig {
  id: string;
  description: string;
  condition: string;
  priority: number;
  action: RuleAction;
}

export interface RuleSetConfig {
  name: string;
  description?: string;
  authorities: string[];
  routeHeader: string;
  hysteresis: { evaluations: number; holdMs: number };
  cooldownS: number;
  evaluateIntervalMs: number;
  rules: RuleConfig[];
}

export type StoreConfig =
  | { kind: 'memory' }
  | { kind: 'etcd'; endpoints: string[]; prefix: string; dialTimeoutMs: number; healthIntervalMs: number; maxEntries: number };

export interface RulesConfig {
  variables: VariableConfig[];
  sets: RuleSetConfig[];
  admin: { enabled: boolean; host: string; port: number; tokenFile?: string; tokenEnv: string; maxOverrideS: number };
  store: StoreConfig;
}

/**
 * Semantic checks after the schema (defaults filled): "field: reason" lines, empty if valid.
 * `peers` are the configured link peer names (a peer variable must name one).
 */
export function checkRulesConfig(cfg: unknown, base = 'rules', peers?: readonly string[]): string[] {
  try {
    compileRules(cfg as RulesConfig, { base, peers });
    return [];
  } catch (err) {
    if (err instanceof RulesConfigError) return err.problems;
    throw err;
  }
}
