// The real CLI (cmd/cli/main.ts; the first call through `npm run --silent cli -- ...`) against a TestEnv's database: one line of
// JSON on stdout and nothing else; errors on stderr with a non-zero exit; secrets stored
// only as scrypt hashes; a missing database created on first use.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import pg from 'pg';
import { TestEnv, ROOT, PG_BASE, ensureServices } from './support/harness';
import { verifySecret } from '../internal/auth/secrets';

interface Run { code: number; stdout: string; stderr: string }

let env: TestEnv;

/**
 * Runs the CLI's entry point in one Node process (`node --import tsx cmd/cli/main.ts`, what
 * `npm run cli` runs without npm's and tsx's own launcher processes: ~3x quicker per call);
 * `viaNpm` runs it exactly as the README does, `npm run --silent cli -- ...`.
 */
function cli(args: string[], viaNpm = false): Promise<Run> {
  const [cmd, argv] = viaNpm
    ? ['npm', ['run', '--silent', 'cli', '--', ...args]]
    : [process.execPath, ['--import', 'tsx', 'cmd/cli/main.ts', ...args]];
  return new Promise((resolve) => {
    execFile(cmd, argv, {
      cwd: ROOT,
      env: { ...process.env, ...env.env({ LOG_LEVEL: 'warn' }) },
      timeout: 60_000,
    }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** Exactly one line of JSON on stdout, and it parses. */
function oneJsonLine(r: Run): any {
  assert.equal(r.code, 0, `exit ${r.code}; stderr: ${r.stderr}`);
  assert.match(r.stdout, /^[^\n]+\n$/, `one line on stdout, got ${JSON.stringify(r.stdout)}`);
  return JSON.parse(r.stdout);
}

function failed(r: Run, message: RegExp): void {
  assert.notEqual(r.code, 0, 'non-zero exit');
  assert.equal(r.stdout, '', 'nothing on stdout');
  assert.match(r.stderr, message);
}

async function databaseExists(name: string): Promise<boolean> {
  const admin = new pg.Client({ connectionString: `${PG_BASE}/postgres` });
  await admin.connect();
  try {
    return ((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount ?? 0) > 0;
  } finally {
    await admin.end();
  }
}

before(() => {
  ensureServices();
  env = new TestEnv('cli'); // no setup(): the CLI must create the database itself
});

after(async () => {
  await env?.teardown();
});

describe('cli', () => {
  let projectId = '';
  let reader: { clientId: string; clientSecret: string } | null = null;
  let db: pg.Pool;

  test('project create on a missing database: creates it, prints {id, name, timezone} only', async () => {
    assert.equal(await databaseExists(env.dbName), false);
    const r = await cli(['project', 'create', '--name', 'My Shop', '--timezone', 'Europe/Berlin', '--origins', 'https://a.example'], true);
    const out = oneJsonLine(r);
    assert.deepEqual(Object.keys(out).sort(), ['id', 'name', 'timezone']);
    assert.equal(out.name, 'My Shop');
    assert.equal(out.timezone, 'Europe/Berlin');
    assert.match(out.id, /^[a-z0-9-]+$/);
    assert.equal(await databaseExists(env.dbName), true);
    db = new pg.Pool({ connectionString: env.databaseUrl, max: 2 });
    const row = (await db.query('SELECT * FROM projects WHERE id = $1', [out.id])).rows[0];
    assert.equal(row.name, 'My Shop');
    assert.equal(row.timezone, 'Europe/Berlin');
    assert.deepEqual(row.allowed_origins, ['https://a.example']);
    projectId = out.id;
  });

  test('project create defaults the timezone to UTC', async () => {
    const out = oneJsonLine(await cli(['project', 'create', '--name', 'Plain']));
    assert.equal(out.timezone, 'UTC');
  });

  test('client create prints {clientId, clientSecret, mode, projectId}; the DB holds only a scrypt hash', async () => {
    const out = oneJsonLine(await cli(['client', 'create', '--project', projectId, '--mode', 'read']));
    assert.deepEqual(Object.keys(out).sort(), ['clientId', 'clientSecret', 'mode', 'projectId']);
    assert.equal(out.mode, 'read');
    assert.equal(out.projectId, projectId);
    assert.equal(typeof out.clientSecret, 'string');
    assert.ok(out.clientSecret.length >= 20);
    const row = (await db.query('SELECT * FROM clients WHERE id = $1', [out.clientId])).rows[0];
    assert.equal(row.mode, 'read');
    assert.equal(row.project_id, projectId);
    assert.equal(row.ingest_rate, 1000, 'default ingest rate');
    assert.match(row.secret_hash, /^scrypt\$\d+\$\d+\$\d+\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
    const dump = JSON.stringify((await db.query('SELECT * FROM clients')).rows);
    assert.ok(!dump.includes(out.clientSecret), 'the secret itself is stored nowhere in clients');
    assert.equal(await verifySecret(out.clientSecret, row.secret_hash), true);
    assert.equal(await verifySecret(`${out.clientSecret}x`, row.secret_hash), false);
    reader = out;
  });

  test('client create with --mode write --ingest-rate 0 and --mode root', async () => {
    const w = oneJsonLine(await cli(['client', 'create', '--project', projectId, '--mode', 'write', '--ingest-rate', '0']));
    assert.equal(w.mode, 'write');
    assert.equal((await db.query('SELECT ingest_rate FROM clients WHERE id = $1', [w.clientId])).rows[0].ingest_rate, 0);
    const root = oneJsonLine(await cli(['client', 'create', '--project', projectId, '--mode', 'root']));
    assert.equal(root.mode, 'root');
  });

  test('client create without --mode makes a write client (interface.md: write is the default mode)', async () => {
    const out = oneJsonLine(await cli(['client', 'create', '--project', projectId]));
    assert.deepEqual(Object.keys(out).sort(), ['clientId', 'clientSecret', 'mode', 'projectId']);
    assert.equal(out.mode, 'write');
    assert.equal((await db.query('SELECT mode FROM clients WHERE id = $1', [out.clientId])).rows[0].mode, 'write');
  });

  test('invalid input: non-zero exit, message on stderr, nothing on stdout', async () => {
    const [tz, mode, noMode, unknownProject, rate, noName, unknownCmd, unknownFlag] = await Promise.all([
      cli(['project', 'create', '--name', 'X', '--timezone', 'Mars/Olympus']),
      cli(['client', 'create', '--project', projectId, '--mode', 'admin']),
      cli(['client', 'create', '--project', projectId, '--mode', '']),
      cli(['client', 'create', '--project', 'no-such-project', '--mode', 'write']),
      cli(['client', 'create', '--project', projectId, '--mode', 'write', '--ingest-rate', 'fast']),
      cli(['project', 'create']),
      cli(['project', 'delete']),
      cli(['project', 'create', '--name', 'X', '--colour', 'red']),
    ]);
    failed(tz, /Mars\/Olympus/);
    failed(mode, /--mode/);
    failed(noMode, /--mode/);
    failed(unknownProject, /no-such-project/);
    failed(rate, /--ingest-rate/);
    failed(noName, /--name/);
    failed(unknownCmd, /unknown command/);
    failed(unknownFlag, /colour/);
    const projects = (await db.query('SELECT name FROM projects ORDER BY created_at')).rows.map((r) => r.name);
    assert.deepEqual(projects, ['My Shop', 'Plain'], 'nothing created by a failed command');
  });

  test('project list and client list (no secrets, no hashes)', async () => {
    const projects = oneJsonLine(await cli(['project', 'list']));
    assert.ok(Array.isArray(projects));
    const mine = projects.find((p: { id: string }) => p.id === projectId);
    assert.deepEqual(mine, { id: projectId, name: 'My Shop', timezone: 'Europe/Berlin', origins: ['https://a.example'] });
    assert.equal(projects.length, 2);

    const r = await cli(['client', 'list', '--project', projectId]);
    const clients = oneJsonLine(r);
    assert.equal(clients.length, 4);
    for (const c of clients) {
      assert.deepEqual(Object.keys(c).sort(), ['clientId', 'ingestRate', 'mode', 'projectId', 'revoked']);
      assert.equal(c.revoked, false);
    }
    assert.ok(!r.stdout.includes(reader!.clientSecret), 'no secret in the output');
    assert.ok(!r.stdout.includes('scrypt'), 'no hash in the output');
    const all = oneJsonLine(await cli(['client', 'list']));
    assert.equal(all.length, 4);
  });

  test('project update changes name, timezone and origins; prints {id, name, timezone} only', async () => {
    const created = oneJsonLine(await cli(['project', 'create', '--name', 'To Update', '--origins', 'https://old.example']));
    const byName = oneJsonLine(await cli(['project', 'update', '--project', created.id, '--name', 'Renamed']));
    assert.deepEqual(byName, { id: created.id, name: 'Renamed', timezone: 'UTC' });
    const byTz = oneJsonLine(await cli(['project', 'update', '--project', created.id, '--timezone', 'America/New_York', '--origins', 'https://*.example.com,example.org']));
    assert.deepEqual(byTz, { id: created.id, name: 'Renamed', timezone: 'America/New_York' });
    const row = (await db.query('SELECT * FROM projects WHERE id = $1', [created.id])).rows[0];
    assert.equal(row.name, 'Renamed');
    assert.equal(row.timezone, 'America/New_York');
    assert.deepEqual(row.allowed_origins, ['https://*.example.com', 'example.org']);
    // an empty --origins allows no browser origin; name and timezone stay
    assert.deepEqual(oneJsonLine(await cli(['project', 'update', '--project', created.id, '--origins', ''])), { id: created.id, name: 'Renamed', timezone: 'America/New_York' });
    assert.deepEqual((await db.query('SELECT allowed_origins FROM projects WHERE id = $1', [created.id])).rows[0].allowed_origins, []);
    await db.query('DELETE FROM projects WHERE id = $1', [created.id]); // the list test below counts projects
  });

  test('project update: unknown project, nothing to change, bad values: non-zero exit, nothing on stdout, nothing changed', async () => {
    const [unknown, noProject, nothing, tz, emptyName, origin, suffix] = await Promise.all([
      cli(['project', 'update', '--project', 'no-such-project', '--name', 'X']),
      cli(['project', 'update', '--name', 'X']),
      cli(['project', 'update', '--project', projectId]),
      cli(['project', 'update', '--project', projectId, '--timezone', 'Mars/Olympus']),
      cli(['project', 'update', '--project', projectId, '--name', ' ']),
      cli(['project', 'update', '--project', projectId, '--origins', 'ftp://x.example']),
      cli(['project', 'update', '--project', projectId, '--origins', 'https://*.com']),
    ]);
    failed(unknown, /no project with id "no-such-project"/);
    failed(noProject, /--project/);
    failed(nothing, /at least one of --name, --timezone, --origins/);
    failed(tz, /Mars\/Olympus/);
    failed(emptyName, /--name/);
    failed(origin, /http or https/);
    failed(suffix, /two labels/);
    const row = (await db.query('SELECT name, timezone, allowed_origins FROM projects WHERE id = $1', [projectId])).rows[0];
    assert.deepEqual(row, { name: 'My Shop', timezone: 'Europe/Berlin', allowed_origins: ['https://a.example'] });
  });

  test('client revoke marks the client revoked', async () => {
    const out = oneJsonLine(await cli(['client', 'revoke', '--id', reader!.clientId]));
    assert.deepEqual(out, { clientId: reader!.clientId, revoked: true });
    const row = (await db.query('SELECT revoked_at FROM clients WHERE id = $1', [reader!.clientId])).rows[0];
    assert.ok(row.revoked_at instanceof Date);
    const list = oneJsonLine(await cli(['client', 'list', '--project', projectId]));
    assert.equal(list.find((c: { clientId: string }) => c.clientId === reader!.clientId).revoked, true);
    failed(await cli(['client', 'revoke', '--id', 'no-such-client']), /no-such-client/);
    await db.end();
  });
});
