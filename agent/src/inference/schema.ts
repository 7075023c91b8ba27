// JSON Schema of the agent config key `inference` (load-aware instance scraping), the
// resolved config type, and defaults/semantic checks for callers that do not run ajv with
// useDefaults (the collector normalises its input itself, so both paths agree).
//
// The agent config loader (agent/src/config.ts) plugs `inferenceSchema` in at
// `properties.inference` of agent/config.schema.json before compiling it with ajv
// (useDefaults: true). Semantic checks ajv cannot express are in checkInferenceConfig().
import Ajv from 'ajv';
import type { CustomMappingsInput, ServerKind, TimeUnit } from './mappings';

const NAME = '^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$';
const PEER = '^$|^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$';
const ADDR = '^(?:(?:\\d{1,3}\\.){3}\\d{1,3}|\\[[0-9A-Fa-f:.]+\\]):\\d{1,5}$';
const TIME_UNITS = ['s', 'ms', 'us', 'ns'];

const timedRef = {
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: {
    name: { type: 'string', minLength: 1 },
    unit: { enum: TIME_UNITS, default: 's', description: 'unit of the values (histogram le bounds / counter)' },
  },
};
const scaledRef = {
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: {
    name: { type: 'string', minLength: 1 },
    scale: { type: 'number', exclusiveMinimum: 0, default: 1, description: 'value x scale = utilisation 0..1 (e.g. 0.01 for percent)' },
  },
};
const nameOrNames = {
  anyOf: [{ type: 'string', minLength: 1 }, { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } }],
};

