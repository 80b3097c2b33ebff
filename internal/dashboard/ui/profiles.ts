// The profiles view: the identified profiles (GET profiles, newest first, with a search over
// id, email and names), and one profile (GET profiles/{id}): its numbers (.../metrics), its
// properties, its recent events as a timeline (newest first) and its sessions
// (.../sessions), each of which opens that session's events (sessions.ts).
import type { EventRow, ProfileMetrics, ProfileRow, SessionRow } from './analytics-api';
import { ApiError } from './api';
import { h } from './dom';
import { duration } from './format';
import { eventItem, loadSession, sessionItem, sessionRef } from './sessions';
import { ago, dateTime } from './times';
import type { ViewContext } from './view-context';

/** "Ada Lovelace", else the email, else the id. */
export function profileName(p: Pick<ProfileRow, 'first_name' | 'last_name' | 'email' | 'id'>): string {
  return `${p.first_name} ${p.last_name}`.trim() || p.email || p.id;
}

/** Two letters for the avatar: of the first and last words of the name shown (letters only). */
export function initials(p: Pick<ProfileRow, 'first_name' | 'last_name' | 'email' | 'id'>): string {
  const name = profileName(p);
  const words = name.replace(/[^\p{L} ]+/gu, ' ').trim().split(/\s+/).filter(Boolean);
  const letters = words.length >= 2 ? words[0]!.charAt(0) + words[words.length - 1]!.charAt(0) : (words[0] ?? name).slice(0, 2) || '?';
  return letters.toUpperCase();
}

/** A property value as text: strings as they are, anything else as JSON. */
export const propertyText = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v) ?? String(v));

/** Properties sorted by key, without the avatar (shown as the picture). */
export const propertyEntries = (props: Record<string, unknown>): [string, string][] =>
  Object.entries(props ?? {}).filter(([k]) => k !== 'avatar').sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => [k, propertyText(v)]);

/** How long to wait after a keystroke before searching. */
const SEARCH_DELAY_MS = 250;

function avatar(p: ProfileRow, big = false): HTMLElement {
  const cls = `avatar${big ? ' big' : ''}`;
  if (/^https:\/\//.test(p.avatar)) return h('img', { class: cls, src: p.avatar, alt: '', referrerpolicy: 'no-referrer' });
  return h('span', { class: cls, 'aria-hidden': 'true' }, initials(p));
}

export async function loadProfiles(host: HTMLElement, ctx: ViewContext): Promise<void> {
  const a = ctx.state.analytics;
  const toList = () => ctx.go({ profile: null, session: null });
  if (a.session) {
    return loadSession(host, ctx, a.session, { label: a.session.profile, go: () => ctx.go({ profile: a.session!.profile, session: null }) });
  }
  if (a.profile) return loadProfile(host, ctx, a.profile, toList);
  const list = h('ol', { class: 'rows', id: 'profile-list', 'aria-busy': 'true' }, h('li', { class: 'skeleton-row' }), h('li', { class: 'skeleton-row' }));
  const input = h('input', {
    type: 'search', id: 'profile-search', value: a.search, placeholder: 'Search by name, email or id', 'aria-label': 'Search profiles', autocomplete: 'off', spellcheck: 'false',
  });
  let timer: ReturnType<typeof setTimeout> | null = null;
  let searching: AbortController | null = null;
  const search = async (now: boolean) => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(async () => {
      const q = input.value;
      ctx.go({ search: q }, 'quiet');
      searching?.abort();
      const ctl = new AbortController();
      searching = ctl;
      ctx.signal.addEventListener('abort', () => ctl.abort(), { once: true });
      try {
        fill(await ctx.api.profiles(q, ctl.signal), q);
      } catch (err) {
        if (ctl.signal.aborted) return;
        list.setAttribute('aria-busy', 'false');
        list.replaceChildren(h('li', { class: 'empty error' }, err instanceof ApiError && err.kind === 'badRequest' ? `The server refused this search: ${err.message}` : 'Could not load the profiles. Try again.'));
      }
    }, now ? 0 : SEARCH_DELAY_MS);
  };
  input.addEventListener('input', () => void search(false));
  const fill = (rows: ProfileRow[], q: string) => {
    list.setAttribute('aria-busy', 'false');
    list.dataset.query = q;
    list.replaceChildren(...(rows.length ? rows.map((p) => h('li', { class: 'row-item' }, h('button', {
      type: 'button', class: 'row profile-row', 'data-id': p.id, onclick: () => ctx.go({ profile: p.id }),
      'aria-label': `${profileName(p)}. Open the profile`,
    },
      h('span', { class: 'row-name' }, avatar(p),
        h('span', { class: 'row-label' }, profileName(p)),
        h('span', { class: 'row-sub' }, p.email && p.email !== profileName(p) ? `${p.email} · ${p.id}` : p.id)),
      h('span', { class: 'row-value seen' }, `seen ${ago(p.last_seen_at)}`))))
      : [h('li', { class: 'empty' }, q.trim() ? `No profile matches “${q.trim()}”.` : 'No identified profiles yet: they come from identify calls.')]));
  };
  host.replaceChildren(h('section', { class: 'box' },
    h('div', { class: 'box-head' }, h('h2', {}, 'Profiles'),
      h('form', { role: 'search', class: 'search', onsubmit: (e: Event) => { e.preventDefault(); void search(true); } }, input)),
    list));
  const rows = await ctx.api.profiles(a.search, ctx.signal);
  if (ctx.signal.aborted) return;
  fill(rows, a.search);
}

