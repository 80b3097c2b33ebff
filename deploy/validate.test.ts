// node --import tsx --test deploy/validate.test.ts
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  DEPLOY_DIR,
  OVERLAYS_DIR,
  REPO_ROOT,
  overlayDirs,
  renderOverlay,
  validateManifests,
  validateOverlay,
} from './validate';
import { validateCompose } from './validation/compose';
import { validateDockerfile } from './validation/dockerfile';
import type { KObject } from './validation/objects';
import { formatReport, type Report } from './validation/report';

const errorsOf = (r: Report) => r.findings.filter((f) => f.level === 'error').map((f) => `${f.where}: ${f.message}`);

function assertValid(r: Report): void {
  assert.equal(r.ok, true, formatReport(r));
  assert.deepEqual(errorsOf(r), []);
}

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tidemark-deploy-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const find = (objects: KObject[], kind: string, name: string): KObject => {
  const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
  assert.ok(o, `${kind}/${name} rendered`);
  return o;
};

test('both overlays exist', () => {
  assert.deepEqual(overlayDirs().map((d) => path.basename(d)), ['dev', 'prod']);
});

for (const overlay of ['dev', 'prod']) {
  test(`overlay ${overlay} renders and validates`, () => {
    assertValid(validateOverlay(path.join(OVERLAYS_DIR, overlay)));
  });
}

test('overlays differ where they should', () => {
  const dev = renderOverlay(path.join(OVERLAYS_DIR, 'dev'));
  const prod = renderOverlay(path.join(OVERLAYS_DIR, 'prod'));
  for (const o of dev) if (o.kind !== 'Namespace') assert.equal(o.metadata.namespace, 'tidemark-dev', o.metadata.name);
  for (const o of prod) if (o.kind !== 'Namespace') assert.equal(o.metadata.namespace, 'tidemark', o.metadata.name);
  // prod never ships the placeholder Secret
  assert.ok(dev.some((o) => o.kind === 'Secret'));
  assert.ok(!prod.some((o) => o.kind === 'Secret'));
  const image = (objs: KObject[]) =>
    (find(objs, 'Deployment', 'tidemark-api') as unknown as { spec: { template: { spec: { containers: { image: string }[] } } } }).spec.template.spec.containers[0]!.image;
  assert.equal(image(dev), 'tidemark:dev');
  assert.match(image(prod), /^registry\.example\.com\/tidemark\/tidemark:\d+\.\d+\.\d+$/);
  const hpa = (objs: KObject[], name: string) => (find(objs, 'HorizontalPodAutoscaler', name) as unknown as { spec: { minReplicas: number; maxReplicas: number } }).spec;
  assert.deepEqual(hpa(dev, 'tidemark-api'), { ...hpa(dev, 'tidemark-api'), minReplicas: 1, maxReplicas: 2 });
  assert.ok(hpa(prod, 'tidemark-api').minReplicas >= 2);
  assert.ok(hpa(prod, 'tidemark-worker').maxReplicas <= 16);
  // the patch merged into the container instead of replacing it
  const api = find(prod, 'Deployment', 'tidemark-api') as unknown as { spec: { template: { spec: { containers: Record<string, unknown>[] } } } };
  const c = api.spec.template.spec.containers[0]!;
  assert.deepEqual(c['resources'], { requests: { cpu: '1', memory: '512Mi' }, limits: { cpu: '2', memory: '1Gi' } });
  assert.ok(c['readinessProbe'] && c['lifecycle'] && c['command']);
});

test('compose.yaml validates', () => {
  assertValid(validateCompose(path.join(DEPLOY_DIR, 'compose.yaml')));
});

test('Dockerfile lints clean', () => {
  assertValid(validateDockerfile(path.join(DEPLOY_DIR, 'Dockerfile'), REPO_ROOT));
});

// ---- negative tests -------------------------------------------------------------

