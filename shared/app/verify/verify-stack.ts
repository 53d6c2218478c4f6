import { assertNever } from '../../domain/claim.js';
import { TesseraError } from '../../domain/errors.js';
import { outputKeys, type SourceRef, tileJobKey } from '../../domain/job-key.js';
import { windowAt } from '../../domain/tile-grid.js';
import type { JobMessage } from '../../ports/job-queue.port.js';
import type { ObjectHead } from '../../ports/object-store.port.js';
import { COG_GHOST_AREA } from '../../raster/cog-writer.js';
import { openGeoTiff } from '../../raster/geotiff-source.js';
import type { Backend } from '../backend.js';
import { readSceneManifest, SCENE_INDEX_PREFIX, type SceneManifest, sceneLifecycleKeys } from '../scene-manifest.js';
import { makeTileJob, toJobMessage } from '../tile-job.js';

/**
 * A deployed stack as `tessera verify` sees it: the stack's own stores and
 * queue behind the ports, built by one per-cloud file from the stack outputs
 * (functions/<cloud>/verify-target.ts). The verifier never runs a handler:
 * the stack's deployed functions do the work, the verifier only writes a
 * scene, sends messages through the stack's transport and reads the result.
 */
export interface VerifyTarget {
  readonly stack: string;
  readonly cloud: 'aws' | 'gcp' | 'azure';
  /** The stack's stores; `queue` is the tile queue the tile function is triggered by. */
  readonly backend: Backend;
  /** Where the scene trigger accepts new scenes (the source prefix, e.g. `incoming/`). */
  readonly sourcePrefix: string;
  /** The stack's lease: the smoke timeout is derived from it. */
  readonly leaseSeconds: number;
  /** Messages not yet settled on the scene and tile queues (visible, in flight, delayed): replay waits for 0. */
  pendingMessages(): Promise<number>;
  /** Send a duplicate of the scene's creation event through the stack's own scene trigger. */
  redeliverSceneEvent(source: SourceRef): Promise<void>;
  /** The tile queue's dead-letter queue (SQS DLQ, `<queue>-poison`), read without removing anything. */
  deadLetters(): Promise<JobMessage[]>;
}

export interface VerifyIo {
  /** Progress lines (stderr). */
  readonly progress: (line: string) => void;
  readonly sleep: (ms: number) => Promise<void>;
}

export interface CheckResult {
  readonly pass: boolean;
  readonly detail: string;
}

export interface ParityRow {
  readonly scenario: string;
  readonly pass: boolean;
  readonly detail: string;
}

export interface VerifyReport {
  readonly stack: string;
  readonly cloud: string;
  readonly smoke: CheckResult & { readonly sceneKey?: string | undefined; readonly tiles?: number | undefined };
  readonly replay: CheckResult;
  readonly parity: readonly ParityRow[];
  readonly seconds: number;
}

export interface VerifyOptions {
  /** A unique id for this run: names the scene and every key and claim row the verifier creates. */
  readonly runId: string;
  /** The synthetic scene to upload (shared/raster writeSyntheticScene). */
  readonly sceneBytes: Uint8Array;
  /** Overrides the timeout derived from the lease (tests). */
  readonly timeoutMs?: number | undefined;
}

/**
 * Why a smoke check must wait this long at most: fan-out, every tile and the
 * mosaic sweep each run within one lease, plus a sweep period (five minutes
 * on every cloud's schedule) and two minutes of the queues' own latency.
 */
export function smokeTimeoutMs(leaseSeconds: number): number {
  return (3 * leaseSeconds + 300 + 120) * 1000;
}

