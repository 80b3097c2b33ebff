// The funnel view: pick 2-10 events (from events/names), the window and what goes through
// (sessions or profiles); one horizontal bar per step with its users, the conversion from the
// first step and the drop-off to the next, the highest drop-off marked, the overall conversion.
// The steps, window and grouping are in the URL (analytics-state.ts); the period and the
// filters are the overview's.
import { funnelQuery, type FunnelResult, type FunnelStep } from './analytics-api';
import { MAX_STEPS, MIN_STEPS, type AnalyticsState, type FunnelGroup } from './analytics-state';
import { h } from './dom';
import { periodLabel } from './periods';
import type { ViewContext } from './view-context';

/** The windows offered (hours); a window from the URL that is not one of them is offered too. */
const WINDOWS = [1, 6, 12, 24, 48, 72, 168, 336, 720];

export function windowOptions(current: number): number[] {
  return WINDOWS.includes(current) ? WINDOWS : [...WINDOWS, current].sort((a, b) => a - b);
}

/** 1 hour, 24 hours, 7 days, 30 days. */
export function windowLabel(hours: number): string {
  if (hours % 24 === 0 && hours >= 48) return `${hours / 24} days`;
  return `${hours} hour${hours === 1 ? '' : 's'}`;
}

/** The first steps of a funnel nobody has built yet: the two most frequent events (or one twice). */
export function defaultSteps(names: readonly string[]): string[] {
  if (names.length === 0) return [];
  return names.length === 1 ? [names[0]!, names[0]!] : [names[0]!, names[1]!];
}

/** The step a new step starts as: the first event not in the funnel yet, else the last step's. */
export function nextStep(names: readonly string[], steps: readonly string[]): string {
  return names.find((n) => !steps.includes(n)) ?? steps[steps.length - 1] ?? names[0] ?? '';
}

/** How many of a step's users did not reach the next step (null on the last). */
export function droppedAt(steps: readonly FunnelStep[], i: number): number | null {
  const next = steps[i + 1];
  return next ? steps[i]!.users - next.users : null;
}

/** A percentage as the API rounds it (2 decimals): 100%, 62.5%, 83.33%. */
export const pct = (n: number): string => `${Number(n.toFixed(2))}%`;

/**
 * The event names of the last project asked, kept a minute: every change of the funnel
 * re-renders it. Asked without the view's signal, so a view left meanwhile leaves it usable.
 */
const NAMES_FOR_MS = 60_000;
let cache: { project: string; at: number; names: Promise<string[]> } | null = null;

function eventNames(ctx: ViewContext): Promise<string[]> {
  const now = Date.now();
  if (!cache || cache.project !== ctx.project.id || now - cache.at > NAMES_FOR_MS) {
    const entry = { project: ctx.project.id, at: now, names: ctx.api.eventNames() };
    entry.names.catch(() => {
      if (cache === entry) cache = null; // a failure is not kept
    });
    cache = entry;
  }
  return cache.names;
}

const noun = (groupBy: FunnelGroup, n: number) => (groupBy === 'profile_id' ? (n === 1 ? 'profile' : 'profiles') : (n === 1 ? 'session' : 'sessions'));

export async function loadFunnel(host: HTMLElement, ctx: ViewContext): Promise<void> {
  const a = ctx.state.analytics;
  const ready = a.steps.length >= MIN_STEPS;
  // With steps from the URL, the funnel is asked at once, beside the names.
  const early = ready ? ctx.api.funnel(funnelQuery(ctx.state.period, ctx.state.filters, a.steps, a.windowHours, a.groupBy), ctx.signal) : null;
  early?.catch(() => {}); // awaited below; not an unhandled rejection meanwhile
  host.replaceChildren(h('div', { class: 'box empty', 'aria-busy': 'true' }, 'Loading the events…'));
  const known = await eventNames(ctx);
  if (ctx.signal.aborted) return;
  if (!ready) {
    const steps = defaultSteps(known);
    if (steps.length >= MIN_STEPS) return ctx.go({ steps }, 'replace');
    host.replaceChildren(h('div', { class: 'box empty' }, 'No events yet: a funnel needs events tracked with /track.'));
    return;
  }
  const result = h('section', { class: 'box funnel-result', id: 'funnel-result', 'aria-busy': 'true', 'aria-labelledby': 'funnel-title' },
    h('div', { class: 'skeleton-row' }), h('div', { class: 'skeleton-row' }));
  host.replaceChildren(builder(known, a, ctx), result);
  const answer = await early!;
  if (ctx.signal.aborted) return;
  renderResult(result, answer, a.groupBy, periodLabel(ctx.state.period));
}

