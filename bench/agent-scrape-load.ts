// Event-loop lag of the agent while it scrapes very large /metrics pages (issue 11 §9).
//   npx tsx bench/agent-scrape-load.ts [--seconds 6] [--cap-mib 64]
// Two instances: a 7.4 MB page and a 50 MB page, each scraped every second, measured with
// perf_hooks.monitorEventLoopDelay while a 10 ms timer stands in for the link probes:
//   buffered:  the previous scraper -- body collected whole (up to the cap), then parsed at once
//   streaming: the agent's scraper -- parsed per chunk as it arrives, aborted at the cap
// Both with the shipped cap (8 MiB) and with a large cap (--cap-mib, default 64) that lets the
// 50 MB page through, which is where the buffered path starved the loop.
import { spawn } from 'node:child_process';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseExposition } from '../agent/src/inference/exposition';
import { extractSignals, mappedSampleFilter, resolveMappings } from '../agent/src/inference/mappings';
import { scrapeOnce } from '../agent/src/inference/scraper';
import { cli, flag, num } from './cli';

const opts = cli('npx tsx bench/agent-scrape-load.ts', 'Event-loop lag of the agent while it scrapes very large /metrics pages.', {
  seconds: num(6, 'seconds per run', 1),
  'cap-mib': num(64, 'the large body cap, MiB', 1),
  hostile: flag('the hostile-server run (instead of the lag runs)'),
  'serve-hostile': flag('internal: serve the hostile pages (child process)'),
});
const SECONDS = opts.seconds;
const BIG_CAP = opts['cap-mib'] * 1024 * 1024;
const DEFAULT_CAP = 8 * 1024 * 1024;

function page(bytes: number): Buffer {
  const head = '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 3\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name="m"} 1\n# TYPE pad gauge\n';
  const line = (i: number): string => `pad{i="${i}",a="${'x'.repeat(30)}"} ${i}\n`;
  const parts: string[] = [head];
  let n = head.length;
  for (let i = 0; n < bytes; i++) {
    const l = line(i);
    parts.push(l);
    n += l.length;
  }
  return Buffer.from(parts.join(''));
}

/** A vLLM page under the 8 MiB cap whose e2e latency histogram has `buckets` buckets (issue 24 #7). */
function bucketPage(buckets: number): Buffer {
  const parts: string[] = ['# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 3\n',
    '# TYPE vllm:e2e_request_latency_seconds histogram\n'];
  for (let i = 1; i < buckets; i++) parts.push(`vllm:e2e_request_latency_seconds_bucket{le="${(i / 1000).toFixed(3)}",model_name="m"} ${i}\n`);
  parts.push(`vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} ${buckets}\n`);
  parts.push(`vllm:e2e_request_latency_seconds_sum{model_name="m"} ${buckets}\nvllm:e2e_request_latency_seconds_count{model_name="m"} ${buckets}\n`);
  return Buffer.from(parts.join(''));
}

