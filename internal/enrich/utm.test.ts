import assert from 'node:assert/strict';
import { test } from 'node:test';
import { blankEventRecord } from './record';
import { parseUtm, putUtm } from './utm';

test('all five utm tags from an absolute URL', () => {
  const result = putUtm.run(
    blankEventRecord({
      url: 'https://shop.example.com/pricing?utm_source=newsletter&utm_medium=email&utm_campaign=spring_sale&utm_term=running+shoes&utm_content=header_link#plans',
    }),
  );
  assert.ok(result.ok);
  const e = result.event;
  assert.equal(e.utm_source, 'newsletter');
  assert.equal(e.utm_medium, 'email');
  assert.equal(e.utm_campaign, 'spring_sale');
  assert.equal(e.utm_term, 'running shoes');
  assert.equal(e.utm_content, 'header_link');
});

test('utm tags from a bare path, percent-decoded; absent ones are empty', () => {
  assert.deepEqual(parseUtm('/landing?utm_source=twitter&utm_campaign=launch%20week&ref=x'), {
    utm_source: 'twitter',
    utm_medium: '',
    utm_campaign: 'launch week',
    utm_term: '',
    utm_content: '',
  });
});

test('no query, a query only in the fragment, or no URL: all empty', () => {
  const empty = { utm_source: '', utm_medium: '', utm_campaign: '', utm_term: '', utm_content: '' };
  assert.deepEqual(parseUtm('https://example.com/pricing'), empty);
  assert.deepEqual(parseUtm('/pricing#utm_source=ignored'), empty);
  assert.deepEqual(parseUtm(null), empty);
  assert.deepEqual(parseUtm(''), empty);
});

test('a malformed URL still yields its utm tags; bad escapes do not throw', () => {
  assert.equal(parseUtm('https://exa mple.com/?utm_source=news').utm_source, 'news');
  assert.doesNotThrow(() => parseUtm('/?utm_source=%E0%A4%A&utm_medium=%'));
  assert.equal(parseUtm('/?utm_medium=%').utm_medium, '%');
});

test('a repeated tag keeps its first value; keys are case-sensitive', () => {
  assert.equal(parseUtm('/?utm_source=first&utm_source=second').utm_source, 'first');
  assert.equal(parseUtm('/?UTM_SOURCE=upper').utm_source, '');
});
