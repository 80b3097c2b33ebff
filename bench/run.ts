// `npm run bench`: the whole benchmark suite in sequence — end to end (bench/e2e.ts: npm start
// under stepped open-loop load against bare uWS, the headline), ingest (bench/ingest.ts), pipeline
// lag (bench/lag.ts), queries (bench/queries.ts), export (bench/export.ts) and export queries
// at 1M/10M events (bench/export-queries.ts) — writing one section of bench/RESULTS.md and one
// SVG bar chart (bench/charts/<name>.svg, linked from the section) per benchmark, so that
// runs can be compared by diffing RESULTS.md and looking at the charts.
//
//   npm run bench                      # everything, full durations (tens of minutes)
//   npm run bench -- --only ingest,lag # a subset, in the suite's order
//   npm run bench -- --quick           # short smoke run; prints, writes nothing unless --write
//   npm run bench -- --only e2e --quick # the end-to-end headline alone, under ~2 minutes
//
// Each benchmark is its own script and can be run alone; the ones that are child
// processes print their RESULTS.md section (markdown) on stdout, which is parsed here.
import { execSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const BENCH = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(BENCH, '..');
const RESULTS = path.join(BENCH, 'RESULTS.md');
const HEADER = '# Benchmark results\n\nOne section per benchmark; each is rewritten by its own script (`npm run bench` runs them all and draws the charts in `bench/charts/`).\n';

// ---------------------------------------------------------------------------------------
// Shared by the benchmark scripts.

export interface Machine {
  nproc: string;
  cpu: string;
  node: string;
  date: string;
  load: string;
  loadAfter?: string;
}

export function machineInfo(): Machine {
  let cpu = os.cpus()[0]?.model ?? 'unknown';
  try {
    cpu = readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1]?.trim() ?? cpu;
  } catch {}
  let nproc = String(os.cpus().length);
  try {
    nproc = execSync('nproc').toString().trim();
  } catch {}
  return { nproc, cpu, node: process.version, date: new Date().toISOString(), load: os.loadavg().map((l) => l.toFixed(1)).join(' ') };
}

let writesEnabled = true;

