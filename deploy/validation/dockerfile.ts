// Lint of deploy/Dockerfile without a Docker engine:
//  1. syntax and instruction arguments: dockerfile-utils' validator (the one
//     behind the VS Code Docker language server), every rule as an error;
//  2. Tidemark's rules: multi-stage, Node 20 on bookworm-slim, production
//     dependencies only (npm ci --omit=dev in a deps stage, copied into the
//     runtime stage), the sources the service runs, a non-root USER, no
//     HEALTHCHECK, an exec-form CMD running node (not npm) as PID 1;
//  3. the build's ignore file (deploy/Dockerfile.dockerignore) lets in what the
//     COPY instructions need and keeps node_modules, .git and tests out.

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { validate as dockerfileValidate, ValidationSeverity } from 'dockerfile-utils';
import { Findings, type Report } from './report';

export interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

/** Splits a Dockerfile into instructions (continuations joined, comments dropped). */
export function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  const lines = text.split(/\r?\n/);
  let buf = '';
  let start = 0;
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    const trimmed = raw.trim();
    if (buf === '' && (trimmed === '' || trimmed.startsWith('#'))) continue;
    if (buf !== '' && trimmed.startsWith('#')) continue;
    if (buf === '') start = i + 1;
    if (trimmed.endsWith('\\')) {
      buf += `${trimmed.slice(0, -1)} `;
      continue;
    }
    buf += trimmed;
    const m = /^(\S+)\s*(.*)$/s.exec(buf);
    if (m) out.push({ keyword: m[1]!.toUpperCase(), args: m[2]!.trim(), line: start });
    buf = '';
  }
  return out;
}

function execForm(args: string): string[] | undefined {
  if (!args.startsWith('[')) return undefined;
  try {
    const v: unknown = JSON.parse(args);
    return Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : undefined;
  } catch {
    return undefined;
  }
}

/** Does a .dockerignore exclude `p` (relative, forward slashes)? Last matching rule wins. */
export function ignored(patterns: string[], p: string): boolean {
  let result = false;
  for (const raw of patterns) {
    const negate = raw.startsWith('!');
    const pat = (negate ? raw.slice(1) : raw).replace(/^\/+/, '').replace(/\/+$/, '');
    if (pat === '') continue;
    const re = new RegExp(
      `^${pat
        .split('/')
        .map((seg) => (seg === '**' ? '(?:.*)' : seg.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')))
        .join('/')
        .replace(/\(\?:\.\*\)\//g, '(?:.*/)?')}(?:/.*)?$`,
    );
    if (re.test(p)) result = !negate;
  }
  return result;
}

