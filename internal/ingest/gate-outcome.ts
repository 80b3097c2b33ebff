// The ingest gate's answer, settled the same way for every ingest route (/track and its
// neighbours): a Redis failure lets the request through on the local decision (counted as
// degraded), a revoked client is a 401, a client over its rate a 429 with its headers.
import { TooManyRequestsError, UnauthorizedError } from '../http/errors';
import { rateHeaders, type GateResult } from '../ratelimit/gate';

export interface GateOutcomeHooks {
  onDegraded?: (what: string, err: unknown) => void;
  onRateLimited?: (scope: string) => void;
}

type GateOk = Extract<GateResult, { outcome: 'ok' }>;

function checked(gate: GateResult, hooks: GateOutcomeHooks): GateOk {
  if (gate.outcome === 'revoked') throw new UnauthorizedError('invalid client credentials');
  if (gate.outcome === 'limited') {
    hooks.onRateLimited?.('ingest');
    const e = new TooManyRequestsError(`rate limit of ${gate.rate.limit} requests per second exceeded`);
    e.headers = rateHeaders(gate.rate, true);
    throw e;
  }
  return gate;
}

/**
 * The gate's result for `deviceId`; throws for revoked and limited. Synchronous when the gate
 * decided at once (the usual case: no promise on the hot path), a promise when Redis answers.
 */
export function settleGate(gate: GateResult | Promise<GateResult>, deviceId: string, hooks: GateOutcomeHooks): GateOk | Promise<GateOk> {
  if (!(gate instanceof Promise)) return checked(gate, hooks);
  return gate.then(
    (g) => checked(g, hooks),
    (err: unknown) => {
      hooks.onDegraded?.('redis', err);
      return { outcome: 'ok', rate: null, deviceId } as const;
    },
  );
}