/** Replaces (or appends) the `## <title>` section of bench/RESULTS.md, up to the next `## `. */
export function writeSection(title: string, markdown: string, file = RESULTS): void {
  if (!writesEnabled) return;
  const section = markdown.trimEnd();
  const old = existsSync(file) ? readFileSync(file, 'utf8') : HEADER;
  const heading = new RegExp(`^## ${title.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s*$`, 'm');
  const start = old.search(heading);
  let next: string;
  if (start === -1) next = `${old.trimEnd()}\n\n${section}\n`;
  else {
    const rest = old.slice(start + 1);
    const end = rest.search(/^## /m);
    next = `${old.slice(0, start)}${section}\n${end === -1 ? '' : `\n${rest.slice(end)}`}`;
  }
  writeFileSync(file, `${next.trimEnd()}\n`);
}

/** Writes bench/charts/<name>; returns the link relative to RESULTS.md. */
export function writeChart(name: string, svg: string): string {
  const link = `charts/${name}`;
  if (!writesEnabled) return link;
  mkdirSync(path.join(BENCH, 'charts'), { recursive: true });
  writeFileSync(path.join(BENCH, 'charts', name), svg);
  return link;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

function fmt(n: number): string {
  if (!Number.isFinite(n)) return '–';
  if (Math.abs(n) >= 100) return Math.round(n).toLocaleString('en-US');
  if (Math.abs(n) >= 10) return n.toFixed(1);
  return n.toFixed(2);
}

/**
 * A horizontal bar chart as a small self-contained SVG: one bar per label, the value at the
 * end of each bar, an optional dashed threshold line. Missing values draw no bar ("–").
 */
export function barChartSvg(o: { title: string; unit: string; bars: { label: string; value: number }[]; threshold?: { value: number; label: string } }): string {
  const W = 760;
  const maxChars = 56; // longer labels are cut (the full one is the bar's tooltip)
  const short = (l: string) => (l.length > maxChars ? `${l.slice(0, maxChars - 1)}…` : l);
  const labelW = Math.max(90, ...o.bars.map((b) => short(b.label).length * 6.6 + 16));
  const barArea = Math.max(200, W - labelW - 110);
  const rowH = 26;
  const top = 44;
  const H = top + o.bars.length * rowH + 34;
  const values = o.bars.map((b) => b.value).filter((v) => Number.isFinite(v) && v > 0);
  const max = Math.max(1e-9, ...values, o.threshold && Number.isFinite(o.threshold.value) ? o.threshold.value : 0) * 1.05;
  const x = (v: number) => labelW + (Math.max(0, v) / max) * barArea;
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, -apple-system, Segoe UI, sans-serif" font-size="12">`);
  parts.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`);
  parts.push(`<text x="12" y="22" font-size="14" font-weight="600" fill="#1b2430">${esc(o.title)}</text>`);
  parts.push(`<line x1="${labelW}" y1="${top - 6}" x2="${labelW}" y2="${top + o.bars.length * rowH}" stroke="#8c959f"/>`);
  o.bars.forEach((b, i) => {
    const y = top + i * rowH;
    parts.push(`<text x="${labelW - 8}" y="${y + 15}" text-anchor="end" fill="#1b2430"><title>${esc(b.label)}</title>${esc(short(b.label))}</text>`);
    if (Number.isFinite(b.value)) {
      const w = Math.max(1, x(b.value) - labelW);
      parts.push(`<rect x="${labelW}" y="${y + 3}" width="${w.toFixed(1)}" height="${rowH - 8}" rx="2" fill="${i % 2 ? '#4f8fd6' : '#2f6fb5'}"/>`);
      parts.push(`<text x="${(labelW + w + 6).toFixed(1)}" y="${y + 15}" fill="#1b2430">${esc(`${fmt(b.value)} ${o.unit}`)}</text>`);
    } else {
      parts.push(`<text x="${labelW + 6}" y="${y + 15}" fill="#8c959f">–</text>`);
    }
  });
  if (o.threshold && Number.isFinite(o.threshold.value)) {
    const tx = x(o.threshold.value).toFixed(1);
    parts.push(`<line x1="${tx}" y1="${top - 6}" x2="${tx}" y2="${top + o.bars.length * rowH}" stroke="#cf222e" stroke-dasharray="5 4"/>`);
    parts.push(`<text x="${tx}" y="${top + o.bars.length * rowH + 16}" text-anchor="middle" fill="#cf222e">${esc(o.threshold.label)}</text>`);
  }
  parts.push(`<text x="${W - 12}" y="${H - 8}" text-anchor="end" fill="#8c959f" font-size="10">${esc(o.unit)} · ${esc(new Date().toISOString().slice(0, 16).replace('T', ' '))} UTC</text>`);
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

/** The first markdown table under the section whose header has a column matching `col`. */
export function tableColumn(markdown: string, col: RegExp): { label: string; value: number }[] {
  const lines = markdown.split('\n');
  for (let i = 0; i + 2 < lines.length; i++) {
    if (!lines[i]!.trim().startsWith('|') || !/^\|[\s:|-]+\|\s*$/.test(lines[i + 1]!.trim())) continue;
    const cells = (l: string) => l.trim().replace(/^\||\|$/g, '').split('|').map((c) => c.trim());
    const header = cells(lines[i]!);
    const idx = header.findIndex((h) => col.test(h));
    if (idx < 1) continue;
    const out: { label: string; value: number }[] = [];
    for (let j = i + 2; j < lines.length && lines[j]!.trim().startsWith('|'); j++) {
      const c = cells(lines[j]!);
      const raw = (c[idx] ?? '').replace(/[*,\s]/g, '').replace(/ms$|s$/, '');
      out.push({ label: (c[0] ?? '').replace(/\*\*/g, '').replace(/`/g, ''), value: raw === '' || raw === '–' ? NaN : Number(raw) });
    }
    return out;
  }
  return [];
}

