// JSON for big answers without blocking the event loop: a chart of 144,000 points is ~8 MB
// of JSON, and one JSON.stringify of it held the API's only thread for hundreds of ms on a
// busy machine, so every /track behind it waited. Here the value is serialized
// piece by piece and the work gives way to other callbacks every SLICE_MS; a small value is
// done in the first slice and returned at once, as JSON.stringify would.
// The text is exactly JSON.stringify(value) for what answers hold (plain objects, arrays,
// strings, numbers, booleans, null, Dates and other toJSON values).

/** Longest stretch of serializing between two turns of the event loop. */
const SLICE_MS = 8;

/** Gives way to pending I/O callbacks (setImmediate runs after them). */
const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Tells a long synchronous loop when to give way: `due()` is true once `sliceMs` have
 * passed since the last turn (the clock is read every `every` calls only).
 */
export class Slicer {
  private started = performance.now();
  private calls = 0;

  constructor(private readonly sliceMs = SLICE_MS, private readonly every = 32) {}

  due(): boolean {
    if (++this.calls % this.every !== 0) return false;
    return performance.now() - this.started >= this.sliceMs;
  }

  /** Gives way when due; resolves at once otherwise. */
  async pause(): Promise<void> {
    if (!this.due()) return;
    await yieldToLoop();
    this.started = performance.now();
  }

  restart(): void {
    this.started = performance.now();
  }
}

type Json = unknown;

function isFlat(v: object): boolean {
  if (Array.isArray(v)) {
    if (v.length > 64) return false;
    for (const x of v) if (typeof x === 'object' && x !== null) return false;
    return true;
  }
  for (const k of Object.keys(v)) {
    const x = (v as Record<string, unknown>)[k];
    if (typeof x === 'object' && x !== null) return false;
  }
  return true;
}

/** Pieces of the JSON text, in order; each piece is small (one flat value). */
function* pieces(value: Json, inArray: boolean): Generator<string> {
  let v = value;
  if (v !== null && typeof v === 'object' && typeof (v as { toJSON?: unknown }).toJSON === 'function') v = (v as { toJSON: () => unknown }).toJSON();
  if (v === null || typeof v !== 'object' || isFlat(v)) {
    const s = JSON.stringify(v);
    yield s === undefined ? (inArray ? 'null' : '') : s;
    return;
  }
  if (Array.isArray(v)) {
    yield '[';
    for (let i = 0; i < v.length; i++) {
      if (i > 0) yield ',';
      yield* pieces(v[i], true);
    }
    yield ']';
    return;
  }
  yield '{';
  let first = true;
  for (const k of Object.keys(v)) {
    const x = (v as Record<string, unknown>)[k];
    if (x === undefined || typeof x === 'function' || typeof x === 'symbol') continue;
    yield `${first ? '' : ','}${JSON.stringify(k)}:`;
    first = false;
    yield* pieces(x, false);
  }
  yield '}';
}

/**
 * JSON.stringify(value), giving way to the event loop every `sliceMs` of work. Returns the
 * string itself when it took less than one slice (no extra turn for small answers).
 */
export function stringifySliced(value: Json, sliceMs = SLICE_MS): string | Promise<string> {
  const slicer = new Slicer(sliceMs, 64);
  const it = pieces(value, false);
  const parts: string[] = [];
  for (let r = it.next(); !r.done; r = it.next()) {
    parts.push(r.value);
    if (slicer.due()) return finish(it, parts, slicer);
  }
  return parts.join('');
}

async function finish(it: Generator<string>, parts: string[], slicer: Slicer): Promise<string> {
  for (;;) {
    await yieldToLoop();
    slicer.restart();
    for (let r = it.next(); ; r = it.next()) {
      if (r.done) return parts.join('');
      parts.push(r.value);
      if (slicer.due()) break;
    }
  }
}
