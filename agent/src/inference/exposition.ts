// Strict parser of the Prometheus text exposition format (version 0.0.4, plus the
// OpenMetrics bits real servers emit: `# EOF`, `_created`, trailing exemplars).
//
// Why not the `parse-prometheus-text-format` package that is installed: its 1.1.1 release
// (the last one) folds every labelled histogram series of a family into ONE object holding
// only the buckets -- the per-series labels, `_sum` and `_count` are dropped (its
// flattenMetrics keeps sum/count only for unlabelled series) -- so vLLM's
// `vllm:e2e_request_latency_seconds{model_name=...}` comes out without its sum and count,
// and two models' buckets overwrite each other. It also accepts garbage silently
// (`<html>` parses as a metric named "<html>oops</html>" with value "", `foo abc` as the
// value "abc"), which would hide a proxy's error page behind "no data". The npm list has no
// maintained alternative (prom2javascript: one release, tiny). The grammar is small and
// fully specified, so it is parsed here, strictly, with line numbers in every error.
//
// Output: every sample, indexed by its sample name (e.g. `foo_bucket`), plus the
// family metadata (TYPE/HELP). Extraction works on sample names, so it does not care whether
// a counter's TYPE line says `foo` or `foo_total`.

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped' | 'gaugehistogram' | 'info' | 'stateset' | 'unknown';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
  timestampMs?: number;
}

export interface Exposition {
  /** sample name -> samples in input order */
  samples: Map<string, Sample[]>;
  /** family name (from TYPE/HELP lines) -> metadata */
  types: Map<string, MetricType>;
  help: Map<string, string>;
  sampleCount: number;
  /** kept samples not stored because a bound was exceeded (ParseOptions maxBucketsPerFamily, maxKeptSamples) */
  dropped?: number;
  /** the first bound exceeded, as a reason (the scrape is then refused: mappings.extractSignals) */
  overBound?: string;
}

export class ExpositionParseError extends Error {
  constructor(
    public readonly line: number,
    public readonly problem: string,
    public readonly excerpt: string,
  ) {
    super(`line ${line}: ${problem} (in ${JSON.stringify(excerpt.length > 80 ? excerpt.slice(0, 77) + '...' : excerpt)})`);
    this.name = 'ExpositionParseError';
  }
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const FLOAT = /^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[Ii]nf(?:inity)?|NaN|nan)$/;
const INT = /^[+-]?\d+$/;
const TYPES = new Set<MetricType>(['counter', 'gauge', 'histogram', 'summary', 'untyped', 'gaugehistogram', 'info', 'stateset', 'unknown']);

/** Parse a Prometheus float ("+Inf", "NaN", "1e3", "-0.5"). Returns undefined when invalid. */
export function parsePromFloat(s: string): number | undefined {
  if (!FLOAT.test(s)) return undefined;
  const l = s.toLowerCase();
  if (l === 'nan') return NaN;
  if (l === '+inf' || l === 'inf' || l === '+infinity' || l === 'infinity') return Infinity;
  if (l === '-inf' || l === '-infinity') return -Infinity;
  return Number(s);
}

function isSpace(c: string): boolean {
  return c === ' ' || c === '\t';
}

export interface ParseOptions {
  /** maximum number of samples accepted (guards memory); default 200 000 */
  maxSamples?: number;
  /** store only the samples whose name passes (all lines are still validated); default all */
  keep?: (sampleName: string) => boolean;
  /** buckets stored per histogram family (all its series); default MAX_BUCKETS_PER_FAMILY */
  maxBucketsPerFamily?: number;
  /** samples stored per page (those `keep` passes); default MAX_KEPT_SAMPLES */
  maxKeptSamples?: number;
}

/**
 * Storage bounds (issue 24 #7: a page under the 8 MiB cap with one 100,000-bucket histogram took
 * the agent's event-loop lag p99 to 96 ms and its RSS to 314 MiB: every bucket became a stored
 * sample, then was grouped, sorted and summed). Real exporters stay far below: vLLM's largest
 * histograms have under 30 buckets per series, a few dozen series per model; 2,048 buckets per
 * family is ~70 models of vLLM's ladder. Past a bound the rest is validated but not stored, counted
 * in `dropped`, and the scrape is refused with the reason (a truncated histogram would misprice).
 */
