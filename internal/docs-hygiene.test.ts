// Documentation hygiene: what the repository's docs, comments and benchmark results say must be
// checkable by a reader of the repository alone. Scanned: every tracked (or new, not ignored)
// *.md, *.ts, *.sql, *.sh, *.yaml/*.yml and *.html file and .ci/run, as whole text (comments,
// prose and the strings code writes into docs); node_modules, package-lock.json and data files
// (svg, mmdb) are not text we write. Three kinds of finding, and one kind of stale name:
//
//   issue       an issue-tracker number: the word issue (or ticket) followed by a number, with
//               or without a hash sign; or a hash sign and digits standing as a word in prose,
//               i.e. after the start of a line, a space or an opening bracket. Not one: a CSS
//               colour (after `:` or `=`, or inside quotes), an anchor such as `#L12` or
//               `#nats-replicas`, a markdown heading, a private field `#x`, a shebang, an
//               HTML entity. An upstream issue is cited by its URL, which a reader can open.
//               The word issue after "the" or "this", as a source, is one too, without
//               its number.
//   report      a report or review named as the source of a claim (the word report after
//               "the", "review" or "audit"; the word review after "a" or "the"): the reader
//               has neither; state the fact instead.
//   local-path  an absolute path of one machine: under /work, /root, /home/<user> or
//               /Users/<user>, anywhere; under /tmp in markdown (docs and bench results). System
//               paths a user's command really names (/etc/postgresql, /var/lib/nats,
//               /usr/share/postgresql/...) are the same on every machine of the documented
//               kind and are allowed.
//
// Then, in markdown and in whole-line comments, every repository path that names code,
// tests, benchmarks, migrations or docs (internal/, test/, bench/, sql/, deploy/, cmd/,
// docs/) must exist, so that headers and docs name the code that is there; and a section of
// bench/RESULTS.md named right after the file (bench/RESULTS.md, "Ingest") must be a heading
// there, since docs point to it for their figures.
//
// The first tests check the matcher on strings in memory; the check itself runs last.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export type Kind = 'issue' | 'report' | 'local-path' | 'missing';
export interface Finding {
  file: string;
  line: number;
  kind: Kind;
  text: string;
}

