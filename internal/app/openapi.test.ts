// The OpenAPI document names every route the API serves, with the parameters of the zod
// schemas that validate them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openApiDocument } from './openapi';
import { ingestRoutes, type IngestDeps } from '../ingest/handler';
import { readRoutes } from './read-routes';
import { exportRoutes } from '../export/routes';
import { opsRoutes, type OpsOptions } from './ops-routes';
import { SESSION_DIMENSIONS } from '../model/event';
import { chartSchema, eventsSchema } from '../export/params';
import { FILTER_OPERATORS } from '../query/params';
import type { ReadDeps } from '../read/guard';

type Doc = { paths: Record<string, Record<string, { parameters?: { name: string; schema: Record<string, any> }[] }>>; components: Record<string, any> };
const doc = openApiDocument() as unknown as Doc;

/** The routes runtime.ts registers (handlers never called: the deps are not used to build them). */
function servedRoutes(): { method: string; pattern: string }[] {
  const none = {} as never;
  return [
    ...ingestRoutes(none as IngestDeps),
    ...readRoutes(none as ReadDeps),
    ...exportRoutes(none as ReadDeps),
    ...opsRoutes({ metrics: none, probes: [], draining: () => false } as OpsOptions),
    // added inline by runtime.ts
    { method: 'GET', pattern: '/openapi.json' },
    { method: 'GET', pattern: '/dashboard' },
  ];
}

const toOpenApiPath = (pattern: string) => pattern.replace(/:([A-Za-z]+)/g, '{$1}');

test('every served route and method is in the document', () => {
  for (const route of servedRoutes()) {
    const method = route.method.toLowerCase();
    if (route.pattern === '/insights/:projectId/:dimension') {
      // the generic breakdown route serves one path per dimension
      for (const d of SESSION_DIMENSIONS) assert.ok(doc.paths[`/insights/{projectId}/${d}`]?.[method], `${route.method} /insights/{projectId}/${d}`);
      continue;
    }
    assert.ok(doc.paths[toOpenApiPath(route.pattern)]?.[method], `${route.method} ${route.pattern}`);
  }
});

test('ingest, insights and export paths document their CORS preflight', () => {
  for (const path of ['/track', '/event', '/track/device-id', '/profile', '/profile/increment', '/profile/decrement', '/insights/{projectId}/metrics', '/insights/{projectId}/country', '/export/events', '/export/charts']) {
    assert.ok(doc.paths[path]?.options, path);
  }
});

test('export parameters are the validating schemas\' keys', () => {
  const names = (path: string) => new Set(doc.paths[path]!.get!.parameters!.map((p) => p.name));
  const events = names('/export/events');
  for (const key of Object.keys(eventsSchema.shape)) assert.ok(events.has(key), `/export/events ${key}`);
  const charts = names('/export/charts');
  for (const key of [...Object.keys(chartSchema.shape), 'startDate', 'endDate', 'range']) assert.ok(charts.has(key), `/export/charts ${key}`);
});

test('the filters parameter describes its JSON content, every operator included', () => {
  const filters = doc.paths['/insights/{projectId}/metrics']!.get!.parameters!.find((p) => p.name === 'filters')!;
  const operators = filters.schema.contentSchema.items.properties.operator.enum as string[];
  assert.deepEqual([...operators].sort(), [...FILTER_OPERATORS].sort());
  const exportFilters = doc.paths['/export/events']!.get!.parameters!.find((p) => p.name === 'filters')!;
  assert.deepEqual(exportFilters.schema.contentSchema, filters.schema.contentSchema);
});

test('the reserved properties (device overrides included) are documented', () => {
  const keys = Object.keys(doc.components.schemas.ReservedProperties.properties);
  for (const k of ['__timestamp', '__ip', '__deviceId', '__path', '__title', '__referrer', '__os', '__osVersion', '__browser', '__browserVersion', '__device', '__brand', '__model']) {
    assert.ok(keys.includes(k), k);
  }
});

test('the document is JSON and names OpenAPI 3.1', () => {
  const text = JSON.stringify(openApiDocument());
  assert.equal((JSON.parse(text) as { openapi: string }).openapi, '3.1.0');
});

test('page and breakdown rows document pageviews (semantics.md, "OpenPanel fidelity")', () => {
  type Row = { properties: Record<string, unknown>; required: string[] };
  const rowOf = (path: string): Row => {
    const paths = doc.paths as unknown as Record<string, { get: { responses: Record<string, { content: { 'application/json': { schema: { items: Row } } } }> } }>;
    return paths[path]!.get.responses['200']!.content['application/json'].schema.items;
  };
  for (const path of ['/insights/{projectId}/pages', ...SESSION_DIMENSIONS.map((d) => `/insights/{projectId}/${d}`)]) {
    const row = rowOf(path);
    assert.ok(row.properties.pageviews, path);
    assert.ok(row.required.includes('pageviews'), path);
  }
});