export const MAX_BUCKETS_PER_FAMILY = 2048;
export const MAX_KEPT_SAMPLES = 20_000;

/** no real exposition line comes near this; a page without newlines must not grow one string */
const MAX_LINE_CHARS = 1 << 20;

export function parseExposition(text: string, opts: ParseOptions = {}): Exposition {
  const p = new ExpositionParser(opts);
  p.push(text);
  return p.end();
}

/**
 * Incremental parser: push() the body as it arrives (each call parses the complete lines it
 * holds, keeping the partial last line), end() parses the rest. A scrape is parsed chunk by chunk
 * between socket reads, so a large page never blocks the event loop (link probes share it) for
 * more than one chunk's lines, and the body is never held whole.
 */
export class ExpositionParser {
  private readonly out: Exposition = { samples: new Map(), types: new Map(), help: new Map(), sampleCount: 0 };
  private readonly maxSamples: number;
  private readonly keep?: (sampleName: string) => boolean;
  private readonly maxBuckets: number;
  private readonly maxKept: number;
  private kept = 0;
  /** stored `_bucket` samples per family */
  private readonly buckets = new Map<string, number>();
  private rest = '';
  private lineNo = 0;
  private first = true;

  constructor(opts: ParseOptions = {}) {
    this.maxSamples = opts.maxSamples ?? 200_000;
    this.keep = opts.keep;
    this.maxBuckets = opts.maxBucketsPerFamily ?? MAX_BUCKETS_PER_FAMILY;
    this.maxKept = opts.maxKeptSamples ?? MAX_KEPT_SAMPLES;
  }

  /** Counts a sample that a bound keeps out; the first bound exceeded is the reason. */
  private drop(reason: string): void {
    const out = this.out;
    out.dropped = (out.dropped ?? 0) + 1;
    out.overBound ??= reason;
  }

