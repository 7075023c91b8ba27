// Agent configuration: built-in defaults <- YAML file <- SWITCHYARD_* environment.
// Validated with ajv against agent/config.schema.json (the single source of truth), with the
// `inference` sub-schema substituted from agent/src/inference/schema.ts, then semantic checks.
import * as fs from 'node:fs';
import Ajv, { type ErrorObject } from 'ajv';
import addFormats from 'ajv-formats';
import * as YAML from 'yaml';
import baseSchema from '../config.schema.json';
import * as inferenceModule from './inference/schema';
import { rulesSchema, checkRulesConfig, type RulesConfig } from './rules/schema';
import { meshSchema, checkMeshConfig, type MeshConfig } from './mesh/schema';
import { inflightSchema, checkInflightConfig, type InflightConfig } from './mesh/inflight-schema';

export const DEFAULT_CONFIG_PATH = '/etc/switchyard/agent.yaml';

export type ProbeSpec = { kind: 'http'; url: string; host?: string } | { kind: 'tcp'; address: string };

export interface PeerConfig {
  name: string;
  probe: ProbeSpec;
  intervalMs: number;
  timeoutMs: number;
  maxInFlight: number;
  degradeThresholdMs: number;
  degradeAfter: number;
  recoverThresholdMs: number;
  recoverAfter: number;
  /** minimum dwell time in degraded before a recovery, ms (0 = none); degrading is never delayed */
  cooldownMs: number;
  /** do not count slow samples the agent's own lateness could explain */
  starvationGuard: boolean;
  initialState: 'degraded' | 'normal';
}

