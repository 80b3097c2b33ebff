import assert from 'node:assert/strict';
import { test } from 'node:test';
import { list } from 'isbot';
import { createPutBot, detectBot, NOT_BOT_PATTERNS } from './bot';
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

test('HTTP libraries with a longer user-agent are not bots either', () => {
  for (const ua of [
    'Apache-HttpClient/4.5.14 (Java/17)',
    'node-fetch/1.0 (+https://github.com/bitinn/node-fetch)',
    'k6/0.49.0 (https://k6.io/)',
    'Faraday v2.9.0',
    'PostmanRuntime/7.36.0',
    'Java/17.0.1',
    'Dart/3.2 (dart:io)',
    'okhttp/4.12.0',
  ]) {
    assert.deepEqual(detectBot(ua), { isBot: false, botReason: null }, ua);
  }
});

test('browsers driven by test and automation tools are not bots (that is how a web SDK integration is tested)', () => {
  for (const ua of [
    'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.6099.28 Safari/537.36',
    'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Playwright/1.40',
    'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Cypress/13.0.0 Chrome/118.0.5993.88 Electron/26.2.4 Safari/537.36',
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) Selenium AppleWebKit/537.36',
  ]) {
    assert.deepEqual(detectBot(ua), { isBot: false, botReason: null }, ua);
  }
});

test('made-up client names are not bots', () => {
  for (const ua of ['Mozilla/5.0 (compatible; MyTest/1.0)', 'Acceptance Test Suite 1.0', 'Mozilla/5.0 (Test)', 'my-app 2.3 (build 7)']) {
    assert.deepEqual(detectBot(ua), { isBot: false, botReason: null }, ua);
  }
});

test('crawlers that name a URL or a common word are still bots', () => {
  assert.deepEqual(detectBot('Mozilla/5.0 (compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)'), { isBot: true, botReason: 'UptimeRobot' });
  assert.deepEqual(detectBot('Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)'), { isBot: true, botReason: 'AhrefsBot' });
  assert.deepEqual(detectBot('Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)'), { isBot: true, botReason: 'YandexBot' });
  assert.equal(detectBot('Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)').isBot, true);
  assert.equal(detectBot('Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)').isBot, true);
  assert.equal(detectBot('Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/122.0.0.0 Safari/537.36 (compatible; SemrushBot/7~bl)').isBot, true);
});

test('every pattern left out is in isbot\'s list (an upgrade that renames one shows here)', () => {
  for (const p of NOT_BOT_PATTERNS) assert.ok(list.includes(p), p);
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