  /** Parse the complete lines of `chunk` (after what is left of the previous one). Throws ExpositionParseError. */
  push(chunk: string): void {
    if (this.first && chunk.length > 0) {
      this.first = false;
      if (chunk.charCodeAt(0) === 0xfeff) chunk = chunk.slice(1);
    }
    const text = this.rest + chunk;
    let from = 0;
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', from)) {
      this.line(text.slice(from, nl));
      from = nl + 1;
    }
    this.rest = text.slice(from);
    if (this.rest.length > MAX_LINE_CHARS) throw new ExpositionParseError(this.lineNo + 1, `line longer than ${MAX_LINE_CHARS} characters`, this.rest.slice(0, 80));
  }

  /** Parse the last line and return the exposition. */
  /** The first bound a sample exceeded (the page will be refused), if any. */
  get overBound(): string | undefined { return this.out.overBound; }

  /**
   * What was parsed so far, without the partial last line: for a page already over a bound, which
   * extractSignals refuses whatever follows (the scraper stops reading it; `dropped` then counts
   * the samples dropped up to that point).
   */
  partial(): Exposition { return this.out; }

  end(): Exposition {
    this.line(this.rest);
    this.rest = '';
    return this.out;
  }

  private line(raw: string): void {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    const lineNo = ++this.lineNo;
    const out = this.out;
    const fail = (problem: string): never => {
      throw new ExpositionParseError(lineNo, problem, line);
    };
    let i = 0;
    while (i < line.length && isSpace(line[i])) i++;
    if (i === line.length) return;
    if (line[i] === '#') {
      const rest = line.slice(i + 1).replace(/^[ \t]+/, '');
      const m = /^(HELP|TYPE)[ \t]+(\S+)(?:[ \t]+(.*))?$/.exec(rest);
      if (!m) return; // ordinary comment, `# EOF`, `# UNIT ...`
      const [, kw, name, arg = ''] = m;
      if (!METRIC_NAME.test(name)) fail(`invalid metric name ${JSON.stringify(name)} in ${kw} line`);
      if (kw === 'TYPE') {
        const t = arg.trim().toLowerCase() as MetricType;
        if (!TYPES.has(t)) fail(`unknown metric type ${JSON.stringify(arg.trim())}`);
        if (out.types.has(name)) fail(`second TYPE line for ${name}`);
        out.types.set(name, t);
      } else {
        out.help.set(name, arg.replace(/\\n/g, '\n').replace(/\\\\/g, '\\'));
      }
      return;
    }
    // ---- sample line: name [{labels}] value [timestamp] [# exemplar]
    const nameStart = i;
    while (i < line.length && !isSpace(line[i]) && line[i] !== '{') i++;
    const name = line.slice(nameStart, i);
    if (!METRIC_NAME.test(name)) fail(`invalid metric name ${JSON.stringify(name)}`);
    const labels: Record<string, string> = {};
    while (i < line.length && isSpace(line[i])) i++;
    if (line[i] === '{') {
      i++;
      for (;;) {
        while (i < line.length && isSpace(line[i])) i++;
        if (i >= line.length) fail('unterminated label set');
        if (line[i] === '}') {
          i++;
          break;
        }
        const ls = i;
        while (i < line.length && /[a-zA-Z0-9_]/.test(line[i])) i++;
        const lname = line.slice(ls, i);
        if (!LABEL_NAME.test(lname)) fail(`invalid label name at column ${ls + 1}`);
        while (i < line.length && isSpace(line[i])) i++;
        if (line[i] !== '=') fail(`expected '=' after label ${lname}`);
        i++;
        while (i < line.length && isSpace(line[i])) i++;
        if (line[i] !== '"') fail(`expected '"' to open the value of label ${lname}`);
        i++;
        let v = '';
        let closed = false;
        while (i < line.length) {
          const c = line[i];
          if (c === '\\') {
            const n = line[i + 1];
            if (n === 'n') v += '\n';
            else if (n === '\\') v += '\\';
            else if (n === '"') v += '"';
            else fail(`invalid escape \\${n ?? ''} in label ${lname}`);
            i += 2;
          } else if (c === '"') {
            closed = true;
            i++;
            break;
          } else {
            v += c;
            i++;
          }
        }
        if (!closed) fail(`unterminated value of label ${lname}`);
        if (Object.prototype.hasOwnProperty.call(labels, lname)) fail(`duplicate label ${lname}`);
        labels[lname] = v;
        while (i < line.length && isSpace(line[i])) i++;
        if (line[i] === ',') {
          i++;
          continue;
        }
        if (line[i] === '}') {
          i++;
          break;
        }
        fail(`expected ',' or '}' after label ${lname}`);
      }
    }
    let tail = line.slice(i);
    const hash = tail.indexOf(' # ');
    if (hash >= 0) tail = tail.slice(0, hash); // OpenMetrics exemplar
    const toks = tail.split(/[ \t]+/).filter((t) => t.length > 0);
    if (toks.length === 0) fail(`missing value for ${name}`);
    if (toks.length > 2) fail(`unexpected text after the value of ${name}`);
    const value = parsePromFloat(toks[0]);
    if (value === undefined) fail(`invalid value ${JSON.stringify(toks[0])} for ${name}`);
    let ts: number | undefined;
    if (toks.length === 2) {
      if (!INT.test(toks[1]) && parsePromFloat(toks[1]) === undefined) fail(`invalid timestamp ${JSON.stringify(toks[1])}`);
      ts = Number(toks[1]);
    }
    if (name.endsWith('_bucket') && !('le' in labels)) {
      const fam = name.slice(0, -'_bucket'.length);
      const t = out.types.get(fam);
      if (t === 'histogram' || t === 'gaugehistogram') fail(`histogram bucket of ${fam} without an le label`);
    }
    if ('le' in labels && name.endsWith('_bucket') && parsePromFloat(labels.le) === undefined) fail(`invalid le ${JSON.stringify(labels.le)}`);
    if (++out.sampleCount > this.maxSamples) fail(`more than ${this.maxSamples} samples`);
    if (this.keep && !this.keep(name)) return; // validated, not stored
    if (this.kept >= this.maxKept) return this.drop(`more than ${this.maxKept} mapped samples on the page`);
    if ('le' in labels && name.endsWith('_bucket')) {
      const fam = name.slice(0, -'_bucket'.length);
      const n = (this.buckets.get(fam) ?? 0) + 1;
      this.buckets.set(fam, n);
      if (n > this.maxBuckets) return this.drop(`histogram ${fam} has more than ${this.maxBuckets} buckets`);
    }
    this.kept++;
    const s: Sample = { name, labels, value: value as number };
    if (ts !== undefined) s.timestampMs = ts;
    let arr = out.samples.get(name);
    if (!arr) out.samples.set(name, (arr = []));
    arr.push(s);
  }
}

