import assert from 'node:assert/strict';
import { test } from 'node:test';
import { blankEventRecord } from './record';
import { createPutReferrer, createReferrerClassifier, NO_REFERRER } from './referrer';

const PAGE = 'https://shop.example.com/pricing?utm_source=x';
const classify = createReferrerClassifier();

test('Google search: name Google, type search, URL stored without its trailing slash', () => {
  assert.deepEqual(classify('https://www.google.com/', PAGE), {
    referrer: 'https://www.google.com',
    referrer_name: 'Google',
    referrer_type: 'search',
  });
  assert.deepEqual(classify('https://www.google.co.uk/search?q=tidemark+analytics', PAGE), {
    referrer: 'https://www.google.co.uk/search?q=tidemark+analytics',
    referrer_name: 'Google',
    referrer_type: 'search',
  });
});

test('social networks: Facebook link shim, t.co, www. fallback for twitter.com', () => {
  assert.deepEqual(classify('https://l.facebook.com/l.php?u=https%3A%2F%2Fshop.example.com%2F', PAGE), {
    referrer: 'https://l.facebook.com/l.php?u=https%3A%2F%2Fshop.example.com%2F',
    referrer_name: 'Facebook',
    referrer_type: 'social',
  });
  assert.deepEqual(classify('https://t.co/', PAGE), { referrer: 'https://t.co', referrer_name: 'Twitter', referrer_type: 'social' });
  assert.equal(classify('https://www.twitter.com/tidemark', PAGE).referrer_name, 'Twitter');
});

test('webmail is email, also from an Android app referrer', () => {
  assert.deepEqual(classify('https://mail.google.com/', PAGE), {
    referrer: 'https://mail.google.com',
    referrer_name: 'Gmail',
    referrer_type: 'email',
  });
  assert.equal(classify('android-app://com.google.android.gm/', PAGE).referrer_type, 'email');
});

test('an unlisted site is a referrer named by its host (no www.), type unknown', () => {
  assert.deepEqual(classify('https://www.someblog.net/2024/05/analytics-tools/', PAGE), {
    referrer: 'https://www.someblog.net/2024/05/analytics-tools',
    referrer_name: 'someblog.net',
    referrer_type: 'unknown',
  });
});

test("the package's 'referral' medium folds into OpenPanel's 'unknown'", () => {
  assert.deepEqual(classify('https://en.wikipedia.org/wiki/Web_analytics', PAGE), {
    referrer: 'https://en.wikipedia.org/wiki/Web_analytics',
    referrer_name: 'Wikipedia',
    referrer_type: 'unknown',
  });
});

test("a referrer on the page's own host is no referrer", () => {
  assert.deepEqual(classify('https://shop.example.com/', PAGE), NO_REFERRER);
  assert.deepEqual(classify('https://SHOP.example.com:8443/cart', PAGE), NO_REFERRER);
  // A relative referrer can only be the same site.
  assert.deepEqual(classify('/previous-page', '/pricing'), NO_REFERRER);
});

test('another host of the same company is still a referrer (exact host match, as OpenPanel)', () => {
  assert.deepEqual(classify('https://blog.example.com/post', PAGE), {
    referrer: 'https://blog.example.com/post',
    referrer_name: 'blog.example.com',
    referrer_type: 'unknown',
  });
});

test('with a bare-path page URL the own-host check cannot apply; the referrer is still named', () => {
  assert.equal(classify('https://duckduckgo.com/', '/pricing').referrer_name, 'DuckDuckGo');
});

test('no referrer: all three empty', () => {
  for (const r of [null, undefined, '', '  ']) assert.deepEqual(classify(r, PAGE), NO_REFERRER);
});

test('an unparseable referrer is kept as sent, unnamed, type unknown, without throwing', () => {
  assert.deepEqual(classify('not a url', PAGE), { referrer: 'not a url', referrer_name: '', referrer_type: 'unknown' });
});

