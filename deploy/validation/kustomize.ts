// A small kustomize renderer for the subset of kustomization.yaml that Tidemark's
// overlays use. It exists so validation runs where no kustomize binary is
// installed; where `kubectl` is on PATH, deploy/validate.ts renders with
// `kubectl kustomize` as well and requires both renderings to be equal.
//
// Supported (applied in kustomize's own order: patches, namespace, labels, images):
//   resources      files (multi-document YAML) and directories with a kustomization
//   patches        strategic-merge patches given by `path` or inline `patch`,
//                  targeted by the patch's own apiVersion/kind/metadata.name;
//                  `$patch: delete` (whole object or list item), `$patch: replace`,
//                  and `null` to remove a field
//   namespace      set on every namespaced object; a Namespace object is renamed
//   labels         pairs + includeTemplates (includeSelectors must be false)
//   images         name -> newName / newTag / digest on containers and initContainers
// Anything else is rejected with an error naming the field: the renderer never
// silently ignores a feature it does not implement.

import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

export type KObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
};

export class KustomizeError extends Error {
  override name = 'KustomizeError';
}

const KUSTOMIZATION_FILES = ['kustomization.yaml', 'kustomization.yml', 'Kustomization'];

const SUPPORTED_FIELDS = new Set(['apiVersion', 'kind', 'resources', 'namespace', 'labels', 'images', 'patches']);

// Kinds that are not namespaced (the ones a small app could plausibly ship).
const CLUSTER_SCOPED = new Set([
  'Namespace', 'ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'PersistentVolume',
  'StorageClass', 'PriorityClass', 'IngressClass', 'RuntimeClass', 'ValidatingWebhookConfiguration',
  'MutatingWebhookConfiguration', 'APIService', 'CSIDriver', 'Node',
]);

// Where `labels[].includeTemplates` puts the labels (kustomize's field specs).
const TEMPLATE_LABEL_PATHS: Record<string, string[][]> = {
  Deployment: [['spec', 'template', 'metadata', 'labels']],
  ReplicaSet: [['spec', 'template', 'metadata', 'labels']],
  DaemonSet: [['spec', 'template', 'metadata', 'labels']],
  StatefulSet: [['spec', 'template', 'metadata', 'labels']],
  Job: [['spec', 'template', 'metadata', 'labels']],
  ReplicationController: [['spec', 'template', 'metadata', 'labels']],
  CronJob: [
    ['spec', 'jobTemplate', 'metadata', 'labels'],
    ['spec', 'jobTemplate', 'spec', 'template', 'metadata', 'labels'],
  ],
};

type Dict = Record<string, unknown>;

const isDict = (v: unknown): v is Dict => typeof v === 'object' && v !== null && !Array.isArray(v);

export function isClusterScoped(kind: string): boolean {
  return CLUSTER_SCOPED.has(kind);
}

export function objectId(o: { kind?: unknown; metadata?: { name?: unknown; namespace?: unknown } }): string {
  const ns = o.metadata?.namespace ? `${String(o.metadata.namespace)}/` : '';
  return `${String(o.kind)}/${ns}${String(o.metadata?.name)}`;
}

/** Parses a multi-document YAML text into plain objects, skipping empty documents. */
export function parseYamlDocuments(text: string, source: string): unknown[] {
  const docs = parseAllDocuments(text, { merge: true, prettyErrors: true });
  if (!Array.isArray(docs)) throw new KustomizeError(`${source}: not a YAML stream`);
  const out: unknown[] = [];
  for (const doc of docs) {
    if (doc.errors.length > 0) {
      throw new KustomizeError(`${source}: YAML error: ${doc.errors.map((e) => e.message).join('; ')}`);
    }
    const value: unknown = doc.toJS({ maxAliasCount: 1000 });
    if (value !== null && value !== undefined) out.push(value);
  }
  return out;
}

function asKObject(v: unknown, source: string): KObject {
  if (!isDict(v)) throw new KustomizeError(`${source}: a resource must be a mapping`);
  const md = v['metadata'];
  if (typeof v['apiVersion'] !== 'string' || typeof v['kind'] !== 'string' || !isDict(md) || typeof md['name'] !== 'string') {
    throw new KustomizeError(`${source}: a resource needs apiVersion, kind and metadata.name`);
  }
  return v as KObject;
}

function findKustomization(dir: string): string {
  for (const f of KUSTOMIZATION_FILES) {
    const p = path.join(dir, f);
    if (existsSync(p)) return p;
  }
  throw new KustomizeError(`${dir}: no kustomization.yaml`);
}