const ISSUE_WORD = /\b(?:issues?|tickets?)[\s-]*#?\d+\b/gi;
// A hash and digits as a word of prose: at a line start, after a space or an opening bracket,
// but not after `:` or `=` (a CSS colour `color: #111827`), nor followed by a word character.
const ISSUE_HASH = /(?<=^|[\s([{])(?<![:=]\s*)#\d+(?![\w-])/gm;
// The word issue after "the" or "this", as a source: the same reference without its number
// (not a validation issue's path, which is followed by the word path).
const ISSUE_BARE = /\b(?:the|this) issue(?:'s)?\b(?!\s+path)/gi;
const REPORT = /\bthe\s+report\b|\b(?:review|audit)\s+report\b|\b(?:a|the) review(?:'s|er)?\b|\breview helpers?\b/gi;
const LOCAL_PATH = /(?<![\w.~$/-])\/(?:work|root|home\/[\w.-]+|Users\/[\w.-]+)\//g;
const TMP_PATH = /(?<![\w.~$/-])\/tmp\//g;

/** The findings in one file's text (file: its path relative to the repository root). */
export function scanText(file: string, text: string): Finding[] {
  const out: Finding[] = [];
  const markdown = file.endsWith('.md');
  const rules: [Kind, RegExp][] = [
    ['issue', ISSUE_WORD],
    ['issue', ISSUE_HASH],
    ['issue', ISSUE_BARE],
    ['report', REPORT],
    ['local-path', LOCAL_PATH],
    ...(markdown ? ([['local-path', TMP_PATH]] as [Kind, RegExp][]) : []),
  ];
  const lines = text.split('\n');
  lines.forEach((l, i) => {
    const spans: [number, number][] = [];
    for (const [kind, re] of rules) {
      for (const m of l.matchAll(re)) {
        const at = m.index ?? 0;
        // One finding per place: the hash of a worded issue reference is not counted again.
        if (spans.some(([a, b]) => at >= a && at < b)) continue;
        spans.push([at, at + m[0].length]);
        out.push({ file, line: i + 1, kind, text: m[0] });
      }
    }
  });
  return out;
}


// Repository paths named in markdown and in whole-line comments.
// A path ends where no path character follows (a full stop ending a sentence is not part of
// it); globs (test/faults-*.test.ts) and placeholders (internal/<concern>/) are skipped.
const REPO_PATH = /(?<![\w./-])((?:internal|test|bench|sql|deploy|cmd|docs)\/[\w./-]*\w)(?![\w*<{…-]|[./][\w*<{…])/g;
const NOT_FILES: { re: RegExp; why: string }[] = [
  { re: /^test\/artifacts\//, why: 'screenshots the browser test writes (git-ignored)' },
  { re: /^deploy\/tidemark-[a-z]+$/, why: 'a kubectl resource (deploy/<name> is a Deployment)' },
  { re: /^sql\/functions\/tm_refresh_language\.sql$/, why: 'the file docs/rollups.md tells you to write when adding a rollup' },
];

function commentLine(file: string, l: string): boolean {
  const t = l.trim();
  if (/\.(ts|html)$/.test(file)) return t.startsWith('//') || t.startsWith('*') || t.startsWith('/*') || t.startsWith('<!--');
  if (file.endsWith('.sql')) return t.startsWith('--');
  return t.startsWith('#');
}

/** The repository paths a text names that do not exist (exists: whether a path is there). */
export function missingPaths(file: string, text: string, exists: (p: string) => boolean): Finding[] {
  const out: Finding[] = [];
  const markdown = file.endsWith('.md');
  text.split('\n').forEach((l, i) => {
    if (!markdown && !commentLine(file, l)) return;
    for (const m of l.matchAll(REPO_PATH)) {
      const p = m[1]!;
      if (NOT_FILES.some((n) => n.re.test(p))) continue;
      // A module named without its extension, or a migration by its number (sql/019).
      const found = exists(p) || ['.ts', '.sql', '.md'].some((x) => exists(p + x)) || (/^sql\/\d{3}$/.test(p) && exists(`${p}*`));
      if (!found) out.push({ file, line: i + 1, kind: 'missing', text: p });
    }
  });
  return out;
}

// A section of bench/RESULTS.md named right after the file's name (bench/RESULTS.md, "End to
// end"; bench/RESULTS.md "Late writes") must be a heading there: the figures live in it.
const RESULTS_SECTION = /RESULTS\.md,? \(?"([^"]+)"/g;

/** The bench/RESULTS.md sections a text names that are not headings (a heading may go on: its date). */
export function missingSections(file: string, text: string, headings: readonly string[]): Finding[] {
  const out: Finding[] = [];
  text.split('\n').forEach((l, i) => {
    for (const m of l.matchAll(RESULTS_SECTION)) {
      const name = m[1]!;
      if (!headings.some((h) => h === name || h.startsWith(`${name} (`) || h.startsWith(`${name}:`))) {
        out.push({ file, line: i + 1, kind: 'missing', text: name });
      }
    }
  });
  return out;
}

const SCANNED = /\.(md|ts|sql|sh|ya?ml|html)$|^\.ci\/run$/;

function trackedFiles(): string[] {
  const out = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' });
  return [...new Set(out.split('\0'))]
    .filter((f) => f !== '' && SCANNED.test(f) && !f.includes('node_modules/') && f !== 'package-lock.json')
    .filter((f) => existsSync(path.join(ROOT, f)))
    .sort();
}

function existsInRepo(p: string): boolean {
  if (p.endsWith('*')) {
    const prefix = p.slice(0, -1);
    const dir = path.join(ROOT, path.dirname(prefix));
    return existsSync(dir) && readdirSync(dir).some((n) => n.startsWith(path.basename(prefix)));
  }
  return existsSync(path.join(ROOT, p));
}

// Planted strings are put together here so that this file does not match its own rules.
const H = '#';
const ISSUE = 'issue';
const REP = 'report';
const REV = 'review';
const HOME = 'home';

test('matcher: issue numbers in prose and comments are found, colours, anchors and fields are not', () => {
  const found = (s: string) => scanText('docs/x.md', s).filter((f) => f.kind === 'issue').map((f) => f.text);
  assert.deepEqual(found(`see ${ISSUE} 12 for why`), [`${ISSUE} 12`]);
  assert.deepEqual(found(`(${ISSUE} ${H}15; the planner)`), [`${ISSUE} ${H}15`], 'one finding, not two');
  assert.deepEqual(found(`(${ISSUE} 19 ${H}6)`), [`${ISSUE} 19`, `${H}6`]);
  assert.deepEqual(found(`${ISSUE.toUpperCase()}S 3 and 4`), [`${ISSUE.toUpperCase()}S 3`]);
  assert.deepEqual(found(`// the fix (${H}42) and item ${H}6`), [`${H}42`, `${H}6`]);
  assert.deepEqual(found(`${H}5 (page p95 < 50 ms)`), [`${H}5`]);
  for (const clean of [
    'color: #111827; fill="#1b2430"; stroke: \'#6b7280\'',
    'background: linear-gradient(135deg, #6366f1, #22d3ee)',
    '#!/usr/bin/env bash',
    '## 3. Heading',
    'this.#pending = 0; this.#x1 = 2',
    'src/a.ts#L12 and docs/operating.md#nats-replicas-and-failures',
    '&#123; an entity',
    'https://github.com/nats-io/nats-server/issues/6290',
    'tissue 12 and reissue 3',
    `every ${ISSUE} path names the field; expected an ${ISSUE} at ["limit"]`,
  ]) assert.deepEqual(found(clean), [], clean);
  assert.deepEqual(found(`what this ${ISSUE} promises; The ${ISSUE}'s aim`), [`this ${ISSUE}`, `The ${ISSUE}'s`]);
});

test('matcher: references to a report, and local paths', () => {
  const kinds = (file: string, s: string) => scanText(file, s).map((f) => `${f.kind}:${f.text}`);
  assert.deepEqual(kinds('test/x.test.ts', `// a known bug (see the ${REP})`), [`report:the ${REP}`]);
  assert.deepEqual(kinds('docs/x.md', `as the audit ${REP} says, per review ${REP}`), [`report:audit ${REP}`, `report:review ${REP}`]);
  assert.deepEqual(kinds('docs/x.md', `${'a'} ${REV} sent 2,000 events`), [`report:a ${REV}`]);
  assert.deepEqual(kinds('docs/x.md', "`nats consumer report <stream>` and bench/queries.ts's report"), []);
  const W = '/' + 'work/';
  assert.deepEqual(kinds('bench/RESULTS.md', `before: ${W}main at abc, \`--old ${W}main/x.ts\``), [`local-path:${W}`, `local-path:${W}`]);
  assert.deepEqual(kinds('docs/x.md', `/${HOME}/alice/tidemark and /${'tmp'}/out.txt`), [`local-path:/${HOME}/alice/`, `local-path:/tmp/`]);
  assert.deepEqual(kinds('test/x.test.ts', `const dir = '/${'tmp'}/x';`), [], '/tmp in code is a path the code uses');
  for (const clean of ['ls /etc/postgresql', '-sd /var/lib/nats', '/usr/share/postgresql/15/extension', 'https://example.com/work/x', 'bench/work/x'])
    assert.deepEqual(kinds('docs/x.md', clean), [], clean);
});

test('matcher: repository paths named in docs and comments must exist', () => {
  const have = new Set(['internal/a.ts', 'sql/019_x.sql', 'docs/b.md']);
  const exists = (p: string) => have.has(p) || (p.endsWith('*') && [...have].some((h) => h.startsWith(p.slice(0, -1))));
  const missing = (file: string, s: string) => missingPaths(file, s, exists).map((f) => f.text);
  assert.deepEqual(missing('docs/x.md', 'see internal/a.ts, internal/a, sql/019, docs/b.md and test/gone.test.ts.'), ['test/gone.test.ts']);
  assert.deepEqual(missing('internal/x.ts', '// checked by internal/gone.test.ts'), ['internal/gone.test.ts']);
  assert.deepEqual(missing('internal/x.ts', "const f = 'internal/gone.ts'; // a fixture"), [], 'code is not a claim');
  assert.deepEqual(missing('sql/001.sql', '-- read by internal/export/gone.ts'), ['internal/export/gone.ts']);
  assert.deepEqual(missing('docs/x.md', 'test/faults-*.test.ts, internal/<concern>/, kubectl rollout status deploy/tidemark-api'), []);
});

test('matcher: sections of bench/RESULTS.md named in docs must be headings there', () => {
  const headings = ['End to end', 'End to end: notes (hand-written)', 'Late writes', 'Refresh functions: the fixed cost of an hour (note)'];
  const missing = (s: string) => missingSections('docs/x.md', s, headings).map((f) => f.text);
  const R = `bench/${'RESULTS'}.md`;
  assert.deepEqual(missing(`${R}, "End to end" and ${R} "End to end: notes"`), []);
  assert.deepEqual(missing(`(${R} "Refresh functions") and ${R}, "Late"`), ['Late']);
  assert.deepEqual(missing(`${R} "JetStream publish path": 30 µs`), ['JetStream publish path']);
});

test('docs, comments and bench results cite no issue numbers, reports or local paths, and name paths that exist', () => {
  const files = trackedFiles();
  const headings = readFileSync(path.join(ROOT, 'bench/RESULTS.md'), 'utf8').split('\n').filter((l) => l.startsWith('## ')).map((l) => l.slice(3).trim());
  assert.ok(files.length > 100 && files.includes('README.md') && files.includes('bench/RESULTS.md'), `scanned ${files.length} files`);
  const bad: string[] = [];
  for (const file of files) {
    const text = readFileSync(path.join(ROOT, file), 'utf8');
    const lines = text.split('\n');
    for (const f of scanText(file, text)) bad.push(`${f.file}:${f.line}: ${f.kind}: ${f.text}`);
    for (const f of missingPaths(file, text, existsInRepo)) bad.push(`${f.file}:${f.line}: missing path: ${f.text}`);
    for (const f of missingSections(file, text, headings)) bad.push(`${f.file}:${f.line}: no such section of bench/RESULTS.md: ${f.text}`);
  }
  assert.deepEqual(bad, [], `${bad.length} findings:\n${bad.join('\n')}`);
});
