import type { Clock } from '../ports/clock.port.js';
import { COUNTERS, type Counter, type LogLevel, type Telemetry } from '../ports/telemetry.port.js';

/** The wall clock. The only place the core reads the time of day. */
export const systemClock: Clock = {
  now: () => Date.now(),
  every(periodMs, task) {
    const timer = setInterval(() => void task(), periodMs);
    // A lease keeper must never keep a finished process (a CLI, a test run) alive.
    timer.unref();
    return () => clearInterval(timer);
  },
};

export { COUNTERS };

export type CounterSnapshot = Record<Counter, number>;

export function emptyCounters(): CounterSnapshot {
  return Object.fromEntries(COUNTERS.map((c) => [c, 0])) as CounterSnapshot;
}

/**
 * Structured JSON-lines logs (one object per line: level, event, fields) and
 * in-process counters. Cloud log pipelines turn `event: "lease-stolen"` at
 * `level: "ERROR"` into an alarm (see infra/).
 *
 * @example
 * const t = new JsonTelemetry((line) => process.stdout.write(`${line}\n`));
 * t.log('INFO', 'write-already-present', { jobKey });
 */
export class JsonTelemetry implements Telemetry {
  readonly #counts = emptyCounters();
  readonly #write: (line: string) => void;
  readonly #clock: Clock | undefined;
  readonly #base: Readonly<Record<string, unknown>>;

  constructor(write: (line: string) => void = () => {}, options: { clock?: Clock; fields?: Record<string, unknown> } = {}) {
    this.#write = write;
    this.#clock = options.clock;
    this.#base = options.fields ?? {};
  }

  log(level: LogLevel, event: string, fields: Readonly<Record<string, unknown>> = {}): void {
    const time = this.#clock ? new Date(this.#clock.now()).toISOString() : undefined;
    this.#write(JSON.stringify({ ...(time ? { time } : {}), level, event, ...this.#base, ...fields }, errorReplacer));
  }

  count(counter: Counter, n = 1): void {
    this.#counts[counter] += n;
  }

  counters(): CounterSnapshot {
    return { ...this.#counts };
  }
}

function errorReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) {
    return { name: value.name, message: value.message, ...('code' in value ? { code: (value as { code: unknown }).code } : {}) };
  }
  return value;
}
