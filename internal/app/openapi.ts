// The OpenAPI 3.1 document, generated from the same zod schemas that validate requests:
// every route the API serves (ingest, insights, export, operations), with CORS preflights.
import { z } from 'zod';
import { EventBody, IdentifyPayload, IncrementPayload, IngestAccepted, TrackBody } from '../ingest/schemas';
import { ConsumedProps } from '../ingest/ops';
import { pageParamsSchema, periodParamsSchema, filterSchema } from '../query/params';
import { breakdownSchema, chartSchema, EXPORT_INCLUDES, eventsSchema, seriesItemSchema } from '../export/params';
import { SESSION_DIMENSIONS } from '../model/event';
import { activityPaths } from './openapi-activity';
import { reportPaths } from './openapi-reports';
import { profilePaths } from './openapi-profiles';
import { eventPropertiesParamsSchema, MAX_EVENT_NAMES, MAX_PROPERTY_KEYS, MAX_PROPERTY_VALUES, propertyValuesParamsSchema } from '../insights/events-catalog';
import { funnelParamsSchema, MAX_STEPS, MIN_STEPS } from '../insights/funnel';

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
  pageviews: z.number().describe('screen views of this page, counted as its sessions are'),
});
const BreakdownRow = z.object({
  name: z.string(), sessions: z.number(), bounce_rate: z.number(), avg_session_duration: z.number(),
  pageviews: z.number().describe('screen views of the row\'s sessions'),
  prefix: z.string().optional().describe('region, city: country; browser_version: browser; os_version: os'),
});

const EventProperties = z.object({
  columns: z.array(z.string()).describe('event columns a filter takes by name'),
  properties: z.array(z.object({ property_key: z.string(), event_name: z.string() })),
});
const PropertyValues = z.object({ event: z.string(), property: z.string(), values: z.array(z.string()) });
const FunnelResponse = z.object({
  steps: z.array(z.object({
    step: z.number().describe('1-based position'),
    eventName: z.string(),
    users: z.number().describe('sessions (groupBy session_id) or profiles (groupBy profile_id) that reached this step'),
    conversionRateFromStart: z.number().describe('users / the first step\'s users, percent, 2 decimals'),
    dropoffPercent: z.number().nullable().describe('share of this step\'s users that did not reach the next one, percent, 2 decimals; null on the last step'),
    isHighestDropoff: z.boolean().describe('the first step with the largest drop-off count'),
  })),
  totalUsers: z.number().describe('users of the first step'),
  completedUsers: z.number().describe('users of the last step'),
  overallConversionRate: z.number().describe('completedUsers / totalUsers, percent, 2 decimals'),
});

/** Query parameters that carry JSON text: the schema of what the text holds. */
const JSON_PARAMS: Record<string, { description: string; content: z.ZodType }> = {
  filters: { description: 'JSON-encoded array of filters (all must hold)', content: z.array(filterSchema) },
  series: { description: 'JSON-encoded array of series items', content: z.array(seriesItemSchema) },
  events: { description: 'JSON-encoded array of series items (OpenPanel\'s older name of series)', content: z.array(seriesItemSchema) },
  breakdowns: { description: 'JSON-encoded array of breakdowns', content: z.array(breakdownSchema) },
};

/** Parameters that may be repeated or comma-separated (read as lists of strings). */
const LIST_PARAMS: Record<string, string> = {
  event: 'Event names; repeated or comma-separated',
  includes: `Field groups or single event columns; repeated or comma-separated: ${EXPORT_INCLUDES.join(', ')}`,
  steps: `Event names in order, ${MIN_STEPS} to ${MAX_STEPS}; repeated (steps=a&steps=b) or one JSON array (steps=["a","b"])`,
};

