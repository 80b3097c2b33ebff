// OpenPanel's older profile routes (its profile.router.ts, called by its first SDKs):
// POST /profile (identify), POST /profile/increment, POST /profile/decrement. The body is the
// payload /track's identify, increment and decrement carry, without the {type, payload}
// envelope; each becomes the same queued op through the same path as /track (auth, body,
// rate limit, JetStream, then the worker applies it). OpenPanel answers 202 with the profile
// id as plain text, and so does this.
import type { ZodType } from 'zod';
import type { Route } from '../http/router';
import type { HttpRequest, HttpResponse } from '../http/types';
import { planIdentify, planIncrement, type OpContext, type PlannedOp } from './ops';
import { IdentifyPayload, IncrementPayload, type IdentifyPayloadT, type IncrementPayloadT } from './schemas';

/** The ingest path of handler.ts: auth, body, plan, device, gate, publish; its 202 (rate headers included). */
export type Ingest = <B>(
  req: HttpRequest,
  schema: ZodType<B>,
  plan: (body: B, ctx: OpContext) => PlannedOp,
  propertiesOf: (body: B) => [Record<string, unknown> | undefined, string[]],
) => Promise<HttpResponse>;

/** The body's properties sit at its top level (a 400 names `properties.…`, not `payload.properties.…`). */
const PROPERTIES = ['properties'];
const identifyProperties = (b: IdentifyPayloadT): [Record<string, unknown> | undefined, string[]] => [b.properties, PROPERTIES];
const noProperties = (): [Record<string, unknown> | undefined, string[]] => [undefined, PROPERTIES];

/** OpenPanel's answer: `reply.status(202).send(profileId)`, a text body. */
function accepted(res: HttpResponse, profileId: string): HttpResponse {
  return { status: 202, headers: res.headers, raw: { contentType: 'text/plain; charset=utf-8', data: profileId } };
}

export function profileRoutes(ingest: Ingest): Route[] {
  const identify = async (req: HttpRequest): Promise<HttpResponse> => {
    let profileId = '';
    const res = await ingest<IdentifyPayloadT>(req, IdentifyPayload, (b, ctx) => {
      profileId = b.profileId;
      return planIdentify(b, ctx, PROPERTIES);
    }, identifyProperties);
    return accepted(res, profileId);
  };
  const adjust = (sign: 1 | -1) => async (req: HttpRequest): Promise<HttpResponse> => {
    let profileId = '';
    const res = await ingest<IncrementPayloadT>(req, IncrementPayload, (b, ctx) => {
      profileId = b.profileId;
      return planIncrement(b, sign, ctx);
    }, noProperties);
    return accepted(res, profileId);
  };
  return [
    { method: 'POST', pattern: '/profile', family: 'ingest', cors: true, handler: identify },
    { method: 'POST', pattern: '/profile/increment', family: 'ingest', cors: true, handler: adjust(1) },
    { method: 'POST', pattern: '/profile/decrement', family: 'ingest', cors: true, handler: adjust(-1) },
  ];
}