export interface AgentConfig {
  listen: { host: string; port: number; maxConnections: number; headersTimeoutMs: number };
  publishIntervalMs: number;
  log: { level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent' };
  link: { peers: PeerConfig[] };
  /** owned by the load-aware scraping; passed through untouched */
  inference?: Record<string, unknown>;
  /** state-driven routing rules (agent/src/rules/schema.ts) */
  rules?: RulesConfig;
  /** pool collectors over etcd + NATS (agent/src/mesh/schema.ts); absent = mode local */
  mesh?: MeshConfig;
  /** mesh-wide in-flight: POST /v1/inflight and its bounds (agent/src/mesh/inflight-schema.ts); defaults filled in */
  inflight: InflightConfig;
}

/** Deep-partial input accepted by resolveConfig / startAgent. */
export type AgentConfigInput = {
  listen?: Partial<AgentConfig['listen']>;
  publishIntervalMs?: number;
  log?: Partial<AgentConfig['log']>;
  link?: { peers?: Array<Partial<PeerConfig> & { name: string; probe: ProbeSpec }> };
  inference?: Record<string, unknown>;
  rules?: Record<string, unknown>;
  mesh?: Record<string, unknown>;
  inflight?: Partial<InflightConfig>;
};

/** Used when no --config is given and DEFAULT_CONFIG_PATH does not exist: the local rig. */
export const BUILTIN_DEFAULTS: AgentConfigInput = {
  link: { peers: [{ name: 'cloud-b', probe: { kind: 'http', url: 'http://127.0.0.1:9102/healthz' } }] },
};

export class ConfigError extends Error {
  /** one line per problem, each "field: reason" */
  constructor(public readonly problems: string[]) {
    super(problems.map((p) => `config error: ${p}`).join('\n'));
    this.name = 'ConfigError';
  }
}

/** Environment overrides: variable -> [config path, type]. */
export const ENV_OVERRIDES: Array<{ env: string; path: string[]; type: 'string' | 'int' }> = [
  { env: 'SWITCHYARD_LISTEN_HOST', path: ['listen', 'host'], type: 'string' },
  { env: 'SWITCHYARD_LISTEN_PORT', path: ['listen', 'port'], type: 'int' },
  { env: 'SWITCHYARD_LOG_LEVEL', path: ['log', 'level'], type: 'string' },
  { env: 'SWITCHYARD_PUBLISH_INTERVAL_MS', path: ['publishIntervalMs'], type: 'int' },
];

function inferenceSubSchema(): Record<string, unknown> {
  const m = inferenceModule as unknown as Record<string, unknown>;
  const s = (m.inferenceSchema ?? m.default ?? m.schema) as Record<string, unknown> | undefined;
  return s && typeof s === 'object' ? s : { type: 'object' };
}

/** The effective JSON Schema (config.schema.json with the inference sub-schema plugged in). */
export function effectiveSchema(): Record<string, unknown> {
  const schema = JSON.parse(JSON.stringify(baseSchema)) as Record<string, any>;
  schema.properties.inference = inferenceSubSchema();
  schema.properties.rules = rulesSchema;
  schema.properties.mesh = meshSchema;
  schema.properties.inflight = inflightSchema;
  return schema;
}

let validator: ReturnType<Ajv['compile']> | undefined;
function getValidator(): ReturnType<Ajv['compile']> {
  if (!validator) {
    const ajv = new Ajv({ useDefaults: true, discriminator: true, allErrors: false, strict: false });
    addFormats(ajv);
    validator = ajv.compile(effectiveSchema());
  }
  return validator;
}

/** "/link/peers/0/intervalMs" -> "link.peers[0].intervalMs" */
export function pointerToField(pointer: string): string {
  if (!pointer) return '';
  let out = '';
  for (const raw of pointer.split('/').slice(1)) {
    const seg = keyName(raw.replace(/~1/g, '/').replace(/~0/g, '~'));
    if (/^\d+$/.test(seg)) out += `[${seg}]`;
    else out += out ? `.${seg}` : seg;
  }
  return out;
}

/** A key "" is named in a path (issue 24 #8: it read ": unknown field"). */
const keyName = (k: string): string => (k === '' ? '<empty key>' : k);

function join(field: string, child: string): string {
  return field ? `${field}.${keyName(child)}` : keyName(child);
}

function formatAjvError(e: ErrorObject, envSources: Map<string, string>): string {
  let field = pointerToField(e.instancePath);
  let reason = e.message ?? 'invalid';
  switch (e.keyword) {
    case 'required':
      field = join(field, String((e.params as { missingProperty: string }).missingProperty));
      reason = 'required';
      break;
    case 'additionalProperties':
      field = join(field, String((e.params as { additionalProperty: string }).additionalProperty));
      reason = 'unknown field';
      break;
    case 'enum':
      reason = `must be one of ${((e.params as { allowedValues: unknown[] }).allowedValues ?? []).map((v) => JSON.stringify(v)).join(', ')}`;
      break;
    case 'discriminator': {
      const p = e.params as { error: string; tag: string };
      field = join(field, p.tag);
      reason = p.error === 'mapping' ? 'must be "http" or "tcp"' : 'must be a string';
      break;
    }
    case 'pattern':
      reason = `must match ${(e.params as { pattern: string }).pattern}`;
      break;
  }
  const env = envSources.get(field);
  return `${field || '(root)'}${env ? ` (from ${env})` : ''}: ${reason}`;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function setPath(obj: Record<string, unknown>, path: string[], value: unknown): void {
  let cur = obj;
  for (const k of path.slice(0, -1)) {
    if (!isPlainObject(cur[k])) cur[k] = {};
    cur = cur[k] as Record<string, unknown>;
  }
  cur[path[path.length - 1]] = value;
}

/** Apply SWITCHYARD_* overrides to a raw (unvalidated) config object. */
export function applyEnv(raw: Record<string, unknown>, env: NodeJS.ProcessEnv, sources?: Map<string, string>): Record<string, unknown> {
  for (const o of ENV_OVERRIDES) {
    const v = env[o.env];
    if (v === undefined || v === '') continue;
    // ints: pass a number only if it parses cleanly, else the string, so the schema reports it
    const value = o.type === 'int' && /^-?\d+$/.test(v.trim()) ? Number(v.trim()) : v;
    setPath(raw, o.path, value);
    sources?.set(pointerToField('/' + o.path.join('/')), o.env);
  }
  return raw;
}

/** the inference module's own semantic checks, if it exports them */
function inferenceChecks(cfg: unknown): string[] {
  const fn = (inferenceModule as unknown as Record<string, unknown>).checkInferenceConfig;
  return typeof fn === 'function' ? ((fn as (c: unknown, base: string) => string[])(cfg, 'inference') ?? []) : [];
}

function semanticChecks(c: AgentConfig): string[] {
  const problems: string[] = [];
  if (c.inference !== undefined) problems.push(...inferenceChecks(c.inference));
  if (c.rules !== undefined) problems.push(...checkRulesConfig(c.rules, 'rules', c.link.peers.map((p) => p.name)));
  problems.push(...checkInflightConfig(c.inflight));
  if (c.mesh !== undefined) problems.push(...checkMeshConfig(c.mesh, c.inference as { scrapeIntervalMs?: number; services?: unknown[] } | undefined));
  // instances of a peer whose link is not probed would be routed on a link state nobody measures
  const linkPeers = new Set(c.link.peers.map((p) => p.name));
  ((c.inference as { services?: Array<{ peer?: string }> } | undefined)?.services ?? []).forEach((s, i) => {
    if (s.peer && !linkPeers.has(s.peer))
      problems.push(`inference.services[${i}].peer: "${s.peer}" is not a link peer (link.peers: ${[...linkPeers].map((n) => `"${n}"`).join(', ') || 'none'}); its link state would be unknown`);
  });
  const seen = new Map<string, number>();
  c.link.peers.forEach((p, i) => {
    const f = `link.peers[${i}]`;
    if (seen.has(p.name)) problems.push(`${f}.name: duplicate peer name "${p.name}" (also link.peers[${seen.get(p.name)}])`);
    else seen.set(p.name, i);
    if (p.recoverThresholdMs > p.degradeThresholdMs)
      problems.push(`${f}.recoverThresholdMs: must be <= degradeThresholdMs (${p.recoverThresholdMs} > ${p.degradeThresholdMs})`);
    // a probe is aborted at timeoutMs: below the degrade threshold no probe could ever be "slow",
    // only failed, so the threshold would be dead configuration
    if (p.timeoutMs < p.degradeThresholdMs)
      problems.push(`${f}.timeoutMs: must be >= degradeThresholdMs (${p.timeoutMs} < ${p.degradeThresholdMs}: a probe could never be slow, only time out)`);
    if (p.probe.kind === 'tcp') {
      const port = Number(p.probe.address.slice(p.probe.address.lastIndexOf(':') + 1));
      if (!(port >= 1 && port <= 65535)) problems.push(`${f}.probe.address: port must be 1..65535`);
    } else {
      try {
        const u = new URL(p.probe.url);
        if (u.protocol !== 'http:' && u.protocol !== 'https:') problems.push(`${f}.probe.url: must be http:// or https://`);
      } catch {
        problems.push(`${f}.probe.url: not a valid URL`);
      }
    }
  });
  return problems;
}

/**
 * Validate a raw config object (defaults are filled in). Throws ConfigError.
 * `envSources` maps field -> env variable, to name the variable in messages.
 */
export function resolveConfig(input: unknown, envSources: Map<string, string> = new Map()): AgentConfig {
  const data = input === undefined || input === null ? {} : JSON.parse(JSON.stringify(input));
  const validate = getValidator();
  if (!validate(data)) {
    throw new ConfigError((validate.errors ?? []).slice(0, 1).map((e) => formatAjvError(e, envSources)));
  }
  const cfg = data as AgentConfig;
  const problems = semanticChecks(cfg);
  if (problems.length) throw new ConfigError(problems);
  return cfg;
}

export interface LoadOptions {
  /** explicit --config path (must exist) */
  path?: string;
  env?: NodeJS.ProcessEnv;
  /** default: DEFAULT_CONFIG_PATH */
  defaultPath?: string;
}

export interface LoadedConfig {
  config: AgentConfig;
  /** file used, or undefined for built-in defaults */
  source?: string;
}

/** Load: file (explicit, SWITCHYARD_CONFIG, or default path if present, else built-in defaults) + env. */
export function loadConfig(opts: LoadOptions = {}): LoadedConfig {
  const env = opts.env ?? process.env;
  const explicit = opts.path ?? (env.SWITCHYARD_CONFIG || undefined);
  const defaultPath = opts.defaultPath ?? DEFAULT_CONFIG_PATH;
  let raw: unknown;
  let source: string | undefined;
  if (explicit !== undefined) {
    source = explicit;
  } else if (fs.existsSync(defaultPath)) {
    source = defaultPath;
  }
  if (source !== undefined) {
    let text: string;
    try {
      text = fs.readFileSync(source, 'utf8');
    } catch (err) {
      throw new ConfigError([`${source}: cannot read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`]);
    }
    try {
      raw = YAML.parse(text);
    } catch (err) {
      throw new ConfigError([`${source}: YAML syntax: ${(err as Error).message.split('\n')[0]}`]);
    }
    if (raw === null || raw === undefined) raw = {};
  } else {
    raw = JSON.parse(JSON.stringify(BUILTIN_DEFAULTS));
  }
  if (!isPlainObject(raw)) throw new ConfigError(['(root): must be a mapping']);
  const sources = new Map<string, string>();
  applyEnv(raw, env, sources);
  const config = resolveConfig(raw, sources);
  // An agent with nothing to probe or scrape serves an empty snapshot and /status "healthy":
  // an empty or truncated file must not look like a working agent.
  const services = (config.inference as { services?: unknown[] } | undefined)?.services ?? [];
  if (source !== undefined && config.link.peers.length === 0 && services.length === 0)
    throw new ConfigError([`${source}: configures neither link.peers nor inference.services (empty or truncated file?)`]);
  return { config, source };
}