/** Renders the kustomization in `dir` and returns its objects. */
export function renderKustomization(dir: string): KObject[] {
  return render(path.resolve(dir), []);
}

function render(dir: string, stack: string[]): KObject[] {
  if (stack.includes(dir)) throw new KustomizeError(`cycle in resources: ${[...stack, dir].join(' -> ')}`);
  const file = findKustomization(dir);
  const docs = parseYamlDocuments(readFileSync(file, 'utf8'), file);
  if (docs.length !== 1 || !isDict(docs[0])) throw new KustomizeError(`${file}: must hold one mapping`);
  const k = docs[0];
  for (const key of Object.keys(k)) {
    if (!SUPPORTED_FIELDS.has(key)) {
      throw new KustomizeError(`${file}: field "${key}" is not supported by deploy/validation/kustomize.ts`);
    }
  }
  if (k['kind'] !== undefined && k['kind'] !== 'Kustomization') throw new KustomizeError(`${file}: kind must be Kustomization`);

  // resources
  let objects: KObject[] = [];
  for (const entry of listOf(k['resources'], file, 'resources')) {
    if (typeof entry !== 'string') throw new KustomizeError(`${file}: resources entries must be strings`);
    if (/^[a-z]+:\/\//i.test(entry) || entry.startsWith('git@')) {
      throw new KustomizeError(`${file}: remote resource "${entry}" is not supported`);
    }
    const p = path.resolve(dir, entry);
    if (!existsSync(p)) throw new KustomizeError(`${file}: resource "${entry}" does not exist`);
    if (statSync(p).isDirectory()) {
      objects.push(...render(p, [...stack, dir]));
    } else {
      for (const d of parseYamlDocuments(readFileSync(p, 'utf8'), p)) objects.push(asKObject(d, p));
    }
  }
  ensureUnique(objects, file);

  // patches (strategic merge only)
  for (const [i, entry] of listOf(k['patches'], file, 'patches').entries()) {
    if (!isDict(entry)) throw new KustomizeError(`${file}: patches[${i}] must be a mapping`);
    for (const key of Object.keys(entry)) {
      if (key !== 'path' && key !== 'patch') {
        throw new KustomizeError(`${file}: patches[${i}].${key} is not supported (only path or patch, no target/options)`);
      }
    }
    let text: string;
    let source: string;
    if (typeof entry['path'] === 'string') {
      source = path.resolve(dir, entry['path']);
      if (!existsSync(source)) throw new KustomizeError(`${file}: patch file "${entry['path']}" does not exist`);
      text = readFileSync(source, 'utf8');
    } else if (typeof entry['patch'] === 'string') {
      source = `${file} patches[${i}]`;
      text = entry['patch'];
    } else {
      throw new KustomizeError(`${file}: patches[${i}] needs path or patch`);
    }
    const patchDocs = parseYamlDocuments(text, source);
    if (patchDocs.length !== 1) throw new KustomizeError(`${source}: one patch per file`);
    const patch = patchDocs[0];
    if (Array.isArray(patch)) throw new KustomizeError(`${source}: JSON 6902 patches are not supported`);
    objects = applyStrategicMergePatch(objects, asKObject(patch, source), source);
  }

  // namespace
  const ns = k['namespace'];
  if (ns !== undefined) {
    if (typeof ns !== 'string' || ns === '') throw new KustomizeError(`${file}: namespace must be a string`);
    for (const o of objects) {
      if (o.kind === 'Namespace') o.metadata.name = ns;
      else if (!isClusterScoped(o.kind)) o.metadata.namespace = ns;
    }
  }

  // labels
  for (const [i, entry] of listOf(k['labels'], file, 'labels').entries()) {
    if (!isDict(entry)) throw new KustomizeError(`${file}: labels[${i}] must be a mapping`);
    for (const key of Object.keys(entry)) {
      if (!['pairs', 'includeSelectors', 'includeTemplates'].includes(key)) {
        throw new KustomizeError(`${file}: labels[${i}].${key} is not supported`);
      }
    }
    if (entry['includeSelectors'] === true) {
      throw new KustomizeError(`${file}: labels[${i}].includeSelectors: true is not supported (selectors are immutable; keep them explicit)`);
    }
    const pairs = entry['pairs'];
    if (!isDict(pairs)) throw new KustomizeError(`${file}: labels[${i}].pairs must be a mapping`);
    for (const [lk, lv] of Object.entries(pairs)) {
      if (typeof lv !== 'string') throw new KustomizeError(`${file}: label ${lk} must be a string (quote it)`);
    }
    const strPairs = pairs as Record<string, string>;
    for (const o of objects) {
      o.metadata.labels = { ...(o.metadata.labels ?? {}), ...strPairs };
      if (entry['includeTemplates'] === true) {
        for (const p of TEMPLATE_LABEL_PATHS[o.kind] ?? []) {
          const target = ensurePath(o, p);
          Object.assign(target, strPairs);
        }
      }
    }
  }

  // images
  for (const [i, entry] of listOf(k['images'], file, 'images').entries()) {
    if (!isDict(entry) || typeof entry['name'] !== 'string') throw new KustomizeError(`${file}: images[${i}] needs a name`);
    for (const key of Object.keys(entry)) {
      if (!['name', 'newName', 'newTag', 'digest'].includes(key)) throw new KustomizeError(`${file}: images[${i}].${key} is not supported`);
    }
    for (const key of ['newName', 'newTag', 'digest']) {
      if (entry[key] !== undefined && typeof entry[key] !== 'string') {
        throw new KustomizeError(`${file}: images[${i}].${key} must be a string (quote it)`);
      }
    }
    const img = entry as { name: string; newName?: string; newTag?: string; digest?: string };
    for (const o of objects) forEachContainer(o, (c) => {
      if (typeof c['image'] === 'string') c['image'] = retag(c['image'], img);
    });
  }

  return objects;
}