export const inferenceSchema: Record<string, unknown> = {
  description: 'Load-aware instance scraping: Prometheus endpoints of inference servers, turned into the INSTANCES snapshot section.',
  type: 'object',
  additionalProperties: false,
  properties: {
    scrapeIntervalMs: { type: 'integer', minimum: 50, maximum: 600000, default: 1000, description: 'each instance is scraped this often' },
    scrapeTimeoutMs: { type: 'integer', minimum: 10, maximum: 600000, default: 800, description: 'a scrape unanswered after this is a failure (reason unreachable)' },
    windowS: { type: 'number', minimum: 1, maximum: 3600, default: 10, description: 'sliding window of the rate / moment estimates' },
    minMomentCompletions: {
      type: 'integer', minimum: 1, maximum: 100000, default: 50,
      description: 'E[S] and E[S^2] cover at least this many completions: older scrape intervals are added while the window holds fewer (a heavy-tailed mean of a few requests can be far off)',
    },
    baselineWindowS: { type: 'number', minimum: 10, maximum: 86400, default: 300, description: 'window of the dynamic P99 baseline' },
    baselineScope: {
      enum: ['service', 'instance'],
      default: 'instance',
      description: "pool of P99 samples of the baseline: each instance alone (default: an instance that got slower than it was is de-weighted; a peer that is slower by design is not, its speed is priced by E[S]) or all instances of the service (an instance slower than its peers is de-weighted)",
    },
    baselineTrim: { type: 'number', minimum: 0, maximum: 0.5, default: 0.1, description: 'fraction of the highest P99 samples dropped before the median' },
    assumedScv: { type: 'number', minimum: 0, maximum: 1000, default: 1, description: 'squared coefficient of variation of service time when no histogram resolves E[S^2] (1 = exponential)' },
    rhoCombine: { enum: ['max', 'load', 'gpu'], default: 'max', description: 'how queue-derived and GPU-derived utilisation combine' },
    staleAfterMs: { type: 'integer', minimum: 100, maximum: 3600000, default: 5000, description: 'an instance whose last good scrape is older is unhealthy (reason stale)' },
    failuresToUnhealthy: { type: 'integer', minimum: 1, maximum: 100, default: 1, description: 'consecutive failed scrapes before the instance is unhealthy' },
    maxBodyBytes: { type: 'integer', minimum: 1024, maximum: 268435456, default: 8388608 },
    modelsIntervalMs: { type: 'integer', minimum: 1000, maximum: 3600000, default: 30000, description: 'LLM services: how often each instance\'s GET /v1/models is fetched (the list changes when adapters are added, not per request)' },
    modelsTimeoutMs: { type: 'integer', minimum: 10, maximum: 600000, default: 2000, description: 'a /v1/models fetch unanswered after this fails (the last good list is kept); bodies above 1 MiB fail too' },
    services: {
      type: 'array',
      default: [],
      maxItems: 1000,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'kind', 'instances'],
        properties: {
          name: { type: 'string', pattern: NAME, description: 'service name in the snapshot' },
          peer: { type: 'string', pattern: PEER, default: '', description: 'cloud the instances are in ("" = local)' },
          kind: {
            enum: ['vllm', 'sglang', 'triton', 'tgi', 'custom'],
            description: 'built-in metric names of the server (agent/src/inference/mappings.ts). A GPU-only exporter (DCGM) is not a kind: it has no request metrics, pair it with its inference instance through `gpu`',
          },
          instances: {
            type: 'object',
            additionalProperties: false,
            minProperties: 1,
            maxProperties: 1,
            properties: {
              static: { type: 'array', maxItems: 4096, uniqueItems: true, items: { type: 'string', pattern: ADDR } },
              dns: {
                type: 'object',
                additionalProperties: false,
                required: ['name', 'port'],
                properties: {
                  name: { type: 'string', minLength: 1, maxLength: 253, description: 'e.g. a Kubernetes headless Service' },
                  port: { type: 'integer', minimum: 1, maximum: 65535 },
                  resolveIntervalMs: { type: 'integer', minimum: 100, maximum: 3600000, default: 5000 },
                  family: { enum: ['any', 'ipv4', 'ipv6'], default: 'any' },
                },
              },
            },
          },
          metricsPath: { type: 'string', pattern: '^/', default: '/metrics' },
          scheme: { enum: ['http', 'https'], default: 'http' },
          concurrency: { type: 'integer', minimum: 1, maximum: 100000, description: 'slots / max batch size; inferred from running+waiting when absent' },
          priorServiceMs: {
            type: 'number', minimum: 0.001, maximum: 3600000, default: 1000,
            description: 'cold start: E[S] (ms) published for an instance with no estimate when no instance of the service has one (else the service median is used); E[S^2] = (1 + assumedScv) x prior^2. Marked esSource "prior" in the snapshot',
          },
          llm: {
            type: 'boolean',
            description: 'publish the instances in the snapshot\'s LLM section (models, per-token terms, KV usage); default: true for kind vllm or when models is set',
          },
          models: {
            type: 'array', maxItems: 64, uniqueItems: true,
            items: { type: 'string', minLength: 1, maxLength: 255 },
            description: 'base models every instance of the service serves (merged with /v1/models and the LoRA gauge)',
          },
          modelsPath: { type: 'string', pattern: '^/[!-~]*$', maxLength: 1024, default: '/v1/models', description: 'path of the OpenAI-style model list (fetchModels)' },
          fetchModels: { type: 'boolean', description: 'fetch modelsPath from each instance; default: true for kind vllm' },
          labels: {
            type: 'object',
            additionalProperties: { type: 'string' },
            description: 'only series with these label values count (e.g. {"model_name": "llama"})',
          },
          gpu: {
            type: 'object',
            additionalProperties: false,
            description: 'pairs each instance with the GPU exporter (e.g. DCGM\'s dcgm-exporter) of its GPUs: scraped with the instance, its utilisation is the instance\'s gpuUtil. A failed GPU scrape leaves gpuUtil unknown, never the instance unhealthy',
            properties: {
              port: { type: 'integer', minimum: 1, maximum: 65535, description: 'the exporter at the instance\'s own IP on this port (a sidecar; dcgm-exporter listens on 9400)' },
              static: {
                type: 'object', maxProperties: 4096,
                propertyNames: { pattern: ADDR },
                additionalProperties: { type: 'string', pattern: ADDR },
                description: 'instance address -> exporter address, for instances whose exporter is elsewhere (takes precedence over port)',
              },
              metricsPath: { type: 'string', pattern: '^/', default: '/metrics' },
              scheme: { enum: ['http', 'https'], default: 'http' },
              labels: { type: 'object', additionalProperties: { type: 'string' }, description: 'only GPU series with these label values count (e.g. {"gpu": "0"} on a node-wide exporter)' },
            },
          },
          triton: {
            type: 'object',
            additionalProperties: false,
            description: 'kind triton only (defaults apply without it): what the agent reads from the models Triton serves',
            properties: {
              modelConfig: { type: 'boolean', default: true, description: 'fetch GET /v2/models/<model>/config of every model on the page (every modelsIntervalMs): the slot count is the model\'s instance_group count (count x GPUs per group) unless concurrency is set, and ensembles are recognised' },
              httpPort: { type: 'integer', minimum: 1, maximum: 65535, description: 'port of Triton\'s HTTP endpoint (default: the instance\'s port; Triton serves /metrics on 8002, HTTP on 8000)' },
              ensembles: { enum: ['top-level', 'all'], default: 'top-level', description: 'top-level: the models an ensemble calls are left out of the sums (each request counted once, at the ensemble); all: every model summed' },
            },
          },
          mappings: {
            type: 'object',
            additionalProperties: false,
            properties: {
              waiting: nameOrNames,
              running: nameOrNames,
              kvCacheUsage: nameOrNames,
              completions: nameOrNames,
              slots: nameOrNames,
              gpuUtil: scaledRef,
              serviceTimeSum: timedRef,
              queueTimeSum: timedRef,
              serviceHistogram: timedRef,
              latencyHistogram: timedRef,
              latencySummary: timedRef,
            },
          },
        },
      },
    },
  },
};
export default inferenceSchema;

