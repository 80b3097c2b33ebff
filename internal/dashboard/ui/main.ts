// The dashboard at /dashboard: sign-in, the project, the period, six metric cards with their
// change, the chart of the selected metric, four breakdown panels whose rows filter the view,
// and the live visitor count over a WebSocket; tabs open the product-analytics views
// (views.ts: funnel, retention, profiles, sessions). It reads only the public API.
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { Api, ApiError, explain, loadCredentials, saveCredentials, type PageRow, type Project, type Row } from './api';
import type { AnalyticsState, View } from './analytics-state';
import { SeriesChart, bucketLabel, bucketOf } from './chart';
import { $, h } from './dom';
import { METRICS, change, compact, exact, formatMetric, metricInfo, type Metrics } from './format';
import { DIMENSION_LABELS, TAB_LABELS, displayName, filterText } from './labels';
import { LiveConnection, type LiveState } from './live';
import { RANGES, datesOf, isDate, periodLabel, previousOf, todayIn } from './periods';
import { TAB_GROUPS, parseState, stateToSearch, withFilter, type TabGroup, type ViewState } from './state';
import type { GoMode } from './view-context';
import { loadView, switchTo, usesPeriod, viewNav } from './views';

const PANEL_ROWS = 8;

// ---------------------------------------------------------------------------------------

class Dashboard {
  private state: ViewState = parseState(location.search);
  private api: Api | null = null;
  private projects: Project[] = [];
  private chart: SeriesChart | null = null;
  private live: LiveConnection | null = null;
  private liveProject: string | null = null;
  private loads: AbortController | null = null;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private retryTick: ReturnType<typeof setInterval> | null = null;
  private lastMetrics: { current: Metrics; previous: Metrics | null; series: (Metrics & { date: string })[]; previousSeries: Metrics[] | null } | null = null;
  private readonly root = $('#app');

  async start(): Promise<void> {
    window.addEventListener('popstate', () => {
      this.state = parseState(location.search);
      if (this.api) this.renderShell();
    });
    const creds = loadCredentials();
    if (!creds) return this.renderSignIn();
    await this.signIn(creds, false);
  }

  // -- sign-in ----------------------------------------------------------------------------

  private renderSignIn(message = ''): void {
    this.teardown();
    document.title = 'Sign in · Tidemark';
    const error = h('p', { class: 'signin-error', role: 'alert', id: 'signin-error' }, message);
    const id = h('input', { id: 'client-id', name: 'clientId', autocomplete: 'username', required: true, spellcheck: 'false', placeholder: '00000000-0000-0000-0000-000000000000' });
    const secret = h('input', { id: 'client-secret', name: 'clientSecret', type: 'password', autocomplete: 'current-password', required: true, placeholder: 'sec_…' });
    const button = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
    const form = h('form', { class: 'signin-card', 'aria-describedby': 'signin-help', onsubmit: async (e: Event) => {
      e.preventDefault();
      button.setAttribute('disabled', '');
      button.textContent = 'Signing in…';
      error.textContent = '';
      await this.signIn({ clientId: id.value.trim(), clientSecret: secret.value.trim() }, true);
      button.removeAttribute('disabled');
      button.textContent = 'Sign in';
    } },
      h('div', { class: 'brand big' }, h('span', { class: 'logo', 'aria-hidden': 'true' }), 'Tidemark'),
      h('h1', {}, 'Sign in to your analytics'),
      h('p', { class: 'muted', id: 'signin-help' }, 'Use a read client of your project, or a root client to see every project. The secret is kept in this browser tab only (never in the address bar) and is forgotten when the tab closes.'),
      h('label', { for: 'client-id' }, 'Client ID'), id,
      h('label', { for: 'client-secret' }, 'Client secret'), secret,
      button, error,
      h('p', { class: 'muted small' }, 'No client yet? ', h('code', {}, 'npm run --silent cli -- client create --project ID --mode read')),
    );
    this.root.replaceChildren(h('main', { class: 'signin' }, form));
    id.focus();
  }