function listOf(v: unknown, file: string, field: string): unknown[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new KustomizeError(`${file}: ${field} must be a list`);
  return v;
}

function ensureUnique(objects: KObject[], file: string): void {
  const seen = new Set<string>();
  for (const o of objects) {
    const id = objectId(o);
    if (seen.has(id)) throw new KustomizeError(`${file}: resource ${id} is defined twice`);
    seen.add(id);
  }
}

function ensurePath(o: Dict, p: string[]): Dict {
  let cur: Dict = o;
  for (const seg of p) {
    const next = cur[seg];
    if (isDict(next)) cur = next;
    else {
      const created: Dict = {};
      cur[seg] = created;
      cur = created;
    }
  }
  return cur;
}

/** Calls fn on every container and init container of every pod template in o. */
export function forEachContainer(o: unknown, fn: (c: Dict) => void): void {
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (isDict(v)) {
      for (const [key, child] of Object.entries(v)) {
        if ((key === 'containers' || key === 'initContainers') && Array.isArray(child)) {
          for (const c of child) if (isDict(c)) fn(c);
        } else walk(child);
      }
    }
  };
  walk(o);
}

export function splitImage(ref: string): { name: string; tag?: string; digest?: string } {
  let rest = ref;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
  }
  let tag: string | undefined;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
  }
  return { name: rest, ...(tag !== undefined ? { tag } : {}), ...(digest !== undefined ? { digest } : {}) };
}

function retag(ref: string, img: { name: string; newName?: string; newTag?: string; digest?: string }): string {
  const cur = splitImage(ref);
  if (cur.name !== img.name) return ref;
  const name = img.newName ?? cur.name;
  if (img.digest !== undefined) return `${name}@${img.digest}`;
  if (img.newTag !== undefined) return `${name}:${img.newTag}`;
  if (cur.digest !== undefined) return `${name}@${cur.digest}`;
  return cur.tag !== undefined ? `${name}:${cur.tag}` : name;
}

// ---- strategic merge patch ----------------------------------------------------

// Merge keys of the lists a patch of ours may touch (from the Kubernetes API's
// x-kubernetes-patch-merge-key). Lists not named here are replaced whole.
const MERGE_KEYS: Record<string, string | ((items: Dict[]) => string)> = {
  containers: 'name',
  initContainers: 'name',
  ephemeralContainers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  imagePullSecrets: 'name',
  hostAliases: 'ip',
  topologySpreadConstraints: 'topologyKey',
  // container ports merge on containerPort, Service ports on port
  ports: (items) => (items.every((i) => 'containerPort' in i) ? 'containerPort' : 'port'),
};

