// Seeded, pure workload generators for the LLM simulator and the routing benchmark: shared
// system prompts, multi-turn chats (each turn's prompt extends the previous one), a mix of short
// and long prompts, spread over several models and adapters. Arrivals are Poisson at `ratePerS`.
// Text is ASCII, so with the simulator's default 4 bytes per token `tokens` maps to 4·tokens bytes.
import { mulberry32, openUniform, type Rng } from '../prng';
import { DEFAULT_BYTES_PER_TOKEN, renderChat } from './tokens';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface WorkloadRequest {
  atMs: number;
  model: string;
  /** /v1/completions with `prompt`, or /v1/chat/completions with `messages` */
  api: 'completions' | 'chat';
  prompt?: string;
  messages?: ChatMessage[];
  maxTokens: number;
  /** which shared prefix / session / turn it belongs to (for analysis) */
  group: string;
  session?: number;
  turn?: number;
}

export interface CommonOptions {
  seed?: number;
  /** requests */
  n?: number;
  /** Poisson arrival rate (requests per second) */
  ratePerS?: number;
  /** `model` values, picked uniformly (base models and/or adapter names) */
  models?: string[];
  /** output tokens: fixed, or [min, max] uniform */
  maxTokens?: number | [number, number];
  startMs?: number;
}

const WORDS = ['the', 'model', 'cache', 'token', 'route', 'block', 'queue', 'prefix', 'answer', 'system', 'user', 'reply', 'data', 'graph', 'index', 'value'];

/** ASCII text of exactly `tokens * bytesPerToken` bytes, words from the rng. */
export function randomText(rng: Rng, tokens: number, bytesPerToken = DEFAULT_BYTES_PER_TOKEN): string {
  const want = tokens * bytesPerToken;
  let s = '';
  while (s.length < want) s += WORDS[Math.floor(rng() * WORDS.length)] + ' ';
  return s.slice(0, want);
}

function intIn(rng: Rng, v: number | [number, number]): number {
  return typeof v === 'number' ? v : v[0] + Math.floor(rng() * (v[1] - v[0] + 1));
}

function arrivals(rng: Rng, n: number, ratePerS: number, startMs: number): number[] {
  const out: number[] = [];
  let t = startMs;
  for (let i = 0; i < n; i++) {
    t += (-Math.log(openUniform(rng)) / ratePerS) * 1000;
    out.push(t);
  }
  return out;
}

function defaults(o: CommonOptions): Required<CommonOptions> {
  return { seed: o.seed ?? 1, n: o.n ?? 100, ratePerS: o.ratePerS ?? 10, models: o.models ?? ['sim-llm'], maxTokens: o.maxTokens ?? [16, 64], startMs: o.startMs ?? 0 };
}

/** Completions sharing one of `prefixes` long system prompts, each followed by a unique question. */
export function sharedSystemPrompts(o: CommonOptions & { prefixes?: number; prefixTokens?: number; suffixTokens?: number | [number, number] } = {}): WorkloadRequest[] {
  const d = defaults(o);
  const rng = mulberry32(d.seed);
  const k = o.prefixes ?? 4;
  const sys = Array.from({ length: k }, () => randomText(rng, o.prefixTokens ?? 1024));
  return arrivals(rng, d.n, d.ratePerS, d.startMs).map((atMs) => {
    const g = Math.floor(rng() * k);
    return {
      atMs,
      model: d.models[Math.floor(rng() * d.models.length)],
      api: 'completions' as const,
      prompt: sys[g] + randomText(rng, intIn(rng, o.suffixTokens ?? [16, 64])),
      maxTokens: intIn(rng, d.maxTokens),
      group: `sys${g}`,
    };
  });
}

/** `sessions` chats of `turns` turns; turn t's messages are turn t-1's plus the answer and a new
 *  user message, so every turn's prompt extends the previous one. Turns of one session are
 *  spaced by `thinkMs` after the session's Poisson start. */
export function multiTurnChats(o: CommonOptions & { sessions?: number; turns?: number; systemTokens?: number; userTokens?: number | [number, number]; thinkMs?: number } = {}): WorkloadRequest[] {
  const d = defaults(o);
  const rng = mulberry32(d.seed);
  const sessions = o.sessions ?? 10;
  const turns = o.turns ?? 4;
  const out: WorkloadRequest[] = [];
  const starts = arrivals(rng, sessions, d.ratePerS, d.startMs);
  for (let s = 0; s < sessions; s++) {
    const model = d.models[Math.floor(rng() * d.models.length)];
    const msgs: ChatMessage[] = [{ role: 'system', content: randomText(rng, o.systemTokens ?? 128) }];
    for (let t = 0; t < turns; t++) {
      if (t > 0) msgs.push({ role: 'assistant', content: randomText(rng, intIn(rng, d.maxTokens)) });
      msgs.push({ role: 'user', content: randomText(rng, intIn(rng, o.userTokens ?? [32, 128])) });
      out.push({ atMs: starts[s] + t * (o.thinkMs ?? 2000), model, api: 'chat', messages: msgs.map((m) => ({ ...m })), maxTokens: intIn(rng, d.maxTokens), group: `chat${s}`, session: s, turn: t });
    }
  }
  return out.sort((a, b) => a.atMs - b.atMs);
}

/** Unrelated prompts: a fraction `longFraction` of `longTokens`, the rest `shortTokens`. */
export function mixedLengths(o: CommonOptions & { shortTokens?: number | [number, number]; longTokens?: number | [number, number]; longFraction?: number } = {}): WorkloadRequest[] {
  const d = defaults(o);
  const rng = mulberry32(d.seed);
  const f = o.longFraction ?? 0.2;
  return arrivals(rng, d.n, d.ratePerS, d.startMs).map((atMs) => {
    const long = rng() < f;
    return {
      atMs,
      model: d.models[Math.floor(rng() * d.models.length)],
      api: 'completions' as const,
      prompt: randomText(rng, intIn(rng, long ? (o.longTokens ?? [1024, 4096]) : (o.shortTokens ?? [32, 256]))),
      maxTokens: intIn(rng, d.maxTokens),
      group: long ? 'long' : 'short',
    };
  });
}

/** Several workloads merged in time order. */
export function merge(...ws: WorkloadRequest[][]): WorkloadRequest[] {
  return ws.flat().sort((a, b) => a.atMs - b.atMs);
}

/** The prompt text the simulator tokenises (chat messages through the template). */
export function promptText(r: WorkloadRequest): string {
  return r.api === 'chat' ? renderChat(r.messages ?? []) : (r.prompt ?? '');
}

/** URL path and OpenAI JSON body of a request. */
export function toHttp(r: WorkloadRequest, stream = false): { path: string; body: string } {
  return r.api === 'chat'
    ? { path: '/v1/chat/completions', body: JSON.stringify({ model: r.model, messages: r.messages, max_completion_tokens: r.maxTokens, stream }) }
    : { path: '/v1/completions', body: JSON.stringify({ model: r.model, prompt: r.prompt, max_tokens: r.maxTokens, stream }) };
}