export function validateDockerfile(file: string, repoRoot: string): Report {
  const f = new Findings();
  const rel = path.relative(process.cwd(), file) || file;
  if (!existsSync(file)) {
    f.error(rel, 'missing');
    return f.report(rel, 'missing');
  }
  const text = readFileSync(file, 'utf8');

  // 1. dockerfile-utils
  const strict = ValidationSeverity.ERROR;
  const diagnostics = dockerfileValidate(text, {
    deprecatedMaintainer: strict,
    directiveCasing: strict,
    emptyContinuationLine: strict,
    instructionCasing: strict,
    instructionCmdMultiple: strict,
    instructionEntrypointMultiple: strict,
    instructionHealthcheckMultiple: strict,
    instructionJSONInSingleQuotes: strict,
    instructionWorkdirRelative: strict,
  });
  for (const d of diagnostics) {
    const where = `${rel}:${d.range.start.line + 1}`;
    const message = typeof d.message === 'string' ? d.message : d.message.value;
    if (d.severity === 1) f.error(where, message);
    else f.warn(where, message);
  }

  // 2. structure
  const instructions = parseDockerfile(text);
  const globalArgs = new Map<string, string>();
  const stages: { name: string | undefined; base: string; from: number; body: Instruction[] }[] = [];
  for (const ins of instructions) {
    if (ins.keyword === 'FROM') {
      const parts = ins.args.split(/\s+/).filter((a) => !a.startsWith('--'));
      const base = (parts[0] ?? '').replace(/\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?/g, (m, n: string) => globalArgs.get(n) ?? m);
      const asIdx = parts.findIndex((p) => p.toUpperCase() === 'AS');
      stages.push({ name: asIdx >= 0 ? parts[asIdx + 1]?.toLowerCase() : undefined, base, from: ins.line, body: [] });
    } else if (stages.length === 0) {
      if (ins.keyword === 'ARG') {
        const m = /^([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$/.exec(ins.args);
        if (m) globalArgs.set(m[1]!, (m[2] ?? '').replace(/^"(.*)"$/, '$1'));
      }
    } else stages[stages.length - 1]!.body.push(ins);
  }
  const at = (ins: { line: number } | { from: number }) => `${rel}:${'line' in ins ? ins.line : ins.from}`;
  if (stages.length < 2) f.error(rel, `${stages.length} build stage(s): use a deps stage and a runtime stage`);
  const stageNames = new Set(stages.map((s) => s.name).filter((n): n is string => n !== undefined));
  for (const s of stages) {
    if (stageNames.has(s.base.toLowerCase())) continue;
    if (!/^(docker\.io\/)?(library\/)?node:20(\.\d+){0,2}-(bookworm-slim)(@sha256:[0-9a-f]{64})?$/.test(s.base) &&
        !/^(docker\.io\/)?(library\/)?node@sha256:[0-9a-f]{64}$/.test(s.base)) {
      f.error(at(s), `base image "${s.base}": use node:20-bookworm-slim (Node 20 for uWebSockets.js, glibc, not alpine)`);
    }
  }

  const runs = stages.flatMap((s) => s.body.filter((i) => i.keyword === 'RUN').map((i) => ({ stage: s, ins: i })));
  const npmCi = runs.filter(({ ins }) => /\bnpm\s+ci\b/.test(ins.args));
  if (npmCi.length === 0) f.error(rel, 'no `npm ci`: install from package-lock.json');
  for (const { ins } of runs) {
    if (/\bnpm\s+(install|i)\b/.test(ins.args)) f.error(at(ins), 'use `npm ci`, not `npm install`');
    if (/\bnpm\s+ci\b/.test(ins.args) && !/--omit[= ]dev\b|--production\b|--only[= ]prod/.test(ins.args)) {
      f.error(at(ins), '`npm ci` without --omit=dev installs devDependencies');
    }
    if (/\b(curl|wget)\b.*\|\s*(sh|bash)\b/.test(ins.args)) f.error(at(ins), 'pipes a download into a shell');
  }

  const final = stages[stages.length - 1];
  if (final) {
    if (npmCi.some(({ stage }) => stage === final)) f.warn(at(final), 'the runtime stage runs npm ci: install in the deps stage and copy node_modules');
    const copies = final.body.filter((i) => i.keyword === 'COPY' || i.keyword === 'ADD');
    const copiedNodeModules = copies.some((c) => /--from=\S+/.test(c.args) && /node_modules/.test(c.args));
    if (!copiedNodeModules && !npmCi.some(({ stage }) => stage === final)) f.error(at(final), 'the runtime stage gets no node_modules from the deps stage');
    const localSources = copies
      .filter((c) => !/--from=/.test(c.args))
      .flatMap((c) => {
        const parts = execForm(c.args.replace(/--\S+\s*/g, '')) ?? c.args.split(/\s+/).filter((a) => !a.startsWith('--'));
        return parts.slice(0, -1);
      })
      .map((s) => s.replace(/^\.\//, '').replace(/\/$/, ''));
    for (const need of ['package.json', 'cmd', 'internal', 'sql']) {
      if (!localSources.includes(need)) f.error(at(final), `the runtime stage does not COPY ${need}`);
    }
    for (const src of localSources) {
      if (src.includes('*')) continue;
      if (!existsSync(path.join(repoRoot, src))) f.warn(at(final), `COPY source ${src} does not exist in the repository (yet)`);
    }
    for (const c of copies.filter((i) => i.keyword === 'ADD')) {
      if (/https?:\/\//.test(c.args)) f.error(at(c), 'ADD of a URL: download in a RUN step with a checksum, or COPY');
      else f.warn(at(c), 'ADD of local files: prefer COPY');
    }
    const users = final.body.filter((i) => i.keyword === 'USER');
    const user = users[users.length - 1]?.args.split(':')[0];
    if (user === undefined) f.error(at(final), 'the runtime stage has no USER: it would run as root');
    else if (user === 'root' || user === '0') f.error(at(users[users.length - 1]!), 'USER is root');
    else if (!/^\d+$/.test(user)) f.warn(at(users[users.length - 1]!), `USER ${user} is a name: use the uid so runAsNonRoot can verify it`);
    const env = final.body.filter((i) => i.keyword === 'ENV').map((i) => i.args).join(' ');
    if (!/\bNODE_ENV=("?)production\1/.test(env)) f.warn(at(final), 'NODE_ENV=production is not set');
    const cmds = final.body.filter((i) => i.keyword === 'CMD' || i.keyword === 'ENTRYPOINT');
    if (cmds.length === 0) f.error(at(final), 'no CMD or ENTRYPOINT');
    for (const c of cmds) {
      const argv = execForm(c.args);
      if (!argv) f.error(at(c), `${c.keyword} in shell form: /bin/sh becomes PID 1 and SIGTERM never reaches node; use the exec form`);
      else if (['npm', 'npx', 'yarn', 'sh', 'bash'].includes(argv[0]?.split('/').pop() ?? '')) {
        f.error(at(c), `${c.keyword} runs ${argv[0]}: it does not pass SIGTERM on; run node directly`);
      }
    }
  }
  for (const s of stages) {
    for (const h of s.body.filter((i) => i.keyword === 'HEALTHCHECK')) {
      f.error(at(h), 'HEALTHCHECK: Kubernetes probes /healthz and /readyz; keep the image free of it');
    }
  }

  // 3. the ignore file
  const ignoreFile = `${file}.dockerignore`;
  const rootIgnore = path.join(repoRoot, '.dockerignore');
  const ignorePath = existsSync(ignoreFile) ? ignoreFile : existsSync(rootIgnore) ? rootIgnore : undefined;
  if (!ignorePath) f.error(rel, `no ${path.basename(ignoreFile)} beside it (nor a .dockerignore at the repository root)`);
  else {
    const patterns = readFileSync(ignorePath, 'utf8')
      .split(/\r?\n/)
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    for (const p of ['node_modules/x', '.git/config', 'internal/ingest/ingest.test.ts', '.env']) {
      if (!ignored(patterns, p)) f.error(path.relative(process.cwd(), ignorePath), `does not exclude ${p}`);
    }
    for (const p of ['package.json', 'package-lock.json', 'cmd/api/main.ts', 'internal/store/db.ts', 'sql/001_init.sql']) {
      if (ignored(patterns, p)) f.error(path.relative(process.cwd(), ignorePath), `excludes ${p}, which the image needs`);
    }
  }

  return f.report(rel, `${stages.length} stages, ${instructions.length} instructions; dockerfile-utils lint, image rules, ignore file`);
}
