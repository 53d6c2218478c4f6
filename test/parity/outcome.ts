import type { ClaimState } from '../../shared/domain/claim.js';
import type { Counter } from '../../shared/ports/telemetry.port.js';

export type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };

/** One claim row as a scenario sees it, with ids and owners replaced by labels (see harness.ts). */
export interface ClaimFact {
  /** e.g. `A/0_1` or `A/0_1 repair`. */
  readonly job: string;
  readonly state: ClaimState;
  /** e.g. `A/0_1#m1@w2`: the first message of that job, taken by worker w2. */
  readonly owner: string;
  /** CLAIMED rows only: whether the lease has lapsed by the scenario's clock. */
  readonly lapsed?: boolean;
}

/**
 * The observable facts of one scenario run, and nothing backend-specific:
 * no raw version tokens, message ids, bucket names or timings. Two backends
 * that behave the same give equal records.
 */
export interface OutcomeRecord {
  /** Which calls won: counts by outcome kind, e.g. `ack:written`, `ack:claim-rejected:done`, `crashed`, `poison`, `fan-out:written`. */
  readonly calls: Readonly<Record<string, number>>;
  /** Output keys present at the end, relative to their scene (`A/tiles/0_0.tif`, `A/scene.json`, `A/mosaic.vrt`), sorted. */
  readonly outputs: readonly string[];
  /** Whether every output version (token and modification time) observed at the scenario's checkpoint is unchanged at the end; null where not checked. */
  readonly versionsUnchanged: boolean | null;
  /** Telemetry counters, the non-zero ones. */
  readonly counters: Readonly<Partial<Record<Counter, number>>>;
  /** ERROR log lines (alarms) by event name. */
  readonly alarms: Readonly<Record<string, number>>;
  /** Sources listed by the last mosaic assembled; null where none was. */
  readonly manifestCount: number | null;
  /** Every claim row, sorted by job label. */
  readonly claims: readonly ClaimFact[];
  /** Scenario-specific facts (source bytes read, dead letters, a reconcile report, keys). */
  readonly facts: Readonly<Record<string, Json>>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const show = (v: unknown): string => (v === undefined ? '(absent)' : JSON.stringify(v));

/**
 * Where two JSON values differ, as `path: expected X, got Y` lines (empty when equal).
 * Arrays are compared element by element; objects key by key, so a missing
 * counter reads `counters.written: expected 4, got (absent)`.
 */
export function diffRecords(expected: unknown, actual: unknown, path = ''): string[] {
  if (Array.isArray(expected) && Array.isArray(actual)) {
    if (expected.length !== actual.length) return [`${path || '(record)'}: expected ${show(expected)}, got ${show(actual)}`];
    return expected.flatMap((e, i) => diffRecords(e, actual[i], `${path}[${i}]`));
  }
  if (isObject(expected) && isObject(actual)) {
    const keys = [...new Set([...Object.keys(expected), ...Object.keys(actual)])].sort();
    return keys.flatMap((k) => diffRecords(expected[k], actual[k], path ? `${path}.${k}` : k));
  }
  return Object.is(expected, actual) ? [] : [`${path || '(record)'}: expected ${show(expected)}, got ${show(actual)}`];
}

/** The top-level path of a diff line (`counters.written: ...` -> `counters.written`). */
export function diffPath(line: string): string {
  return line.slice(0, line.indexOf(': expected '));
}
