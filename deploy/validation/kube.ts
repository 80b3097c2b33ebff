// Validation of rendered Kubernetes objects (what `kubectl kustomize` prints):
//  1. schema: the JSON-schema validators of `kubernetes-models` (generated from the
//     Kubernetes OpenAPI specification), per apiVersion and kind;
//  2. Tidemark: the environment each Tidemark container gets passes Tidemark's own
//     configuration schema (internal/config/config.ts); the worker autoscaler never goes
//     above TIDEMARK_SHARDS; container commands run what a package.json script runs, with
//     node as PID 1 for long-running roles (npm and sh do not pass SIGTERM on, so the
//     graceful drain would never start).
// Everything else (Pod Security, probes, selectors) is Kubernetes' own business: the API
// server and the namespace's Pod Security admission check it at apply time.

import { createRequire } from 'node:module';
import { objectId, type KObject } from './objects';
import { Findings } from './report';

type Dict = Record<string, unknown>;
const isDict = (v: unknown): v is Dict => typeof v === 'object' && v !== null && !Array.isArray(v);
const require = createRequire(import.meta.url);

export interface ObjectCheckOptions {
  /** scripts of the repository's package.json, to check container commands against */
  scripts?: Record<string, string>;
  /** validates a Tidemark container's environment; returns an error message or undefined */
  checkEnv?: (env: Record<string, string>) => string | undefined;
}

export function get(v: unknown, path: string): unknown {
  let cur = v;
  for (const seg of path.split('.')) {
    if (!isDict(cur)) return undefined;
    cur = cur[seg];
  }
  return cur;
}

const asDicts = (v: unknown): Dict[] => (Array.isArray(v) ? v.filter(isDict) : []);
const asStringMap = (v: unknown): Record<string, string> =>
  isDict(v) ? (Object.fromEntries(Object.entries(v).filter(([, x]) => typeof x === 'string')) as Record<string, string>) : {};

const WORKLOAD_KINDS = new Set(['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job', 'CronJob', 'Pod']);
const LONG_RUNNING = new Set(['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet']);

function podSpecOf(o: KObject): Dict | undefined {
  if (o.kind === 'Pod') return isDict(o['spec']) ? o['spec'] : undefined;
  if (o.kind === 'CronJob') {
    const s = get(o, 'spec.jobTemplate.spec.template.spec');
    return isDict(s) ? s : undefined;
  }
  const s = get(o, 'spec.template.spec');
  return WORKLOAD_KINDS.has(o.kind) && isDict(s) ? s : undefined;
}

// ---- schema (kubernetes-models) -----------------------------------------------------

interface ModelClass {
  new (data: unknown): { validate(): void };
}

