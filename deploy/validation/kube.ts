// Validation of rendered Kubernetes objects:
//  1. schema: the JSON-schema validators of `kubernetes-models` (generated from
//     the Kubernetes OpenAPI specification), per apiVersion and kind;
//  2. strict fields: no field the API does not define (strict-fields.ts);
//  3. consistency: selectors, Service ports, HPA and PDB targets, ConfigMap and
//     Secret references, volume mounts, probes' ports;
//  4. policy: the restricted Pod Security Standard, requests and limits, probes,
//     preStop and grace period, pinned images, GA APIs only, one namespace;
//  5. Tidemark: commands match package.json scripts and keep node as PID 1,
//     worker autoscaling stays within TIDEMARK_SHARDS.

import { createRequire } from 'node:module';
import { isDeepStrictEqual } from 'node:util';
import { findUnknownFields } from './strict-fields';
import { isClusterScoped, objectId, splitImage, type KObject } from './kustomize';
import { Findings } from './report';

type Dict = Record<string, unknown>;
const isDict = (v: unknown): v is Dict => typeof v === 'object' && v !== null && !Array.isArray(v);
const require = createRequire(import.meta.url);

export interface ObjectCheckOptions {
  /** scripts of the repository's package.json, to check container commands against */
  scripts?: Record<string, string>;
  /** every namespaced object must carry this namespace */
  namespace?: string;
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

function podLabelsOf(o: KObject): Record<string, string> {
  if (o.kind === 'Pod') return asStringMap(o.metadata.labels);
  if (o.kind === 'CronJob') return asStringMap(get(o, 'spec.jobTemplate.spec.template.metadata.labels'));
  return asStringMap(get(o, 'spec.template.metadata.labels'));
}

const matches = (selector: Record<string, string>, labels: Record<string, string>): boolean =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

// ---- quantities ------------------------------------------------------------------

const SUFFIX: Record<string, number> = {
  '': 1, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};

export function parseQuantity(q: unknown): number | undefined {
  if (typeof q === 'number') return q;
  if (typeof q !== 'string') return undefined;
  const m = /^([0-9]+(?:\.[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/.exec(q.trim());
  if (!m) return undefined;
  return Number(m[1]) * (SUFFIX[m[2] ?? ''] ?? NaN);
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

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const LABEL_KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** Validates a list of (rendered) objects. Returns the number of objects checked per kind. */
export function checkObjects(input: unknown[], f: Findings, opts: ObjectCheckOptions = {}): Map<string, number> {
  const kinds = new Map<string, number>();
  const objects: KObject[] = [];

  // 1. shape, names, API versions, schema
  input.forEach((raw, i) => {
    const md = get(raw, 'metadata');
    const apiVersion = get(raw, 'apiVersion');
    const kind = get(raw, 'kind');
    const name = get(raw, 'metadata.name');
    if (typeof apiVersion !== 'string' || typeof kind !== 'string' || !isDict(md) || typeof name !== 'string') {
      f.error(`object #${i + 1}`, 'needs apiVersion, kind and metadata.name');
      return;
    }
    const o = raw as KObject;
    const id = objectId(o);
    objects.push(o);
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    if (name.length > 253 || !DNS1123_SUBDOMAIN.test(name)) f.error(id, `name "${name}" is not a DNS-1123 subdomain`);
    if ((kind === 'Service' || kind === 'Namespace') && (name.length > 63 || !DNS1035_LABEL.test(name))) {
      f.error(id, `name "${name}" is not a DNS-1035 label (required for ${kind})`);
    }
    if (/(alpha|beta)\d*$/.test(apiVersion)) f.error(id, `apiVersion ${apiVersion} is not a GA API (deprecated or removed); use the stable version`);
    for (const [where, labels] of [['metadata.labels', md['labels']], ['pod template labels', podLabelsOf(o)]] as const) {
      for (const [k, v] of Object.entries(isDict(labels) ? labels : {})) {
        if (!LABEL_KEY.test(k)) f.error(id, `${where}: invalid label key "${k}"`);
        if (typeof v === 'string' && (v.length > 63 || !LABEL_VALUE.test(v))) f.error(id, `${where}: invalid label value "${v}" for ${k}`);
      }
    }
    const errs = schemaErrors(o);
    if (errs === undefined) f.error(id, `unknown apiVersion/kind ${apiVersion} ${kind} (no schema in kubernetes-models)`);
    else for (const e of errs) f.error(id, `schema: ${e}`);
  });

  const ids = new Set<string>();
  for (const o of objects) {
    const id = objectId(o);
    if (ids.has(id)) f.error(id, 'defined more than once');
    ids.add(id);
  }

  // 2. unknown fields
  const { unknown } = findUnknownFields(objects);
  for (const u of unknown) {
    const o = objects[u.index];
    if (o) f.error(objectId(o), `unknown field ${u.path} (${u.message})`);
  }

  // 3-5. consistency and policy
  const byKind = (k: string) => objects.filter((o) => o.kind === k);
  const workloads = objects.filter((o) => podSpecOf(o) !== undefined);
  const configMaps = new Map(byKind('ConfigMap').map((c) => [c.metadata.name, c]));
  const secrets = new Map(byKind('Secret').map((s) => [s.metadata.name, s]));
  const hpas = byKind('HorizontalPodAutoscaler');
  const services = byKind('Service');
  const findTarget = (kind: unknown, name: unknown, ns: string | undefined) =>
    objects.find((o) => o.kind === kind && o.metadata.name === name && o.metadata.namespace === ns);

  // namespace
  if (opts.namespace !== undefined) {
    for (const o of objects) {
      if (isClusterScoped(o.kind)) continue;
      if (o.metadata.namespace !== opts.namespace) {
        f.error(objectId(o), `namespace is ${o.metadata.namespace ?? '(none)'}, expected ${opts.namespace}`);
      }
    }
    if (!objects.some((o) => o.kind === 'Namespace' && o.metadata.name === opts.namespace)) {
      f.warn('Namespace', `no Namespace object named ${opts.namespace}: it must exist before apply`);
    }
  }

  for (const w of workloads) checkWorkload(w, f, { configMaps, secrets, hpas, services, scripts: opts.scripts, checkEnv: opts.checkEnv });

  for (const s of services) {
    const id = objectId(s);
    const selector = asStringMap(get(s, 'spec.selector'));
    if (get(s, 'spec.type') === 'ExternalName') continue;
    if (Object.keys(selector).length === 0) {
      f.error(id, 'Service without a selector');
      continue;
    }
    const targets = workloads.filter((w) => w.metadata.namespace === s.metadata.namespace && matches(selector, podLabelsOf(w)));
    if (targets.length === 0) {
      f.error(id, `selector ${JSON.stringify(selector)} matches no pod template`);
      continue;
    }
    const containerPorts = targets.flatMap((w) => asDicts(podSpecOf(w)?.['containers']).flatMap((c) => asDicts(c['ports'])));
    for (const p of asDicts(get(s, 'spec.ports'))) {
      const tp = p['targetPort'] ?? p['port'];
      if (typeof tp === 'string' && !containerPorts.some((cp) => cp['name'] === tp)) {
        f.error(id, `targetPort "${tp}" is not a named port of the selected pods`);
      } else if (typeof tp === 'number' && !containerPorts.some((cp) => cp['containerPort'] === tp)) {
        f.warn(id, `targetPort ${tp} is not declared by the selected pods`);
      }
    }
  }

  for (const h of hpas) {
    const id = objectId(h);
    const ref = get(h, 'spec.scaleTargetRef');
    const target = findTarget(get(ref, 'kind'), get(ref, 'name'), h.metadata.namespace);
    const min = Number(get(h, 'spec.minReplicas') ?? 1);
    const max = Number(get(h, 'spec.maxReplicas'));
    if (!target) {
      f.error(id, `scaleTargetRef ${String(get(ref, 'kind'))}/${String(get(ref, 'name'))} is not in the manifests`);
      continue;
    }
    if (get(ref, 'apiVersion') !== undefined && get(ref, 'apiVersion') !== target.apiVersion) {
      f.error(id, `scaleTargetRef.apiVersion ${String(get(ref, 'apiVersion'))} differs from the target's ${target.apiVersion}`);
    }
    if (!(min >= 1) || !(max >= min)) f.error(id, `needs 1 <= minReplicas (${min}) <= maxReplicas (${max})`);
    const metrics = asDicts(get(h, 'spec.metrics'));
    if (metrics.length === 0) f.warn(id, 'no metrics: the default is CPU at 80 %');
    const resourceMetrics = metrics
      .filter((m) => m['type'] === 'Resource' && get(m, 'resource.target.type') === 'Utilization')
      .map((m) => String(get(m, 'resource.name')));
    if (metrics.length === 0) resourceMetrics.push('cpu');
    for (const res of new Set(resourceMetrics)) {
      for (const c of asDicts(podSpecOf(target)?.['containers'])) {
        if (get(c, `resources.requests.${res}`) === undefined) {
          f.error(id, `scales on ${res} utilization but container ${String(c['name'])} of ${objectId(target)} has no ${res} request`);
        }
      }
    }
  }

  for (const p of byKind('PodDisruptionBudget')) {
    const id = objectId(p);
    const selector = asStringMap(get(p, 'spec.selector.matchLabels'));
    const targets = workloads.filter((w) => w.metadata.namespace === p.metadata.namespace && matches(selector, podLabelsOf(w)));
    if (targets.length === 0) f.error(id, `selector ${JSON.stringify(selector)} matches no pod template`);
    const maxUnavailable = get(p, 'spec.maxUnavailable');
    if (maxUnavailable === 0 || maxUnavailable === '0%') f.error(id, 'maxUnavailable 0 blocks every node drain');
    const minAvailable = get(p, 'spec.minAvailable');
    for (const t of targets) {
      const hpa = hpas.find((h) => get(h, 'spec.scaleTargetRef.name') === t.metadata.name && get(h, 'spec.scaleTargetRef.kind') === t.kind);
      const floor = hpa ? Number(get(hpa, 'spec.minReplicas') ?? 1) : Number(get(t, 'spec.replicas') ?? 1);
      if (typeof minAvailable === 'number' && minAvailable >= floor) {
        f.error(id, `minAvailable ${minAvailable} >= the ${floor} replica(s) ${objectId(t)} may run with: node drains would block`);
      }
      if (minAvailable === '100%') f.error(id, 'minAvailable 100% blocks every node drain');
    }
  }

  for (const s of byKind('Secret')) {
    const values = { ...asStringMap(get(s, 'stringData')), ...asStringMap(get(s, 'data')) };
    const placeholders = Object.entries(values).filter(([, v]) => /CHANGE_?ME/i.test(v)).map(([k]) => k);
    if (placeholders.length > 0) f.warn(objectId(s), `placeholder values in ${placeholders.join(', ')}: replace them before use`);
  }

  // Tidemark: worker autoscaling within the shard count
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

interface WorkloadContext {
  configMaps: Map<string, KObject>;
  secrets: Map<string, KObject>;
  hpas: KObject[];
  services: KObject[];
  scripts: Record<string, string> | undefined;
  checkEnv: ((env: Record<string, string>) => string | undefined) | undefined;
}

/** The environment a container gets from the manifests (ConfigMaps, Secrets in the manifests, literal env). */
function containerEnv(c: Dict, ctx: WorkloadContext): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of asDicts(c['envFrom'])) {
    const prefix = typeof e['prefix'] === 'string' ? e['prefix'] : '';
    const cm = ctx.configMaps.get(String(get(e, 'configMapRef.name')));
    if (cm) for (const [k, v] of Object.entries(asStringMap(cm['data']))) env[prefix + k] = v;
    const sec = ctx.secrets.get(String(get(e, 'secretRef.name')));
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

function checkWorkload(w: KObject, f: Findings, ctx: WorkloadContext): void {
  const id = objectId(w);
  const pod = podSpecOf(w)!;
  const podSc = isDict(pod['securityContext']) ? pod['securityContext'] : {};
  const longRunning = LONG_RUNNING.has(w.kind);

  // selector vs template labels
  if (w.kind !== 'Pod' && w.kind !== 'CronJob' && w.kind !== 'Job') {
    const selector = get(w, 'spec.selector');
    const ml = asStringMap(get(selector, 'matchLabels'));
    if (get(selector, 'matchExpressions') !== undefined) f.warn(id, 'selector.matchExpressions is not checked');
    if (Object.keys(ml).length === 0) f.error(id, 'spec.selector.matchLabels is empty');
    else if (!matches(ml, podLabelsOf(w))) f.error(id, `selector ${JSON.stringify(ml)} does not match the pod template labels`);
  }

  const hpa = ctx.hpas.find(
    (h) => get(h, 'spec.scaleTargetRef.kind') === w.kind && get(h, 'spec.scaleTargetRef.name') === w.metadata.name && h.metadata.namespace === w.metadata.namespace,
  );
  if (hpa && get(w, 'spec.replicas') !== undefined) {
    f.error(id, `spec.replicas is set but ${objectId(hpa)} owns the replica count: every apply would reset it`);
  }

  // Pod Security Standard "restricted" (pod level)
  for (const hostNs of ['hostNetwork', 'hostPID', 'hostIPC']) if (pod[hostNs] === true) f.error(id, `${hostNs}: true`);
  const volumes = asDicts(pod['volumes']);
  for (const v of volumes) if (v['hostPath'] !== undefined) f.error(id, `volume ${String(v['name'])} is a hostPath`);
  if (pod['automountServiceAccountToken'] !== false) f.warn(id, 'automountServiceAccountToken is not false: Tidemark needs no Kubernetes API token');

  const serviceSelected = ctx.services.some(
    (s) => s.metadata.namespace === w.metadata.namespace && matches(asStringMap(get(s, 'spec.selector')), podLabelsOf(w)),
  );
  const grace = Number(pod['terminationGracePeriodSeconds'] ?? 30);

  const containers = asDicts(pod['containers']);
  const all = [...asDicts(pod['initContainers']).map((c) => ({ c, init: true })), ...containers.map((c) => ({ c, init: false }))];
  for (const { c, init } of all) {
    const cid = `${id} container ${String(c['name'])}`;
    const sc = isDict(c['securityContext']) ? c['securityContext'] : {};
    const image = c['image'];
    if (typeof image !== 'string' || image === '') f.error(cid, 'no image');
    else {
      const ref = splitImage(image);
      if (ref.digest === undefined && ref.tag === undefined) f.error(cid, `image ${image} has no tag: pin a version`);
      if (ref.tag === 'latest') f.error(cid, `image ${image} uses the "latest" tag: pin a version`);
    }

    // restricted PSS (container level)
    if ((sc['runAsNonRoot'] ?? podSc['runAsNonRoot']) !== true) f.error(cid, 'runAsNonRoot is not true');
    if ((sc['runAsUser'] ?? podSc['runAsUser']) === 0) f.error(cid, 'runAsUser is 0 (root)');
    const seccomp = get(sc, 'seccompProfile.type') ?? get(podSc, 'seccompProfile.type');
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') f.error(cid, 'seccompProfile.type must be RuntimeDefault or Localhost');
    if (sc['allowPrivilegeEscalation'] !== false) f.error(cid, 'allowPrivilegeEscalation is not false');
    if (sc['privileged'] === true) f.error(cid, 'privileged');
    const drop = get(sc, 'capabilities.drop');
    if (!Array.isArray(drop) || !drop.includes('ALL')) f.error(cid, 'capabilities.drop must include ALL');
    const add = get(sc, 'capabilities.add');
    if (Array.isArray(add) && add.some((a) => a !== 'NET_BIND_SERVICE')) f.error(cid, `capabilities.add ${JSON.stringify(add)}`);
    if (sc['readOnlyRootFilesystem'] !== true) f.error(cid, 'readOnlyRootFilesystem is not true');

    // volumes
    const mounts = asDicts(c['volumeMounts']);
    for (const m of mounts) {
      if (!volumes.some((v) => v['name'] === m['name'])) f.error(cid, `volumeMount ${String(m['name'])} has no volume`);
    }
    if (sc['readOnlyRootFilesystem'] === true && !mounts.some((m) => m['mountPath'] === '/tmp')) {
      f.error(cid, 'read-only root filesystem without a writable /tmp (tsx and npm write there)');
    }

    // resources
    for (const r of ['requests.cpu', 'requests.memory', 'limits.memory']) {
      if (get(c, `resources.${r}`) === undefined) f.error(cid, `resources.${r} is missing`);
    }
    for (const res of ['cpu', 'memory']) {
      const req = parseQuantity(get(c, `resources.requests.${res}`));
      const lim = parseQuantity(get(c, `resources.limits.${res}`));
      if (req !== undefined && lim !== undefined && req > lim) f.error(cid, `${res} request is above its limit`);
    }

    // references
    for (const e of asDicts(c['envFrom'])) {
      const cm = get(e, 'configMapRef.name');
      if (typeof cm === 'string' && !ctx.configMaps.has(cm) && get(e, 'configMapRef.optional') !== true) {
        f.error(cid, `envFrom ConfigMap ${cm} is not in the manifests`);
      }
      const sec = get(e, 'secretRef.name');
      if (typeof sec === 'string' && !ctx.secrets.has(sec) && get(e, 'secretRef.optional') !== true) {
        f.warn(cid, `Secret ${sec} is not in the manifests: create it in the namespace before applying`);
      }
    }
    for (const e of asDicts(c['env'])) {
      const cmRef = get(e, 'valueFrom.configMapKeyRef');
      if (isDict(cmRef) && cmRef['optional'] !== true) {
        const cm = ctx.configMaps.get(String(cmRef['name']));
        if (!cm) f.error(cid, `env ${String(e['name'])}: ConfigMap ${String(cmRef['name'])} is not in the manifests`);
        else if (asStringMap(cm['data'])[String(cmRef['key'])] === undefined) {
          f.error(cid, `env ${String(e['name'])}: ConfigMap ${String(cmRef['name'])} has no key ${String(cmRef['key'])}`);
        }
      }
    }

    // probes and ports
    const ports = asDicts(c['ports']);
    for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
      const p = c[probe];
      if (!isDict(p)) continue;
      const port = get(p, 'httpGet.port') ?? get(p, 'tcpSocket.port') ?? get(p, 'grpc.port');
      if (typeof port === 'string' && !ports.some((cp) => cp['name'] === port)) f.error(cid, `${probe} uses port "${port}", not a named port`);
      if (typeof port === 'number' && !ports.some((cp) => cp['containerPort'] === port)) f.warn(cid, `${probe} port ${port} is not declared`);
    }
    if (longRunning && !init) {
      if (!isDict(c['readinessProbe'])) f.error(cid, 'no readinessProbe');
      if (!isDict(c['livenessProbe'])) f.error(cid, 'no livenessProbe');
    }

    // graceful shutdown behind a Service: preStop sleep, then the drain
    if (longRunning && !init && serviceSelected) {
      const pre = get(c, 'lifecycle.preStop');
      if (!isDict(pre)) f.error(cid, 'behind a Service without a lifecycle.preStop: in-flight routing races the shutdown');
      else {
        const cmd = get(pre, 'exec.command');
        const sleep = Number(get(pre, 'sleep.seconds') ?? (Array.isArray(cmd) && cmd[0] === 'sleep' ? cmd[1] : 0));
        if (sleep >= grace) f.error(cid, `preStop sleeps ${sleep}s, not less than terminationGracePeriodSeconds ${grace}s: no time left to drain`);
      }
    }

    // commands: node as PID 1 for long-running roles, and they must match package.json
    checkCommand(c, cid, longRunning && !init, f, ctx.scripts);

    // the environment must pass Tidemark's own configuration schema
    if (ctx.checkEnv && isTidemarkContainer(c)) {
      const problem = ctx.checkEnv(containerEnv(c, ctx));
      if (problem) f.error(cid, `Tidemark configuration: ${problem}`);
    }
  }
}

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
      f.warn(cid, `npm run ${name}: package.json has no script "${name}" (yet)`);
    }
  }
}

/** First path at which two JSON-like values differ, or undefined if equal. */
export function firstDifference(a: unknown, b: unknown, at = ''): string | undefined {
  if (isDeepStrictEqual(a, b)) return undefined;
  if (isDict(a) && isDict(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const d = firstDifference(a[k], b[k], at ? `${at}.${k}` : k);
      if (d !== undefined) return d;
    }
  }
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    for (let i = 0; i < a.length; i++) {
      const d = firstDifference(a[i], b[i], `${at}[${i}]`);
      if (d !== undefined) return d;
    }
  }
  return `${at || '(root)'}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`;
}
