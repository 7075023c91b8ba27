// Start the agent CLI as a child process (for the local rig and tests) and wait until it
// serves. Runs the TypeScript entry with tsx, or a bundle (build/agent.js) if `entry` ends in .js.
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';

export interface SpawnedAgent {
  url: string;
  child: ChildProcess;
  /** SIGTERM, resolves with the exit code */
  stop(): Promise<number | null>;
}

export interface SpawnAgentOptions {
  configPath?: string;
  /** extra environment (e.g. SWITCHYARD_LISTEN_PORT: '0') */
  env?: Record<string, string>;
  /** default agent/src/main.ts */
  entry?: string;
  /** forward the child's stdout/stderr lines here (default: dropped after startup) */
  onLine?: (line: string) => void;
  startTimeoutMs?: number;
}

export function spawnAgent(opts: SpawnAgentOptions = {}): Promise<SpawnedAgent> {
  const entry = opts.entry ?? path.resolve(__dirname, 'main.ts');
  const args = entry.endsWith('.ts') ? ['--import', 'tsx', entry] : [entry];
  if (opts.configPath) args.push('--config', opts.configPath);
  const child = spawn(process.execPath, args, { env: { ...process.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return new Promise<SpawnedAgent>((resolve, reject) => {
    let buf = '';
    let err = '';
    let started = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`agent did not start within ${opts.startTimeoutMs ?? 15000} ms: ${err}`));
    }, opts.startTimeoutMs ?? 15000);
    child.stderr!.on('data', (c: Buffer) => {
      err += c.toString();
      opts.onLine?.(c.toString());
    });
    child.stdout!.on('data', (c: Buffer) => {
      buf += c.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        opts.onLine?.(line);
        if (started) continue;
        try {
          const j = JSON.parse(line);
          if (j.msg === 'switchyard agent listening' && typeof j.url === 'string') {
            started = true;
            clearTimeout(timer);
            resolve({
              url: j.url,
              child,
              stop: () => {
                if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
                return exited;
              },
            });
          }
        } catch {
          /* not a JSON line */
        }
      }
    });
    exited.then((code) => {
      if (!started) {
        clearTimeout(timer);
        reject(Object.assign(new Error(`agent exited with code ${code}: ${err.trim()}`), { exitCode: code }));
      }
    });
  });
}
