// What a product-analytics view is given (views.ts builds it; each view reads it).
import type { Project } from './api';
import type { AnalyticsApi } from './analytics-api';
import type { AnalyticsState } from './analytics-state';
import type { ViewState } from './state';

/** 'push': a new history entry; 'replace': the same entry, re-rendered; 'quiet': the URL only. */
export type GoMode = 'push' | 'replace' | 'quiet';

export interface ViewContext {
  api: AnalyticsApi;
  project: Project;
  state: ViewState;
  /** Aborted when the view is left or loaded again. */
  signal: AbortSignal;
  /** Changes the analytics state (and the URL). */
  go(next: Partial<AnalyticsState>, mode?: GoMode): void;
}
