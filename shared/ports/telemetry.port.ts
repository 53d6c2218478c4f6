export type LogLevel = 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';

/** The counters every backend emits under the same names. */
/** Every counter, in report order: the one list (the type below and every snapshot derive from it). */
export const COUNTERS = [
  'claimed',
  'claim-rejected',
  'lease-taken-over',
  'written',
  'write-already-present',
  'lease-stolen',
  'committed',
  'failed',
  'event-ignored',
  'poison',
  'enqueued',
  'version-mismatch',
  'write-occupied',
  'source-changed',
  'code-version-refused',
  'heartbeat-failed',
  'mosaic-closed-out',
  'mosaic-replaced',
  'feature-inserted',
  'feature-already-present',
  'ingest-published',
  'ingest-already-published',
  'ingest-lost-race',
  'ingest-invalid',
  'ingest-occupied',
  'scene-incomplete',
  'event-stale',
  'postgres-connection-lost',
  // Feature batches (shared/app/feature-batch.ts): batches inserted or found done, and their records.
  'batch-inserted',
  'batch-already-done',
  'records-inserted',
  'records-duplicate',
  'records-rejected',
] as const;

export type Counter = (typeof COUNTERS)[number];

/** Structured logs and counters. Adapters: JSON lines on stdout, CloudWatch EMF, etc. */
export interface Telemetry {
  log(level: LogLevel, event: string, fields?: Readonly<Record<string, unknown>>): void;
  count(counter: Counter, n?: number): void;
}