export interface InferenceServiceConfig {
  name: string;
  peer: string;
  kind: ServerKind;
  instances: { static: string[] } | { dns: { name: string; port: number; resolveIntervalMs: number; family: 'any' | 'ipv4' | 'ipv6' } };
  metricsPath: string;
  scheme: 'http' | 'https';
  concurrency?: number;
  priorServiceMs: number;
  llm?: boolean;
  models?: string[];
  modelsPath: string;
  fetchModels?: boolean;
  labels?: Record<string, string>;
  gpu?: { port?: number; static?: Record<string, string>; metricsPath: string; scheme: 'http' | 'https'; labels?: Record<string, string> };
  triton?: { modelConfig: boolean; httpPort?: number; ensembles: 'top-level' | 'all' };
  mappings?: CustomMappingsInput;
}

export interface InferenceConfig {
  scrapeIntervalMs: number;
  scrapeTimeoutMs: number;
  windowS: number;
  minMomentCompletions: number;
  baselineWindowS: number;
  baselineScope: 'service' | 'instance';
  baselineTrim: number;
  assumedScv: number;
  rhoCombine: 'max' | 'load' | 'gpu';
  staleAfterMs: number;
  failuresToUnhealthy: number;
  maxBodyBytes: number;
  modelsIntervalMs: number;
  modelsTimeoutMs: number;
  services: InferenceServiceConfig[];
}

export type { TimeUnit };

export class InferenceConfigError extends Error {
  constructor(public readonly problems: string[]) {
    super(problems.map((p) => `config error: ${p}`).join('\n'));
    this.name = 'InferenceConfigError';
  }
}

/** Problems ajv cannot express (field paths relative to the config root). */
export function checkInferenceConfig(cfg: InferenceConfig, base = 'inference'): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  cfg.services.forEach((s, i) => {
    const key = `${s.peer}\u0000${s.name}`;
    if (seen.has(key)) problems.push(`${base}.services[${i}].name: duplicate service ${JSON.stringify(s.name)} for peer ${JSON.stringify(s.peer)}`);
    seen.add(key);
    if (s.kind !== 'triton' && s.triton !== undefined)
      problems.push(`${base}.services[${i}].triton: only for kind triton (kind is ${JSON.stringify(s.kind)})`);
    if (s.gpu && s.gpu.port === undefined && s.gpu.static === undefined) problems.push(`${base}.services[${i}].gpu: needs port or static (which exporter belongs to which instance)`);
    if (s.gpu?.static && 'static' in s.instances) {
      const mine = new Set(s.instances.static);
      for (const a of Object.keys(s.gpu.static)) if (!mine.has(a)) problems.push(`${base}.services[${i}].gpu.static: ${JSON.stringify(a)} is not one of the service's instances`);
    }
    if ('static' in s.instances) {
      s.instances.static.forEach((a, j) => {
        const port = Number(a.slice(a.lastIndexOf(':') + 1));
        if (!(port >= 1 && port <= 65535)) problems.push(`${base}.services[${i}].instances.static[${j}]: port out of range`);
        const v4 = /^(\d+)\.(\d+)\.(\d+)\.(\d+):/.exec(a);
        if (v4 && v4.slice(1, 5).some((o) => Number(o) > 255)) problems.push(`${base}.services[${i}].instances.static[${j}]: invalid IPv4 address`);
      });
    }
  });
  return problems;
}

let validate: ReturnType<Ajv['compile']> | undefined;

/**
 * Validate + fill defaults (a deep copy of `raw`), for standalone use (tests, the collector
 * constructed without the agent loader). Throws InferenceConfigError naming the fields.
 */
export function resolveInferenceConfig(raw: unknown): InferenceConfig {
  if (!validate) validate = new Ajv({ useDefaults: true, allErrors: true, strict: false }).compile(inferenceSchema);
  const copy = JSON.parse(JSON.stringify(raw ?? {}));
  if (!validate(copy)) {
    const problems = (validate.errors ?? []).map((e) => {
      const field = 'inference' + e.instancePath.replace(/\/(\d+)/g, '[$1]').replace(/\//g, '.');
      if (e.keyword === 'additionalProperties') return `${field}.${(e.params as { additionalProperty: string }).additionalProperty}: unknown field`;
      if (e.keyword === 'required') return `${field}.${(e.params as { missingProperty: string }).missingProperty}: required`;
      return `${field}: ${e.message}`;
    });
    throw new InferenceConfigError(problems);
  }
  const cfg = copy as InferenceConfig;
  const problems = checkInferenceConfig(cfg);
  if (problems.length) throw new InferenceConfigError(problems);
  return cfg;
}