/** Query parameters of object schemas as OpenAPI parameters (later schemas add theirs). */
function queryParameters(...schemas: z.ZodType[]): unknown[] {
  const out = new Map<string, unknown>();
  for (const s of schemas) {
    const js = schema(s) as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
    for (const [name, p] of Object.entries(js.properties ?? {})) {
      const json = JSON_PARAMS[name];
      const list = LIST_PARAMS[name];
      out.set(name, {
        name,
        in: 'query',
        required: js.required?.includes(name) ?? false,
        ...(list ? { style: 'form', explode: true, description: list } : {}),
        schema: json ? { type: 'string', description: json.description, contentMediaType: 'application/json', contentSchema: schema(json.content) } : p,
      });
    }
  }
  return [...out.values()];
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
const DeviceIdAnswer = z.object({
  deviceId: z.string().describe('32 hex chars: the id /track gives this user-agent and client address now'),
  sessionId: z.string().describe("the device's live session (its next event joins it), or '' when none"),
  message: z.string().describe("OpenPanel's: 'current session exists for this device id', 'previous session exists for this device id' or 'No session exists for this device id'"),
});
/** OpenPanel's older profile routes: the /track payload without the envelope; 202 with the profile id as text. */
const profileRoute = (summary: string, body: z.ZodType, security: unknown[], preflight: Record<string, unknown>) => ({
  post: {
    summary, tags: ['ingest'], security,
    parameters: [idempotencyParam],
    requestBody: { required: true, content: { 'application/json': { schema: schema(body) } } },
    responses: {
      202: { description: 'Durably queued; the body is the profile id (text/plain, as OpenPanel answers)', content: { 'text/plain': { schema: { type: 'string' } } } },
      ...ingestErrors,
    },
  },
  ...preflight,
});
const idempotencyParam = {
  name: 'Idempotency-Key', in: 'header', required: false,
  description: 'The event\'s own key (1-256 characters; or the property __idempotencyKey): a retry with the same key is never counted twice',
  schema: { type: 'string', minLength: 1, maxLength: 256 },
};
const projectParam = { name: 'projectId', in: 'path', required: true, schema: { type: 'string' } };

// Export responses (documentation: what internal/export/events.ts and charts.ts answer).
const ExportedProfile = z.object({
  id: z.string(), firstName: z.string().nullable(), lastName: z.string().nullable(), email: z.string().nullable(),
  properties: z.record(z.string(), z.unknown()), groups: z.array(z.string()),
});
const ExportedEvent = z
  .object({
    id: z.string(), name: z.string(), deviceId: z.string(), profileId: z.string(), sessionId: z.string().nullable(),
    projectId: z.string(), createdAt: z.string().describe('ISO 8601, milliseconds'), path: z.string(), origin: z.string(), title: z.string(),
    profile: ExportedProfile.nullable().optional().describe('includes=profile; null when no profile row exists'),
    meta: z.object({ durationMs: z.number().nullable(), isBot: z.boolean(), botReason: z.string().nullable(), receivedAt: z.string() }).optional().describe('includes=meta'),
  })
  .catchall(z.unknown())
  .describe('Base fields, plus the fields of each include (properties, groups, country ... utmContent, or single columns)');
const EventsPage = z.object({
  meta: z.object({
    count: z.number(), totalCount: z.number(), pages: z.number(), current: z.number(),
    cursor: z.string().nullable().describe('pass back as cursor for the next page; null on the last'),
  }),
  data: z.array(ExportedEvent),
});
const PreviousValue = z.object({ diff: z.number().nullable(), state: z.enum(['positive', 'negative', 'neutral']), value: z.number() });
const ChartMetrics = z.object({ sum: z.number(), average: z.number(), min: z.number(), max: z.number() });
const ChartResponse = z.object({
  series: z.array(z.object({
    id: z.string(),
    names: z.array(z.string()),
    event: z.object({ id: z.string(), name: z.string(), breakdowns: z.record(z.string(), z.string()).optional() }),
    metrics: ChartMetrics.extend({ count: z.number(), previous: z.record(z.string(), PreviousValue).optional() }),
    data: z.array(z.object({ date: z.string(), count: z.number(), previous: PreviousValue.optional() })),
  })),
  metrics: ChartMetrics,
});
const exportProjectParams = [
  { name: 'projectId', in: 'query', required: false, schema: { type: 'string' }, description: "A read client's own project when left out; required for a root client" },
  { name: 'project_id', in: 'query', required: false, schema: { type: 'string' }, description: 'OpenPanel\'s other spelling of projectId' },
];

/** A CORS preflight answer. */
const preflight = (summary: string) => ({
  options: { summary, tags: ['cors'], responses: { 204: { description: 'Access-Control-Allow-* headers, no body' } } },
});

export function openApiDocument(extraPaths: Record<string, unknown> = {}): Record<string, unknown> {
  const readSecurity = [{ clientId: [], clientSecret: [] }, { openpanelClientId: [], openpanelClientSecret: [] }];
  const readPreflight = preflight('CORS preflight: any origin (Access-Control-Allow-Origin: *; requests need a secret)');
  const insights = (summary: string, params: z.ZodType, response: z.ZodType) => ({
    get: {
      summary,
      tags: ['insights'],
      security: readSecurity,
      parameters: [projectParam, ...queryParameters(params)],
      responses: { 200: { description: 'OK', content: json(response) }, ...readErrors },
    },
    ...readPreflight,
  });
  const ingestSecurity = [{ clientId: [], clientSecret: [] }, { openpanelClientId: [], openpanelClientSecret: [] }, { clientId: [] }, { openpanelClientId: [] }];
  const ingestPreflight = preflight("CORS preflight: the request's Origin (browser clients ingest only from the project's allowed origins)");
  const ops = (summary: string, contentType: string, body: Record<string, unknown>) => ({
    get: { summary, tags: ['operations'], responses: { 200: { description: 'OK', content: { [contentType]: { schema: body } } } } },
  });
  const paths: Record<string, unknown> = {
    '/event': {
      post: {
        summary: 'Create one event', tags: ['ingest'], security: ingestSecurity,
        parameters: [idempotencyParam],
        requestBody: { required: true, content: { 'application/json': { schema: schema(EventBody) } } },
        responses: { 202: { description: 'Durably queued', content: json(IngestAccepted) }, ...ingestErrors },
      },
      ...ingestPreflight,
    },
    '/track': {
      post: {
        summary: 'track, identify, increment, decrement, group or assign_group', tags: ['ingest'],
        security: ingestSecurity,
        parameters: [idempotencyParam],
        requestBody: { required: true, content: { 'application/json': { schema: schema(TrackBody) } } },
        responses: { 202: { description: 'Durably queued', content: json(IngestAccepted) }, ...ingestErrors },
      },
      ...ingestPreflight,
    },
    '/track/device-id': {
      get: {
        summary: "The device id /track gives the caller's user-agent and address, and its live session (OpenPanel's)", tags: ['ingest'],
        security: ingestSecurity,
        responses: {
          200: { description: 'OK', content: json(DeviceIdAnswer) },
          400: { description: 'No user-agent header', content: json(BadRequest) },
          401: ingestErrors[401], 403: ingestErrors[403], 429: ingestErrors[429],
          503: { description: 'The device salts could not be read (Redis); retry', content: json(IngestError) },
        },
      },
      ...ingestPreflight,
    },
    '/profile': profileRoute('identify (OpenPanel\'s older route: the body is /track\'s identify payload)', IdentifyPayload, ingestSecurity, ingestPreflight),
    '/profile/increment': profileRoute('increment (OpenPanel\'s older route: the body is /track\'s increment payload)', IncrementPayload, ingestSecurity, ingestPreflight),
    '/profile/decrement': profileRoute('decrement (OpenPanel\'s older route: the body is /track\'s decrement payload)', IncrementPayload, ingestSecurity, ingestPreflight),
    '/insights/{projectId}/metrics': insights('Totals and a series per bucket', periodParamsSchema, MetricsResponse),
    '/projects': {
      get: {
        summary: 'Projects this client may read: its own (read client) or every project (root client)', tags: ['insights'],
        security: readSecurity,
        responses: {
          200: { description: 'OK', content: json(z.array(z.object({ id: z.string(), name: z.string(), timezone: z.string().describe('IANA time zone of insights periods') }))) },
          ...readErrors,
        },
      },
    },
    '/insights/{projectId}/live': {
      get: {
        summary: 'Visitors with an event in the last 5 minutes; also a WebSocket (docs/api.md "Live push")', tags: ['insights'], security: readSecurity,
        parameters: [projectParam],
        responses: {
          101: { description: 'WebSocket upgrade: {"visitors": N} at once after authentication, then on every change' },
          200: { description: 'OK', content: json(z.object({ visitors: z.number() })) }, ...readErrors,
        },
      },
      ...readPreflight,
    },
    '/insights/{projectId}/pages': insights('Top pages', pageParamsSchema, z.array(PageRow)),
    '/insights/{projectId}/events/names': insights(
      `The project's event names (OpenPanel's): at most ${MAX_EVENT_NAMES}, most frequent recently first`, z.object({}), z.array(z.string()),
    ),
    '/insights/{projectId}/events/properties': insights(
      `Property keys per event name (OpenPanel's): at most ${MAX_PROPERTY_KEYS} pairs, by key then name`, eventPropertiesParamsSchema, EventProperties,
    ),
    '/insights/{projectId}/events/property_values': insights(
      `Values of one property of one event name (OpenPanel's): at most ${MAX_PROPERTY_VALUES}, most recently seen first`, propertyValuesParamsSchema, PropertyValues,
    ),
    '/insights/{projectId}/funnel': {
      get: {
        ...insights("Funnel (OpenPanel's): sessions or profiles that did the steps in order, each within windowHours of the first", funnelParamsSchema, FunnelResponse).get,
        parameters: [projectParam, ...queryParameters(periodParamsSchema, funnelParamsSchema)],
      },
      ...readPreflight,
    },
    ...activityPaths(insights, Metrics),
    ...reportPaths(insights),
    ...profilePaths(insights),
    ...Object.fromEntries(
      SESSION_DIMENSIONS.map((d) => [`/insights/{projectId}/${d}`, insights(`Sessions by ${d}`, pageParamsSchema, z.array(BreakdownRow))]),
    ),
    '/export/events': {
      get: {
        summary: 'Raw events, newest first: pages (json) or all of them (ndjson)', tags: ['export'], security: readSecurity,
        parameters: [...exportProjectParams, ...queryParameters(eventsSchema.omit({ projectId: true, project_id: true }))],
        responses: {
          200: {
            description: 'OK',
            content: { ...json(EventsPage), 'application/x-ndjson': { schema: { ...schema(ExportedEvent, 'output'), description: 'format=ndjson: one event per line' } } },
          },
          ...readErrors,
        },
      },
      ...readPreflight,
    },
    '/export/charts': {
      get: {
        summary: 'Event series per bucket, with breakdowns (OpenPanel chart engine)', tags: ['export'], security: readSecurity,
        parameters: [...exportProjectParams, ...queryParameters(chartSchema, periodParamsSchema)],
        responses: { 200: { description: 'OK', content: json(ChartResponse) }, ...readErrors },
      },
      ...readPreflight,
    },
    '/healthz': ops('Liveness', 'application/json', { type: 'object', properties: { status: { const: 'ok' } } }),
    '/readyz': {
      get: {
        summary: 'Readiness: every critical dependency answers', tags: ['operations'],
        responses: {
          200: { description: 'Ready (or degraded: a non-critical dependency is away)', content: { 'application/json': { schema: { type: 'object' } } } },
          503: { description: 'Not ready, or draining', content: { 'application/json': { schema: { type: 'object' } } } },
        },
      },
    },
    '/metrics': ops('Prometheus metrics', 'text/plain', { type: 'string' }),
    '/openapi.json': ops('This document', 'application/json', { type: 'object' }),
    '/dashboard': ops('A small HTML dashboard over the insights API', 'text/html', { type: 'string' }),
    ...extraPaths,
  };
  return {
    openapi: '3.1.0',
    info: { title: 'Tidemark', version: '0.1.0', description: 'OpenPanel-compatible event analytics API' },
    components: {
      securitySchemes: {
        clientId: { type: 'apiKey', in: 'header', name: 'service-client-id' },
        clientSecret: { type: 'apiKey', in: 'header', name: 'service-client-secret' },
        openpanelClientId: { type: 'apiKey', in: 'header', name: 'openpanel-client-id' },
        openpanelClientSecret: { type: 'apiKey', in: 'header', name: 'openpanel-client-secret' },
      },
      schemas: {
        ReservedProperties: {
          ...schema(ConsumedProps),
          description: 'Keys of `properties` the service consumes (never kept as custom properties): event time, client address, device id, page, and the device overrides',
        },
      },
    },
    paths,
  };
}