  private async signIn(creds: { clientId: string; clientSecret: string }, typed: boolean): Promise<void> {
    const api = new Api(creds);
    try {
      this.projects = await api.projects();
    } catch (err) {
      if (err instanceof ApiError && (err.kind === 'unauthorized' || err.kind === 'forbidden')) {
        saveCredentials(null);
        if (!typed) return this.renderSignIn('Your session ended. Sign in again.');
        const el = document.getElementById('signin-error');
        if (el) el.textContent = explain(err);
        document.getElementById('client-secret')?.focus();
        return;
      }
      if (err instanceof ApiError && (err.kind === 'rateLimited' || err.kind === 'unavailable' || err.kind === 'network')) {
        // Not the credentials' fault: say so, and try again when the server says.
        const wait = err.retryAfter ?? (err.kind === 'rateLimited' ? 10 : 5);
        if (!typed) this.renderWaiting(explain(err));
        else {
          const el = document.getElementById('signin-error');
          if (el) el.textContent = explain(err);
        }
        this.retryTimer = setTimeout(() => void this.signIn(creds, typed), wait * 1000);
        return;
      }
      if (!typed) return this.renderSignIn(explain(err));
      const el = document.getElementById('signin-error');
      if (el) el.textContent = explain(err);
      return;
    }
    saveCredentials(creds);
    this.api = api;
    if (!this.projects.length) return this.renderSignIn('This client can read no project.');
    if (!this.state.project || !this.projects.some((p) => p.id === this.state.project)) {
      this.state = { ...this.state, project: this.projects[0]!.id };
      history.replaceState(null, '', `${location.pathname}${stateToSearch(this.state)}`);
    }
    this.renderShell();
  }

  /** Signed in, but the server asks to wait (429, 503) or cannot be reached: say so, retry. */
  private renderWaiting(message: string): void {
    document.title = 'Tidemark';
    this.root.replaceChildren(h('main', { class: 'signin' }, h('div', { class: 'signin-card' },
      h('div', { class: 'brand big' }, h('span', { class: 'logo', 'aria-hidden': 'true' }), 'Tidemark'),
      h('p', { class: 'notice', role: 'status', id: 'waiting' }, message),
      h('button', { type: 'button', class: 'ghost', onclick: () => { this.clearRetry(); this.signOut(); } }, 'Sign out'))));
  }

  private signOut(): void {
    saveCredentials(null);
    this.api = null;
    this.renderSignIn('Signed out.');
  }

  private teardown(): void {
    this.live?.stop();
    this.live = null;
    this.liveProject = null;
    this.chart?.destroy();
    this.chart = null;
    this.loads?.abort();
    this.clearRetry();
  }

  // -- the page ---------------------------------------------------------------------------

  private get project(): Project {
    return this.projects.find((p) => p.id === this.state.project) ?? this.projects[0]!;
  }

  private setState(next: Partial<ViewState>, push = true): void {
    this.state = { ...this.state, ...next };
    const url = `${location.pathname}${stateToSearch(this.state)}`;
    if (push) history.pushState(null, '', url);
    else history.replaceState(null, '', url);
    this.renderShell();
  }

