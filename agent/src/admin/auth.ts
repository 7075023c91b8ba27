// Bearer-token check for the admin API. The token comes from a file (preferred: a mounted
// Secret) or an environment variable; comparison is constant-time over SHA-256 digests so that
// neither the content nor the length of the token leaks through timing.
import { createHash, timingSafeEqual } from 'node:crypto';
import * as fs from 'node:fs';

export const MIN_TOKEN_CHARS = 16;

export interface TokenSource {
  tokenFile?: string;
  tokenEnv: string;
}

/** The configured token, or an explanation of why writes are disabled. Throws on an unreadable file. */
export function loadToken(src: TokenSource, env: NodeJS.ProcessEnv = process.env): { token?: string; why?: string } {
  let token: string | undefined;
  let from: string;
  if (src.tokenFile) {
    from = src.tokenFile;
    try {
      token = fs.readFileSync(src.tokenFile, 'utf8').trim();
    } catch (err) {
      throw new Error(`rules.admin.tokenFile: cannot read ${src.tokenFile} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  } else {
    from = `$${src.tokenEnv}`;
    token = env[src.tokenEnv]?.trim() || undefined;
  }
  if (!token) return { why: `no admin token (${from} is empty): writes are refused` };
  if (token.length < MIN_TOKEN_CHARS) throw new Error(`rules.admin: the token from ${from} is shorter than ${MIN_TOKEN_CHARS} characters`);
  return { token };
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** true iff the Authorization header carries exactly `Bearer <token>` */
export function authorized(header: string | undefined, token: string | undefined): boolean {
  if (!token || typeof header !== 'string') return false;
  const m = /^Bearer ([\x21-\x7e]+)$/.exec(header);
  if (!m) return false;
  return timingSafeEqual(digest(m[1]), digest(token));
}

export function isLoopback(addr: string | undefined): boolean {
  if (!addr) return false;
  return addr === '::1' || addr.startsWith('127.') || addr.startsWith('::ffff:127.');
}
