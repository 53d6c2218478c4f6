import type { FanOutResult } from '../../shared/app/fan-out.js';
import type { TileJob } from '../../shared/app/tile-job.js';
import { outputKeys, type ProcessingParams, type SourceRef, sceneKey, tileJobKey } from '../../shared/domain/job-key.js';
import { windows } from '../../shared/domain/tile-grid.js';
import type { Delivery } from '../../shared/ports/job-queue.port.js';
import { type BackendName, PARITY_SOURCE_BUCKET, type ParityBackendOptions } from './backends.js';
import { PARITY_GRID, PARITY_PARAMS, type ScenarioContext } from './harness.js';
import type { ClaimFact, OutcomeRecord } from './outcome.js';

/**
 * A place where an emulator is known to differ from its cloud, declared so the
 * cell shows as a limitation (never a pass). `differs` names the record paths
 * (prefixes) the emulator gets wrong; a difference anywhere else is a failure,
 * and no difference at all fails too, so the declaration gets revisited.
 */
export interface Limitation {
  readonly reason: string;
  readonly differs: readonly string[];
}

export interface Scenario {
  /** Two digits (three from 100), the row of the matrix. */
  readonly id: string;
  readonly title: string;
  run(ctx: ScenarioContext): Promise<OutcomeRecord>;
  readonly expected: OutcomeRecord;
  readonly limitations?: Partial<Record<BackendName, Limitation>>;
  /** What the scenario's backends need beyond the default (`outputFaults`: the output store behind a fault proxy). */
  readonly backendOptions?: ParityBackendOptions | undefined;
}

/** An expected record: unspecified fields are empty (no calls, no outputs, no counters, no alarms, no claims, no facts). */
export function outcome(r: Partial<OutcomeRecord>): OutcomeRecord {
  return {
    calls: {},
    outputs: [],
    versionsUnchanged: null,
    counters: {},
    alarms: {},
    manifestCount: null,
    claims: [],
    facts: {},
    ...r,
    // Calls are recorded sorted by kind; the table lists them in the order they happen.
    ...(r.calls ? { calls: Object.fromEntries(Object.entries(r.calls).sort(([a], [b]) => (a < b ? -1 : 1))) } : {}),
  };
}

export const WINDOWS = ['0_0', '0_1', '1_0', '1_1'] as const;
export const tiles = (scene: string, ...ids: readonly string[]): string[] => ids.map((id) => `${scene}/tiles/${id}.tif`);
/** Everything a finished scene publishes: manifest, every tile and (with `mosaic`) the mosaic, sorted. */
export const sceneOutputs = (scene: string, mosaic: boolean): string[] =>
  [...(mosaic ? [`${scene}/mosaic.stac.json`, `${scene}/mosaic.vrt`] : []), `${scene}/scene.json`, ...tiles(scene, ...WINDOWS)].sort();
export const committed = (job: string, owner: string): ClaimFact => ({ job, state: 'COMMITTED', owner });
/** Every tile of a scene committed by the first message of its job, taken by `worker`. */
export const allCommitted = (scene: string, worker: string): ClaimFact[] =>
  WINDOWS.map((w) => committed(`${scene}/${w}`, `${scene}/${w}#m1@${worker}`));

/** Whether a tile's window is (row, col). */
export const at = (row: number, col: number) => (job: { window: { row: number; col: number } }) =>
  job.window.row === row && job.window.col === col;

/** A complete first run: stage the scene, fan it out, drain the queue with worker w1 and, unless told not to, assemble the mosaic. */
export async function firstRun(ctx: ScenarioContext, label = 'A', withMosaic = true): Promise<{ source: SourceRef; fan: FanOutResult }> {
  const source = await ctx.stage();
  const fan = await ctx.fanOut(label, { source, params: PARITY_PARAMS });
  await ctx.drain('w1');
  if (withMosaic) await ctx.mosaic(fan.sceneKey);
  return { source, fan };
}

/** Stage the scene and put `copies` messages of its tile 0_0 on the queue. */
export async function enqueueOneTile(ctx: ScenarioContext, copies = 1): Promise<TileJob> {
  const job = ctx.jobFor('A', await ctx.stage(), 0, 0);
  await ctx.send([job], copies);
  return job;
}

/** The one message on the queue, hidden for `visibilityMs`. */
export async function receiveOne(ctx: ScenarioContext, visibilityMs?: number): Promise<Delivery> {
  const [d] = await ctx.receive(1, visibilityMs);
  return d as Delivery;
}

/** The count of log lines at `level` for `event` so far. */
export function logged(ctx: ScenarioContext, level: string, event: string): number {
  return ctx.logs().filter((l) => l.level === level && l.event === event).length;
}

/** S3 notifications form-encode keys (`+` for a space, `%XX` for the rest, `/` left as is); GCS and Event Grid deliver names as they are. */
export function s3EventKey(name: string): string {
  return name
    .split('/')
    .map((segment) => encodeURIComponent(segment).replace(/%20/g, '+'))
    .join('/');
}

/** Object names that trip naive key handling: a plus and a space, a literal `%2F`, and non-ASCII letters and an emoji. */
export const KEY_CASES = [
  { label: 'plus-space', name: 'incoming/a+b c.tif' },
  { label: 'encoded-slash', name: 'incoming/50%2Foff.tif' },
  { label: 'unicode', name: 'incoming/Zürich 東京 🛰.tif' },
] as const;

/**
 * What a source name's keys must be on every backend, derived by the domain
 * functions alone from the key material: the logical bucket, the decoded
 * name, and the backend's own version token (ETag, versionId, generation,
 * content hash: they differ by design, and every read is pinned to it, so
 * the record compares how each key was derived, never the raw hashes).
 */
export function derivedKeys(
  name: string,
  versionToken: string,
  params: ProcessingParams,
): { scene: string; jobs: string[]; outputs: string[] } {
  const scene = sceneKey({ bucket: PARITY_SOURCE_BUCKET, key: name, versionToken }, params);
  return {
    scene,
    jobs: [...windows(PARITY_GRID)].map((w) => tileJobKey(scene, w)).sort(),
    outputs: [outputKeys.sceneManifest(scene), ...[...windows(PARITY_GRID)].map((w) => outputKeys.tile(scene, w))].sort(),
  };
}

/**
 * Drain the queue with `worker` and record, as facts, the dead letters and how
 * many deliveries each message took (its highest receive count): what the
 * poison scenarios assert, "dead-lettered by its first delivery".
 */
export async function drainCountingDeliveries(ctx: ScenarioContext, worker: string): Promise<void> {
  const deliveries = new Map<string, number>();
  await ctx.drain(worker, {
    onResult: (d) => {
      const label = ctx.messageLabel(d.deliveryId);
      deliveries.set(label, Math.max(deliveries.get(label) ?? 0, d.receiveCount));
    },
  });
  ctx.fact('deadLetters', await ctx.deadLetters());
  ctx.fact('deliveriesPerMessage', Object.fromEntries([...deliveries].sort(([a], [b]) => (a < b ? -1 : 1))));
}
