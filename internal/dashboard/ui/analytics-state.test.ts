import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_ANALYTICS } from './analytics-state';
import { DEFAULT_STATE, parseState, stateToSearch } from './state';
import { switchTo } from './views';

test('an analytics view survives the URL beside the overview state, defaults left out', () => {
  const s = {
    ...DEFAULT_STATE, project: 'p1', period: { range: '30d' as const },
    analytics: { view: 'funnel' as const, steps: ['screen_view', 'signup, "free"', 'purchase'], windowHours: 72, groupBy: 'profile_id' as const, search: 'ada', profile: null, session: null },
  };
  const search = stateToSearch(s);
  assert.deepEqual(parseState(search), s);
  assert.equal(search, '?project=p1&range=30d&view=funnel&step=screen_view&step=signup%2C+%22free%22&step=purchase&window=72&groupBy=profile_id&q=ada');
  assert.equal(stateToSearch({ ...DEFAULT_STATE, project: 'p1' }), '?project=p1', 'the overview adds nothing');
});

test('an open session keeps its profile and day in the URL', () => {
  const session = { id: 'sess-1', profile: 'user-42', day: '2026-11-20' };
  const s = { ...DEFAULT_STATE, project: 'p', analytics: { ...DEFAULT_ANALYTICS, view: 'profiles' as const, profile: 'user-42', session } };
  const back = parseState(stateToSearch(s));
  assert.deepEqual(back.analytics.session, session);
  assert.equal(back.analytics.profile, 'user-42');
  // A session without its day (or profile) is not a session the page can find.
  assert.equal(parseState('?view=sessions&session=x&profile=u').analytics.session, null);
  assert.equal(parseState('?view=sessions&session=x&day=2026-11-20').analytics.session, null);
});

test('a hand-edited URL falls back to the defaults for what it gets wrong', () => {
  const a = parseState(`?view=nope&window=0&groupBy=device&step=${'x'.repeat(300)}&step=ok`).analytics;
  assert.equal(a.view, 'overview');
  assert.equal(a.windowHours, 24);
  assert.equal(a.groupBy, 'session_id');
  assert.deepEqual(a.steps, ['ok'], 'a step longer than an event name can be is dropped');
  assert.equal(parseState('?window=721').analytics.windowHours, 24);
  assert.equal(parseState('?window=2.5').analytics.windowHours, 24);
  assert.equal(parseState(`?${Array.from({ length: 12 }, (_, i) => `step=e${i}`).join('&')}`).analytics.steps.length, 10, 'at most 10 steps');
});

test('picking a tab keeps the funnel and the search, and closes the open profile or session', () => {
  const open = { ...DEFAULT_ANALYTICS, view: 'profiles' as const, steps: ['a', 'b'], search: 'ada', profile: 'u1', session: { id: 's', profile: 'u1', day: '2026-01-01' } };
  assert.deepEqual(switchTo(open, 'funnel'), { ...open, view: 'funnel', profile: null, session: null });
});