// ---------------------------------------------------------------------------------------
// Running the suite.

/** Runs a command with output passed through (stderr) and stdout captured. */
function runChild(cmd: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d;
      process.stderr.write(d);
    });
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout }));
  });
}

const tsx = (script: string, args: string[], env: Record<string, string> = {}) => runChild(process.execPath, ['--import', 'tsx', script, ...args], env);

/** The `## <title>` section of a script's stdout (to the end or the next `## `). */
function sectionOf(stdout: string, title: string): string | null {
  const start = stdout.search(new RegExp(`^## ${title}\\s*$`, 'm'));
  if (start === -1) return null;
  const rest = stdout.slice(start + 1);
  const end = rest.search(/^## |^BENCH_RESULT /m);
  return stdout.slice(start, end === -1 ? undefined : start + 1 + end).trimEnd();
}

interface Outcome {
  name: string;
  status: 'ok' | 'failed' | 'skipped';
  note?: string;
}

type Bench = (quick: boolean) => Promise<Outcome>;

const ingest: Bench = async (quick) => {
  const args = quick ? ['--seconds', '1', '--no-worker-run', '--no-diagnostic', '--no-write'] : ['--no-write'];
  const { code, stdout } = await tsx('bench/ingest.ts', args);
  const md = sectionOf(stdout, 'Ingest');
  if (!md) return { name: 'ingest', status: 'failed', note: `bench/ingest.ts exited ${code} without a "## Ingest" section` };
  const bars = tableColumn(md, /^req\/s$/);
  const link = writeChart('ingest.svg', barChartSvg({ title: 'Ingest: POST /track throughput (higher is better)', unit: 'req/s', bars }));
  writeSection('Ingest', `${md.replace(/^Command: `npx tsx bench\/ingest\.ts([^`]*)`/m, (_m, a: string) => `Command: \`npx tsx bench/ingest.ts${a.replace(' --no-write', '')}\` (via \`npm run bench${quick ? ' -- --quick' : ''}\`)`)}\n\n![ingest throughput](${link})\n`);
  return { name: 'ingest', status: code === 0 ? 'ok' : 'failed', note: code === 0 ? undefined : `exit ${code} (durability check failed?)` };
};

/** End to end (bench/e2e.ts): npm start under stepped open-loop load, bare uWS in the same run. */
const e2e: Bench = async (quick) => {
  const { runE2e, e2eMarkdown, e2eOptions } = await import('./e2e');
  const o = e2eOptions(quick ? ['--quick'] : []);
  const r = await runE2e(o);
  const bars = [
    { label: 'bare uWS, wrk (closed loop)', value: r.bare.rps },
    { label: 'Tidemark npm start, wrk (closed loop)', value: r.closed.rps },
    ...[...r.steps].sort((a, b) => a.rate - b.rate).map((s) => ({ label: `open loop ${s.rate}/s${s.pass ? '' : ' (failed)'}`, value: s.acceptedPerS })),
  ];
  const link = writeChart('e2e.svg', barChartSvg({ title: 'End to end: accepted events/s (every 202 readable)', unit: 'events/s', bars }));
  const md = `${e2eMarkdown(r, `npm run bench -- --only e2e${quick ? ' --quick' : ''}`)}\n![end to end](${link})\n`;
  process.stdout.write(`${md}\n`);
  writeSection('End to end', md);
  const cap = r.capacity;
  return {
    name: 'e2e', status: 'ok',
    note: `capacity ${cap ? Math.round(cap.acceptedPerS) : 'none'} events/s (${cap ? ((cap.acceptedPerS / r.bare.rps) * 100).toFixed(0) : 0}% of bare uWS ${Math.round(r.bare.rps)}); sequential p50 ${r.seq.p50.toFixed(2)} ms vs JetStream ${r.floor.p50.toFixed(2)} ms`,
  };
};

const lag: Bench = async (quick) => {
  const { runLag, lagMarkdown, lagChart, lagOptions } = await import('./lag');
  const o = lagOptions(quick ? ['--quick'] : []);
  const r = await runLag({ ...o, log: (l) => console.error(l) });
  const link = writeChart('lag.svg', lagChart(r));
  const md = lagMarkdown(r, `npm run bench -- --only lag${quick ? ' --quick' : ''}`, link);
  process.stdout.write(`${md}\n`);
  writeSection('Pipeline lag', md);
  return { name: 'lag', status: 'ok', note: `p95 ${Math.round(r.steady.lagMs.p95)} ms at ${Math.round(r.steady.achievedRate)} events/s; worker ${Math.round(r.throughput.eventsPerSecond)} events/s` };
};

const queries: Bench = async (quick) => {
  const script = path.join(BENCH, 'queries.ts');
  if (!existsSync(script)) return { name: 'queries', status: 'skipped', note: 'bench/queries.ts does not exist yet' };
  const { code, stdout } = await tsx('bench/queries.ts', [...(quick ? ['--quick'] : []), '--no-write']);
  const title = /^## (Quer[^\n]*)$/m.exec(stdout)?.[1]?.trim();
  const md = title ? sectionOf(stdout, title.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')) : null;
  if (!md || !title) return { name: 'queries', status: 'failed', note: `bench/queries.ts exited ${code} without a "## Queries" section on stdout` };
  const bars = tableColumn(md, /p95/i).length ? tableColumn(md, /p95/i) : tableColumn(md, /p50|ms/i);
  const link = writeChart('queries.svg', barChartSvg({ title: 'Queries: latency p95 (lower is better)', unit: 'ms', bars }));
  writeSection(title, `${md}\n\n![query latency](${link})\n`);
  return { name: 'queries', status: code === 0 ? 'ok' : 'failed' };
};

/** Export: the export latency benchmark bench/export.ts (node:test file, ~1M events). */
const exportBench: Bench = async (quick) => {
  const test = 'bench/export.ts';
  if (!existsSync(path.join(ROOT, test))) return { name: 'export', status: 'skipped', note: 'no export benchmark script' };
  // The test pages to page 1000 of limit=1000: it needs its full million events, so a
  // quick run leaves it out.
  if (quick) return { name: 'export', status: 'skipped', note: `${test} needs ~1M events (minutes); run without --quick` };
  const events = process.env.EXPORT_BENCH_EVENTS ?? '1000000';
  const runs = process.env.EXPORT_BENCH_RUNS ?? '30';
  const machine = machineInfo();
  const { code, stdout } = await runChild(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', test], {
    EXPORT_BENCH_EVENTS: events, EXPORT_BENCH_RUNS: runs,
  });
  const rows: { label: string; p50: number; p95: number; runs: number; kib: number }[] = [];
  for (const m of stdout.matchAll(/^[\s#]*(.+?)\s+p50\s+([\d.]+) ms\s+p95\s+([\d.]+) ms\s+\((\d+) runs, (\d+) KiB\)/gm)) {
    const row = { label: m[1]!.trim(), p50: Number(m[2]), p95: Number(m[3]), runs: Number(m[4]), kib: Number(m[5]) };
    if (!rows.some((r) => r.label === row.label)) rows.push(row);
  }
  const ndjson = /ndjson stream of .*$/m.exec(stdout)?.[0]?.trim();
  const inserted = /inserted \d+ \+ \d+ events in \d+ ms/.exec(stdout)?.[0];
  if (!rows.length) return { name: 'export', status: 'failed', note: `${test} exited ${code} with no timing lines` };
  const L = ['## Export', ''];
  L.push(`Command: \`EXPORT_BENCH_EVENTS=${events} EXPORT_BENCH_RUNS=${runs} node --import tsx --test ${test}\` (via \`npm run bench${quick ? ' -- --quick' : ''}\`)`, '');
  L.push(`Machine: ${machine.nproc} CPUs, ${machine.cpu}, Node ${machine.node}; load average before: ${machine.load}. Date: ${machine.date}. ${Number(events).toLocaleString('en-US')} events of one project over 30 days (+20% in another project)${inserted ? `; ${inserted}` : ''}; requests through the HTTP stack of the export routes.`, '');
  L.push('| Request | p50 ms | p95 ms | runs | KiB |', '|---|---:|---:|---:|---:|');
  for (const r of rows) L.push(`| ${r.label} | ${r.p50.toFixed(1)} | ${r.p95.toFixed(1)} | ${r.runs} | ${r.kib} |`);
  if (ndjson) L.push('', `NDJSON: ${ndjson}.`);
  const link = writeChart('export.svg', barChartSvg({ title: 'Export: latency p95 (lower is better)', unit: 'ms', bars: rows.map((r) => ({ label: r.label, value: r.p95 })) }));
  L.push('', `![export latency](${link})`, '');
  const md = L.join('\n');
  process.stdout.write(`${md}\n`);
  writeSection('Export', md);
  return { name: 'export', status: code === 0 ? 'ok' : 'failed' };
};

/**
 * Export queries at 1M and 10M events (bench/export-queries.ts, on the databases made by
 * bench/generate.ts): the script writes its own "## Export queries" section.
 */
const exportQueries: Bench = async (quick) => {
  const { code } = await tsx('bench/export-queries.ts', [
    ...(quick ? ['--n', '5', '--budget-s', '5'] : []),
    ...(writesEnabled ? [] : ['--no-write']),
  ]);
  return {
    name: 'export-queries', status: code === 0 ? 'ok' : 'failed',
    note: code === 0 ? undefined : `exit ${code} (are bench_1m and bench_10m generated? npx tsx bench/generate.ts --events 1000000 --db postgres://postgres@127.0.0.1:5432/bench_1m)`,
  };
};

const SUITE: [string, Bench][] = [['e2e', e2e], ['ingest', ingest], ['lag', lag], ['queries', queries], ['export', exportBench], ['export-queries', exportQueries]];

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { only: { type: 'string' }, quick: { type: 'boolean', default: false }, write: { type: 'boolean', default: false }, 'no-write': { type: 'boolean', default: false } },
  });
  const quick = values.quick === true;
  writesEnabled = values['no-write'] ? false : quick ? values.write === true : true;
  const names = SUITE.map(([n]) => n);
  const only = values.only ? values.only.split(',').map((s) => s.trim()).filter(Boolean) : names;
  const unknown = only.filter((n) => !names.includes(n));
  if (unknown.length) {
    console.error(`unknown benchmark(s): ${unknown.join(', ')}; known: ${names.join(', ')}`);
    return 2;
  }
  console.error(`bench: ${only.join(', ')}${quick ? ' (quick)' : ''}; ${writesEnabled ? `writing ${path.relative(process.cwd(), RESULTS)} and bench/charts/` : 'not writing RESULTS.md (quick run; --write to write)'}`);
  const outcomes: Outcome[] = [];
  for (const [name, bench] of SUITE) {
    if (!only.includes(name)) continue;
    console.error(`\n== ${name} ==`);
    const t0 = Date.now();
    try {
      const o = await bench(quick);
      outcomes.push({ ...o, note: `${o.note ? `${o.note}; ` : ''}${((Date.now() - t0) / 1000).toFixed(0)} s` });
    } catch (err) {
      console.error(err);
      outcomes.push({ name, status: 'failed', note: (err as Error).message });
    }
  }
  console.error('\n== summary ==');
  for (const o of outcomes) console.error(`${o.status.padEnd(7)} ${o.name}${o.note ? `: ${o.note}` : ''}`);
  return outcomes.some((o) => o.status === 'failed') ? 1 : 0;
}

// No top-level await here: bench/lag.ts imports this module's helpers, and a module still
// evaluating (suspended in a top-level await) would make that import wait forever.
if (process.argv[1] && /bench[\\/]run\.ts$/.test(process.argv[1])) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
