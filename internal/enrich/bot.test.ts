import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createPutBot, detectBot } from './bot';
import { blankEventRecord } from './record';

const GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)';
const GOOGLEBOT_SMARTPHONE =
  'Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.201 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)';
const BINGBOT = 'Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)';
const CHROME = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36';
const IPHONE =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1';

test('crawlers are bots; the reason is the matched user-agent token without its version', () => {
  assert.deepEqual(detectBot(GOOGLEBOT), { isBot: true, botReason: 'Googlebot' });
  assert.deepEqual(detectBot(GOOGLEBOT_SMARTPHONE), { isBot: true, botReason: 'Googlebot' });
  assert.deepEqual(detectBot(BINGBOT), { isBot: true, botReason: 'bingbot' });
  assert.deepEqual(detectBot('Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.0; +https://openai.com/gptbot)'), {
    isBot: true,
    botReason: 'GPTBot',
  });
  assert.deepEqual(detectBot('facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)'), {
    isBot: true,
    botReason: 'facebookexternalhit',
  });
});

test('HTTP libraries (server-side SDKs, scripts) are not bots: their events count like OpenPanel server events', () => {
  for (const ua of ['curl/8.4.0', 'python-requests/2.31.0', 'node', 'axios/1.6.8', 'Go-http-client/1.1', 'undici']) {
    assert.deepEqual(detectBot(ua), { isBot: false, botReason: null }, ua);
  }
});

test('browsers are not bots', () => {
  assert.deepEqual(detectBot(CHROME), { isBot: false, botReason: null });
  assert.deepEqual(detectBot(IPHONE), { isBot: false, botReason: null });
});

test('no user-agent is not a bot (a server-side call)', () => {
  assert.deepEqual(detectBot(null), { isBot: false, botReason: null });
  assert.deepEqual(detectBot(''), { isBot: false, botReason: null });
});

test('the step flags the record and keeps it', () => {
  const put = createPutBot({ cacheSize: 4 });
  const bot = put.run(blankEventRecord({ userAgent: GOOGLEBOT }));
  assert.ok(bot.ok);
  assert.equal(bot.event.isBot, true);
  assert.equal(bot.event.botReason, 'Googlebot');
  const human = put.run(blankEventRecord({ userAgent: CHROME }));
  assert.ok(human.ok);
  assert.equal(human.event.isBot, false);
  assert.equal(human.event.botReason, null);
  // Cached verdict, same answer.
  const again = put.run(blankEventRecord({ userAgent: GOOGLEBOT }));
  assert.ok(again.ok);
  assert.equal(again.event.isBot, true);
});