/** Smoke, replay and the live parity scenarios against one stack; never throws for a failed check. */
export async function verifyStack(target: VerifyTarget, options: VerifyOptions, io: VerifyIo): Promise<VerifyReport> {
  const started = target.backend.clock.now();
  const timeoutMs = options.timeoutMs ?? smokeTimeoutMs(target.leaseSeconds);
  const smoke: SmokeOutcome = await guarded(() => runSmoke(target, options, timeoutMs, io));
  const replay =
    smoke.manifest === undefined
      ? { pass: false, detail: 'not run: the smoke check found no scene to replay' }
      : await guarded(() => runReplay(target, smoke.manifest as SceneManifest, timeoutMs, io));
  const parity: ParityRow[] = [];
  for (const scenario of LIVE_SCENARIOS) {
    const r = await guarded(() => scenario.run(target, options.runId, io, timeoutMs));
    parity.push({ scenario: scenario.name, pass: r.pass, detail: r.detail });
    io.progress(`${target.stack}: parity ${scenario.name}: ${r.pass ? 'pass' : `FAIL ${r.detail}`}`);
  }
  return {
    stack: target.stack,
    cloud: target.cloud,
    smoke: { pass: smoke.pass, detail: smoke.detail, sceneKey: smoke.manifest?.sceneKey, tiles: smoke.manifest?.grid.count },
    replay: { pass: replay.pass, detail: replay.detail },
    parity,
    seconds: Math.round((target.backend.clock.now() - started) / 100) / 10,
  };
}

/** A check that threw failed; its error is the detail (a verifier reports, it does not crash on the first bad stack). */
async function guarded<T extends CheckResult>(run: () => Promise<T>): Promise<T | CheckResult> {
  try {
    return await run();
  } catch (e) {
    return { pass: false, detail: `${(e as Error).name}: ${(e as Error).message}` };
  }
}

async function waitFor<T>(
  what: string,
  timeoutMs: number,
  io: VerifyIo,
  clock: Backend['clock'],
  probe: () => Promise<T | undefined>,
): Promise<T> {
  const deadline = clock.now() + timeoutMs;
  let next = clock.now();
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (clock.now() > deadline) throw new VerifyTimeoutError(`${what}: not seen within ${Math.round(timeoutMs / 1000)} s`);
    if (clock.now() >= next) {
      io.progress(`  waiting for ${what} (${Math.round((deadline - clock.now()) / 1000)} s left)`);
      next = clock.now() + 5000;
    }
    await io.sleep(250);
  }
}

/** A stack that did not produce what it should within the time its leases allow. */
export class VerifyTimeoutError extends TesseraError {
  constructor(message: string) {
    super('VERIFY_TIMEOUT', message);
  }
}

type SmokeOutcome = CheckResult & { readonly manifest?: SceneManifest | undefined };

async function runSmoke(t: VerifyTarget, o: VerifyOptions, timeoutMs: number, io: VerifyIo): Promise<SmokeOutcome> {
  const { sources, outputs, clock } = t.backend;
  const key = `${t.sourcePrefix}tessera-verify-${o.runId}.tif`;
  io.progress(`${t.stack}: smoke: uploading ${key} (${o.sceneBytes.byteLength} bytes, create-only)`);
  const put = await sources.putIfAbsent(key, o.sceneBytes, { contentType: 'image/tiff' });
  if (put.kind !== 'written') return { pass: false, detail: `${key} already exists in the source bucket; the run id must be unique` };
  // The scene key is derived from the stack's own params (not in the outputs): find the manifest
  // through the sweep's index of this hour and the last, where fan-out records every scene.
  const manifest = await waitFor(`the scene manifest of ${key}`, timeoutMs, io, clock, () => findManifest(t, key));
  const scene = manifest.sceneKey;
  io.progress(`${t.stack}: smoke: scene ${scene}, ${manifest.grid.count} tiles; waiting for the mosaic`);
  await waitFor(`the mosaic ${outputKeys.mosaic(scene)}`, timeoutMs, io, clock, async () =>
    (await outputs.head(outputKeys.mosaic(scene))) === undefined ? undefined : true,
  );
  const tiles: ObjectHead[] = [];
  for await (const h of outputs.list(outputKeys.tilePrefix(scene))) tiles.push(h);
  if (tiles.length !== manifest.grid.count)
    return {
      pass: false,
      detail: `${tiles.length} tiles under ${outputKeys.tilePrefix(scene)}, the grid has ${manifest.grid.count}`,
      manifest,
    };
  for (const tile of tiles) {
    const problem = await cogProblem(t, tile.key);
    if (problem !== undefined) return { pass: false, detail: `${tile.key}: ${problem}`, manifest };
  }
  return { pass: true, detail: `${tiles.length} tiles = grid count, every tile a COG, mosaic written`, manifest };
}