  private renderShell(): void {
    const project = this.project;
    document.title = `${project.name} · Tidemark`;
    const projectControl = this.projects.length > 1
      ? h('select', { id: 'project', class: 'project-select', 'aria-label': 'Project', onchange: (e: Event) => this.setState({ project: (e.target as HTMLSelectElement).value, filters: [], analytics: switchTo(this.state.analytics, this.state.analytics.view) }) },
        this.projects.map((p) => h('option', { value: p.id, selected: p.id === project.id }, p.name)))
      : h('span', { class: 'project-name' }, project.name);
    const header = h('header', { class: 'topbar' },
      h('div', { class: 'brand' }, h('span', { class: 'logo', 'aria-hidden': 'true' }), 'Tidemark'),
      h('div', { class: 'project' }, projectControl, h('span', { class: 'tz', title: 'Dates and hours are in the project\'s timezone' }, project.timezone)),
      h('div', { class: 'live', id: 'live', role: 'status', 'aria-live': 'polite' }),
      h('button', { class: 'ghost', type: 'button', onclick: () => this.signOut() }, 'Sign out'),
    );
    const toolbar = h('div', { class: 'toolbar' }, this.filterChips(), this.periodPicker());
    const notice = h('div', { class: 'notice', id: 'notice', role: 'alert', hidden: true });
    const footer = h('footer', { class: 'foot muted' }, 'Tidemark · numbers from the public API · ', h('a', { href: '/openapi.json' }, 'OpenAPI'));
    const view = this.state.analytics.view;
    const opened = (v: View): ViewState => ({ ...this.state, analytics: switchTo(this.state.analytics, v) });
    const nav = viewNav(view, (v) => this.setState(opened(v)), (v) => `${location.pathname}${stateToSearch(opened(v))}`);
    this.chart?.destroy();
    this.chart = null;
    if (view !== 'overview') {
      this.root.replaceChildren(h('div', { class: 'page' }, header, nav, h('main', {}, usesPeriod(view) ? toolbar : null, notice, h('div', { id: 'view', class: `view-${view}` })), footer));
      this.startLive();
      return void this.load();
    }
    const cards = h('section', { class: 'cards', id: 'cards', 'aria-label': 'Key metrics: choose one to chart it' },
      METRICS.map((m) => h('button', {
        type: 'button', class: `card${m.key === this.state.metric ? ' selected' : ''}`, 'data-metric': m.key, 'aria-pressed': String(m.key === this.state.metric),
        onclick: () => this.setState({ metric: m.key }),
      }, h('span', { class: 'card-label' }, m.label), h('span', { class: 'card-value skeleton' }, '\u00a0'), h('span', { class: 'card-change' }, '\u00a0'))));
    const chartHost = h('div', { class: 'chart', id: 'chart' });
    const chartCard = h('section', { class: 'chart-card', 'aria-labelledby': 'chart-title' },
      h('div', { class: 'chart-head' },
        h('h2', { id: 'chart-title' }, metricInfo(this.state.metric).label),
        h('span', { class: 'muted', id: 'chart-sub' }, periodLabel(this.state.period)),
        h('span', { class: 'legend' }, h('span', { class: 'swatch now' }), 'This period', h('span', { class: 'swatch prev' }), 'Previous period')),
      chartHost,
      h('table', { class: 'sr-only', id: 'chart-table' }));
    const panels = h('div', { class: 'panels' },
      this.panel('pages', 'Top pages', null),
      this.panel('sources', 'Sources', 'sources'),
      this.panel('geo', 'Locations', 'geo'),
      this.panel('devices', 'Devices', 'devices'));
    this.root.replaceChildren(h('div', { class: 'page' }, header, nav, h('main', {}, toolbar, notice, cards, chartCard, panels), footer));
    this.chart = new SeriesChart(chartHost);
    this.startLive();
    void this.load();
  }

  private filterChips(): HTMLElement {
    const chips = this.state.filters.map((f) =>
      h('span', { class: 'chip' }, filterText(f),
        h('button', { type: 'button', class: 'chip-x', 'aria-label': `Remove filter: ${filterText(f)}`, onclick: () => this.setState({ filters: this.state.filters.filter((x) => x !== f) }) }, '×')));
    return h('div', { class: 'filters', id: 'filters', 'aria-label': 'Filters' },
      chips.length ? chips : this.state.analytics.view === 'overview' ? h('span', { class: 'muted hint' }, 'Click any row below to filter the whole view.') : null,
      chips.length > 1 ? h('button', { type: 'button', class: 'link', onclick: () => this.setState({ filters: [] }) }, 'Clear all') : null);
  }

  private periodPicker(): HTMLElement {
    const p = this.state.period;
    const custom = !('range' in p);
    const select = h('select', { id: 'range', 'aria-label': 'Period', onchange: (e: Event) => {
      const v = (e.target as HTMLSelectElement).value;
      if (v === 'custom') {
        form.hidden = false;
        start.focus();
      } else this.setState({ period: { range: v as (typeof RANGES)[number]['value'] } });
    } },
      RANGES.map((r) => h('option', { value: r.value, selected: 'range' in p && p.range === r.value }, r.label)),
      h('option', { value: 'custom', selected: custom }, custom ? periodLabel(p) : 'Custom dates…'));
    const today = todayIn(this.project.timezone);
    const dates = datesOf(p, today) ?? { startDate: today, endDate: today };
    const start = h('input', { type: 'date', id: 'from', value: dates.startDate, max: today, 'aria-label': 'From (inclusive)' });
    const end = h('input', { type: 'date', id: 'to', value: dates.endDate, max: today, 'aria-label': 'To (inclusive)' });
    const form = h('form', { class: 'custom', hidden: !custom, onsubmit: (e: Event) => {
      e.preventDefault();
      if (!isDate(start.value) || !isDate(end.value) || start.value > end.value) {
        end.setCustomValidity('The end date must be on or after the start date');
        end.reportValidity();
        return;
      }
      this.setState({ period: { startDate: start.value, endDate: end.value } });
    } }, start, h('span', { 'aria-hidden': 'true' }, '→'), end, h('button', { type: 'submit', class: 'primary small' }, 'Apply'));
    end.addEventListener('input', () => end.setCustomValidity(''));
    return h('div', { class: 'period' }, select, form);
  }

