// The floors of the code: every folder of internal/ (and cmd/) stands on one floor, and a file
// imports only its own folder and folders on floors below its own; no two files import each
// other, directly or around a loop. This test reads the imports of every non-test .ts file
// under internal/ and cmd/ (`import`, `import type`, `export ... from`, `import()`; type-only
// imports count: a type is a dependency too) and fails naming the file and the import that
// breaks a rule. It needs no service (it reads source files only). It also holds every .ts
// file under internal/, tests included, to MAX_LINES lines: a longer one is split by concern
// (nothing under internal/ is generated: the dashboard is bundled in memory at run time).
//
// The floors, bottom up, as the code is:
//
//  0 model, obs, http, dashboard: the shapes that cross processes (model/event.ts), logs and
//    metrics, the HTTP server and its error types, the browser dashboard. They import nothing
//    of ours.
//  1 sessionize, enrich: the pure domain rules over model's shapes.
//  2 store: PostgreSQL (it writes sessionize's session states).
//  3 redis, bus: the other services' clients (both report store's ServiceUnreachableError).
//    bus also holds the JetStream message, the contract between the two roles: its format
//    (bus/message.ts) and what in it PostgreSQL can store (bus/storable.ts, over enrich's URL
//    parsing).
//  4 auth, ratelimit: who may call, and how often (over redis and store).
//  5 ingest, worker, live: the edges of the roles, the API's write path, the worker's
//    consumer, live push. On one floor, so neither role imports the other: what they share
//    is below them (bus's message, model's shapes).
//  6 config: the environment's schema. Its defaults and allowed values come from the modules
//    it configures (ingest's client-address headers and event-time bound, live's slots), so
//    it stands above them; nothing below it reads the configuration: those modules take
//    their options as arguments (from app/runtime.ts).
//  7 query: the read side's shared pieces (parameters, periods, filters, the read planner,
//    budget, admission, errors, the read transaction); query/db.ts reads
//    TIDEMARK_EXACT_VISITORS_MAX through config.
//  8 read: the read guard and its context, which every read route stands behind (auth, the
//    read rate limit, the project check, admission, the query budget).
//  9 insights, export, jobs: what the read routes answer, and the periodic jobs (the
//    worker's; the salt rotation uses ingest's salt keeper).
// 10 app, cli: the wiring (runtime, routes, API threads) and the admin commands.
// 11 cmd: the entry points.
//
// A new folder needs a floor here (the test names it); a folder that needs one above its own
// moves up only if nothing it stands under imports it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const FLOORS: readonly (readonly string[])[] = [
  ['model', 'obs', 'http', 'dashboard'],
  ['sessionize', 'enrich'],
  ['store'],
  ['redis', 'bus'],
  ['auth', 'ratelimit'],
  ['ingest', 'worker', 'live'],
  ['config'],
  ['query'],
  ['read'],
  ['insights', 'export', 'jobs'],
  ['app', 'cli'],
  ['cmd'],
];

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** One import of a file: as written, and the repository file it resolves to (posix path). */
interface Import {
  spec: string;
  target: string;
}

/** Repository path (posix) -> its relative imports. */
type ImportGraph = Map<string, Import[]>;

/** The most lines a .ts file under internal/ may have, tests included. */
const MAX_LINES = 500;

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== 'node_modules') sourceFiles(p, out);
    } else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && !e.name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** Every .ts file under `dir`, tests and declarations included (node_modules aside). */
function tsFiles(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== 'node_modules') tsFiles(p, out);
    } else if (e.name.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** A text's lines, as an editor numbers them (a last line without a newline counts too). */
const lineCount = (text: string): number => (text === '' ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0));

const posix = (p: string) => p.split(sep).join('/');
const isFile = (p: string) => existsSync(p) && statSync(p).isFile();

/** The file a relative specifier names (`./x`, `./x.ts`, `./x/index.ts`), or null. */
function resolveImport(from: string, spec: string): string | null {
  const base = normalize(join(dirname(from), spec));
  for (const c of [base, `${base}.ts`, base.replace(/\.js$/, '.ts'), join(base, 'index.ts')]) if (isFile(c)) return c;
  return null;
}

/** The relative imports of every non-test .ts file under internal/ and cmd/ (packages aside). */
function importGraph(root = ROOT): ImportGraph {
  const graph: ImportGraph = new Map();
  for (const file of [...sourceFiles(join(root, 'internal')), ...sourceFiles(join(root, 'cmd'))]) {
    const imports: Import[] = [];
    for (const { fileName: spec } of ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles) {
      if (!spec.startsWith('.')) continue; // a package or node: builtin
      const target = resolveImport(file, spec);
      // A stylesheet or other asset the dashboard's bundler loads is no module of ours.
      if (target === null && /\.(css|json|svg|html)$/.test(spec)) continue;
      imports.push({ spec, target: target === null ? `(unresolved) ${spec}` : posix(relative(root, target)) });
    }
    graph.set(posix(relative(root, file)), imports);
  }
  return graph;
}