async function findManifest(t: VerifyTarget, sourceKey: string): Promise<SceneManifest | undefined> {
  const now = t.backend.clock.now();
  const hours = new Set(
    [now, now - 3_600_000].map((ms) => new Date(Math.floor(ms / 3_600_000) * 3_600_000).toISOString().slice(0, 13).replace(/[-T]/g, '')),
  );
  for (const hour of hours) {
    for await (const entry of t.backend.outputs.list(sceneLifecycleKeys.indexHour(hour))) {
      const scene = entry.key.slice(`${SCENE_INDEX_PREFIX}${hour}/`.length);
      const manifest = await readSceneManifest(t.backend.outputs, scene).catch(() => undefined);
      if (manifest?.source.key === sourceKey) return manifest;
    }
  }
  return undefined;
}

/** A valid COG by the project's own reader: a tiled GeoTIFF that opens, reads, and carries GDAL's COG ghost area. */
async function cogProblem(t: VerifyTarget, key: string): Promise<string | undefined> {
  const head = new TextDecoder('latin1').decode(await t.backend.outputs.getRange(key, 0, 16 + COG_GHOST_AREA.length));
  if (!head.includes('LAYOUT=IFDS_BEFORE_DATA')) return 'no COG ghost area (LAYOUT=IFDS_BEFORE_DATA) after the header';
  const src = await openGeoTiff(t.backend.outputs, key);
  if (!src.tiled) return 'not tiled';
  await src.readWindow({ x: 0, y: 0, width: Math.min(src.width, src.blockWidth), height: Math.min(src.height, src.blockHeight) }, [1]);
  return undefined;
}

/** Every tile's version token and modification time, to compare after a replay. */
async function tileHeads(t: VerifyTarget, scene: string): Promise<Map<string, ObjectHead>> {
  const heads = new Map<string, ObjectHead>();
  for await (const h of t.backend.outputs.list(outputKeys.tilePrefix(scene))) heads.set(h.key, h);
  return heads;
}

function changedTiles(before: Map<string, ObjectHead>, after: Map<string, ObjectHead>): string[] {
  const changed: string[] = [];
  for (const [key, b] of before) {
    const a = after.get(key);
    if (a === undefined || a.version !== b.version || a.lastModified !== b.lastModified) changed.push(key);
  }
  for (const key of after.keys()) if (!before.has(key)) changed.push(key);
  return changed;
}

async function runReplay(t: VerifyTarget, manifest: SceneManifest, timeoutMs: number, io: VerifyIo): Promise<CheckResult> {
  const { claims, queue, clock } = t.backend;
  const scene = manifest.sceneKey;
  const window = windowAt(manifest.grid, 0, 0);
  const job = makeTileJob(scene, manifest.source, manifest.params, manifest.grid, window, { kind: 'create' }, manifest.pin);
  const claimBefore = await claims.get(tileJobKey(scene, window));
  if (claimBefore?.state !== 'COMMITTED')
    return { pass: false, detail: `claim row ${job.jobKey} is ${claimBefore?.state ?? 'absent'}, not COMMITTED` };
  // Queue counts are approximate (SQS's lag behind the queue): settled is 0 twice, a second apart.
  const settled = () =>
    waitFor('the scene and tile queues to settle', timeoutMs, io, clock, async () => {
      if ((await t.pendingMessages()) !== 0) return undefined;
      await io.sleep(1000);
      return (await t.pendingMessages()) === 0 ? true : undefined;
    });
  const steps: { name: string; deliver: () => Promise<void> }[] = [
    { name: `tile message ${job.jobKey}`, deliver: () => queue.sendBatch([toJobMessage(job)]) },
    { name: 'scene event', deliver: () => t.redeliverSceneEvent(manifest.source) },
  ];
  for (const step of steps) {
    const before = await tileHeads(t, scene);
    io.progress(`${t.stack}: replay: re-delivering the ${step.name} through the stack's queue`);
    await step.deliver();
    // Let the trigger pick it up before asking whether the queue is empty again.
    await io.sleep(1000);
    await settled();
    const changed = changedTiles(before, await tileHeads(t, scene));
    if (changed.length > 0)
      return { pass: false, detail: `after the duplicate ${step.name}: ${changed.join(', ')} changed (version or modification time)` };
    const row = await claims.get(job.jobKey);
    if (row?.state !== 'COMMITTED' || row.finishedAt !== claimBefore.finishedAt || row.owner !== claimBefore.owner)
      return { pass: false, detail: `after the duplicate ${step.name}: claim row ${job.jobKey} changed (${JSON.stringify(row)})` };
  }
  // Against a deployed stack the handler's claim-rejected counter lives in its logs; what the
  // verifier can read is its effect: the committed row and every tile untouched.
  return {
    pass: true,
    detail: `duplicate tile message and duplicate scene event: ${manifest.grid.count} tiles kept their version and modification time, claim COMMITTED by ${claimBefore.owner}`,
  };
}

