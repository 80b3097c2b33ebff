// Allowed origins: exact origins, https://*.example.com (any subdomain, never the apex), bare
// hosts (https or http), and no suffix tricks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { originAllowed, OriginSyntaxError, parseAllowedOrigin } from './origins';

test('parseAllowedOrigin stores each form normalised', () => {
  const cases: [string, string][] = [
    ['*', '*'],
    ['https://Shop.Example.com', 'https://shop.example.com'],
    ['https://shop.example.com/', 'https://shop.example.com'],
    ['http://localhost:3000', 'http://localhost:3000'],
    ['https://example.com:443', 'https://example.com'],
    ['https://*.Example.com', 'https://*.example.com'],
    ['http://*.example.com:8080', 'http://*.example.com:8080'],
    ['example.com', 'example.com'],
    ['Example.COM:8443', 'example.com:8443'],
    ['*.example.com', '*.example.com'],
    ['bücher.example', 'xn--bcher-kva.example'],
  ];
  for (const [input, stored] of cases) assert.equal(parseAllowedOrigin(input), stored, input);
});

test('parseAllowedOrigin refuses what cannot be an origin, a misplaced wildcard and a wildcard over a top-level name', () => {
  for (const bad of ['ftp://example.com', 'https://example.com/path', 'https://a.*.example.com', 'https://*', 'https://*.com', '*.com', 'https://', '', 'exa mple.com', 'https://user@example.com', 'example.com?x=1']) {
    assert.throws(() => parseAllowedOrigin(bad), OriginSyntaxError, bad);
  }
});

test('an exact origin: that scheme, host and port only', () => {
  const allowed = ['https://shop.example.com'];
  assert.equal(originAllowed('https://shop.example.com', allowed), true);
  assert.equal(originAllowed('https://SHOP.example.com', allowed), true);
  assert.equal(originAllowed('http://shop.example.com', allowed), false);
  assert.equal(originAllowed('https://shop.example.com:8443', allowed), false);
  assert.equal(originAllowed('https://a.shop.example.com', allowed), false);
});

test('https://*.example.com: any subdomain at any depth over https, never the apex, never a suffix trick', () => {
  const allowed = [parseAllowedOrigin('https://*.example.com')];
  for (const ok of ['https://www.example.com', 'https://a.example.com', 'https://a.b.example.com', 'https://A.Example.Com']) assert.equal(originAllowed(ok, allowed), true, ok);
  for (const no of [
    'https://example.com', // apex
    'http://a.example.com', // scheme
    'https://a.example.com:8443', // port
    'https://example.com.evil.net', // suffix trick
    'https://a.example.com.evil.net',
    'https://evilexample.com', // no label boundary
    'https://a.evil-example.com',
    'null',
    'not a url',
  ]) assert.equal(originAllowed(no, allowed), false, no);
});

test('a bare host: that host over https or http (its port only), nothing else', () => {
  const allowed = [parseAllowedOrigin('example.com')];
  assert.equal(originAllowed('https://example.com', allowed), true);
  assert.equal(originAllowed('http://example.com', allowed), true);
  for (const no of ['https://www.example.com', 'https://example.com:8443', 'https://example.com.evil.net', 'https://notexample.com', 'ws://example.com']) {
    assert.equal(originAllowed(no, allowed), false, no);
  }
  const withPort = [parseAllowedOrigin('localhost:3000')];
  assert.equal(originAllowed('http://localhost:3000', withPort), true);
  assert.equal(originAllowed('http://localhost:3001', withPort), false);
  // *.example.com without a scheme: its subdomains over either scheme
  const bareWildcard = [parseAllowedOrigin('*.example.com')];
  assert.equal(originAllowed('http://a.example.com', bareWildcard), true);
  assert.equal(originAllowed('https://a.example.com', bareWildcard), true);
  assert.equal(originAllowed('https://example.com', bareWildcard), false);
});

test('* allows any origin; an empty list none', () => {
  assert.equal(originAllowed('https://anything.example', ['*']), true);
  assert.equal(originAllowed('https://anything.example', []), false);
  // several entries: any one may match
  assert.equal(originAllowed('https://b.example', ['https://a.example', 'b.example']), true);
});