function applyStrategicMergePatch(objects: KObject[], patch: KObject, source: string): KObject[] {
  const matches = objects.filter(
    (o) =>
      o.kind === patch.kind &&
      o.metadata.name === patch.metadata.name &&
      (patch.metadata.namespace === undefined || o.metadata.namespace === patch.metadata.namespace),
  );
  if (matches.length !== 1) {
    throw new KustomizeError(`${source}: patch target ${objectId(patch)} matches ${matches.length} resources, expected 1`);
  }
  const target = matches[0]!;
  if (target.apiVersion !== patch.apiVersion) {
    throw new KustomizeError(`${source}: patch apiVersion ${patch.apiVersion} differs from the target's ${target.apiVersion}`);
  }
  const directive = (patch as Dict)['$patch'];
  if (directive === 'delete') return objects.filter((o) => o !== target);
  const merged = mergeValue(target, patch, source, []) as KObject;
  return objects.map((o) => (o === target ? merged : o));
}

function mergeValue(base: unknown, patch: unknown, source: string, at: string[]): unknown {
  if (isDict(patch)) {
    const directive = patch['$patch'];
    if (directive === 'replace') {
      const { $patch: _ignored, ...rest } = patch;
      return stripDirectives(rest, source, at);
    }
    if (directive !== undefined && directive !== 'merge') {
      throw new KustomizeError(`${source}: $patch: ${String(directive)} at ${at.join('.') || '(root)'} is not supported here`);
    }
    const out: Dict = isDict(base) ? { ...base } : {};
    for (const [key, pv] of Object.entries(patch)) {
      if (key === '$patch') continue;
      if (key.startsWith('$')) throw new KustomizeError(`${source}: directive ${key} at ${[...at, key].join('.')} is not supported`);
      if (pv === null) delete out[key];
      else if (Array.isArray(pv)) out[key] = mergeList(out[key], pv, key, source, [...at, key]);
      else out[key] = mergeValue(out[key], pv, source, [...at, key]);
    }
    return out;
  }
  return patch;
}

function mergeList(base: unknown, patch: unknown[], key: string, source: string, at: string[]): unknown[] {
  const keySpec = MERGE_KEYS[key];
  const items = patch.filter(isDict);
  if (keySpec === undefined || items.length !== patch.length || !Array.isArray(base)) {
    return patch.map((p, i) => stripDirectives(p, source, [...at, String(i)]));
  }
  const mergeKey = typeof keySpec === 'string' ? keySpec : keySpec(items);
  for (const item of items) {
    if (item[mergeKey] === undefined) throw new KustomizeError(`${source}: ${at.join('.')} item without merge key ${mergeKey}`);
  }
  const sameKey = (a: unknown, b: Dict) => isDict(a) && a[mergeKey] === b[mergeKey];
  const deletions = items.filter((i) => i['$patch'] === 'delete');
  const patchItems = items.filter((i) => i['$patch'] !== 'delete');
  const original = base.filter((b) => !deletions.some((d) => sameKey(b, d)));
  // Items named in the patch, merged with their originals, in patch order ...
  const merged = patchItems.map((p) => {
    const at2 = [...at, `${mergeKey}=${String(p[mergeKey])}`];
    const orig = original.find((b) => sameKey(b, p));
    return orig === undefined ? stripDirectives(p, source, at2) : mergeValue(orig, p, source, at2);
  });
  // ... and the original items the patch does not name, in original order,
  // interleaved as apimachinery's strategic merge does (mergeSortedSlice): an
  // original item goes before a patch item only if it came first originally.
  const serverOnly = original.filter((b) => !patchItems.some((p) => sameKey(b, p)));
  const order = (x: unknown) => base.findIndex((b) => isDict(x) && sameKey(b, x));
  const out: unknown[] = [];
  let i = 0;
  let j = 0;
  while (i < serverOnly.length || j < merged.length) {
    if (j >= merged.length) out.push(serverOnly[i++]);
    else if (i >= serverOnly.length) out.push(merged[j++]);
    else {
      const li = order(serverOnly[i]);
      const ri = order(merged[j]);
      if (li >= 0 && ri >= 0 && li < ri) out.push(serverOnly[i++]);
      else out.push(merged[j++]);
    }
  }
  return out;
}

function stripDirectives(v: unknown, source: string, at: string[]): unknown {
  if (Array.isArray(v)) return v.map((x, i) => stripDirectives(x, source, [...at, String(i)]));
  if (isDict(v)) {
    const out: Dict = {};
    for (const [k, x] of Object.entries(v)) {
      if (k.startsWith('$')) throw new KustomizeError(`${source}: directive ${k} at ${[...at, k].join('.')} is not supported`);
      if (x !== null) out[k] = stripDirectives(x, source, [...at, k]);
    }
    return out;
  }
  return v;
}
