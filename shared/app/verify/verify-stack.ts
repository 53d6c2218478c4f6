import { BACKFILL_POLICIES, type BackfillPolicy } from '../../domain/backfill-policy.js';
import { canonicalJson } from '../../domain/canonical-json.js';
import { assertNever, type ClaimRow } from '../../domain/claim.js';
import { InvalidParamsError, TesseraError } from '../../domain/errors.js';
import { outputKeys, repairJobKey, sceneKey, tileJobKey } from '../../domain/job-key.js';
import { verifyKeys } from '../../domain/key-layout.js';
import type { RenderedFormat, RenderParams } from '../../domain/render-params.js';
import { windowAt } from '../../domain/tile-grid.js';
import { type TilingParams, tilingParams } from '../../domain/tiling-params.js';
import type { Delivery, JobMessage, PullQueue } from '../../ports/job-queue.port.js';
import type { ObjectHead } from '../../ports/object-store.port.js';
import { COG_GHOST_AREA } from '../../raster/cog-writer.js';
import { openGeoTiff } from '../../raster/geotiff-source.js';
import { decodeImage, type RawImage, renderedBands } from '../../raster/image-encoder.js';
import type { Backend } from '../backend.js';
import { enqueueReadyParents } from '../pyramid.js';
import { indexHourOf, readSceneManifest, type SceneManifest, sceneLifecycleKeys } from '../scene-manifest.js';
import { type TileMode, toJobMessage } from '../tile-job.js';
import { fanOutJobs, manifestTiles, type SceneTile, sceneJob, sceneTiles, sceneWindow, sceneZooms } from './scene-tiles.js';

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
  /** How verify tells that what it just sent through the stack's queues has been handled. */
  readonly settling: Settling;
  /**
   * Send a duplicate of the scene's creation event through the stack's own
   * scene trigger (AWS: the S3 notification on the scene queue; Azure: the
   * BlobCreated event on the scene queue). Where no trigger can be sent a
   * duplicate (GCP: Eventarc takes no event from outside), the scene's whole
   * fan-out, every tile job a duplicate event would publish, goes to the tile
   * topic instead. Returns the job keys it put on the tile queue directly.
   */
  redeliverSceneEvent(manifest: SceneManifest): Promise<readonly string[]>;
  /** The tile queue's dead-letter queue (SQS DLQ, `<queue>-poison`, GCP: a tap on the dead-letter topic), read without removing anything. */
  deadLetters(): Promise<JobMessage[]>;
  /**
   * Remove the dead letters `match` picks (each under the receipt of the receive that saw it: no queue has
   * another precondition). `left` says what stays, and why, where the cloud cannot remove it.
   */
  removeDeadLetters(match: (m: JobMessage) => boolean): Promise<{ readonly removed: number; readonly left?: string | undefined }>;
  /** Before any check (GCP: the tap subscriptions, which see only what is published after they exist). */
  open?(): Promise<void>;
  /** After every check (GCP: deletes the tap subscriptions). */
  close?(): Promise<void>;
}

/**
 * - `backlog`: the queues count their messages (SQS approximate counts, a
 *   Storage Queue's approximate count): settled is 0 on the scene and tile
 *   queues, twice, a second apart.
 * - `tap`: Pub/Sub has no backlog count outside Cloud Monitoring. verify's own
 *   subscription on the tile topic proves a message went through the topic the
 *   stack's trigger subscribes to (`mark`: a position in what the tap has seen;
 *   `seenSince`: the job keys of the messages it saw after it); then a quiet
 *   period of `quietMs`, in which a handler acting on the message would leave
 *   its trace (a new version, a changed claim row), which the checks then read.
 */
export type Settling =
  | { readonly kind: 'backlog'; pendingMessages(): Promise<number> }
  | {
      readonly kind: 'tap';
      mark(): Promise<number>;
      seenSince(mark: number): Promise<readonly string[]>;
      readonly quietMs: number;
    };

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
  readonly cleanup: CleanupReport;
  readonly seconds: number;
}

