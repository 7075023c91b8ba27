// OpenAI request bodies (/v1/completions, /v1/chat/completions) as the simulator accepts them.
import { renderChat, tokenize } from './tokens';

export interface ParsedRequest {
  model: string;
  promptTokens: number[];
  maxTokens: number;
  stream: boolean;
  api: 'completions' | 'chat';
}

export class BadRequest extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BadRequest';
  }
}

function textOfContent(c: unknown, where: string): string {
  if (typeof c === 'string') return c;
  if (c === null || c === undefined) return '';
  if (Array.isArray(c)) {
    return c
      .map((p, i) => {
        if (p && typeof p === 'object' && (p as { type?: unknown }).type === 'text' && typeof (p as { text?: unknown }).text === 'string') return (p as { text: string }).text;
        if (p && typeof p === 'object' && typeof (p as { type?: unknown }).type === 'string') return ''; // image_url etc.: no text
        throw new BadRequest(`${where}[${i}]: expected a content part object`);
      })
      .join('');
  }
  throw new BadRequest(`${where}: expected a string or an array of content parts`);
}

/** Parse an OpenAI body; BadRequest names the field at fault. */
export function parseOpenAiRequest(api: 'completions' | 'chat', body: string, bytesPerToken: number, defaultMaxTokens: number): ParsedRequest {
  let j: unknown;
  try {
    j = JSON.parse(body);
  } catch (e) {
    throw new BadRequest(`body is not JSON: ${(e as Error).message}`);
  }
  if (!j || typeof j !== 'object' || Array.isArray(j)) throw new BadRequest('body: expected a JSON object');
  const o = j as Record<string, unknown>;
  if (typeof o.model !== 'string' || o.model === '') throw new BadRequest('model: required, a non-empty string');
  let tokens: number[];
  if (api === 'completions') {
    const p = o.prompt;
    if (typeof p === 'string') tokens = tokenize(p, bytesPerToken);
    else if (Array.isArray(p) && p.every((x) => typeof x === 'string')) tokens = tokenize((p as string[]).join(''), bytesPerToken);
    else if (Array.isArray(p) && p.length > 0 && p.every((x) => Number.isInteger(x) && x >= 0)) tokens = p as number[];
    else throw new BadRequest('prompt: required, a string, an array of strings or an array of token ids');
  } else {
    if (!Array.isArray(o.messages) || o.messages.length === 0) throw new BadRequest('messages: required, a non-empty array');
    const msgs = o.messages.map((m, i) => {
      if (!m || typeof m !== 'object' || typeof (m as { role?: unknown }).role !== 'string') throw new BadRequest(`messages[${i}].role: required, a string`);
      return { role: (m as { role: string }).role, content: textOfContent((m as { content?: unknown }).content, `messages[${i}].content`) };
    });
    tokens = tokenize(renderChat(msgs), bytesPerToken);
  }
  if (tokens.length === 0) throw new BadRequest(api === 'chat' ? 'messages: empty prompt' : 'prompt: empty');
  const mt = o.max_completion_tokens ?? o.max_tokens;
  const field = o.max_completion_tokens !== undefined ? 'max_completion_tokens' : 'max_tokens';
  if (mt !== undefined && mt !== null && !(Number.isInteger(mt) && (mt as number) >= 1)) throw new BadRequest(`${field}: an integer >= 1`);
  if (o.stream !== undefined && typeof o.stream !== 'boolean') throw new BadRequest('stream: a boolean');
  return { model: o.model, promptTokens: tokens, maxTokens: (mt as number | undefined) ?? defaultMaxTokens, stream: o.stream === true, api };
}
