import type { Meter, Counter as OtelCounter } from '@opentelemetry/api';
import { COUNTERS, type Counter, type LogLevel, type Telemetry } from '../../shared/ports/telemetry.port.js';

/**
 * The logs' counters as OpenTelemetry counters, whichever SDK set the meter up: the OTLP one (otel-sdk.ts) or Azure
 * Monitor's distro (functions/azure/azure-monitor.ts). One place, so both export the same instruments under the same
 * names, added to exactly where the log's counter is. Only `@opentelemetry/api` here: loading it loads no SDK.
 */

/** `tessera.<counter>` for every counter of the logs (shared/ports/telemetry.port.ts COUNTERS), on `meter`. */
export function tesseraCounters(meter: Meter): ReadonlyMap<Counter, OtelCounter> {
  return new Map(COUNTERS.map((c) => [c, meter.createCounter(`tessera.${c}`, { description: `the ${c} counter of the logs' summary` })]));
}

/** The logs as before; every count also added to its OTel counter. */
export class OtelTelemetry implements Telemetry {
  constructor(
    readonly inner: Telemetry,
    readonly instruments: ReadonlyMap<Counter, OtelCounter>,
  ) {}

  log(level: LogLevel, event: string, fields?: Readonly<Record<string, unknown>>): void {
    this.inner.log(level, event, fields);
  }

  count(counter: Counter, n = 1): void {
    this.inner.count(counter, n);
    this.instruments.get(counter)?.add(n);
  }
}