  private panel(id: string, title: string, group: TabGroup | null): HTMLElement {
    const current = group ? this.state.tabs[group] : '';
    const pick = (dim: string) => group && this.setState({ tabs: { ...this.state.tabs, [group]: dim } }, false);
    const utm = group === 'sources'
      ? h('select', { class: `tab utm-select${current.startsWith('utm_') ? ' selected' : ''}`, 'aria-label': 'Campaign (UTM) parameter', 'data-dimension': 'utm',
        onchange: (e: Event) => pick((e.target as HTMLSelectElement).value) },
        h('option', { value: '', disabled: true, selected: !current.startsWith('utm_') }, 'UTM'),
        TAB_GROUPS.sources.filter((d) => d.startsWith('utm_')).map((d) => h('option', { value: d, selected: d === current }, TAB_LABELS[d]!)))
      : null;
    const tabs = group
      ? h('div', { class: 'tabs', role: 'tablist', 'aria-label': `${title} by` },
        TAB_GROUPS[group].filter((dim) => !dim.startsWith('utm_')).map((dim) => h('button', {
          type: 'button', role: 'tab', 'aria-selected': String(current === dim), tabindex: current === dim ? '0' : '-1',
          class: 'tab', 'data-dimension': dim,
          onclick: () => pick(dim),
          onkeydown: (e: Event) => this.tabKeys(e as KeyboardEvent),
        }, TAB_LABELS[dim] ?? dim)), utm)
      : null;
    return h('section', { class: 'panel', id: `panel-${id}`, 'aria-labelledby': `panel-${id}-title` },
      h('div', { class: 'panel-head' }, h('h2', { id: `panel-${id}-title` }, title), tabs),
      h('div', { class: 'panel-cols muted', 'aria-hidden': 'true' }, h('span', {}, group ? DIMENSION_LABELS[this.state.tabs[group]] : 'Page'), h('span', {}, 'Sessions')),
      h('ol', { class: 'rows', 'aria-busy': 'true' }, Array.from({ length: 4 }, () => h('li', { class: 'row skeleton-row' }))));
  }

