// Validates everything under deploy/ without a cluster or a Docker engine:
//   - every kustomize overlay in deploy/k8s/overlays: rendered by the built-in
//     renderer (validation/kustomize.ts) and, when kubectl is on PATH, by
//     `kubectl kustomize` too (both must agree), then checked against the
//     Kubernetes schemas, for unknown fields, and against the deployment policy
//     (validation/kube.ts);
//   - deploy/compose.yaml (validation/compose.ts);
//   - deploy/Dockerfile and its ignore file (validation/dockerfile.ts).
//
//   npx tsx deploy/validate.ts                 validate all, exit 1 on any error
//   npx tsx deploy/validate.ts --render prod   print an overlay's rendered YAML
//   TIDEMARK_KUBECTL=off|auto|require          use of kubectl (default auto)

import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { validateCompose } from './validation/compose';
import { validateDockerfile } from './validation/dockerfile';
import { checkObjects, firstDifference } from './validation/kube';
import { KustomizeError, objectId, parseYamlDocuments, renderKustomization, type KObject } from './validation/kustomize';
import { Findings, formatReport, type Report } from './validation/report';
import { tidemarkConfigCheck } from './validation/tidemark-config';

export const DEPLOY_DIR = path.dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = path.dirname(DEPLOY_DIR);
export const OVERLAYS_DIR = path.join(DEPLOY_DIR, 'k8s', 'overlays');

export type KubectlMode = 'off' | 'auto' | 'require';

export interface OverlayOptions {
  kubectl?: KubectlMode;
}

function scripts(): Record<string, string> | undefined {
  try {
    const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
    return pkg.scripts ?? {};
  } catch {
    return undefined;
  }
}

function kubectlMode(opt: KubectlMode | undefined): KubectlMode {
  const env = process.env['TIDEMARK_KUBECTL'];
  if (opt) return opt;
  return env === 'off' || env === 'require' ? env : 'auto';
}

let kubectlInfo: { available: boolean; kustomize?: string } | undefined;
function kubectl(): { available: boolean; kustomize?: string } {
  if (kubectlInfo) return kubectlInfo;
  const r = spawnSync('kubectl', ['version', '--client', '-o', 'json'], { encoding: 'utf8', timeout: 30_000 });
  if (r.error || r.status !== 0) return (kubectlInfo = { available: false });
  try {
    const v = JSON.parse(r.stdout) as { kustomizeVersion?: string };
    return (kubectlInfo = { available: true, ...(v.kustomizeVersion ? { kustomize: v.kustomizeVersion } : {}) });
  } catch {
    return (kubectlInfo = { available: true });
  }
}

/** `kubectl kustomize dir`, parsed; undefined when kubectl is not installed. */
export function renderWithKubectl(dir: string): KObject[] | undefined {
  if (!kubectl().available) return undefined;
  const r = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8', timeout: 60_000, maxBuffer: 64 << 20 });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new KustomizeError(`kubectl kustomize ${dir}: ${r.stderr.trim()}`);
  return parseYamlDocuments(r.stdout, `kubectl kustomize ${dir}`) as KObject[];
}

/** Validates already-rendered objects (what an overlay produces). */
export function validateManifests(objects: unknown[], target: string, namespace?: string): Report {
  const f = new Findings();
  const check = tidemarkConfigCheck();
  if (!check) f.warn(target, 'internal/config/config.ts could not be loaded: environments not checked against the configuration schema');
  const kinds = checkObjects(objects, f, {
    scripts: scripts(),
    ...(namespace !== undefined ? { namespace } : {}),
    ...(check ? { checkEnv: check } : {}),
  });
  const kindList = [...kinds.entries()].map(([k, n]) => (n > 1 ? `${k}x${n}` : k)).join(', ');
  return f.report(target, `${objects.length} objects (${kindList})`);
}

function overlayNamespace(dir: string): string | undefined {
  try {
    const k = parseYamlDocuments(readFileSync(path.join(dir, 'kustomization.yaml'), 'utf8'), dir)[0] as { namespace?: unknown };
    return typeof k.namespace === 'string' ? k.namespace : undefined;
  } catch {
    return undefined;
  }
}

