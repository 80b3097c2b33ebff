// Health, readiness and metrics routes, served by the API and by a worker's metrics port.
import type { Route } from '../http/router';
import type { Metrics } from '../obs/metrics';

export interface Probe {
  name: string;
  check: () => Promise<void>;
  /** A failing critical probe makes the process unready; others only mark it degraded. */
  critical: boolean;
}

export interface OpsOptions {
  metrics: Metrics;
  probes: Probe[];
  draining: () => boolean;
  /** Samples gauges before /metrics is rendered. */
  extra?: () => Promise<void>;
  /** Renders /metrics (API threads: the sum over every thread); default: this registry. */
  render?: () => Promise<string>;
}

export function opsRoutes(o: OpsOptions): Route[] {
  return [
    { method: 'GET', pattern: '/healthz', family: 'ops', handler: async () => ({ status: 200, body: { status: 'ok' } }) },
    {
      method: 'GET', pattern: '/readyz', family: 'ops',
      handler: async () => {
        if (o.draining()) return { status: 503, body: { status: 'draining' } };
        const checks: Record<string, string> = {};
        let ok = true;
        let degraded = false;
        await Promise.all(
          o.probes.map(async (p) => {
            try {
              await withTimeout(p.check(), 2000);
              checks[p.name] = 'ok';
            } catch (err) {
              if (p.critical) ok = false;
              else degraded = true;
              checks[p.name] = (err as Error).message;
            }
          }),
        );
        return { status: ok ? 200 : 503, body: { status: ok ? (degraded ? 'degraded' : 'ready') : 'not ready', checks } };
      },
    },
    {
      method: 'GET', pattern: '/metrics', family: 'ops',
      handler: async () => {
        await o.extra?.();
        const data = o.render ? await o.render() : await o.metrics.registry.metrics();
        return { status: 200, raw: { contentType: o.metrics.registry.contentType, data } };
      },
    },
  ];
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return Promise.race([p, new Promise<T>((_, rej) => setTimeout(() => rej(new Error(`timed out after ${ms} ms`)), ms).unref())]);
}