  private tabKeys(e: KeyboardEvent): void {
    if (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft') return;
    const tabs = [...(e.currentTarget as HTMLElement).parentElement!.querySelectorAll<HTMLButtonElement>('[role=tab]')];
    const i = tabs.indexOf(e.currentTarget as HTMLButtonElement);
    const next = tabs[(i + (e.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length]!;
    next.focus();
    next.click();
  }

  // -- data -------------------------------------------------------------------------------

  private async load(): Promise<void> {
    const api = this.api;
    if (!api) return;
    this.loads?.abort();
    this.clearRetry();
    const ctl = new AbortController();
    this.loads = ctl;
    const s = this.state;
    const project = this.project;
    const tasks = s.analytics.view === 'overview' ? this.overviewTasks(api, project, s, ctl)
      : [loadView($('#view'), api, project, s, ctl.signal, (next, mode) => this.go(next, mode))];
    const results = await Promise.allSettled(tasks);
    if (ctl.signal.aborted) return;
    const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected' && (r.reason as Error)?.name !== 'AbortError');
    if (failure) this.failed(failure.reason);
    else this.notice(null);
  }

  /** Changes the open analytics view's state; 'quiet' only writes the URL. */
  private go(next: Partial<AnalyticsState>, mode: GoMode = 'push'): void {
    if (mode !== 'quiet') return this.setState({ analytics: { ...this.state.analytics, ...next } }, mode === 'push');
    this.state = { ...this.state, analytics: { ...this.state.analytics, ...next } };
    history.replaceState(null, '', `${location.pathname}${stateToSearch(this.state)}`);
  }

  private overviewTasks(api: Api, project: Project, s: ViewState, ctl: AbortController): Promise<unknown>[] {
    const previous = previousOf(s.period, todayIn(project.timezone));
    const tasks: Promise<unknown>[] = [];
    const current = api.metrics(project.id, s.period, s.filters, ctl.signal);
    // The panels' shares are of this load's total: they wait for it (not for the previous period).
    const total = current.then((m) => m.metrics.total_sessions, () => null);
    tasks.push((async () => {
      const [cur, prev] = await Promise.all([
        current,
        previous ? api.metrics(project.id, previous, s.filters, ctl.signal) : Promise.resolve(null),
      ]);
      if (ctl.signal.aborted) return;
      this.lastMetrics = { current: cur.metrics, previous: prev?.metrics ?? null, series: cur.series, previousSeries: prev?.series ?? null };
      this.renderMetrics();
    })());
    tasks.push(this.loadPanel('pages', () => api.pages(project.id, s.period, s.filters, PANEL_ROWS, ctl.signal), total, ctl));
    for (const group of Object.keys(TAB_GROUPS) as TabGroup[]) {
      const dim = s.tabs[group];
      tasks.push(this.loadPanel(group, () => api.breakdown(project.id, dim, s.period, s.filters, PANEL_ROWS, ctl.signal), total, ctl));
    }
    return tasks;
  }

  private async loadPanel(id: string, fetchRows: () => Promise<(Row | PageRow)[]>, total: Promise<number | null>, ctl: AbortController): Promise<void> {
    const list = $(`#panel-${id} .rows`);
    try {
      const rows = await fetchRows();
      const sessions = await total;
      if (ctl.signal.aborted) return;
      this.renderRows(id, rows, sessions);
    } catch (err) {
      if (ctl.signal.aborted) return;
      list.setAttribute('aria-busy', 'false');
      list.replaceChildren(h('li', { class: 'empty error' }, 'Could not load this panel.'));
      throw err;
    }
  }

  private failed(err: unknown): void {
    if (err instanceof ApiError && err.kind === 'unauthorized') {
      saveCredentials(null);
      this.api = null;
      return this.renderSignIn(explain(err));
    }
    const retryable = !(err instanceof ApiError) || ['rateLimited', 'unavailable', 'network', 'server'].includes(err.kind);
    if (!retryable) return this.notice(explain(err), 'error');
    let left = err instanceof ApiError && err.retryAfter ? err.retryAfter : err instanceof ApiError && err.kind === 'rateLimited' ? 10 : 5;
    const show = () => this.notice(explain(err instanceof ApiError ? new ApiError(err.kind, err.message, err.status, left) : err), 'warn', () => void this.load());
    show();
    this.retryTick = setInterval(() => {
      left = Math.max(0, left - 1);
      show();
    }, 1000);
    this.retryTimer = setTimeout(() => void this.load(), left * 1000);
  }

  private clearRetry(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.retryTick) clearInterval(this.retryTick);
    this.retryTimer = null;
    this.retryTick = null;
  }

  private notice(message: string | null, level: 'warn' | 'error' = 'warn', retry?: () => void): void {
    const el = document.getElementById('notice');
    if (!el) return;
    if (!message) {
      el.hidden = true;
      el.replaceChildren();
      return;
    }
    el.hidden = false;
    el.className = `notice ${level}`;
    el.replaceChildren(h('span', {}, message));
    if (retry) el.append(h('button', { type: 'button', class: 'link', onclick: retry }, 'Retry now'));
  }

  // -- rendering data ---------------------------------------------------------------------

  private renderMetrics(): void {
    const m = this.lastMetrics;
    if (!m) return;
    for (const info of METRICS) {
      const card = document.querySelector<HTMLElement>(`.card[data-metric="${info.key}"]`);
      if (!card) continue;
      const value = m.current[info.key];
      const c = change(info.key, value, m.previous ? m.previous[info.key] : null);
      const v = card.querySelector('.card-value')!;
      v.classList.remove('skeleton');
      v.textContent = formatMetric(info.key, value);
      card.dataset.value = String(value);
      v.setAttribute('title', exact(info.key, value));
      const ch = card.querySelector('.card-change')!;
      ch.className = `card-change ${c.direction} ${c.good === null ? '' : c.good ? 'good' : 'bad'}`;
      ch.textContent = c.direction === 'none' ? 'no comparison' : `${c.direction === 'up' ? '↑' : c.direction === 'down' ? '↓' : ''} ${c.text}`.trim();
      card.setAttribute('aria-label', `${info.label}: ${exact(info.key, value)}, ${c.spoken}`);
    }
    const key = this.state.metric;
    const values = m.series.map((row) => row[key]);
    const previous = m.previousSeries ? m.previousSeries.map((row) => row[key]) : null;
    this.chart?.render({ metric: key, dates: m.series.map((row) => row.date), values, previous, timeZone: this.project.timezone });
    document.querySelector('.legend')?.classList.toggle('no-prev', !previous);
    // The chart's numbers for screen readers.
    const bucket = bucketOf(m.series.map((r) => r.date));
    const table = document.getElementById('chart-table');
    table?.replaceChildren(
      h('caption', {}, `${metricInfo(key).label}, ${periodLabel(this.state.period)}, per ${bucket}`),
      h('tr', {}, h('th', { scope: 'col' }, 'Period'), h('th', { scope: 'col' }, metricInfo(key).label)),
      ...m.series.map((row) => h('tr', {}, h('td', {}, bucketLabel(row.date, bucket, this.project.timezone)), h('td', {}, exact(key, row[key])))),
    );
  }

  private renderRows(id: string, rows: (Row | PageRow)[], total: number | null): void {
    const list = $(`#panel-${id} .rows`);
    list.setAttribute('aria-busy', 'false');
    const dimension = id === 'pages' ? 'path' : this.state.tabs[id as TabGroup];
    if (!rows.length) {
      list.replaceChildren(h('li', { class: 'empty' }, this.state.filters.length ? 'Nothing matches these filters in this period.' : 'No data in this period yet.'));
      return;
    }
    const max = Math.max(1, ...rows.map((r) => r.sessions));
    list.replaceChildren(...rows.map((r) => {
      const page = 'path' in r ? r : null;
      const raw = page ? page.path : (r as Row).name;
      const label = page ? page.path || '/' : displayName(dimension, raw);
      const sub = page ? (page.title || page.origin) : (r as Row).prefix ? displayName('country', (r as Row).prefix!) : '';
      const share = total ? Math.round((r.sessions / total) * 100) : null;
      const content = [
        h('span', { class: 'bar', style: `width:${Math.max(2, (r.sessions / max) * 100).toFixed(1)}%`, 'aria-hidden': 'true' }),
        h('span', { class: 'row-name' },
          dimension === 'country' && raw ? h('span', { class: 'code', 'aria-hidden': 'true' }, raw) : null,
          h('span', { class: 'row-label' }, label), sub ? h('span', { class: 'row-sub' }, sub) : null),
        h('span', { class: 'row-value' }, compact(r.sessions), share !== null ? h('span', { class: 'row-share' }, `${share}%`) : null),
      ];
      const filterable = raw !== '';
      const spoken = `${DIMENSION_LABELS[dimension] ?? dimension} ${label}: ${r.sessions.toLocaleString('en-US')} sessions`;
      return h('li', { class: 'row-item' }, filterable
        ? h('button', {
          type: 'button', class: 'row', 'data-name': raw, 'data-sessions': String(r.sessions),
          'aria-label': `${spoken}. Filter the view by it`, title: `Filter by ${DIMENSION_LABELS[dimension] ?? dimension}: ${label}`,
          onclick: () => this.setState({ filters: withFilter(this.state.filters, { name: dimension, operator: 'is', value: [raw] }) }),
        }, content)
        : h('div', { class: 'row static', 'data-name': raw, 'data-sessions': String(r.sessions), 'aria-label': spoken }, content));
    }));
  }

  // -- live -------------------------------------------------------------------------------

  private startLive(): void {
    const project = this.project.id;
    if (this.live && this.liveProject === project) return this.showLive(this.liveState);
    this.live?.stop();
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/insights/${encodeURIComponent(project)}/live`;
    this.liveProject = project;
    this.live = new LiveConnection(url, this.api!.credentials, (s) => this.showLive(s));
  }

  private liveState: LiveState = { kind: 'connecting' };

  private showLive(s: LiveState): void {
    this.liveState = s;
    const el = document.getElementById('live');
    if (!el) return;
    el.className = `live ${s.kind}`;
    el.dataset.state = s.kind;
    switch (s.kind) {
      case 'live':
        el.dataset.visitors = String(s.visitors);
        el.replaceChildren(h('span', { class: 'pulse', 'aria-hidden': 'true' }), h('b', { id: 'live-count' }, compact(s.visitors)), ` current visitor${s.visitors === 1 ? '' : 's'}`);
        break;
      case 'connecting':
        el.replaceChildren(h('span', { class: 'pulse', 'aria-hidden': 'true' }), 'Connecting to live…');
        break;
      case 'down':
        el.replaceChildren(h('span', { class: 'pulse', 'aria-hidden': 'true' }), `Live updates paused · retrying in ${s.retryInSeconds} s `,
          h('button', { type: 'button', class: 'link', onclick: () => this.live?.retryNow() }, 'Retry'));
        break;
      case 'refused':
        el.replaceChildren(h('span', { class: 'pulse', 'aria-hidden': 'true' }), `Live count unavailable: ${s.reason}`);
        break;
    }
  }
}

void new Dashboard().start();
