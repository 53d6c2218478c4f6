export type LogLevel = 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';

/** The counters every backend emits under the same names. */
export type Counter =
  | 'claimed'
  | 'claim-rejected'
  | 'lease-taken-over'
  | 'written'
  | 'write-already-present'
  | 'lease-stolen'
  | 'committed'
  | 'failed'
  | 'event-ignored'
  | 'poison'
  | 'enqueued'
  | 'version-mismatch'
  | 'write-occupied'
  | 'source-changed'
  | 'code-version-refused'
  | 'heartbeat-failed'
  | 'mosaic-closed-out'
  | 'feature-inserted'
  | 'feature-already-present'
  | 'ingest-published'
  | 'ingest-already-published'
  | 'ingest-lost-race'
  | 'ingest-invalid'
  | 'ingest-occupied'
  | 'scene-incomplete';

/** Structured logs and counters. Adapters: JSON lines on stdout, CloudWatch EMF, etc. */
export interface Telemetry {
  log(level: LogLevel, event: string, fields?: Readonly<Record<string, unknown>>): void;
  count(counter: Counter, n?: number): void;
}