export interface HistogramSeries {
  /** labels without `le` */
  labels: Record<string, string>;
  /** finite upper bounds, ascending (in the exposition's unit) */
  bounds: number[];
  /** cumulative counts; length bounds.length + 1, last = +Inf bucket */
  cumulative: number[];
  sum: number;
  count: number;
}

function labelKey(labels: Record<string, string>, omit?: string): string {
  return Object.keys(labels)
    .filter((k) => k !== omit)
    .sort()
    .map((k) => `${k}\u0000${labels[k]}`)
    .join('\u0001');
}

export function labelsMatch(labels: Record<string, string>, match?: Record<string, string>): boolean {
  if (!match) return true;
  for (const [k, v] of Object.entries(match)) if ((labels[k] ?? '') !== v) return false;
  return true;
}

/**
 * Histogram series of family `name` (samples `name_bucket`, `name_sum`, `name_count`).
 * Throws ExpositionParseError-like Errors for structurally broken histograms (missing +Inf,
 * non-monotonic buckets); returns [] when the family is absent.
 */
export function histogramSeries(exp: Exposition, name: string, match?: Record<string, string>): HistogramSeries[] {
  const buckets = exp.samples.get(`${name}_bucket`);
  if (!buckets) return [];
  const groups = new Map<string, { labels: Record<string, string>; pts: Array<[number, number]> }>();
  for (const s of buckets) {
    if (!labelsMatch(s.labels, match)) continue;
    const key = labelKey(s.labels, 'le');
    let g = groups.get(key);
    if (!g) {
      const labels = { ...s.labels };
      delete labels.le;
      groups.set(key, (g = { labels, pts: [] }));
    }
    g.pts.push([parsePromFloat(s.labels.le) as number, s.value]);
  }
  const sums = new Map<string, number>();
  const counts = new Map<string, number>();
  for (const s of exp.samples.get(`${name}_sum`) ?? []) sums.set(labelKey(s.labels), s.value);
  for (const s of exp.samples.get(`${name}_count`) ?? []) counts.set(labelKey(s.labels), s.value);
  const out: HistogramSeries[] = [];
  for (const [key, g] of groups) {
    g.pts.sort((a, b) => a[0] - b[0]);
    const last = g.pts[g.pts.length - 1];
    if (last[0] !== Infinity) throw new Error(`histogram ${name}${fmtLabels(g.labels)}: no le="+Inf" bucket`);
    for (let k = 1; k < g.pts.length; k++) {
      if (g.pts[k][0] === g.pts[k - 1][0]) throw new Error(`histogram ${name}${fmtLabels(g.labels)}: duplicate le=${g.pts[k][0]}`);
      if (g.pts[k][1] < g.pts[k - 1][1]) throw new Error(`histogram ${name}${fmtLabels(g.labels)}: bucket counts decrease at le=${g.pts[k][0]}`);
    }
    const count = counts.get(key) ?? last[1];
    const sum = sums.get(key);
    if (sum === undefined) throw new Error(`histogram ${name}${fmtLabels(g.labels)}: no _sum sample`);
    out.push({
      labels: g.labels,
      bounds: g.pts.slice(0, -1).map((p) => p[0]),
      cumulative: g.pts.map((p) => p[1]),
      sum,
      count,
    });
  }
  return out;
}

export function fmtLabels(labels: Record<string, string>): string {
  const ks = Object.keys(labels);
  if (ks.length === 0) return '';
  return `{${ks.map((k) => `${k}=${JSON.stringify(labels[k])}`).join(',')}}`;
}
