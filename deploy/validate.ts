// Validates everything under deploy/ without a cluster or a Docker engine:
//   - every kustomize overlay in deploy/k8s/overlays: rendered by `kubectl kustomize`
//     (kubectl with kustomize v4.1 or later: the overlays use `labels` and `patches`;
//     .ci/run installs kubectl when it is missing), then checked against the Kubernetes
//     schemas (kubernetes-models) and Tidemark's own rules (validation/kube.ts);
//   - deploy/compose.yaml (validation/compose.ts);
//   - deploy/Dockerfile and its ignore file (validation/dockerfile.ts).
//
//   npx tsx deploy/validate.ts                 validate all, exit 1 on any error
//   npx tsx deploy/validate.ts --render prod   print an overlay's rendered YAML

import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { validateCompose } from './validation/compose';
import { validateDockerfile } from './validation/dockerfile';
import { checkObjects } from './validation/kube';
import { parseYamlDocuments, type KObject } from './validation/objects';
import { Findings, formatReport, type Report } from './validation/report';
import { tidemarkConfigCheck } from './validation/tidemark-config';

export const DEPLOY_DIR = path.dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = path.dirname(DEPLOY_DIR);
export const OVERLAYS_DIR = path.join(DEPLOY_DIR, 'k8s', 'overlays');

function scripts(): Record<string, string> | undefined {
  try {
    const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
    return pkg.scripts ?? {};
  } catch {
    return undefined;
  }
}

export class RenderError extends Error {
  override name = 'RenderError';
}

/** kubectl's version and its kustomize's, or null when kubectl is not installed. */
function kubectlVersion(): { kubectl: string; kustomize: string | undefined } | null {
  const r = spawnSync('kubectl', ['version', '--client', '-o', 'json'], { encoding: 'utf8', timeout: 30_000 });
  if (r.error || r.status !== 0) return null;
  try {
    const v = JSON.parse(r.stdout) as { clientVersion?: { gitVersion?: string }; kustomizeVersion?: string };
    return { kubectl: v.clientVersion?.gitVersion ?? 'unknown', kustomize: v.kustomizeVersion };
  } catch {
    return { kubectl: 'unknown', kustomize: undefined };
  }
}

/** The YAML `kubectl kustomize dir` prints; throws RenderError naming what went wrong. */
export function renderYaml(dir: string): string {
  const r = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8', timeout: 60_000, maxBuffer: 64 << 20 });
  if (r.error) {
    const missing = (r.error as NodeJS.ErrnoException).code === 'ENOENT';
    throw new RenderError(missing ? 'kubectl is not installed (.ci/run installs it; or see https://kubernetes.io/docs/tasks/tools/)' : r.error.message);
  }
  if (r.status !== 0) {
    const v = kubectlVersion();
    const old = v && !v.kustomize ? ` (kubectl ${v.kubectl} embeds a kustomize older than v4.1, which these overlays need: use kubectl 1.22 or later)` : '';
    throw new RenderError(`kubectl kustomize ${path.relative(REPO_ROOT, dir) || dir}: ${r.stderr.trim()}${old}`);
  }
  return r.stdout;
}

/** `kubectl kustomize dir`, parsed into objects. */
export function renderOverlay(dir: string): KObject[] {
  return parseYamlDocuments(renderYaml(dir), `kubectl kustomize ${dir}`) as KObject[];
}

/** Validates already-rendered objects (what an overlay produces). */
export function validateManifests(objects: unknown[], target: string): Report {
  const f = new Findings();
  const check = tidemarkConfigCheck();
  if (!check) f.warn(target, 'internal/config/config.ts could not be loaded: environments not checked against the configuration schema');
  const kinds = checkObjects(objects, f, { scripts: scripts(), ...(check ? { checkEnv: check } : {}) });
  const kindList = [...kinds.entries()].map(([k, n]) => (n > 1 ? `${k}x${n}` : k)).join(', ');
  return f.report(target, `${objects.length} objects (${kindList})`);
}

/** Renders an overlay with kubectl kustomize and validates it. */
export function validateOverlay(dir: string): Report {
  const target = `overlay ${path.relative(REPO_ROOT, dir) || dir}`;
  let objects: KObject[];
  try {
    objects = renderOverlay(dir);
  } catch (e) {
    const f = new Findings();
    f.error(target, `render: ${(e as Error).message}`);
    return f.report(target, 'not rendered');
  }
  const r = validateManifests(objects, target);
  const v = kubectlVersion();
  return { ...r, summary: `${r.summary}; kubectl kustomize${v?.kustomize ? ` (kustomize ${v.kustomize})` : ''}` };
}

export function overlayDirs(): string[] {
  if (!existsSync(OVERLAYS_DIR)) return [];
  return readdirSync(OVERLAYS_DIR)
    .map((d) => path.join(OVERLAYS_DIR, d))
    .filter((d) => statSync(d).isDirectory() && existsSync(path.join(d, 'kustomization.yaml')))
    .sort();
}

export function validateAll(): Report[] {
  return [
    ...overlayDirs().map((d) => validateOverlay(d)),
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
    try {
      process.stdout.write(renderYaml(dir));
    } catch (e) {
      console.error((e as Error).message);
      return 1;
    }
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
