import assert from 'node:assert/strict';
import { test } from 'node:test';
import { blankEventRecord } from './record';
import { parsePageUrl, putUrl } from './url';

const run = (url: string | null, title = '') => {
  const result = putUrl.run(blankEventRecord({ url, title }));
  assert.ok(result.ok);
  return result.event;
};

test('absolute URL: origin is scheme://host, path drops query and fragment', () => {
  const e = run('https://shop.example.com/pricing?utm_source=newsletter#plans', 'Pricing');
  assert.equal(e.origin, 'https://shop.example.com');
  assert.equal(e.path, '/pricing');
  assert.equal(e.title, 'Pricing');
});

test('absolute URL keeps a non-default port and a trailing slash', () => {
  const e = run('http://localhost:3000/docs/getting-started/');
  assert.equal(e.origin, 'http://localhost:3000');
  assert.equal(e.path, '/docs/getting-started/');
});

test('absolute URL without a path has path "/"; host is lower-cased, default port dropped', () => {
  const e = run('HTTPS://Example.COM:443');
  assert.equal(e.origin, 'https://example.com');
  assert.equal(e.path, '/');
});

test('bare path: no origin, path as sent without query or fragment', () => {
  const e = run('/pricing?plan=pro#faq');
  assert.equal(e.origin, '');
  assert.equal(e.path, '/pricing');
  assert.equal(run('/café/menu').path, '/café/menu');
  assert.equal(run('/').path, '/');
});

test('app scheme URL (mobile SDK) keeps its scheme and host as origin', () => {
  const e = run('myapp://settings/profile?tab=2');
  assert.equal(e.origin, 'myapp://settings');
  assert.equal(e.path, '/profile');
});

test('malformed absolute URL does not throw and keeps what can be read', () => {
  const badPort = run('https://shop.example.com:99999/checkout?step=2');
  assert.equal(badPort.origin, 'https://shop.example.com:99999');
  assert.equal(badPort.path, '/checkout');
  const space = run('https://exa mple.com/pricing');
  assert.equal(space.origin, 'https://exa mple.com');
  assert.equal(space.path, '/pricing');
  assert.equal(parsePageUrl('https://exa mple.com/pricing').hostname, 'exa mple.com');
  const hostOnly = run('http://[::1');
  assert.equal(hostOnly.path, '/');
});

test('missing or blank URL gives empty origin and path', () => {
  for (const url of [null, '', '   ']) {
    const e = run(url);
    assert.equal(e.origin, '');
    assert.equal(e.path, '');
  }
});

test('parsePageUrl exposes the host name and raw query for the other steps', () => {
  assert.deepEqual(parsePageUrl('https://www.Example.com:8443/a/b?x=1&y=2#z'), {
    origin: 'https://www.example.com:8443',
    hostname: 'www.example.com',
    path: '/a/b',
    query: 'x=1&y=2',
  });
});

test('the input record is not mutated', () => {
  const input = blankEventRecord({ url: 'https://example.com/a' });
  const copy = structuredClone(input);
  putUrl.run(input);
  assert.deepEqual(input, copy);
});
