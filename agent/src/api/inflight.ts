// POST /v1/inflight (docs/contracts.md "Mesh in-flight report"): a filter's snapshot writer reports
// its proxy's in-flight counts per instance; the answer is the other proxies' counts
// (agent/src/mesh/inflight.ts). On the agent's one listener, like /v1/snapshot (the local filters'
// endpoint); the body is bounded (413 beyond inflight.maxBodyBytes) and read before any work.
import * as promClient from 'prom-client';
import type { Registry } from 'prom-client';
import { INFLIGHT_CONTENT_TYPE, type InflightAggregator } from '../mesh/inflight';
import { send, type ApiRoute } from './server';

export interface InflightRouteMetrics {
  reports: promClient.Counter<'result'>;
  proxies: promClient.Gauge;
  prefix: promClient.Counter<'direction'>;
}

export function inflightMetrics(registry: Registry, agg: InflightAggregator): InflightRouteMetrics {
  const r = [registry];
  return {
    reports: new promClient.Counter({ name: 'switchyard_inflight_reports_total', help: 'Mesh in-flight reports from the filters, by result (ok, remote_unknown: answered "the rest of the mesh unknown", refused: malformed, too_large, too_many_proxies).', labelNames: ['result'], registers: r }),
    proxies: new promClient.Gauge({ name: 'switchyard_inflight_proxies', help: 'Proxies whose in-flight report stands (not expired).', registers: r, collect() { agg.sweep(); this.set(agg.proxyCount); } }),
    prefix: new promClient.Counter({
      name: 'switchyard_inflight_prefix_records_total', help: 'Prefix placements (docs/mesh.md "Prefix placements"): records taken from the proxies\' reports and the other agents (in), given in answers (out), dropped: malformed, not an instance, over inflight.prefixRecords (ignored), overwritten before a proxy was given them (lost).', labelNames: ['direction'], registers: r,
      collect() {
        const st = agg.stats;
        this.reset();
        this.inc({ direction: 'in' }, st.prefixIn);
        this.inc({ direction: 'out' }, st.prefixOut);
        this.inc({ direction: 'ignored' }, st.prefixIgnored);
        this.inc({ direction: 'lost' }, agg.prefixLog.lost);
      },
    }),
  };
}

export function inflightRoute(agg: InflightAggregator, maxBodyBytes: number, metrics?: InflightRouteMetrics): ApiRoute {
  return {
    path: '/v1/inflight',
    methods: ['POST'],
    handle(req, res) {
      const declared = Number(req.headers['content-length'] ?? NaN);
      if (declared > maxBodyBytes) {
        metrics?.reports.inc({ result: 'too_large' });
        res.setHeader('connection', 'close');
        send(res, 413, `body of ${declared} bytes exceeds inflight.maxBodyBytes (${maxBodyBytes})\n`);
        req.resume();
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      let over = false;
      req.on('data', (c: Buffer) => {
        if (over) return;
        size += c.length;
        if (size > maxBodyBytes) {
          over = true;
          chunks.length = 0;
          metrics?.reports.inc({ result: 'too_large' });
          res.setHeader('connection', 'close');
          send(res, 413, `body exceeds inflight.maxBodyBytes (${maxBodyBytes})\n`);
          return;
        }
        chunks.push(c);
      });
      req.on('end', () => {
        if (over) return;
        const r = agg.report(Buffer.concat(chunks, size));
        if (!r.ok) {
          metrics?.reports.inc({ result: r.status === 503 ? 'too_many_proxies' : 'refused' });
          return send(res, r.status, `${r.error}\n`);
        }
        metrics?.reports.inc({ result: r.remoteUnknown ? 'remote_unknown' : 'ok' });
        send(res, 200, r.answer, { 'content-type': INFLIGHT_CONTENT_TYPE });
      });
    },
  };
}