test('a broken manifest is rejected: schema, shards, configuration, commands', () => {
  const objects = renderOverlay(path.join(OVERLAYS_DIR, 'prod')) as unknown as Record<string, any>[];
  const api = objects.find((o) => o['kind'] === 'Deployment' && o['metadata'].name === 'tidemark-api')!;
  const container = api['spec'].template.spec.containers[0];
  container.ports[0].containerPort = 'http'; // wrong type
  container.command = ['node', '--import', 'tsx', 'cmd/apiserver/main.ts']; // no package.json script runs it
  const workerHpa = objects.find((o) => o['kind'] === 'HorizontalPodAutoscaler' && o['metadata'].name === 'tidemark-worker')!;
  workerHpa['spec'].maxReplicas = 64; // more workers than shards
  const config = objects.find((o) => o['kind'] === 'ConfigMap')!;
  config['data'].LOG_LEVEL = 'loud'; // not a level internal/config accepts
  const worker = objects.find((o) => o['kind'] === 'Deployment' && o['metadata'].name === 'tidemark-worker')!;
  worker['spec'].template.spec.containers[0].command = ['npm', 'run', 'worker']; // npm as PID 1: no graceful drain

  const r = validateManifests(objects, 'broken prod');
  assert.equal(r.ok, false);
  const errors = errorsOf(r).join('\n');
  assert.match(errors, /containerPort: must be integer/);
  assert.match(errors, /cmd\/apiserver\/main\.ts, which no package.json script runs/);
  assert.match(errors, /64 workers for 16 shards/);
  assert.match(errors, /tidemark-worker container worker: Tidemark configuration: .*LOG_LEVEL/);
  assert.match(errors, /tidemark-worker container worker: runs under npm/);
});

test('a manifest missing required fields or of an unknown API is rejected', () => {
  const r = validateManifests(
    [
      { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web' }, spec: { template: {} } },
      { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } },
      { apiVersion: 'v1', kind: 'ConfigMap' },
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'shards' }, data: { TIDEMARK_SHARDS: 'many' } },
    ],
    'broken',
  );
  assert.equal(r.ok, false);
  const errors = errorsOf(r).join('\n');
  assert.match(errors, /spec: must have required property '?selector/);
  assert.match(errors, /unknown apiVersion\/kind example.com\/v1 Widget/);
  assert.match(errors, /needs apiVersion, kind and metadata.name/);
  assert.match(errors, /TIDEMARK_SHARDS "many" is not a positive integer/);
});

test('an overlay kubectl cannot render is an error naming it', (t) => {
  const dir = tempDir(t);
  writeFileSync(path.join(dir, 'kustomization.yaml'), 'resources: [missing.yaml]\n');
  const r = validateOverlay(dir);
  assert.equal(r.ok, false);
  assert.match(errorsOf(r).join('\n'), /render: kubectl kustomize .*missing\.yaml/);
});

test('a broken compose file is rejected', (t) => {
  const dir = tempDir(t);
  const good = readFileSync(path.join(DEPLOY_DIR, 'compose.yaml'), 'utf8');
  const broken = good
    .replace('["nats-server", "--jetstream", "--store_dir", "/data", "--http_port", "8222"]', '["nats-server", "--http_port", "8222"]')
    .replace('      redis:\n        condition: service_healthy\n    healthcheck:', '      cache:\n        condition: service_healthy\n    healthcheck:')
    .replace('    stop_grace_period: 30s\n', '    stop_grace_period: 30s\n    restart_policy: always\n')
    .replace('REDIS_URL: redis://redis:6379', 'REDIS_URL: redis://localhost:6379')
    .replace('TIDEMARK_SHARDS: "16"', 'TIDEMARK_SHARDS: "0"');
  assert.notEqual(broken, good);
  writeFileSync(path.join(dir, 'compose.yaml'), broken);
  const r = validateCompose(path.join(dir, 'compose.yaml'));
  assert.equal(r.ok, false);
  const errors = errorsOf(r).join('\n');
  assert.match(errors, /JetStream is not enabled/);
  assert.match(errors, /depends_on cache: no such service/);
  assert.match(errors, /additional properties "restart_policy"/);
  assert.match(errors, /REDIS_URL points at "localhost"/);
  assert.match(errors, /service worker: Tidemark configuration: .*TIDEMARK_SHARDS/);
});

test('a broken Dockerfile is rejected', (t) => {
  const dir = tempDir(t);
  writeFileSync(
    path.join(dir, 'Dockerfile'),
    `FROM node:20-alpine
WORKDIR /app
COPY . .
RUN npm install
HEALTHCHECK CMD curl -f http://localhost:3000/healthz
CMD npm start
`,
  );
  const r = validateDockerfile(path.join(dir, 'Dockerfile'), REPO_ROOT);
  assert.equal(r.ok, false);
  const errors = errorsOf(r).join('\n');
  assert.match(errors, /1 build stage/);
  assert.match(errors, /use node:20-bookworm-slim/);
  assert.match(errors, /use `npm ci`, not `npm install`/);
  assert.match(errors, /HEALTHCHECK/);
  assert.match(errors, /no USER/);
  assert.match(errors, /shell form/);
  assert.match(errors, /Dockerfile.dockerignore/);
});