/** Renders an overlay (built-in renderer, cross-checked with kubectl when present) and validates it. */
export function validateOverlay(dir: string, opts: OverlayOptions = {}): Report {
  const target = `overlay ${path.relative(REPO_ROOT, dir) || dir}`;
  const mode = kubectlMode(opts.kubectl);
  const f = new Findings();
  let objects: KObject[];
  try {
    objects = renderKustomization(dir);
  } catch (e) {
    f.error(target, `render: ${(e as Error).message}`);
    return f.report(target, 'not rendered');
  }

  let renderer = 'built-in renderer';
  if (mode !== 'off') {
    const info = kubectl();
    if (!info.available) {
      if (mode === 'require') f.error(target, 'kubectl is not installed (TIDEMARK_KUBECTL=require)');
      renderer += ' (kubectl not found: no cross-check)';
    } else {
      try {
        const reference = renderWithKubectl(dir) ?? [];
        const mine = new Map(objects.map((o) => [objectId(o), o]));
        const theirs = new Map(reference.map((o) => [objectId(o), o]));
        for (const id of theirs.keys()) if (!mine.has(id)) f.error(target, `kubectl kustomize renders ${id}, the built-in renderer does not`);
        for (const [id, o] of mine) {
          const ref = theirs.get(id);
          if (!ref) f.error(target, `the built-in renderer renders ${id}, kubectl kustomize does not`);
          else {
            const diff = firstDifference(o, ref);
            if (diff) f.error(target, `renderers disagree on ${id} at ${diff}`);
          }
        }
        renderer += ` = kubectl kustomize${info.kustomize ? ` (kustomize ${info.kustomize})` : ''}`;
      } catch (e) {
        f.error(target, `kubectl kustomize failed: ${(e as Error).message}`);
      }
    }
  }

  const ns = overlayNamespace(dir);
  const r = validateManifests(objects, target, ns);
  const findings = [...f.list, ...r.findings];
  return {
    target,
    ok: findings.every((x) => x.level !== 'error'),
    findings,
    summary: `${r.summary}; ${renderer}`,
  };
}

export function overlayDirs(): string[] {
  if (!existsSync(OVERLAYS_DIR)) return [];
  return readdirSync(OVERLAYS_DIR)
    .map((d) => path.join(OVERLAYS_DIR, d))
    .filter((d) => statSync(d).isDirectory() && existsSync(path.join(d, 'kustomization.yaml')))
    .sort();
}

export function validateAll(opts: OverlayOptions = {}): Report[] {
  return [
    ...overlayDirs().map((d) => validateOverlay(d, opts)),
    validateCompose(path.join(DEPLOY_DIR, 'compose.yaml')),
    validateDockerfile(path.join(DEPLOY_DIR, 'Dockerfile'), REPO_ROOT),
  ];
}

function main(argv: string[]): number {
  const renderIdx = argv.indexOf('--render');
  if (renderIdx >= 0) {
    const name = argv[renderIdx + 1];
    if (!name) {
      console.error('usage: validate.ts --render <overlay>');
      return 2;
    }
    const dir = existsSync(name) ? path.resolve(name) : path.join(OVERLAYS_DIR, name);
    const objects = renderKustomization(dir);
    process.stdout.write(objects.map((o) => stringify(o, { lineWidth: 0 })).join('---\n'));
    return 0;
  }
  const t0 = Date.now();
  const reports = validateAll();
  for (const r of reports) console.log(formatReport(r));
  const failed = reports.filter((r) => !r.ok);
  const errors = reports.reduce((n, r) => n + r.findings.filter((x) => x.level === 'error').length, 0);
  const warnings = reports.reduce((n, r) => n + r.findings.filter((x) => x.level === 'warning').length, 0);
  console.log(
    `\n${failed.length === 0 ? 'deploy/ is valid' : 'deploy/ is INVALID'}: ${reports.length - failed.length}/${reports.length} targets pass, ` +
      `${errors} error(s), ${warnings} warning(s), ${((Date.now() - t0) / 1000).toFixed(1)}s`,
  );
  return failed.length === 0 ? 0 : 1;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