async function serve(body: Buffer): Promise<{ addr: string; close(): Promise<void> }> {
  const srv = http.createServer((_q, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    let off = 0;
    const pump = (): void => {
      while (off < body.length) {
        const c = body.subarray(off, off + 65536);
        off += c.length;
        if (!res.write(c)) return void res.once('drain', pump);
      }
      res.end();
    };
    res.on('close', () => (off = body.length));
    pump();
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  return {
    addr: `127.0.0.1:${(srv.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => (srv.closeAllConnections(), srv.close(() => r()))),
  };
}

/** the scraper before: whole body, then one parse */
function bufferedScrape(addr: string, cap: number): Promise<string> {
  return new Promise((resolve) => {
    const [host, port] = addr.split(':');
    const req = http.get({ host, port: Number(port), path: '/metrics', agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > cap) {
          res.destroy();
          resolve('too large');
          return;
        }
        chunks.push(c);
      });
      res.on('end', () => {
        try {
          extractSignals(parseExposition(Buffer.concat(chunks).toString('utf8'), { maxSamples: 10_000_000 }), resolveMappings('vllm'));
          resolve('ok');
        } catch (e) {
          resolve((e as Error).message);
        }
      });
      res.on('error', () => resolve('error'));
    });
    req.on('error', () => resolve('error'));
  });
}

async function streamingScrape(addr: string, cap: number): Promise<string> {
  const m = resolveMappings('vllm');
  const out = await scrapeOnce({ addr, path: '/metrics', scheme: 'http' }, { timeoutMs: 30_000, maxBodyBytes: cap, parse: { keep: mappedSampleFilter(m), maxSamples: 10_000_000 } });
  if (!out.ok) return out.reason;
  try {
    extractSignals(out.exposition, m);
  } catch (e) {
    return `refused (${(e as Error).message})`;
  }
  return 'ok';
}

async function run(mode: 'buffered' | 'streaming', cap: number, addrs: string[]): Promise<string> {
  global.gc?.();
  let rssPeak = 0;
  const rss = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage.rss())), 20);
  const h = monitorEventLoopDelay({ resolution: 5 });
  let probes = 0;
  const probe = setInterval(() => probes++, 10); // stands in for the link probes' timers
  h.enable();
  const results: string[] = [];
  const end = Date.now() + SECONDS * 1000;
  while (Date.now() < end) {
    const t0 = Date.now();
    const r = await Promise.all(addrs.map((a) => (mode === 'buffered' ? bufferedScrape(a, cap) : streamingScrape(a, cap))));
    results.push(...r);
    await new Promise((res) => setTimeout(res, Math.max(0, 1000 - (Date.now() - t0))));
  }
  h.disable();
  clearInterval(probe);
  clearInterval(rss);
  const ms = (ns: number): string => (ns / 1e6).toFixed(1);
  const expected = Math.floor((SECONDS * 1000) / 10);
  return `${mode.padEnd(9)} cap ${String(cap / 1024 / 1024).padStart(3)} MiB | lag p50 ${ms(h.percentile(50)).padStart(6)} p99 ${ms(h.percentile(99)).padStart(6)} max ${ms(h.max).padStart(6)} ms | RSS peak ${(rssPeak / 1048576).toFixed(0).padStart(4)} MiB | 10 ms timer ${probes}/${expected} | ${[...new Set(results)].join(', ')}`;
}

async function main(): Promise<void> {
  if (opts['serve-hostile']) return serveHostile();
  if (opts.hostile) return hostile();
  const servers = [await serve(page(7.4e6)), await serve(page(50e6))];
  const addrs = servers.map((s) => s.addr);
  console.log(`agent scrape load: pages 7.4 MB + 50 MB, each scraped every 1 s for ${SECONDS} s`);
  for (const cap of [DEFAULT_CAP, BIG_CAP]) {
    console.log(await run('buffered', cap, addrs));
    console.log(await run('streaming', cap, addrs));
  }
  for (const s of servers) await s.close();
}

void main();

/**
 * Issue 24 #7: the hostile pages, the agent's streaming scraper with the shipped cap. One vLLM page
 * with a 100,000-bucket histogram (7 MB, under the cap), alone and with the two large pages above.
 *   npx tsx bench/agent-scrape-load.ts --hostile [--seconds 6]
 */
async function hostile(): Promise<void> {
  // The page servers run in a child process (they stand for the exporters, other machines): the
  // lag and RSS printed are the scraper's alone, which is what the targets are about.
  const child = spawn(process.execPath, ['--import', 'tsx', __filename, '--serve-hostile'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (c: Buffer) => { buf += c.toString('utf8'); const i = buf.indexOf('\n'); if (i >= 0) resolve(buf.slice(0, i)); });
    child.once('exit', (code) => reject(new Error(`page servers exited (${code})`)));
  });
  const { buckets, others, bucketBytes } = JSON.parse(line) as { buckets: string; others: string[]; bucketBytes: number };
  try {
    console.log(`agent scrape load, hostile pages (${(bucketBytes / 1e6).toFixed(1)} MB page with a 100,000-bucket histogram; servers in a child process), each scraped every 1 s for ${SECONDS} s`);
    console.log('7.4 MB page alone:            ' + (await run('streaming', DEFAULT_CAP, [others[0]])));
    console.log('100,000 buckets alone:        ' + (await run('streaming', DEFAULT_CAP, [buckets])));
    console.log('100,000 buckets + 7.4 + 50 MB: ' + (await run('streaming', DEFAULT_CAP, [buckets, ...others])));
  } finally {
    child.stdin!.end();
    child.kill();
  }
}

/** The child of --hostile: serves the pages, prints their addresses, exits when its stdin closes. */
async function serveHostile(): Promise<void> {
  const b = bucketPage(100_000);
  const buckets = await serve(b);
  const others = [await serve(page(7.4e6)), await serve(page(50e6))];
  process.stdout.write(JSON.stringify({ buckets: buckets.addr, others: others.map((s) => s.addr), bucketBytes: b.length }) + '\n');
  process.stdin.resume();
  process.stdin.once('end', () => process.exit(0));
}