interface LiveScenario {
  readonly name: string;
  run(t: VerifyTarget, runId: string, io: VerifyIo, timeoutMs: number): Promise<CheckResult>;
}

const FAR = 3_600_000;

/**
 * The parity scenarios that can run against live stores without killing a
 * cloud process. Their keys are under `verify/<run id>/`; the claim row's id
 * is the job key of the pseudo-scene `tessera-verify-<run id>-claim-race`.
 * Not run live (docs/deploy.md says why): crashes and stalls mid-job, stolen
 * leases by clock, overwrites of a source mid-scene, backfill policies.
 */
export const LIVE_SCENARIOS: readonly LiveScenario[] = [
  {
    name: '16 concurrent claimers, one winner',
    async run(t, runId) {
      const { claims, clock } = t.backend;
      // A claim id is a SHA-256 key like every job key (the Azure table refuses anything else).
      const jobId = tileJobKey(`tessera-verify-${runId}-claim-race`, { row: 0, col: 0 });
      const now = clock.now();
      const results = await Promise.all(
        Array.from({ length: 16 }, (_, i) =>
          claims.claim({ jobId, owner: `verify-${i}`, now, leaseUntil: now + FAR, expiresAt: now + 7 * 86_400_000 }),
        ),
      );
      const winners: string[] = [];
      for (const [i, r] of results.entries()) {
        switch (r.kind) {
          case 'claimed':
            winners.push(`verify-${i}`);
            break;
          case 'held':
          case 'done':
            break;
          default:
            assertNever(r, 'claim result');
        }
      }
      if (winners.length !== 1) return { pass: false, detail: `${winners.length} of 16 claimers won` };
      const loser = winners[0] === 'verify-0' ? 'verify-1' : 'verify-0';
      const stolen = await claims.commit({ jobId, owner: loser, outputUri: 'verify://loser', now: clock.now() });
      if (stolen.kind !== 'lease-stolen') return { pass: false, detail: `a loser's commit was ${stolen.kind}` };
      const won = await claims.commit({ jobId, owner: winners[0] as string, outputUri: 'verify://winner', now: clock.now() });
      if (won.kind !== 'committed') return { pass: false, detail: `the winner's commit was ${won.kind}` };
      const again = await claims.claim({
        jobId,
        owner: 'verify-late',
        now: clock.now(),
        leaseUntil: clock.now() + FAR,
        expiresAt: clock.now() + FAR,
      });
      if (again.kind !== 'done') return { pass: false, detail: `a claim after commit was ${again.kind}` };
      return { pass: true, detail: '1 of 16 won; a loser could not commit; a late claim saw done' };
    },
  },
  {
    name: '16 create-only writers of one output key',
    async run(t, runId) {
      const { outputs } = t.backend;
      const key = `verify/${runId}/race.bin`;
      const body = new TextEncoder().encode(`tessera verify ${runId}\n`);
      const results = await Promise.all(Array.from({ length: 16 }, () => outputs.putIfAbsent(key, body)));
      const written = results.filter((r) => r.kind === 'written').length;
      const same = results.filter((r) => r.kind === 'already-present' && r.sameBytes).length;
      if (written !== 1 || same !== 15)
        return { pass: false, detail: `${written} written, ${same} already-present with the same bytes (want 1 and 15)` };
      const foreign = await outputs.putIfAbsent(key, new TextEncoder().encode('other bytes'));
      if (foreign.kind !== 'already-present' || foreign.sameBytes)
        return { pass: false, detail: `other bytes under a taken key gave ${JSON.stringify(foreign)}` };
      return { pass: true, detail: '1 written, 15 same-bytes answers, foreign bytes refused' };
    },
  },
  {
    name: 'odd keys (+, %2F, space, unicode) round-trip',
    async run(t, runId) {
      const { outputs } = t.backend;
      const names = ['a+b.tif', 'a%2Fb.tif', 'with space.tif', 'çà-日本.tif'];
      for (const name of names) {
        const key = `verify/${runId}/odd/${name}`;
        const body = new TextEncoder().encode(key);
        const put = await outputs.putIfAbsent(key, body);
        if (put.kind !== 'written') return { pass: false, detail: `${JSON.stringify(key)}: ${put.kind}` };
        const got = new TextDecoder().decode(await outputs.get(key));
        if (got !== key) return { pass: false, detail: `${JSON.stringify(key)} read back ${JSON.stringify(got)}` };
      }
      const listed: string[] = [];
      for await (const h of outputs.list(`verify/${runId}/odd/`)) listed.push(h.key.slice(`verify/${runId}/odd/`.length));
      const missing = names.filter((n) => !listed.includes(n));
      if (missing.length > 0 || listed.length !== names.length)
        return { pass: false, detail: `list gave ${JSON.stringify(listed.sort())}` };
      return { pass: true, detail: `${names.length} keys written, read and listed under their own names` };
    },
  },
  {
    name: 'poison tile message settled into the DLQ',
    async run(t, runId, io, timeoutMs) {
      // Parses as JSON, is no tile job: the tile function must dead-letter it at once, never retry it.
      const body = JSON.stringify({ v: 1, tesseraVerify: runId, poison: 'not a tile job' });
      await t.backend.queue.sendBatch([{ jobKey: tileJobKey(`tessera-verify-${runId}-poison`, { row: 0, col: 0 }), body }]);
      const letter = await waitFor('the poison message in the dead-letter queue', timeoutMs, io, t.backend.clock, async () =>
        (await t.deadLetters()).find((m) => m.body.includes(runId)),
      );
      const pending = await t.pendingMessages();
      if (pending !== 0) return { pass: false, detail: `dead-lettered, but ${pending} messages are still on the queues` };
      return { pass: true, detail: `dead-lettered (${letter.body.length} bytes, body unchanged: ${letter.body === body})` };
    },
  },
];