/** The folder (concern) a repository file belongs to: `internal/<folder>/...`, or `cmd`. */
function folderOf(file: string): string | null {
  const parts = file.split('/');
  if (parts[0] === 'cmd') return 'cmd';
  if (parts[0] === 'internal' && parts.length > 2) return parts[1]!;
  return null;
}

/** Every import that leaves the floors: to a higher floor or the same one, to or from no floor. */
function floorViolations(graph: ImportGraph, floors: readonly (readonly string[])[] = FLOORS): string[] {
  const floorOf = new Map<string, number>();
  floors.forEach((names, i) => names.forEach((n) => floorOf.set(n, i)));
  const where = (folder: string) => `floor ${floorOf.get(folder)} (${floors[floorOf.get(folder)!]!.join(', ')})`;
  const out: string[] = [];
  for (const [file, imports] of graph) {
    const from = folderOf(file);
    if (from === null || !floorOf.has(from)) {
      out.push(`${file} is in no floor's folder: put it in one, or give its folder a floor in FLOORS (internal/architecture.test.ts)`);
      continue;
    }
    for (const { spec, target } of imports) {
      const to = folderOf(target);
      if (to === from) continue;
      if (to === null || !floorOf.has(to)) {
        out.push(`${file} imports '${spec}' (${target}), outside the floors' folders`);
      } else if (floorOf.get(to)! >= floorOf.get(from)!) {
        const how = floorOf.get(to) === floorOf.get(from) ? 'a folder on its own floor' : 'a higher floor';
        out.push(`${file} imports '${spec}' (${target}): ${how}, ${to} on ${where(to)}, from ${from} on ${where(from)}`);
      }
    }
  }
  return out;
}

/** Every import cycle among the files, each as the files around it (the first one repeated last). */
function importCycles(graph: ImportGraph): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string): void => {
    state.set(file, 'open');
    stack.push(file);
    for (const { target } of graph.get(file) ?? []) {
      if (!graph.has(target)) continue;
      const s = state.get(target);
      if (s === 'open') cycles.push([...stack.slice(stack.indexOf(target)), target]);
      else if (s === undefined) visit(target);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return cycles;
}

const graph = importGraph();

test('the floors name every folder of internal/ once', () => {
  const named = FLOORS.flat();
  assert.equal(new Set(named).size, named.length, 'a folder on two floors');
  const folders = readdirSync(join(ROOT, 'internal'), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
  assert.deepEqual(folders.filter((f) => !named.includes(f)), [], 'folders without a floor (add them to FLOORS)');
  assert.ok(graph.size > 100, `read ${graph.size} files`);
});

test('no import runs up a floor or across one (every import resolves to a file)', () => {
  assert.deepEqual(floorViolations(graph), []);
});

test('no import cycle', () => {
  assert.deepEqual(importCycles(graph).map((c) => c.join(' -> ')), []);
});

test('the two roles share only what is below them: the worker imports nothing from ingest, ingest nothing from the worker', () => {
  const between = [...graph].flatMap(([file, imports]) => imports
    .filter(({ target }) => [folderOf(file), folderOf(target)].sort().join() === 'ingest,worker')
    .map(({ spec }) => `${file} imports '${spec}'`));
  assert.deepEqual(between, []);
});

test('no file in internal/ is over 500 lines', () => {
  const files = tsFiles(join(ROOT, 'internal'));
  assert.ok(files.length > 150, `read ${files.length} files`);
  const long = files
    .map((file) => ({ file: posix(relative(ROOT, file)), lines: lineCount(readFileSync(file, 'utf8')) }))
    .filter((x) => x.lines > MAX_LINES)
    .sort((a, b) => b.lines - a.lines)
    .map((x) => `${x.file}: ${x.lines} lines`);
  assert.deepEqual(long, [], `over ${MAX_LINES} lines (split each by concern)`);
});

test('the checks themselves: an upward import, a sideways one, an unknown folder and a cycle are each named', () => {
  const g: ImportGraph = new Map([
    ['internal/model/event.ts', [{ spec: '../store/db', target: 'internal/store/db.ts' }]],
    ['internal/worker/a.ts', [{ spec: '../ingest/b', target: 'internal/ingest/b.ts' }, { spec: './c', target: 'internal/worker/c.ts' }]],
    ['internal/worker/c.ts', [{ spec: './a', target: 'internal/worker/a.ts' }]],
    ['internal/ingest/b.ts', []],
    ['internal/store/db.ts', []],
    ['internal/nowhere/x.ts', []],
  ]);
  const v = floorViolations(g);
  assert.equal(v.length, 3, v.join('\n'));
  assert.match(v[0]!, /^internal\/model\/event\.ts imports '\.\.\/store\/db' \(internal\/store\/db\.ts\): a higher floor, store on floor 2/);
  assert.match(v[1]!, /^internal\/worker\/a\.ts imports '\.\.\/ingest\/b' .*: a folder on its own floor, ingest on floor 5/);
  assert.match(v[2]!, /^internal\/nowhere\/x\.ts is in no floor's folder/);
  assert.deepEqual(importCycles(g), [['internal/worker/a.ts', 'internal/worker/c.ts', 'internal/worker/a.ts']]);
});