test('the step writes the three fields and leaves the rest alone', () => {
  const put = createPutReferrer({ cacheSize: 10 });
  const result = put.run(blankEventRecord({ url: PAGE, referrer: 'https://www.bing.com/search?q=x', utm_source: 'keep' }));
  assert.ok(result.ok);
  assert.equal(result.event.referrer, 'https://www.bing.com/search?q=x');
  assert.equal(result.event.referrer_name, 'Bing');
  assert.equal(result.event.referrer_type, 'search');
  assert.equal(result.event.utm_source, 'keep');
  // Cached answer is the same answer.
  const again = put.run(blankEventRecord({ url: PAGE, referrer: 'https://www.bing.com/search?q=y' }));
  assert.ok(again.ok);
  assert.equal(again.event.referrer_name, 'Bing');
});

test('no external referrer: utm_source, ref or utm_referrer in the page URL names it (list name and type, else the value, unknown)', async () => {
  const { createSourceClassifier } = await import('./referrer');
  const source = createSourceClassifier();
  assert.deepEqual(source(null, 'https://shop.example.com/?utm_source=twitter'), { referrer: '', referrer_name: 'Twitter', referrer_type: 'social' });
  assert.deepEqual(source('', 'https://shop.example.com/?ref=producthunt'), { referrer: '', referrer_name: 'producthunt', referrer_type: 'unknown' });
  assert.deepEqual(source(null, '/landing?utm_referrer=google'), { referrer: '', referrer_name: 'Google', referrer_type: 'search' });
  // a host, a listed name in any case, the value kept as sent when unlisted
  assert.deepEqual(source(null, 'https://a.example/?utm_source=news.ycombinator.com'), { referrer: '', referrer_name: 'Hacker News', referrer_type: 'social' });
  assert.deepEqual(source(null, 'https://a.example/?utm_source=hacker%20news'), { referrer: '', referrer_name: 'Hacker News', referrer_type: 'social' });
  assert.deepEqual(source(null, 'https://a.example/?utm_source=Spring+Newsletter'), { referrer: '', referrer_name: 'Spring Newsletter', referrer_type: 'unknown' });
  // the list is matched exactly, never by prefix (the package's own URL match would call bufferapp Buffer)
  assert.deepEqual(source(null, 'https://a.example/?ref=bufferapp'), { referrer: '', referrer_name: 'bufferapp', referrer_type: 'unknown' });
});

test('utm_source first, then ref, then utm_referrer; an empty one is skipped', async () => {
  const { createSourceClassifier } = await import('./referrer');
  const source = createSourceClassifier();
  assert.equal(source(null, 'https://a.example/?ref=reddit&utm_source=facebook&utm_referrer=bing').referrer_name, 'Facebook');
  assert.equal(source(null, 'https://a.example/?utm_referrer=bing&ref=reddit').referrer_name, 'Reddit');
  assert.equal(source(null, 'https://a.example/?utm_source=&ref=%20&utm_referrer=bing').referrer_name, 'Bing');
  assert.deepEqual(source(null, 'https://a.example/?utm_medium=email'), NO_REFERRER);
  assert.deepEqual(source(null, null), NO_REFERRER);
});

test('an external referrer wins over the URL; a same-site referrer is none, so the URL names the source', async () => {
  const { createSourceClassifier } = await import('./referrer');
  const source = createSourceClassifier();
  assert.deepEqual(source('https://www.google.com/', 'https://shop.example.com/?utm_source=twitter'), {
    referrer: 'https://www.google.com', referrer_name: 'Google', referrer_type: 'search',
  });
  assert.deepEqual(source('https://shop.example.com/cart', 'https://shop.example.com/?utm_source=twitter'), {
    referrer: '', referrer_name: 'Twitter', referrer_type: 'social',
  });
  // the step uses it
  const r = createPutReferrer().run(blankEventRecord({ url: 'https://shop.example.com/?ref=linkedin' }));
  assert.ok(r.ok);
  assert.deepEqual([r.event.referrer, r.event.referrer_name, r.event.referrer_type], ['', 'LinkedIn', 'social']);
});