/** Scenarios of the parity table not run against a live stack, and why (printed under the matrix). */
export const NOT_RUN_LIVE: readonly string[] = [
  'crash / stall mid-job, stolen leases: need to kill or pause a cloud function mid-invocation',
  'source overwritten mid-scene, backfill policies: would overwrite a scene in the stack; not yet run live',
];

/** The matrix `npm run parity` prints, one column per stack. */
export function formatMatrix(reports: readonly VerifyReport[]): string {
  const rows: { name: string; cells: string[] }[] = [
    { name: 'smoke', cells: reports.map((r) => mark(r.smoke.pass)) },
    { name: 'replay (tile message, scene event)', cells: reports.map((r) => mark(r.replay.pass)) },
    ...LIVE_SCENARIOS.map((s) => ({
      name: s.name,
      cells: reports.map((r) => mark(r.parity.find((p) => p.scenario === s.name)?.pass ?? false)),
    })),
  ];
  const heads = reports.map((r) => `${r.stack} (${r.cloud})`);
  const first = Math.max('scenario'.length, ...rows.map((r) => r.name.length));
  const widths = heads.map((h) => Math.max(h.length, 4));
  const line = (name: string, cells: string[]) =>
    `${name.padEnd(first)}  ${cells.map((c, i) => c.padEnd(widths[i] as number)).join('  ')}`.trimEnd();
  const failures = reports.flatMap((r) => [
    ...(r.smoke.pass ? [] : [`${r.stack}: smoke: ${r.smoke.detail}`]),
    ...(r.replay.pass ? [] : [`${r.stack}: replay: ${r.replay.detail}`]),
    ...r.parity.filter((p) => !p.pass).map((p) => `${r.stack}: ${p.scenario}: ${p.detail}`),
  ]);
  return [
    line('scenario', heads),
    ...rows.map((r) => line(r.name, r.cells)),
    '',
    ...(failures.length > 0 ? ['failures:', ...failures.map((f) => `  ${f}`), ''] : []),
    'not run live:',
    ...NOT_RUN_LIVE.map((n) => `  ${n}`),
  ].join('\n');
}

const mark = (pass: boolean): string => (pass ? 'ok' : 'FAIL');

export function verifyPassed(report: VerifyReport): boolean {
  return report.smoke.pass && report.replay.pass && report.parity.every((p) => p.pass);
}