function schemaModel(apiVersion: string, kind: string): ModelClass | undefined {
  let mod: Record<string, unknown>;
  try {
    mod = require(`kubernetes-models/${apiVersion}`) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const cls = mod[kind];
  return typeof cls === 'function' ? (cls as ModelClass) : undefined;
}

function schemaErrors(o: KObject): string[] | undefined {
  const Model = schemaModel(o.apiVersion, o.kind);
  if (!Model) return undefined;
  try {
    new Model(structuredClone(o)).validate();
    return [];
  } catch (e) {
    const errs = (e as { errors?: { instancePath?: string; message?: string; params?: unknown }[] }).errors;
    if (!Array.isArray(errs) || errs.length === 0) return [String((e as Error).message)];
    const out = new Set<string>();
    for (const err of errs) {
      const at = (err.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.') || '(root)';
      const params = isDict(err.params) && err.params['missingProperty'] ? ` (${String(err.params['missingProperty'])})` : '';
      out.add(`${at}: ${err.message ?? 'invalid'}${params}`);
    }
    return [...out];
  }
}

// ---- the checks ----------------------------------------------------------------------

/** Validates a list of (rendered) objects. Returns the number of objects checked per kind. */
export function checkObjects(input: unknown[], f: Findings, opts: ObjectCheckOptions = {}): Map<string, number> {
  const kinds = new Map<string, number>();
  const objects: KObject[] = [];

  // 1. shape and schema
  input.forEach((raw, i) => {
    const apiVersion = get(raw, 'apiVersion');
    const kind = get(raw, 'kind');
    if (typeof apiVersion !== 'string' || typeof kind !== 'string' || !isDict(get(raw, 'metadata')) || typeof get(raw, 'metadata.name') !== 'string') {
      f.error(`object #${i + 1}`, 'needs apiVersion, kind and metadata.name');
      return;
    }
    const o = raw as KObject;
    objects.push(o);
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    const errs = schemaErrors(o);
    if (errs === undefined) f.error(objectId(o), `unknown apiVersion/kind ${apiVersion} ${kind} (no schema in kubernetes-models)`);
    else for (const e of errs) f.error(objectId(o), `schema: ${e}`);
  });

  // 2. Tidemark
  const configMaps = new Map(objects.filter((o) => o.kind === 'ConfigMap').map((c) => [c.metadata.name, c]));
  const secrets = new Map(objects.filter((o) => o.kind === 'Secret').map((s) => [s.metadata.name, s]));
  const hpas = objects.filter((o) => o.kind === 'HorizontalPodAutoscaler');
  const workloads = objects.filter((o) => podSpecOf(o) !== undefined);

  for (const w of workloads) {
    const longRunning = LONG_RUNNING.has(w.kind);
    for (const c of asDicts(podSpecOf(w)!['containers'])) {
      const cid = `${objectId(w)} container ${String(c['name'])}`;
      checkCommand(c, cid, longRunning, f, opts.scripts);
      if (opts.checkEnv && isTidemarkContainer(c)) {
        const problem = opts.checkEnv(containerEnv(c, configMaps, secrets));
        if (problem) f.error(cid, `Tidemark configuration: ${problem}`);
      }
    }
  }

  // worker autoscaling within the shard count
  for (const cm of configMaps.values()) {
    const raw = asStringMap(cm['data'])['TIDEMARK_SHARDS'];
    if (raw === undefined) continue;
    const shards = Number(raw);
    if (!Number.isInteger(shards) || shards < 1) {
      f.error(objectId(cm), `TIDEMARK_SHARDS "${raw}" is not a positive integer`);
      continue;
    }
    const users = workloads.filter((w) =>
      asDicts(podSpecOf(w)?.['containers']).some((c) => asDicts(c['envFrom']).some((e) => get(e, 'configMapRef.name') === cm.metadata.name)),
    );
    for (const w of users.filter((u) => u.metadata.labels?.['app.kubernetes.io/component'] === 'worker')) {
      const hpa = hpas.find((h) => get(h, 'spec.scaleTargetRef.name') === w.metadata.name);
      const max = hpa ? Number(get(hpa, 'spec.maxReplicas')) : Number(get(w, 'spec.replicas') ?? 1);
      if (max > shards) {
        f.error(hpa ? objectId(hpa) : objectId(w), `up to ${max} workers for ${shards} shards (TIDEMARK_SHARDS): workers beyond the shard count stay idle`);
      }
    }
  }

  return kinds;
}

/** The environment a container gets from the manifests (ConfigMaps, Secrets in the manifests, literal env). */
function containerEnv(c: Dict, configMaps: Map<string, KObject>, secrets: Map<string, KObject>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of asDicts(c['envFrom'])) {
    const prefix = typeof e['prefix'] === 'string' ? e['prefix'] : '';
    const cm = configMaps.get(String(get(e, 'configMapRef.name')));
    if (cm) for (const [k, v] of Object.entries(asStringMap(cm['data']))) env[prefix + k] = v;
    const sec = secrets.get(String(get(e, 'secretRef.name')));
    if (sec) {
      for (const [k, v] of Object.entries(asStringMap(sec['data']))) env[prefix + k] = Buffer.from(v, 'base64').toString('utf8');
      for (const [k, v] of Object.entries(asStringMap(sec['stringData']))) env[prefix + k] = v;
    }
  }
  for (const e of asDicts(c['env'])) if (typeof e['value'] === 'string') env[String(e['name'])] = e['value'];
  return env;
}

const isTidemarkContainer = (c: Dict): boolean => {
  const cmd = [...(Array.isArray(c['command']) ? c['command'] : []), ...(Array.isArray(c['args']) ? c['args'] : [])].map(String);
  return cmd.includes('tsx') || (cmd[0] === 'npm' && cmd[1] === 'run') || /(^|\/)tidemark(:|@|$)/.test(String(c['image'] ?? ''));
};

/** Commands: node as PID 1 for long-running roles, and they must run what a package.json script runs. */
function checkCommand(c: Dict, cid: string, longRunning: boolean, f: Findings, scripts: Record<string, string> | undefined): void {
  const cmd = [...(Array.isArray(c['command']) ? c['command'] : []), ...(Array.isArray(c['args']) ? c['args'] : [])].map(String);
  if (cmd.length === 0) return;
  const exe = cmd[0]!.split('/').pop()!;
  if (longRunning && ['npm', 'npx', 'yarn', 'pnpm', 'sh', 'bash'].includes(exe)) {
    f.error(cid, `runs under ${exe}: it does not pass SIGTERM on, so the graceful drain never starts; run node directly (node --import tsx <entry>)`);
  }
  if (!scripts) return;
  if (exe === 'node') {
    const importIdx = cmd.indexOf('--import');
    const entry = cmd.slice(1).find((a, i) => !a.startsWith('-') && cmd[i] !== '--import');
    if (importIdx >= 0 && cmd[importIdx + 1] === 'tsx' && entry !== undefined) {
      const script = Object.entries(scripts).find(([, v]) => v.trim() === `tsx ${entry}`);
      if (!script) f.error(cid, `runs ${entry}, which no package.json script runs with tsx: entry points drifted`);
    }
  } else if (exe === 'npm' && (cmd[1] === 'run' || cmd[1] === 'run-script')) {
    const name = cmd.slice(2).find((a) => !a.startsWith('-'));
    if (name !== undefined && scripts[name] === undefined) {
      f.error(cid, `npm run ${name}: package.json has no script "${name}"`);
    }
  }
}
