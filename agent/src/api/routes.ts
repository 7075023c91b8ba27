// The agent's read API (docs/contracts.md): /healthz, /status, /metrics, /v1/snapshot (long poll).
import type { Registry } from 'prom-client';
import { CONTENT_TYPE } from '../snapshot/codec';
import type { SnapshotPublisher } from '../snapshot/publisher';
import { send, type ApiRoute } from './server';

/** the longest long poll a client may ask for; larger waitMs values are clamped */
export const MAX_WAIT_MS = 30000;

export type LinkStatus = (peer?: string) => 'healthy' | 'degraded' | undefined;

export function healthzRoute(): ApiRoute {
  return { path: '/healthz', handle: (_req, res) => send(res, 200, 'ok\n') };
}

/**
 * `/status`: `healthy` / `degraded` as text (what probes and scripts read); `?format=json` adds
 * the rules' state when rules are configured — variables (value, source, since, why), every
 * set's decision (active rule, since, the variables that made it true, override) and pending
 * outcome, flags, overrides and the store; and the mesh's (mode, NATS connection, fallback, the
 * source of every pool's records) when `mesh` is configured.
 */
export function statusRoute(status: LinkStatus, rules?: () => unknown, mesh?: () => unknown): ApiRoute {
  return {
    path: '/status',
    handle(_req, res, url) {
      const format = url.searchParams.get('format') ?? 'text';
      if (format !== 'text' && format !== 'json') return send(res, 400, 'format: must be text or json\n');
      const s = status(url.searchParams.get('peer') ?? undefined);
      if (s === undefined) return send(res, 404, 'unknown peer\n');
      if (format === 'text') return send(res, 200, s);
      const body: Record<string, unknown> = { status: s };
      const r = rules?.();
      if (r !== undefined) body.rules = r;
      const m = mesh?.();
      if (m !== undefined) body.mesh = m;
      send(res, 200, JSON.stringify(body, null, 2) + '\n', { 'content-type': 'application/json' });
    },
  };
}

export function metricsRoute(registry: Registry): ApiRoute {
  return {
    path: '/metrics',
    handle(_req, res) {
      registry
        .metrics()
        .then((text) => send(res, 200, text, { 'content-type': registry.contentType }))
        .catch((err) => send(res, 500, `metrics error: ${(err as Error).message}\n`));
    },
  };
}

export function snapshotRoute(pub: SnapshotPublisher): ApiRoute {
  return {
    path: '/v1/snapshot',
    handle(_req, res, url) {
      const format = url.searchParams.get('format') ?? 'binary';
      if (format !== 'binary' && format !== 'json') return send(res, 400, 'format: must be json or binary\n');
      const after = url.searchParams.get('after') ?? undefined;
      if (after !== undefined && !/^\d{1,20}$/.test(after)) return send(res, 400, 'after: must be an unsigned integer\n');
      const waitRaw = url.searchParams.get('waitMs');
      let waitMs = 0;
      if (waitRaw !== null) {
        if (!/^\d{1,10}$/.test(waitRaw)) return send(res, 400, 'waitMs: must be a non-negative integer\n');
        waitMs = Math.min(Number(waitRaw), MAX_WAIT_MS);
      }
      let cancel: () => void = () => {};
      const onClose = (): void => cancel();
      res.once('close', onClose);
      cancel = pub.wait(after, waitMs, (p) => {
        res.off('close', onClose);
        if (format === 'json') send(res, 200, p.json, { 'content-type': 'application/json', 'x-switchyard-seq': String(p.snapshot.seq) });
        else send(res, 200, p.binary, { 'content-type': CONTENT_TYPE, 'x-switchyard-seq': String(p.snapshot.seq) });
      });
    },
  };
}
