// The shape every enrichment step shares: a name and a function from one record to
// the enriched record, or to a drop with a reason from a closed list.
import type { EventRecord } from '../model/event';

/**
 * Why the worker refuses to store an event. Closed on purpose: each value is a
 * label on the drop counter, so a new one is a deliberate change. Bots are flagged
 * (`isBot`), never dropped.
 */
const DROP_REASONS = ['invalid_name', 'invalid_timestamp', 'missing_identity'] as const;
export type DropReason = (typeof DROP_REASONS)[number];

export type StepResult = { ok: true; event: EventRecord } | { ok: false; reason: DropReason };

export interface Step {
  /** Short stable name; a label on the step timing histogram. */
  readonly name: string;
  /** Must not throw on any input; returns a new record (the input is not mutated). */
  run(event: EventRecord): StepResult;
}

export function keep(event: EventRecord): StepResult {
  return { ok: true, event };
}

export function drop(reason: DropReason): StepResult {
  return { ok: false, reason };
}

/** A step threw: a bug, not bad input. Carries the step's name for the log line. */
export class EnrichStepError extends Error {
  constructor(
    readonly step: string,
    options: { cause: unknown },
  ) {
    super(`enrichment step "${step}" failed: ${options.cause instanceof Error ? options.cause.message : String(options.cause)}`, options);
    this.name = 'EnrichStepError';
  }
}