async function loadProfile(host: HTMLElement, ctx: ViewContext, id: string, back: () => void): Promise<void> {
  const tz = ctx.project.timezone;
  const backLink = h('button', { type: 'button', class: 'link back', onclick: back }, '← All profiles');
  host.replaceChildren(backLink, h('section', { class: 'box', 'aria-busy': 'true' }, h('div', { class: 'skeleton-row' }), h('div', { class: 'skeleton-row' })));
  let data: [{ profile: ProfileRow; recentEvents: EventRow[] }, SessionRow[], ProfileMetrics];
  try {
    data = await Promise.all([ctx.api.profile(id, ctx.signal), ctx.api.profileSessions(id, ctx.signal), ctx.api.profileMetrics(id, ctx.signal)]);
  } catch (err) {
    if (!(err instanceof ApiError && err.kind === 'notFound')) throw err;
    host.replaceChildren(backLink, h('section', { class: 'box' }, h('p', { class: 'empty' }, `There is no profile “${id}” in this project.`)));
    return;
  }
  if (ctx.signal.aborted) return;
  const [{ profile: p, recentEvents }, sessions, m] = data;
  const stat = (label: string, value: string, key: string) => h('div', { class: 'stat', 'data-metric': key }, h('span', { class: 'card-label' }, label), h('span', { class: 'stat-value' }, value));
  const props = propertyEntries(p.properties);
  const header = h('section', { class: 'box profile-head', id: 'profile', 'data-id': p.id },
    h('div', { class: 'who' }, avatar(p, true),
      h('div', {},
        h('h2', { id: 'profile-name' }, profileName(p)),
        h('div', { class: 'muted' }, [p.email, p.id].filter((x, i, all) => x && all.indexOf(x) === i).join(' · ')),
        h('div', { class: 'muted small' }, `First seen ${dateTime(m.firstSeen ?? p.created_at, tz)} · last seen ${dateTime(m.lastSeen ?? p.last_seen_at, tz)} (${ago(m.lastSeen ?? p.last_seen_at)})`)),
      h('span', { class: `badge${p.is_external ? '' : ' muted'}` }, p.is_external ? 'Identified' : 'Anonymous')),
    h('div', { class: 'stats', id: 'profile-metrics' },
      stat('Sessions', m.sessions.toLocaleString('en-US'), 'sessions'),
      stat('Events', m.totalEvents.toLocaleString('en-US'), 'totalEvents'),
      stat('Page views', m.screenViews.toLocaleString('en-US'), 'screenViews'),
      stat('Days active', m.uniqueDaysActive.toLocaleString('en-US'), 'uniqueDaysActive'),
      stat('Avg. session', duration(m.avgSessionDurationMin * 60), 'avgSessionDurationMin'),
      stat('Bounce rate', `${m.bounceRate}%`, 'bounceRate')));
  const properties = h('section', { class: 'box' }, h('div', { class: 'box-head' }, h('h2', {}, 'Properties')),
    props.length
      ? h('dl', { class: 'prop-list', id: 'profile-properties' }, props.flatMap(([k, v]) => [h('dt', {}, k), h('dd', { 'data-key': k }, v)]))
      : h('p', { class: 'empty' }, 'No properties.'),
    p.groups.length ? h('p', { class: 'muted small' }, `Groups: ${p.groups.join(', ')}`) : null);
  const sessionList = h('section', { class: 'box' }, h('div', { class: 'box-head' }, h('h2', {}, 'Sessions'), h('span', { class: 'muted' }, 'Newest first')),
    sessions.length
      ? h('ol', { class: 'rows', id: 'profile-sessions' }, sessions.map((s) => sessionItem(s, tz, () => ctx.go({ session: sessionRef(s, tz) }), false)))
      : h('p', { class: 'empty' }, 'No sessions.'));
  const events = h('section', { class: 'box' }, h('div', { class: 'box-head' }, h('h2', {}, 'Recent events'), h('span', { class: 'muted' }, 'Newest first')),
    recentEvents.length
      ? h('ol', { class: 'timeline', id: 'profile-events' }, recentEvents.map((e) => eventItem(e, tz)))
      : h('p', { class: 'empty' }, 'No events.'));
  host.replaceChildren(backLink, header, h('div', { class: 'profile-grid' }, h('div', { class: 'col' }, properties, sessionList), h('div', { class: 'col' }, events)));
}
