// The LLM simulator as a process (sim/inference-server.ts --mode llm), for the agent's LLM tests.
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';

export const ROOT = path.resolve(__dirname, '../..');

export interface SimProcess {
  url: string;
  addr: string;
  stop(): Promise<void>;
}

export async function startLlmSim(args: string[]): Promise<SimProcess> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'sim/inference-server.ts', '--mode', 'llm', '--port', '0', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`LLM simulator did not start: ${err}`)), 30_000);
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`LLM simulator exited ${code}: ${err}`));
    });
  });
  return {
    url,
    addr: url.replace(/^http:\/\//, ''),
    stop: () => new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    }),
  };
}

/** One completion with exactly `promptTokens` prompt tokens (token ids, distinct per `salt`: no prefix reuse). */
/** The simulator's own timing of one request (its response's `sim` field, engine clock, ms). */
export interface SimTiming {
  queuedMs: number;
  ttftMs: number;
  e2eMs: number;
}

export async function complete(url: string, model: string, promptTokens: number, maxTokens: number, salt: number): Promise<SimTiming> {
  const prompt = Array.from({ length: promptTokens }, (_, i) => ((salt * 100_003 + i) % 50_000) + 1);
  const res = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, prompt, max_tokens: maxTokens }) });
  if (res.status !== 200) throw new Error(`completion: HTTP ${res.status} ${await res.text()}`);
  return ((await res.json()) as { sim: SimTiming }).sim;
}
