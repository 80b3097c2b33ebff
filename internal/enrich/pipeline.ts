// Runs an ordered list of steps over one record: each step is timed, the first drop
// stops the run and is counted by reason. Hooks come from the caller (Prometheus later).
import type { EventRecord } from '../model/event';
import { EnrichStepError, type DropReason, type Step, type StepResult } from './step';

interface PipelineHooks {
  onStep?: (step: string, ms: number) => void;
  onDrop?: (reason: DropReason) => void;
}

export function runSteps(steps: readonly Step[], event: EventRecord, hooks: PipelineHooks = {}): StepResult {
  let current = event;
  for (const step of steps) {
    const started = performance.now();
    let result: StepResult;
    try {
      result = step.run(current);
    } catch (cause) {
      // Steps handle every input; a throw is a bug, reported with the step's name.
      throw new EnrichStepError(step.name, { cause });
    } finally {
      hooks.onStep?.(step.name, performance.now() - started);
    }
    if (!result.ok) {
      hooks.onDrop?.(result.reason);
      return result;
    }
    current = result.event;
  }
  return { ok: true, event: current };
}
