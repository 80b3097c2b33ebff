// The sessions view (GET sessions: the period's latest sessions, the overview's filters
// applied) and one session's events in order. The events route has no session parameter, so
// a session's events are its profile's events of the days it spans (by profileId, and by its
// device id when that differs: the anonymous events before an identify), kept when their
// session_id is the session's. The URL names a session by id, profile and local start day.
import type { EventRow, SessionRow } from './analytics-api';
import { LIST_ROWS } from './analytics-api';
import type { SessionRef } from './analytics-state';
import { h } from './dom';
import { compact, duration } from './format';
import { displayName } from './labels';
import { periodLabel, periodParams, todayIn } from './periods';
import { dateTime, localDay, offset, timeOfDay } from './times';
import type { ViewContext } from './view-context';

/** The period (local days) whose events hold a session that started on `day`: that day and the next, never after today. */
export function eventsPeriod(day: string, today: string): { startDate: string; endDate: string } {
  const next = new Date(Date.parse(`${day}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);
  return { startDate: day, endDate: next > today ? (day > today ? day : today) : next };
}

/** The session's events from the lists asked (newest first, maybe overlapping), oldest first. */
export function sessionEvents(lists: readonly EventRow[][], sessionId: string): EventRow[] {
  const byId = new Map<string, EventRow>();
  for (const list of lists) for (const e of list) if (e.session_id === sessionId) byId.set(e.id, e);
  return [...byId.values()].sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? -1 : a.id > b.id ? 1 : 0) : a.created_at < b.created_at ? -1 : 1));
}

/** What a person calls an event: a screen view is a page view. */
export const eventTitle = (e: Pick<EventRow, 'name'>): string => (e.name === 'screen_view' ? 'Page view' : e.name);

/** A few of an event's properties, "plan: pro · amount: 49" (objects as JSON). */
export function propertySummary(props: Record<string, unknown>, most = 4): string {
  const entries = Object.entries(props ?? {}).filter(([k]) => !k.startsWith('__'));
  const shown = entries.slice(0, most).map(([k, v]) => `${k}: ${typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v)}`);
  return entries.length > most ? `${shown.join(' · ')} · +${entries.length - most} more` : shown.join(' · ');
}

/** A session's place in the URL. */
export const sessionRef = (s: SessionRow, timeZone: string): SessionRef => ({ id: s.id, profile: s.profile_id, day: localDay(s.created_at, timeZone) });

/** One event of a timeline: when (or how long after the session's start), what, where. */
export function eventItem(e: EventRow, timeZone: string, start?: string): HTMLElement {
  const page = e.name === 'screen_view';
  const props = propertySummary(e.properties);
  const when = start === undefined ? dateTime(e.created_at, timeZone) : offset(Date.parse(e.created_at) - Date.parse(start));
  return h('li', { class: `event ${page ? 'is-view' : 'is-custom'}`, 'data-id': e.id, 'data-name': e.name },
    h('span', { class: 'event-dot', 'aria-hidden': 'true' }),
    h('div', { class: 'event-body' },
      h('div', { class: 'event-line' },
        h('span', { class: 'event-name' }, eventTitle(e)),
        e.path ? h('span', { class: 'event-path' }, e.path) : null,
        h('time', { class: 'event-time', datetime: e.created_at, title: dateTime(e.created_at, timeZone) }, when)),
      page && e.title ? h('div', { class: 'event-sub' }, e.title) : null,
      props ? h('div', { class: 'event-sub event-props' }, props) : null));
}

/** One session of a list: a button that opens it. */
export function sessionItem(s: SessionRow, timeZone: string, open: () => void, showProfile: boolean): HTMLElement {
  const where = [displayName('country', s.country), s.browser, s.os].filter((x) => x && x !== '(not set)').join(' · ');
  return h('li', { class: 'row-item' }, h('button', {
    type: 'button', class: 'row session-row', 'data-id': s.id, 'data-events': String(s.event_count), onclick: open,
    'aria-label': `Session of ${dateTime(s.created_at, timeZone)}: ${s.event_count} events, ${duration(s.duration)}. Show its events`,
  },
    h('span', { class: 'row-name' },
      h('span', { class: 'row-label' }, dateTime(s.created_at, timeZone)),
      h('span', { class: 'row-sub' }, [showProfile ? (s.profile_id === s.device_id ? 'Anonymous' : s.profile_id) : '', s.entry_path || '', where].filter(Boolean).join(' · '))),
    h('span', { class: 'row-value' }, `${compact(s.event_count)} event${s.event_count === 1 ? '' : 's'}`, h('span', { class: 'row-share' }, duration(s.duration)))));
}

export async function loadSessions(host: HTMLElement, ctx: ViewContext): Promise<void> {
  const open = ctx.state.analytics.session;
  if (open) return loadSession(host, ctx, open, { label: 'All sessions', go: () => ctx.go({ session: null, profile: null }) });
  const list = h('ol', { class: 'rows', id: 'session-list', 'aria-busy': 'true' }, h('li', { class: 'skeleton-row' }), h('li', { class: 'skeleton-row' }));
  host.replaceChildren(h('section', { class: 'box' },
    h('div', { class: 'box-head' }, h('h2', {}, 'Sessions'), h('span', { class: 'muted' }, `Latest ${LIST_ROWS} of ${periodLabel(ctx.state.period).toLowerCase()}`)),
    list));
  const filters: Record<string, string> = ctx.state.filters.length ? { filters: JSON.stringify(ctx.state.filters) } : {};
  const rows = await ctx.api.sessions({ ...periodParams(ctx.state.period), ...filters }, ctx.signal);
  if (ctx.signal.aborted) return;
  const tz = ctx.project.timezone;
  list.setAttribute('aria-busy', 'false');
  list.replaceChildren(...(rows.length
    ? rows.map((s) => sessionItem(s, tz, () => ctx.go({ session: sessionRef(s, tz) }), true))
    : [h('li', { class: 'empty' }, 'No session started in this period.')]));
}

/** One session: its numbers and its events in order. `back` returns to where it was opened. */
export async function loadSession(host: HTMLElement, ctx: ViewContext, ref: SessionRef, back: { label: string; go: () => void }): Promise<void> {
  const tz = ctx.project.timezone;
  const backLink = h('button', { type: 'button', class: 'link back', onclick: back.go }, `← ${back.label}`);
  host.replaceChildren(backLink, h('section', { class: 'box', 'aria-busy': 'true' }, h('div', { class: 'skeleton-row' }), h('div', { class: 'skeleton-row' })));
  const period = eventsPeriod(ref.day, todayIn(tz));
  const started = await ctx.api.sessions({ profileId: ref.profile, startDate: ref.day, endDate: ref.day }, ctx.signal);
  const session = started.find((s) => s.id === ref.id) ?? null;
  const ids = [ref.profile, ...(session && session.device_id !== ref.profile ? [session.device_id] : [])];
  const lists = await Promise.all(ids.map((profileId) => ctx.api.events({ profileId, ...period }, ctx.signal)));
  if (ctx.signal.aborted) return;
  const events = sessionEvents(lists, ref.id);
  const start = session?.created_at ?? events[0]?.created_at;
  const stat = (label: string, value: string, id: string, text = false) =>
    h('div', { class: 'stat' }, h('span', { class: 'card-label' }, label), h('span', { class: `stat-value${text ? ' text' : ''}`, id }, value));
  const head = h('div', { class: 'box-head' },
    h('h2', { id: 'session-title' }, start ? `Session of ${dateTime(start, tz)}` : 'Session'),
    ctx.state.analytics.view === 'profiles' ? null
      : h('button', { type: 'button', class: 'link', onclick: () => ctx.go({ view: 'profiles', profile: ref.profile, session: null }) }, `Profile ${ref.profile}`));
  const facts = session
    ? h('div', { class: 'stats' },
      stat('Duration', duration(session.duration), 'session-duration'),
      stat('Events', String(session.event_count), 'session-events'),
      stat('Page views', String(session.screen_view_count), 'session-views'),
      stat('Entry → exit', `${session.entry_path || '—'} → ${session.exit_path || '—'}`, 'session-path', true),
      stat('Device', [session.device && displayName('device', session.device), session.browser, session.os].filter(Boolean).join(' · ') || '—', 'session-device', true),
      stat('Location', [session.city, session.country && displayName('country', session.country)].filter(Boolean).join(', ') || '—', 'session-location', true))
    : h('p', { class: 'muted' }, 'This session is not among the sessions of its profile that started on that day.');
  const cut = session && events.length < session.event_count && lists.some((l) => l.length >= LIST_ROWS);
  host.replaceChildren(backLink, h('section', { class: 'box session', 'data-session': ref.id }, head, facts,
    h('h3', { class: 'sub-title' }, `Events in order (${events.length})`),
    events.length
      ? h('ol', { class: 'timeline', id: 'session-events' }, events.map((e) => eventItem(e, tz, start)))
      : h('p', { class: 'empty' }, 'No events found for this session.'),
    cut ? h('p', { class: 'muted small' }, `The ${LIST_ROWS} latest events of the profile on those days are shown; this session has ${session.event_count}.`) : null,
    start ? h('p', { class: 'muted small' }, `Times after the session's start at ${timeOfDay(start, tz)} (${tz}).`) : null));
}
