// Deterministic tokenisation without a vocabulary: every `bytesPerToken` bytes of UTF-8 form one
// token whose id is a hash of those bytes. Equal text prefixes give equal token prefixes (what
// prefix caching needs), and token counts scale with text length like a real BPE (~4 bytes per
// token for English), without shipping a tokenizer.

export const DEFAULT_BYTES_PER_TOKEN = 4;

/** UTF-8 bytes of `text` cut into tokens of `bytesPerToken` bytes (the last may be shorter). */
export function tokenize(text: string, bytesPerToken = DEFAULT_BYTES_PER_TOKEN): number[] {
  if (!(Number.isInteger(bytesPerToken) && bytesPerToken >= 1)) throw new RangeError('bytesPerToken must be an integer >= 1');
  const b = Buffer.from(text, 'utf8');
  const out: number[] = new Array(Math.ceil(b.length / bytesPerToken));
  for (let t = 0, i = 0; i < b.length; t++, i += bytesPerToken) {
    let h = 0x811c9dc5;
    const end = Math.min(b.length, i + bytesPerToken);
    for (let k = i; k < end; k++) h = Math.imul(h ^ b[k], 0x01000193);
    out[t] = (h >>> 1) & 0x3fffffff; // ids < 2^30; 2^30 and up are reserved for generated tokens
  }
  return out;
}

/** Chat messages rendered as a prompt (a fixed template: role marker, content, newline). */
export function renderChat(messages: Array<{ role: string; content: string }>): string {
  return messages.map((m) => `<|${m.role}|>\n${m.content}\n`).join('') + '<|assistant|>\n';
}

/**
 * Chain hashes of the full `blockSize`-token blocks of `tokens`: block i's hash covers its
 * tokens, the hash of block i-1 and `extraKey` (the LoRA adapter, as vLLM mixes the LoRA id into
 * its block hashes), so one hash identifies the whole prefix up to that block.
 * Two independent 32-bit FNV-1a/Murmur-style lanes: 64 bits, collisions are not a concern here.
 */
export function blockHashes(tokens: number[], blockSize: number, extraKey = '', maxBlocks = Infinity): string[] {
  const n = Math.min(Math.floor(tokens.length / blockSize), maxBlocks);
  const out: string[] = new Array(n);
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  for (let k = 0; k < extraKey.length; k++) {
    a = Math.imul(a ^ extraKey.charCodeAt(k), 0x01000193);
    b = Math.imul(b ^ extraKey.charCodeAt(k), 0x5bd1e995);
  }
  for (let i = 0; i < n; i++) {
    for (let k = i * blockSize; k < (i + 1) * blockSize; k++) {
      const t = tokens[k];
      a = Math.imul(a ^ t, 0x01000193);
      b = Math.imul(b ^ t, 0x5bd1e995);
      b ^= b >>> 15;
    }
    out[i] = (a >>> 0).toString(36) + '.' + (b >>> 0).toString(36);
  }
  return out;
}
