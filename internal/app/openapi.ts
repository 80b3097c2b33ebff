// The OpenAPI 3.1 document, generated from the same zod schemas that validate requests.
import { z } from 'zod';
import { EventBody, IngestAccepted, TrackBody } from '../ingest/schemas';
import { pageParamsSchema, periodParamsSchema, filterSchema } from '../query/params';
import { SESSION_DIMENSIONS } from '../model/event';

const schema = (s: z.ZodType, io: 'input' | 'output' = 'input') =>
  z.toJSONSchema(s, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as Record<string, unknown>;

const Issue = z.object({ path: z.array(z.string()), message: z.string() });
const BadRequest = z.object({
  error: z.literal('Bad Request'),
  message: z.string(),
  details: z.object({ issues: z.array(Issue) }),
  status: z.literal(400).optional().describe('ingest responses only'),
});
const IngestError = z.object({ error: z.string(), status: z.number() });
const ReadError = z.object({ error: z.string(), message: z.string() });

const Metrics = z.object({
  bounce_rate: z.number().describe('percent, 0..100, 2 decimals'),
  unique_visitors: z.number(),
  total_sessions: z.number(),
  avg_session_duration: z.number().describe('seconds, 2 decimals'),
  total_screen_views: z.number(),
  views_per_session: z.number(),
});
const MetricsResponse = z.object({ metrics: Metrics, series: z.array(Metrics.extend({ date: z.string().describe('bucket start, ISO 8601') })) });
const PageRow = z.object({
  title: z.string(), origin: z.string(), path: z.string(), sessions: z.number(),
  bounce_rate: z.number(), avg_duration: z.number().describe('seconds'),
});
const BreakdownRow = z.object({
  name: z.string(), sessions: z.number(), bounce_rate: z.number(), avg_session_duration: z.number(),
  prefix: z.string().optional().describe('region, city: country; browser_version: browser; os_version: os'),
});

/** Query parameters of an object schema as OpenAPI parameters. */
function queryParameters(s: z.ZodType): unknown[] {
  const js = schema(s) as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
  return Object.entries(js.properties ?? {}).map(([name, p]) => ({
    name,
    in: 'query',
    required: js.required?.includes(name) ?? false,
    schema: name === 'filters' ? { type: 'string', description: 'JSON-encoded array of filters', contentSchema: schema(z.array(filterSchema)) } : p,
  }));
}

const json = (s: z.ZodType) => ({ 'application/json': { schema: schema(s, 'output') } });
const readErrors = {
  400: { description: 'Invalid parameter', content: json(BadRequest) },
  401: { description: 'Missing or invalid credentials', content: json(ReadError) },
  403: { description: 'Client mode or project not allowed', content: json(ReadError) },
  404: { description: 'Unknown project', content: json(ReadError) },
  429: { description: 'Rate limit (100 requests / 10 s per client); X-RateLimit-* and Retry-After headers', content: json(ReadError) },
};
const ingestErrors = {
  400: { description: 'Invalid body', content: json(BadRequest) },
  401: { description: 'Missing or invalid credentials', content: json(IngestError) },
  403: { description: 'A read client cannot ingest', content: json(IngestError) },
  413: { description: 'Body over 1 MiB', content: json(IngestError) },
  429: { description: 'Ingest rate limit of the client', content: json(IngestError) },
  503: { description: 'Not confirmed stored (it may or may not have been); retry with backoff and the same Idempotency-Key', content: json(IngestError) },
};
const idempotencyParam = {
  name: 'Idempotency-Key', in: 'header', required: false,
  description: 'The event\'s own key (1-256 characters; or the property __idempotencyKey): a retry with the same key is never counted twice',
  schema: { type: 'string', minLength: 1, maxLength: 256 },
};
const projectParam = { name: 'projectId', in: 'path', required: true, schema: { type: 'string' } };

export function openApiDocument(extraPaths: Record<string, unknown> = {}): Record<string, unknown> {
  const insights = (summary: string, params: z.ZodType, response: z.ZodType) => ({
    get: {
      summary,
      tags: ['insights'],
      security: [{ clientId: [], clientSecret: [] }],
      parameters: [projectParam, ...queryParameters(params)],
      responses: { 200: { description: 'OK', content: json(response) }, ...readErrors },
    },
  });
  const paths: Record<string, unknown> = {
    '/event': {
      post: {
        summary: 'Create one event', tags: ['ingest'], security: [{ clientId: [], clientSecret: [] }, { clientId: [] }],
        parameters: [idempotencyParam],
        requestBody: { required: true, content: { 'application/json': { schema: schema(EventBody) } } },
        responses: { 202: { description: 'Durably queued', content: json(IngestAccepted) }, ...ingestErrors },
      },
    },
    '/track': {
      post: {
        summary: 'track, identify, increment, decrement, group or assign_group', tags: ['ingest'],
        security: [{ clientId: [], clientSecret: [] }, { clientId: [] }],
        parameters: [idempotencyParam],
        requestBody: { required: true, content: { 'application/json': { schema: schema(TrackBody) } } },
        responses: { 202: { description: 'Durably queued', content: json(IngestAccepted) }, ...ingestErrors },
      },
    },
    '/insights/{projectId}/metrics': insights('Totals and a series per bucket', periodParamsSchema, MetricsResponse),
    '/insights/{projectId}/live': {
      get: {
        summary: 'Visitors with an event in the last 5 minutes', tags: ['insights'], security: [{ clientId: [], clientSecret: [] }],
        parameters: [projectParam],
        responses: { 200: { description: 'OK', content: json(z.object({ visitors: z.number() })) }, ...readErrors },
      },
    },
    '/insights/{projectId}/pages': insights('Top pages', pageParamsSchema, z.array(PageRow)),
    ...Object.fromEntries(
      SESSION_DIMENSIONS.map((d) => [`/insights/{projectId}/${d}`, insights(`Sessions by ${d}`, pageParamsSchema, z.array(BreakdownRow))]),
    ),
    ...extraPaths,
  };
  return {
    openapi: '3.1.0',
    info: { title: 'Tidemark', version: '0.1.0', description: 'OpenPanel-compatible event analytics API' },
    components: {
      securitySchemes: {
        clientId: { type: 'apiKey', in: 'header', name: 'service-client-id' },
        clientSecret: { type: 'apiKey', in: 'header', name: 'service-client-secret' },
      },
    },
    paths,
  };
}