/** What verify removed of what it created, each delete conditional on the version or row state it last read. */
export interface CleanupReport extends CheckResult {
  readonly objects: number;
  readonly claimRows: number;
  readonly deadLetters: number;
  /** What stays, and why (a version someone else wrote since verify read it; a dead letter a cloud cannot remove). */
  readonly left: readonly string[];
  /** Jobs of the run's scenes that the stack dead-lettered though no check sent them there (each fails the cleanup). */
  readonly faults: readonly string[];
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

/** Smoke, replay, the live parity scenarios and the cleanup against one stack; never throws for a failed check. */
export async function verifyStack(target: VerifyTarget, options: VerifyOptions, io: VerifyIo): Promise<VerifyReport> {
  const started = target.backend.clock.now();
  const timeoutMs = options.timeoutMs ?? smokeTimeoutMs(target.leaseSeconds);
  const created = new Created(options.runId);
  const unopened = await guarded(async () => {
    await target.open?.();
    return { pass: true, detail: '' };
  });
  try {
    if (!unopened.pass) {
      // Nothing was sent or written: every check fails with the reason (e.g. GCP: no right to create a subscription).
      const why = `not run: verify could not prepare its checks: ${unopened.detail}`;
      return {
        stack: target.stack,
        cloud: target.cloud,
        smoke: { pass: false, detail: why },
        replay: { pass: false, detail: why },
        parity: LIVE_SCENARIOS.map((sc) => ({ scenario: sc.name, pass: false, detail: why })),
        cleanup: { pass: true, detail: 'nothing was created', objects: 0, claimRows: 0, deadLetters: 0, left: [], faults: [] },
        seconds: 0,
      };
    }
    const smoke: SmokeOutcome = await guarded(() => runSmoke(target, options, timeoutMs, io, created));
    const replay =
      smoke.manifest === undefined
        ? { pass: false, detail: 'not run: the smoke check found no scene to replay' }
        : await guarded(() => runReplay(target, smoke.manifest as SceneManifest, timeoutMs, io));
    const parity: ParityRow[] = [];
    const live: LiveContext = { t: target, runId: options.runId, io, timeoutMs, scene: smoke.manifest, replayed: replay.pass, created };
    for (const scenario of LIVE_SCENARIOS) {
      const r = await guarded(() => scenario.run(live));
      parity.push({ scenario: scenario.name, pass: r.pass, detail: r.detail });
      io.progress(`${target.stack}: parity ${scenario.name}: ${r.pass ? 'pass' : `FAIL ${r.detail}`}`);
    }
    const cleanup = await cleanUp(target, created, io);
    return {
      stack: target.stack,
      cloud: target.cloud,
      smoke: {
        pass: smoke.pass,
        detail: smoke.detail,
        sceneKey: smoke.manifest?.sceneKey,
        tiles: smoke.manifest === undefined ? undefined : manifestTiles(smoke.manifest).length,
      },
      replay: { pass: replay.pass, detail: replay.detail },
      parity,
      cleanup,
      seconds: Math.round((target.backend.clock.now() - started) / 100) / 10,
    };
  } finally {
    await target.close?.();
  }
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

async function runSmoke(t: VerifyTarget, o: VerifyOptions, timeoutMs: number, io: VerifyIo, created: Created): Promise<SmokeOutcome> {
  const { sources, outputs, clock } = t.backend;
  const key = `${t.sourcePrefix}tessera-verify-${o.runId}.tif`;
  io.progress(`${t.stack}: smoke: uploading ${key} (${o.sceneBytes.byteLength} bytes, create-only)`);
  const put = await sources.putIfAbsent(key, o.sceneBytes, { contentType: 'image/tiff' });
  if (put.kind !== 'written') return { pass: false, detail: `${key} already exists in the source bucket; the run id must be unique` };
  created.source = { key, version: put.version };
  // The scene key is derived from the stack's own params (not in the outputs): find the manifest
  // through the sweep's index of this hour and the last, where fan-out records every scene.
  const manifest = await waitFor(`the scene manifest of ${key}`, timeoutMs, io, clock, () => findManifest(t, key));
  const scene = manifest.sceneKey;
  created.addScene(manifest, clock.now());
  io.progress(`${t.stack}: smoke: scene ${scene}, ${manifest.grid.count} tiles; waiting for the mosaic`);
  await waitFor(`the mosaic ${outputKeys.mosaic(scene)}`, timeoutMs, io, clock, async () =>
    (await outputs.head(outputKeys.mosaic(scene))) === undefined ? undefined : true,
  );
  // Every tile of every zoom (a pyramid's: docs/pyramids.md), each under its own key, and nothing else.
  const expected = manifestTiles(manifest);
  const listed = await tileHeads(t, scene);
  const missing = expected.filter((tile) => !listed.has(tile.outputKey)).map((tile) => tile.outputKey);
  const known = new Set(expected.map((tile) => tile.outputKey));
  const extra = [...listed.keys()].filter((key) => !known.has(key));
  if (missing.length > 0 || extra.length > 0)
    return {
      pass: false,
      detail:
        `${listed.size} tiles under ${outputKeys.tilePrefix(scene)}, the scene has ${expected.length} (${tilesWord(manifest)})` +
        `${missing.length > 0 ? `; missing: ${missing.slice(0, 5).join(', ')}` : ''}${extra.length > 0 ? `; unexpected: ${extra.slice(0, 5).join(', ')}` : ''}`,
      manifest,
    };
  const tiling = tilingParams(manifest.params);
  for (const tile of expected) {
    const problem = await tileProblem(t, tile.outputKey, tiling);
    if (problem !== undefined) return { pass: false, detail: `${tile.outputKey}: ${problem}`, manifest };
  }
  const format = tiling.render === undefined ? 'a COG' : `a ${tiling.render.format} of ${tiling.tilePx} px`;
  return {
    pass: true,
    detail: `${expected.length} tiles (${tilesWord(manifest)}) = grid count, every tile ${format}, mosaic written`,
    manifest,
  };
}

/** `4 tiles` for one zoom; `zooms 15-13: 4 + 2 + 1` for a pyramid. */
function tilesWord(m: SceneManifest): string {
  const zooms = sceneZooms(m.params);
  if (zooms[0] === undefined) return `one zoom, ${m.grid.count} tiles`;
  const per = new Map<number | undefined, number>();
  for (const tile of manifestTiles(m)) per.set(tile.zoom, (per.get(tile.zoom) ?? 0) + 1);
  return `zooms ${zooms[0]}-${zooms[zooms.length - 1]}: ${zooms.map((z) => per.get(z) ?? 0).join(' + ')}`;
}

async function findManifest(t: VerifyTarget, sourceKey: string): Promise<SceneManifest | undefined> {
  const now = t.backend.clock.now();
  const hours = new Set(
    [now, now - 3_600_000].map((ms) => new Date(Math.floor(ms / 3_600_000) * 3_600_000).toISOString().slice(0, 13).replace(/[-T]/g, '')),
  );
  for (const hour of hours) {
    for await (const entry of t.backend.outputs.list(sceneLifecycleKeys.indexHour(hour))) {
      const scene = entry.key.slice(sceneLifecycleKeys.indexHour(hour).length);
      const manifest = await readSceneManifest(t.backend.outputs, scene).catch(() => undefined);
      if (manifest?.source.key === sourceKey) return manifest;
    }
  }
  return undefined;
}

/** A tile as its format makes it: a COG ({@link cogProblem}), or a rendered image ({@link imageProblem}). */
function tileProblem(t: VerifyTarget, key: string, tiling: TilingParams): Promise<string | undefined> {
  return tiling.render === undefined ? cogProblem(t, key) : imageProblem(t, key, tiling.render, tiling.tilePx);
}

/** The first bytes of each rendered format (PNG's signature, RIFF....WEBP, JPEG's SOI marker). */
const IMAGE_SIGNATURES: Readonly<Record<RenderedFormat, (head: Uint8Array) => boolean>> = {
  PNG: (h) => [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a].every((b, i) => h[i] === b),
  WEBP: (h) =>
    new TextDecoder('latin1').decode(h.subarray(0, 4)) === 'RIFF' && new TextDecoder('latin1').decode(h.subarray(8, 12)) === 'WEBP',
  JPEG: (h) => h[0] === 0xff && h[1] === 0xd8 && h[2] === 0xff,
};

/** A rendered tile: the format's signature, and an image that decodes (the pinned libvips) to the tile's size and bands. */
async function imageProblem(t: VerifyTarget, key: string, render: RenderParams, tilePx: number): Promise<string | undefined> {
  const bytes = await t.backend.outputs.get(key);
  if (!IMAGE_SIGNATURES[render.format](bytes)) return `not a ${render.format} image (its first bytes are not the format's signature)`;
  const channels = renderedBands(render).length as RawImage['channels'];
  const image = await decodeImage(bytes, channels);
  if (image.width !== tilePx || image.height !== tilePx) return `a ${image.width}x${image.height} image, not a ${tilePx} px tile`;
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

/**
 * Re-deliver tile 0_0 of the scene (of its highest zoom and, in a pyramid, of its lowest: a parent, built from its
 * children), then the scene event: every tile of every zoom must keep its version and modification time, and each
 * replayed job's claim row stay COMMITTED by the same owner.
 */
async function runReplay(t: VerifyTarget, manifest: SceneManifest, timeoutMs: number, io: VerifyIo): Promise<CheckResult> {
  const { claims, queue } = t.backend;
  const scene = manifest.sceneKey;
  const zooms = sceneZooms(manifest.params);
  const picked = [...new Set([zooms[0], zooms[zooms.length - 1]])];
  const jobs = picked.map((zoom) => sceneJob(manifest, zoom, sceneWindow(manifest, zoom, 0, 0)));
  const rowsBefore = new Map<string, ClaimRow>();
  for (const job of jobs) {
    const row = await claims.get(job.jobKey);
    if (row?.state !== 'COMMITTED') return { pass: false, detail: `claim row ${job.jobKey} is ${row?.state ?? 'absent'}, not COMMITTED` };
    rowsBefore.set(job.jobKey, row);
  }
  const named = jobs.map((j) => (j.zoom === undefined ? j.jobKey : `${j.jobKey} (zoom ${j.zoom})`)).join(', ');
  const steps: { name: string; deliver: () => Promise<readonly string[]> }[] = [
    {
      name: `tile message${jobs.length > 1 ? 's' : ''} ${named}`,
      deliver: async () => {
        await queue.sendBatch(jobs.map(toJobMessage));
        return jobs.map((j) => j.jobKey);
      },
    },
    { name: 'scene event', deliver: () => t.redeliverSceneEvent(manifest) },
  ];
  let kept = 0;
  for (const step of steps) {
    const before = await tileHeads(t, scene);
    io.progress(`${t.stack}: replay: re-delivering the ${step.name} through the stack's queue`);
    await sentAndSettled(t, io, timeoutMs, step.deliver);
    const after = await tileHeads(t, scene);
    const changed = changedTiles(before, after);
    if (changed.length > 0)
      return { pass: false, detail: `after the duplicate ${step.name}: ${changed.join(', ')} changed (version or modification time)` };
    kept = after.size;
    for (const [jobKey, was] of rowsBefore) {
      const row = await claims.get(jobKey);
      if (row?.state !== 'COMMITTED' || row.finishedAt !== was.finishedAt || row.owner !== was.owner)
        return { pass: false, detail: `after the duplicate ${step.name}: claim row ${jobKey} changed (${JSON.stringify(row)})` };
    }
  }
  // Against a deployed stack the handler's claim-rejected counter lives in its logs; what the
  // verifier can read is its effect: the committed rows and every tile untouched.
  const owners = [...new Set([...rowsBefore.values()].map((r) => r.owner))].join(', ');
  return {
    pass: true,
    detail:
      `duplicate tile message${jobs.length > 1 ? 's (highest and lowest zoom)' : ''} and duplicate scene event: ` +
      `${kept} tiles kept their version and modification time, claim${jobs.length > 1 ? 's' : ''} COMMITTED by ${owners}`,
  };
}

/**
 * Send, then wait until what was sent has been handled, by the target's own
 * means (see {@link Settling}). `send` returns the job keys it put on the
 * tile queue directly (a tap counts those); a scene event is counted by the
 * scene queue's backlog.
 */
async function sentAndSettled(t: VerifyTarget, io: VerifyIo, timeoutMs: number, send: () => Promise<readonly string[]>): Promise<void> {
  const { clock } = t.backend;
  const settling = t.settling;
  switch (settling.kind) {
    case 'backlog':
      await send();
      // Let the trigger pick it up before asking whether the queue is empty again; counts are approximate
      // (SQS's lag behind the queue): settled is 0 twice, a second apart.
      await io.sleep(1000);
      await waitFor('the scene and tile queues to settle', timeoutMs, io, clock, async () => {
        if ((await settling.pendingMessages()) !== 0) return undefined;
        await io.sleep(1000);
        return (await settling.pendingMessages()) === 0 ? true : undefined;
      });
      return;
    case 'tap': {
      // A key may go out more than once in a run (the replayed tile, then the scene's fan-out): count from here.
      const mark = await settling.mark();
      const keys = await send();
      const want = new Map<string, number>();
      for (const k of keys) want.set(k, (want.get(k) ?? 0) + 1);
      await waitFor(`${keys.length} messages on the tile topic`, timeoutMs, io, clock, async () => {
        const seen = new Map<string, number>();
        for (const k of await settling.seenSince(mark)) seen.set(k, (seen.get(k) ?? 0) + 1);
        for (const [k, n] of want) if ((seen.get(k) ?? 0) < n) return undefined;
        return true;
      });
      io.progress(`  seen on the tile topic; watching for ${Math.round(settling.quietMs / 1000)} s (Pub/Sub has no backlog count)`);
      await io.sleep(settling.quietMs);
      return;
    }
    default:
      assertNever(settling, 'settling');
  }
}

/** What a live scenario runs with: the stack, the run, and the smoke scene (undefined if smoke found none). */
interface LiveContext {
  readonly t: VerifyTarget;
  readonly runId: string;
  readonly io: VerifyIo;
  readonly timeoutMs: number;
  readonly scene: SceneManifest | undefined;
  /** Whether the replay passed: the backfills build on a scene whose tiles and claims were just proven. */
  readonly replayed: boolean;
  /** Everything a scenario makes is registered here, for the cleanup. */
  readonly created: Created;
}

interface LiveScenario {
  readonly name: string;
  run(ctx: LiveContext): Promise<CheckResult>;
}

const FAR = 3_600_000;

const BACKFILL_SCENARIO_NAMES: Readonly<Record<BackfillPolicy, string>> = {
  skip: 'backfill skip fills a gap, leaves committed tiles untouched',
  'new-key': 'backfill new-key writes beside the old tiles',
  overwrite: 'backfill overwrite repairs at the seen version, dead-letters a changed tile (pyramids: refused)',
};

/**
 * The parity scenarios that can run against live stores without killing a
 * cloud process. Their keys are under `verify/<run id>/`; the claim row's id
 * is the job key of the pseudo-scene `tessera-verify-<run id>-claim-race`.
 * The three backfill policies run on the smoke scene, through the stack's own
 * tile queue and tile function (shared/domain/backfill-policy.ts).
 * Not run live (docs/deploy.md says why): crashes and stalls mid-job, stolen
 * leases by clock, overwrites of a source mid-scene.
 */
export const LIVE_SCENARIOS: readonly LiveScenario[] = [
  {
    name: '16 concurrent claimers, one winner',
    async run({ t, runId, created }) {
      const { claims, clock } = t.backend;
      // A claim id is a SHA-256 key like every job key (the Azure table refuses anything else).
      const jobId = tileJobKey(`tessera-verify-${runId}-claim-race`, { row: 0, col: 0 });
      created.claims.add(jobId);
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
    async run({ t, runId }) {
      const { outputs } = t.backend;
      const key = verifyKeys.race(runId);
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
    async run({ t, runId }) {
      const { outputs } = t.backend;
      const names = ['a+b.tif', 'a%2Fb.tif', 'with space.tif', 'çà-日本.tif'];
      for (const name of names) {
        const key = verifyKeys.odd(runId, name);
        const body = new TextEncoder().encode(key);
        const put = await outputs.putIfAbsent(key, body);
        if (put.kind !== 'written') return { pass: false, detail: `${JSON.stringify(key)}: ${put.kind}` };
        const got = new TextDecoder().decode(await outputs.get(key));
        if (got !== key) return { pass: false, detail: `${JSON.stringify(key)} read back ${JSON.stringify(got)}` };
      }
      const listed: string[] = [];
      for await (const h of outputs.list(verifyKeys.oddPrefix(runId))) listed.push(h.key.slice(verifyKeys.oddPrefix(runId).length));
      const missing = names.filter((n) => !listed.includes(n));
      if (missing.length > 0 || listed.length !== names.length)
        return { pass: false, detail: `list gave ${JSON.stringify(listed.sort())}` };
      return { pass: true, detail: `${names.length} keys written, read and listed under their own names` };
    },
  },
  {
    name: 'poison tile message settled into the DLQ',
    async run({ t, runId, io, timeoutMs, created }) {
      // Parses as JSON, is no tile job: the tile function must dead-letter it at once, never retry it.
      const body = JSON.stringify({ v: 1, tesseraVerify: runId, poison: 'not a tile job' });
      // By its content: a queue may re-encode the JSON text (Azure's entry is canonical JSON of the same object).
      const isOurs = (m: JobMessage) => {
        try {
          return (JSON.parse(m.body) as { tesseraVerify?: unknown }).tesseraVerify === runId;
        } catch {
          return false;
        }
      };
      created.deadLetters.push(isOurs);
      await t.backend.queue.sendBatch([{ jobKey: tileJobKey(`tessera-verify-${runId}-poison`, { row: 0, col: 0 }), body }]);
      const letter = await waitFor('the poison message in the dead-letter queue', timeoutMs, io, t.backend.clock, async () =>
        (await t.deadLetters()).find(isOurs),
      );
      // Where the queues count their backlog, a poison message must also be gone from them (not left to retry).
      if (t.settling.kind === 'backlog') {
        const pending = await t.settling.pendingMessages();
        if (pending !== 0) return { pass: false, detail: `dead-lettered, but ${pending} messages are still on the queues` };
      }
      return { pass: true, detail: `dead-lettered (${letter.body.length} bytes, body unchanged: ${letter.body === body})` };
    },
  },
  ...BACKFILL_POLICIES.map(backfillScenario),
];

/** The name of a policy's live scenario (the matrix row). */
export function backfillScenarioName(policy: BackfillPolicy): string {
  return BACKFILL_SCENARIO_NAMES[policy];
}

function backfillScenario(policy: BackfillPolicy): LiveScenario {
  return {
    name: backfillScenarioName(policy),
    async run(ctx) {
      if (ctx.scene === undefined) return { pass: false, detail: 'not run: the smoke check found no scene to backfill' };
      // A stack whose duplicates already misbehave (or whose outputs name other stores) would only time out here.
      if (!ctx.replayed) return { pass: false, detail: 'not run: the replay failed, so the scene it would backfill is not proven' };
      switch (policy) {
        case 'skip':
          return backfillSkip(ctx, ctx.scene);
        case 'new-key':
          return backfillNewKey(ctx, ctx.scene);
        case 'overwrite':
          return sceneZooms(ctx.scene.params)[0] === undefined ? backfillOverwrite(ctx, ctx.scene) : overwriteRefused(ctx, ctx.scene);
        default:
          return assertNever(policy, 'backfill policy');
      }
    },
  };
}

/**
 * skip: make the gaps a crashed first run leaves (the scene's last tile and, in a pyramid, the last tile of its lowest
 * zoom: a parent whose message was lost; each tile and its claim row removed conditionally on what verify read), then
 * send what `tessera backfill --policy skip` sends, through the stack's tile queue: the scene's jobs again under the
 * same keys (a pyramid's: its highest zoom's, as fan-out sends them) and, in a pyramid, every missing tile whose
 * children are all written (shared/app/pyramid.ts `enqueueReadyParents`). Each gap is filled; every committed tile
 * stops at its claim and keeps its version and modification time.
 */
async function backfillSkip({ t, io, timeoutMs }: LiveContext, m: SceneManifest): Promise<CheckResult> {
  const { outputs, claims, clock } = t.backend;
  const all = manifestTiles(m);
  const zooms = sceneZooms(m.params);
  const lastOf = (zoom: number | undefined) => all.filter((tile) => tile.zoom === zoom).at(-1) as SceneTile;
  const gaps = [...new Set([lastOf(zooms[0]), lastOf(zooms[zooms.length - 1])])];
  for (const gap of gaps) {
    const head = await outputs.head(gap.outputKey);
    const row = await claims.get(gap.jobKey);
    if (head === undefined || row?.state !== 'COMMITTED') return { pass: false, detail: `${gap.outputKey} is not a committed tile` };
    const tileGone = await outputs.deleteIfVersion(gap.outputKey, head.version);
    const rowGone = await claims.deleteIf({ jobId: gap.jobKey, state: 'COMMITTED', owner: row.owner });
    // `absent` makes the gap as well: it is what a delete that landed answers when its first answer was lost and the
    // SDK resent it (both ports say so), and each delete was conditional on what verify read, so nothing else went.
    const gone = (kind: string) => kind === 'deleted' || kind === 'absent';
    if (!gone(tileGone.kind) || !gone(rowGone.kind))
      return { pass: false, detail: `could not make the gap ${gap.outputKey}: tile ${tileGone.kind}, claim row ${rowGone.kind}` };
  }
  const before = await tileHeads(t, m.sceneKey);
  const jobs = fanOutJobs(m);
  const named = gaps.map((g) => g.outputKey).join(' and ');
  io.progress(`${t.stack}: backfill skip: ${named} removed; sending the scene's ${jobs.length} jobs again`);
  let parents = 0;
  await sentAndSettled(t, io, timeoutMs, async () => {
    await t.backend.queue.sendBatch(jobs.map(toJobMessage));
    // A pyramid's tiles below the highest zoom whose children are all there: no child would enqueue them again.
    parents = await enqueueReadyParents(t.backend, m);
    return jobs.map((j) => j.jobKey);
  });
  const tiling = tilingParams(m.params);
  const fillers: string[] = [];
  for (const gap of gaps) {
    const filled = await waitFor(`the gap ${gap.outputKey} to be filled`, timeoutMs, io, clock, async () => {
      const row = await claims.get(gap.jobKey);
      return row?.state === 'COMMITTED' ? row : undefined;
    });
    fillers.push(filled.owner);
    const problem = await tileProblem(t, gap.outputKey, tiling);
    if (problem !== undefined) return { pass: false, detail: `the filled gap ${gap.outputKey}: ${problem}` };
  }
  const refilled = new Set(gaps.map((g) => g.outputKey));
  const changed = changedTiles(before, await tileHeads(t, m.sceneKey)).filter((k) => !refilled.has(k));
  if (changed.length > 0) return { pass: false, detail: `committed tiles changed: ${changed.join(', ')}` };
  const where = (g: SceneTile) => `${g.zoom === undefined ? '' : `${g.zoom}/`}${g.window.row}_${g.window.col}`;
  return {
    pass: true,
    detail:
      `gap${gaps.length > 1 ? 's' : ''} ${gaps.map(where).join(' and ')} filled by ${[...new Set(fillers)].join(', ')}` +
      `${zooms[0] === undefined ? '' : ` (${jobs.length} jobs of zoom ${zooms[0]} and ${parents} ready parent${parents === 1 ? '' : 's'} sent)`}; ` +
      `${all.length - gaps.length} committed tiles untouched`,
  };
}

/**
 * new-key: the same scene under a bumped params.version: every key changes, new tiles land beside the old ones. As
 * `tessera backfill --policy new-key` fans out: the new scene's manifest first, create-only (a pyramid's tiles below
 * the highest zoom read it), then its jobs (a pyramid's highest zoom; the children enqueue every parent). Every tile of
 * every zoom of the new scene must commit, byte-identical to the old tile in its place; the old ones stay untouched.
 */
async function backfillNewKey({ t, runId, io, timeoutMs, created }: LiveContext, m: SceneManifest): Promise<CheckResult> {
  const { outputs, claims, clock } = t.backend;
  const params = { ...m.params, version: `${String(m.params.version ?? '')}+verify-${runId}` };
  const newScene = sceneKey(m.source, params);
  const fresh = sceneTiles(newScene, m.grid, params);
  const old = manifestTiles(m);
  created.addDerivedScene(newScene, fresh);
  const manifest: SceneManifest = { ...m, sceneKey: newScene, params, createdAt: new Date(clock.now()).toISOString() };
  const manifestKey = outputKeys.sceneManifest(newScene);
  const put = await outputs.putIfAbsent(manifestKey, new TextEncoder().encode(JSON.stringify(manifest)), {
    contentType: 'application/json',
  });
  if (put.kind !== 'written') return { pass: false, detail: `${manifestKey} was already there (${put.kind}); the run id must be unique` };
  const jobs = fanOutJobs(m, { params });
  const before = await tileHeads(t, m.sceneKey);
  io.progress(`${t.stack}: backfill new-key: scene ${newScene}, ${jobs.length} jobs for ${fresh.length} tiles`);
  await t.backend.queue.sendBatch(jobs.map(toJobMessage));
  await waitFor(`${fresh.length} tiles under ${outputKeys.tilePrefix(newScene)}`, timeoutMs, io, clock, async () => {
    for (const tile of fresh) if ((await claims.get(tile.jobKey))?.state !== 'COMMITTED') return undefined;
    return true;
  });
  const written = await tileHeads(t, newScene);
  if (written.size !== fresh.length) return { pass: false, detail: `${written.size} tiles under the new key, want ${fresh.length}` };
  for (const [i, tile] of fresh.entries()) {
    const twin = (old[i] as SceneTile).outputKey;
    const a = new Uint8Array(await outputs.get(tile.outputKey));
    const b = new Uint8Array(await outputs.get(twin));
    if (Buffer.compare(a, b) !== 0) return { pass: false, detail: `${tile.outputKey} differs from ${twin} (same source, same pixels)` };
  }
  const changed = changedTiles(before, await tileHeads(t, m.sceneKey));
  if (changed.length > 0) return { pass: false, detail: `old tiles changed: ${changed.join(', ')}` };
  return { pass: true, detail: `${fresh.length} new tiles under ${newScene.slice(0, 12)}..., the old ${before.size} untouched` };
}

/**
 * overwrite on a pyramid: refused. Its tiles below the highest zoom are built from the tiles above, so a tile repaired
 * in place would leave its parents with the old pixels (docs/pyramids.md): `tessera backfill --policy overwrite` makes
 * no repair job of a pyramid's tile (InvalidParamsError, naming new-key), and a repair message sent anyway, here by
 * hand through the stack's tile queue, is poison: the tile function dead-letters it at once and the tile keeps its
 * version.
 */
async function overwriteRefused({ t, io, timeoutMs, created }: LiveContext, m: SceneManifest): Promise<CheckResult> {
  const { outputs, clock } = t.backend;
  const tile = manifestTiles(m)[0] as SceneTile;
  const seen = await outputs.head(tile.outputKey);
  if (seen === undefined) return { pass: false, detail: `${tile.outputKey} is missing` };
  const mode: TileMode = { kind: 'overwrite', expectedVersion: seen.version };
  try {
    sceneJob(m, tile.zoom, tile.window, { mode });
    return {
      pass: false,
      detail: `a repair job of pyramid tile ${tile.outputKey} was made; a pyramid's tiles are never repaired in place`,
    };
  } catch (e) {
    if (!(e instanceof InvalidParamsError)) throw e;
  }
  const job = sceneJob(m, tile.zoom, tile.window);
  const isRepair = (d: JobMessage) => {
    try {
      const body = JSON.parse(d.body) as { jobKey?: unknown; mode?: { expectedVersion?: unknown } };
      return body.jobKey === job.jobKey && body.mode?.expectedVersion === seen.version;
    } catch {
      return false;
    }
  };
  created.deadLetters.push(isRepair);
  created.claims.add(repairJobKey(job.jobKey, seen.version));
  io.progress(`${t.stack}: backfill overwrite: a pyramid's tile is not repaired in place; sending a repair of ${tile.outputKey} by hand`);
  await t.backend.queue.sendBatch([{ jobKey: job.jobKey, body: canonicalJson({ ...job, mode }) }]);
  await waitFor(`the repair of ${tile.outputKey} in the dead-letter queue`, timeoutMs, io, clock, async () =>
    (await t.deadLetters()).some(isRepair) ? true : undefined,
  );
  const after = await outputs.head(tile.outputKey);
  if (after?.version !== seen.version || after.lastModified !== seen.lastModified)
    return { pass: false, detail: `${tile.outputKey} changed after the refused repair` };
  return {
    pass: true,
    detail: `pyramid: no repair job is made (backfill --policy new-key instead); a repair of ${tile.outputKey} sent by hand was dead-lettered, the tile kept its version`,
  };
}

/**
 * overwrite: a repair of tile 0_0 conditional on the version verify read
 * commits (its repair claim row COMMITTED, the bytes deterministic); a repair
 * of tile 0_1 under a version that another writer (verify, conditionally)
 * replaced meanwhile is poison: dead-lettered at once, the other bytes kept.
 */
async function backfillOverwrite({ t, io, timeoutMs, created }: LiveContext, m: SceneManifest): Promise<CheckResult> {
  const { outputs, claims, clock } = t.backend;
  const first = windowAt(m.grid, 0, 0);
  const repairKey = sceneJob(m, undefined, first).outputKey;
  const seen = await outputs.head(repairKey);
  if (seen === undefined) return { pass: false, detail: `${repairKey} is missing` };
  const bytesBefore = await outputs.get(repairKey);
  const repair = sceneJob(m, undefined, first, { mode: { kind: 'overwrite', expectedVersion: seen.version } });
  const repairClaim = repairJobKey(repair.jobKey, seen.version);
  created.claims.add(repairClaim);
  io.progress(`${t.stack}: backfill overwrite: repairing ${repairKey} under ${seen.version}`);
  await t.backend.queue.sendBatch([toJobMessage(repair)]);
  await waitFor(`the repair of ${repairKey} to commit`, timeoutMs, io, clock, async () =>
    (await claims.get(repairClaim))?.state === 'COMMITTED' ? true : undefined,
  );
  if (Buffer.compare(new Uint8Array(await outputs.get(repairKey)), new Uint8Array(bytesBefore)) !== 0)
    return { pass: false, detail: `the repair of ${repairKey} wrote other bytes than the deterministic tile` };
  // The second half needs a second tile; a one-tile grid repairs the same tile again after a foreign write.
  const second = m.grid.count > 1 ? windowAt(m.grid, 0, m.grid.cols > 1 ? 1 : 0) : first;
  const changedKey = sceneJob(m, undefined, second).outputKey;
  const read = await outputs.head(changedKey);
  if (read === undefined) return { pass: false, detail: `${changedKey} is missing` };
  const foreign = new TextEncoder().encode(`tessera verify: another writer replaced this tile after it was read\n`);
  const other = await outputs.putIfMatch(changedKey, foreign, read.version);
  if (other.kind !== 'written') return { pass: false, detail: `the other writer's conditional write of ${changedKey} was ${other.kind}` };
  const stale = sceneJob(m, undefined, second, { mode: { kind: 'overwrite', expectedVersion: read.version } });
  created.claims.add(repairJobKey(stale.jobKey, read.version));
  const isStale = (d: JobMessage) => {
    try {
      const body = JSON.parse(d.body) as { jobKey?: unknown; mode?: { expectedVersion?: unknown } };
      return body.jobKey === stale.jobKey && body.mode?.expectedVersion === read.version;
    } catch {
      return false;
    }
  };
  created.deadLetters.push(isStale);
  await t.backend.queue.sendBatch([toJobMessage(stale)]);
  await waitFor(`the stale repair of ${changedKey} in the dead-letter queue`, timeoutMs, io, clock, async () =>
    (await t.deadLetters()).some(isStale) ? true : undefined,
  );
  const kept = new TextDecoder().decode(await outputs.get(changedKey));
  if (kept !== new TextDecoder().decode(foreign)) return { pass: false, detail: `${changedKey} lost the other writer's bytes` };
  return {
    pass: true,
    detail: `${repairKey} repaired under its version (claim COMMITTED); the stale repair of ${changedKey} dead-lettered, the other bytes kept`,
  };
}

/**
 * Everything one run created: the scene it uploaded, the outputs and claim
 * rows the stack made for it, the keys and rows of the live scenarios, the
 * dead letters they caused. Cleanup deletes each object at the version it
 * lists with, and each claim row in the state and owner it reads, so
 * nothing anyone wrote after verify looked is ever removed.
 */
class Created {
  source: { key: string; version: string } | undefined;
  /** Output prefixes that hold only this run's objects, and single output keys. */
  readonly prefixes = new Set<string>();
  readonly keys = new Set<string>();
  readonly claims = new Set<string>();
  readonly deadLetters: ((m: JobMessage) => boolean)[] = [];
  /** The scenes whose tiles this run made: a dead letter of one of their jobs that no check planted is a fault. */
  readonly scenes = new Set<string>();

  constructor(runId: string) {
    this.prefixes.add(verifyKeys.run(runId));
  }

  addScene(m: SceneManifest, now: number): void {
    const scene = m.sceneKey;
    this.scenes.add(scene);
    for (const prefix of [outputKeys.tilePrefix(scene), outputKeys.scenePrefix(scene)]) this.prefixes.add(prefix);
    this.addMosaics(scene);
    this.keys.add(sceneLifecycleKeys.closedOut(scene));
    // The mosaic sweep's index entry lives under the UTC hour of the fan-out: this hour or the last.
    for (const ms of [now, now - 3_600_000]) this.keys.add(sceneLifecycleKeys.indexEntry(indexHourOf(ms), scene));
    // Every tile of every zoom (a pyramid's job keys bind their zoom).
    for (const tile of manifestTiles(m)) this.claims.add(tile.jobKey);
  }

  /**
   * Everything an assembly writes beside a scene: the VRT, the COG mosaic (`mosaic: cog`), the STAC Item, and for a
   * rendered scene its PMTiles archive, TileJSON and quicklook (docs/web-maps.md).
   */
  private addMosaics(scene: string): void {
    for (const key of [
      outputKeys.mosaic(scene),
      outputKeys.cogMosaic(scene),
      outputKeys.stacItem(scene),
      outputKeys.pmtiles(scene),
      outputKeys.tileJson(scene),
      outputKeys.quicklook(scene),
    ])
      this.keys.add(key);
  }

  /** A scene verify made itself (new-key): its tiles, its manifest (written by verify), any mosaic, its claim rows. */
  addDerivedScene(scene: string, tiles: readonly SceneTile[]): void {
    this.scenes.add(scene);
    for (const prefix of [outputKeys.tilePrefix(scene), outputKeys.scenePrefix(scene)]) this.prefixes.add(prefix);
    this.addMosaics(scene);
    for (const tile of tiles) this.claims.add(tile.jobKey);
  }
}

/** The scene key a dead letter's tile job names, if it is one. */
function sceneOfLetter(m: JobMessage): string | undefined {
  try {
    const body = JSON.parse(m.body) as { sceneKey?: unknown };
    return typeof body.sceneKey === 'string' ? body.sceneKey : undefined;
  } catch {
    return undefined;
  }
}

/** A dead tile job as a report names it: its output key (zoom, window) and job key. */
function describeLetter(m: JobMessage): string {
  try {
    const body = JSON.parse(m.body) as { outputKey?: unknown; jobKey?: unknown };
    return `${String(body.outputKey)} (job ${String(body.jobKey).slice(0, 16)}...)`;
  } catch {
    return m.jobKey;
  }
}

async function cleanUp(t: VerifyTarget, created: Created, io: VerifyIo): Promise<CleanupReport> {
  const { sources, outputs, claims } = t.backend;
  const left: string[] = [];
  let objects = 0;
  let claimRows = 0;
  const remove = async (store: typeof outputs, key: string, version: string) => {
    const r = await store.deleteIfVersion(key, version);
    switch (r.kind) {
      case 'deleted':
        objects++;
        break;
      case 'absent':
        break;
      case 'version-mismatch':
        left.push(`${key}: now at ${r.current}, not the ${version} verify read; left alone`);
        break;
      default:
        assertNever(r, 'delete result');
    }
  };
  try {
    if (created.source) await remove(sources, created.source.key, created.source.version);
    for (const prefix of created.prefixes) {
      const heads: ObjectHead[] = [];
      for await (const h of outputs.list(prefix)) heads.push(h);
      for (const h of heads) await remove(outputs, h.key, h.version);
    }
    for (const key of created.keys) {
      const h = await outputs.head(key);
      if (h !== undefined) await remove(outputs, key, h.version);
    }
    for (const jobId of created.claims) {
      const row = await claims.get(jobId);
      if (row === undefined) continue;
      const r = await claims.deleteIf({ jobId, state: row.state, owner: row.owner });
      switch (r.kind) {
        case 'deleted':
          claimRows++;
          break;
        case 'absent':
          break;
        case 'mismatch':
          left.push(`claim row ${jobId}: now ${r.current.state} by ${r.current.owner}; left alone`);
          break;
        default:
          assertNever(r, 'claim delete result');
      }
    }
    // A dead letter of a job of this run's scenes that no check sent there (e.g. a pyramid's parent that could not
    // read its scene's manifest, retried until its queue gave up) is a fault of the stack: named, and removed with
    // the planted ones.
    const planted = (m: JobMessage) => created.deadLetters.some((match) => match(m));
    const stray = (m: JobMessage) => !planted(m) && created.scenes.has(sceneOfLetter(m) ?? '');
    const faults = (await t.deadLetters()).filter(stray).map(describeLetter);
    const letters = await t.removeDeadLetters((m) => planted(m) || stray(m));
    if (letters.left !== undefined) left.push(letters.left);
    const detail =
      `deleted ${objects} objects, ${claimRows} claim rows, ${letters.removed} dead letters (each conditional on what verify read)` +
      (left.length > 0 ? `; left: ${left.join('; ')}` : '') +
      (faults.length > 0
        ? `; FAULT: ${faults.length} job(s) of this run's scenes were dead-lettered by the stack (${faults.slice(0, 5).join('; ')}): see the tile function's logs`
        : '');
    io.progress(`${t.stack}: cleanup: ${detail}`);
    // A dead letter a cloud cannot remove is reported, not failed: the stack is fine.
    const pass = faults.length === 0 && left.every((l) => l.startsWith('dead letters:'));
    return { pass, detail, objects, claimRows, deadLetters: letters.removed, left, faults };
  } catch (e) {
    const detail = `${(e as Error).name}: ${(e as Error).message}`;
    return { pass: false, detail, objects, claimRows, deadLetters: 0, left: [...left, detail], faults: [] };
  }
}

/** Scenarios of the parity table not run against a live stack, and why (printed under the matrix). */
export const NOT_RUN_LIVE: readonly string[] = [
  'crash / stall mid-job, stolen leases: need to kill or pause a cloud function mid-invocation',
  'source overwritten mid-scene: would overwrite a scene in the stack while its tiles run; not yet run live',
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
    { name: 'cleanup (conditional deletes)', cells: reports.map((r) => mark(r.cleanup.pass)) },
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
    ...(r.cleanup.pass ? [] : [`${r.stack}: cleanup: ${r.cleanup.detail}`]),
  ]);
  const cleanups = reports.map((r) => `  ${r.stack}: ${r.cleanup.detail}`);
  return [
    line('scenario', heads),
    ...rows.map((r) => line(r.name, r.cells)),
    '',
    ...(failures.length > 0 ? ['failures:', ...failures.map((f) => `  ${f}`), ''] : []),
    'cleanup:',
    ...cleanups,
    '',
    'not run live:',
    ...NOT_RUN_LIVE.map((n) => `  ${n}`),
  ].join('\n');
}

const mark = (pass: boolean): string => (pass ? 'ok' : 'FAIL');

export function verifyPassed(report: VerifyReport): boolean {
  return report.smoke.pass && report.replay.pass && report.parity.every((p) => p.pass) && report.cleanup.pass;
}

/**
 * Remove what `match` picks from a dead-letter queue the process can pull
 * (an SQS DLQ, a Storage Queue's `<queue>-poison`): each message is received
 * and deleted under the receipt of that receive, the only precondition a
 * queue has; every other message is made visible again at once.
 */
export async function removeDeadLettersFrom(queue: PullQueue, match: (m: JobMessage) => boolean): Promise<number> {
  let removed = 0;
  const seen = new Set<string>();
  const others: Delivery[] = [];
  try {
    for (let round = 0; round < 100; round++) {
      const got = (await queue.receive(10, 30_000)).filter((d) => !seen.has(d.deliveryId));
      if (got.length === 0) break;
      for (const d of got) {
        seen.add(d.deliveryId);
        if (match(d)) {
          await queue.ack(d);
          removed++;
        } else others.push(d);
      }
    }
  } finally {
    await Promise.all(others.map((d) => queue.release(d, 0).catch(() => undefined)));
  }
  return removed;
}