function builder(names: string[], a: AnalyticsState, ctx: ViewContext): HTMLElement {
  const set = (steps: string[]) => ctx.go({ steps });
  const options = [...names, ...a.steps.filter((s) => !names.includes(s))];
  const rows = a.steps.map((step, i) => h('li', { class: 'step-edit' },
    h('span', { class: 'step-num', 'aria-hidden': 'true' }, String(i + 1)),
    h('select', {
      class: 'step-select', 'data-step': String(i + 1), 'aria-label': `Step ${i + 1}: event`,
      onchange: (e: Event) => set(a.steps.map((s, j) => (j === i ? (e.target as HTMLSelectElement).value : s))),
    }, options.map((n) => h('option', { value: n, selected: n === step }, n))),
    h('button', {
      type: 'button', class: 'icon-x', 'aria-label': `Remove step ${i + 1} (${step})`, disabled: a.steps.length <= MIN_STEPS,
      onclick: () => set(a.steps.filter((_, j) => j !== i)),
    }, '×')));
  const windowSelect = h('select', { id: 'funnel-window', onchange: (e: Event) => ctx.go({ windowHours: Number((e.target as HTMLSelectElement).value) }) },
    windowOptions(a.windowHours).map((w) => h('option', { value: String(w), selected: w === a.windowHours }, windowLabel(w))));
  const group = (g: FunnelGroup, label: string) => h('button', {
    type: 'button', class: 'seg-btn', 'data-group': g, 'aria-pressed': String(a.groupBy === g), onclick: () => ctx.go({ groupBy: g }),
  }, label);
  return h('section', { class: 'box funnel-builder', 'aria-labelledby': 'funnel-title' },
    h('div', { class: 'box-head' }, h('h2', { id: 'funnel-title' }, 'Funnel'), h('span', { class: 'muted' }, 'Pick the events in order; the period and filters are above')),
    h('ol', { class: 'steps-edit' }, rows),
    h('div', { class: 'builder-row' },
      h('button', { type: 'button', class: 'ghost', id: 'add-step', disabled: a.steps.length >= MAX_STEPS, onclick: () => set([...a.steps, nextStep(names, a.steps)]) }, '+ Add step'),
      h('label', { class: 'inline', for: 'funnel-window' }, 'Each step within', windowSelect, 'of the first'),
      h('div', { class: 'seg', role: 'group', 'aria-label': 'Count' }, group('session_id', 'Sessions'), group('profile_id', 'Profiles'))));
}

function renderResult(host: HTMLElement, r: FunnelResult, groupBy: FunnelGroup, period: string): void {
  host.setAttribute('aria-busy', 'false');
  const first = r.totalUsers;
  const summary = h('div', { class: 'funnel-summary' },
    h('div', {}, h('span', { class: 'card-label' }, 'Overall conversion'),
      h('span', { class: 'big-number', id: 'funnel-overall', 'data-value': String(r.overallConversionRate) }, pct(r.overallConversionRate))),
    h('p', { class: 'muted' }, `${first.toLocaleString('en-US')} ${noun(groupBy, first)} started (${period}), `,
      `${r.completedUsers.toLocaleString('en-US')} reached the last step.`));
  if (first === 0) {
    host.replaceChildren(summary, h('p', { class: 'empty' }, `No ${noun(groupBy, 2)} did the first step in this period.`));
    return;
  }
  const steps = r.steps.map((s, i) => {
    const dropped = droppedAt(r.steps, i);
    return h('li', {
      class: `funnel-step${s.isHighestDropoff ? ' highest' : ''}`, 'data-step': String(s.step), 'data-event': s.eventName, 'data-users': String(s.users),
      'data-conversion': String(s.conversionRateFromStart), 'data-dropoff': s.dropoffPercent === null ? '' : String(s.dropoffPercent), 'data-highest': String(s.isHighestDropoff),
    },
      h('div', { class: 'fs-head' },
        h('span', { class: 'step-num', 'aria-hidden': 'true' }, String(s.step)),
        h('span', { class: 'fs-name' }, s.eventName),
        s.isHighestDropoff ? h('span', { class: 'badge bad' }, 'Highest drop-off') : null),
      h('div', { class: 'fs-track' },
        h('span', { class: 'fs-bar', style: `width:${Math.max(0.5, s.conversionRateFromStart).toFixed(2)}%`, 'aria-hidden': 'true' }),
        h('span', { class: 'fs-users' }, h('b', {}, s.users.toLocaleString('en-US')), ` ${noun(groupBy, s.users)}`),
        h('span', { class: 'fs-conv' }, `${pct(s.conversionRateFromStart)} of start`)),
      dropped === null || s.dropoffPercent === null
        ? h('div', { class: 'fs-drop done' }, `${pct(s.conversionRateFromStart)} completed the funnel`)
        : h('div', { class: `fs-drop${dropped > 0 ? '' : ' none'}` }, dropped > 0 ? `↓ ${dropped.toLocaleString('en-US')} dropped off (${pct(s.dropoffPercent)})` : 'No drop-off'));
  });
  host.replaceChildren(summary, h('ol', { class: 'funnel-steps', 'aria-label': 'Steps' }, steps));
}
