// The product-analytics views beside the overview: the tabs that switch between them and the
// one place main.ts hands a view its host element, the API and the state. Each view renders
// its own content and throws an API error it cannot show in place (main.ts then says so and
// retries, as for the overview).
import type { Api, Project } from './api';
import { AnalyticsApi } from './analytics-api';
import { VIEWS, VIEW_LABELS, type AnalyticsState, type View } from './analytics-state';
import { h } from './dom';
import { loadFunnel } from './funnel';
import { loadProfiles } from './profiles';
import { loadRetention } from './retention';
import { loadSessions } from './sessions';
import type { ViewState } from './state';
import type { ViewContext } from './view-context';

/** Whether a view reads the period and the filters (it shows the period picker and the chips). */
export const usesPeriod = (view: View): boolean => view === 'overview' || view === 'funnel' || view === 'sessions';

/** The analytics state after a tab is picked: the funnel and the search stay, what was open closes. */
export const switchTo = (a: AnalyticsState, view: View): AnalyticsState => ({ ...a, view, profile: null, session: null });

/** The tabs: Overview | Funnel | Retention | Profiles | Sessions; links to each view's URL. */
export function viewNav(current: View, pick: (view: View) => void, href: (view: View) => string): HTMLElement {
  return h('nav', { class: 'views', 'aria-label': 'Views' },
    VIEWS.map((v) => h('a', {
      href: href(v), class: 'view-tab', 'data-view': v, 'aria-current': v === current ? 'page' : null,
      onclick: (e: Event) => {
        const m = e as MouseEvent;
        if (m.button !== 0 || m.metaKey || m.ctrlKey || m.shiftKey || m.altKey) return; // a new tab or window: the link
        e.preventDefault();
        pick(v);
      },
    }, VIEW_LABELS[v])));
}

/** Renders the open view into `host` once its data is in. */
export function loadView(host: HTMLElement, api: Api, project: Project, state: ViewState, signal: AbortSignal, go: ViewContext['go']): Promise<void> {
  const ctx: ViewContext = { api: new AnalyticsApi(api, project.id), project, state, signal, go };
  switch (state.analytics.view) {
    case 'funnel': return loadFunnel(host, ctx);
    case 'retention': return loadRetention(host, ctx);
    case 'profiles': return loadProfiles(host, ctx);
    case 'sessions': return loadSessions(host, ctx);
    default: return Promise.resolve();
  }
}
