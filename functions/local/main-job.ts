import { createHash } from 'node:crypto';
import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { assembleMosaic, type MosaicResult, sceneGeoref } from '../../shared/app/assemble-mosaic.js';
import { deliveryOwner } from '../../shared/app/deliveries.js';
import { fanOutScene } from '../../shared/app/fan-out.js';
import { processTile } from '../../shared/app/process-tile.js';
import { pyramidOf, tilesPerZoom } from '../../shared/app/pyramid-grid.js';
import { checkStacCrs } from '../../shared/app/scene-grid.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { makeTileJob, parseTileJob, type TileJob, toJobMessage } from '../../shared/app/tile-job.js';
import { resolveLease } from '../../shared/domain/ceilings.js';
import { InvalidParamsError, MissingTilesError } from '../../shared/domain/errors.js';
import type { ProcessingParams, SourceRef } from '../../shared/domain/job-key.js';
import { DEFAULT_SOURCE_PREFIX } from '../../shared/domain/key-layout.js';
import { DEFAULT_PARAMS } from '../../shared/domain/runtime-config.js';
import { type ResolvedStacAsset, withStacScaleOffsets } from '../../shared/domain/stac-item.js';
import { windows } from '../../shared/domain/tile-grid.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import type { JobMessage } from '../../shared/ports/job-queue.port.js';
import { crsOfRaster } from '../../shared/raster/crs.js';
import { epsgFromWkt, SENTINEL_LIKE_SCENE, writeSyntheticScene } from '../../shared/raster/index.js';
import { createLocalBackend, LOCAL_SOURCE_BUCKET, type LocalBackend } from './compose.js';
import type { Progress } from './progress.js';
import { type BandSpec, stageBandFiles, stageStacItem } from './scene-input.js';
import { runWorkerProcesses } from './worker-process.js';

export interface MainJobOptions {
  readonly dir: string;
  /** Use this GeoTIFF instead of generating a synthetic scene. */
  readonly scene?: string | undefined;
  /** Tile an object already in the source store (e.g. a key `tessera ingest` published) instead. */
  readonly sourceKey?: string | undefined;
  readonly width: number;
  readonly height: number;
  readonly tilePx: number;
  readonly workers: number;
  /** Fraction of tile jobs delivered twice (at least this many). */
  readonly duplicateRate: number;
  /** Inject one worker that stalls past its lease and gets its job stolen. */
  readonly injectSteal: boolean;
  readonly seed: number;
  readonly fresh: boolean;
  readonly params?: ProcessingParams | undefined;
  /** `--band` specs: name the scene file's bands, or give each band its own file (a multi-file scene). */
  readonly bandSpecs?: readonly BandSpec[] | undefined;
  /** `--stac ITEM --asset NAME=ASSET`: the scene is the STAC Item's assets (a local file or a source-store key). */
  readonly stac?: { readonly item: string; readonly assets: Readonly<Record<string, string>> } | undefined;
  /** Measure the tile phase for `tessera choose` (seconds and peak memory per tile). */
  readonly profile?: boolean | undefined;
  readonly progress: Progress;
  readonly log: (line: string) => void;
}

export interface MainJobSummary {
  readonly sceneKey: string;
  readonly source: string;
  /** A multi-file scene: each band's object (`bucket/key`), by band name. */
  readonly bands?: Readonly<Record<string, string>> | undefined;
  readonly windows: number;
  readonly tilesWritten: number;
  readonly duplicatesDelivered: number;
  readonly duplicatesStoppedAtClaim: number;
  readonly duplicatesStoppedAtWrite: number;
  readonly leasesStolen: number;
  readonly leasesTakenOver: number;
  readonly poison: number;
  readonly failed: number;
  readonly manifestCount: number;
  readonly gridCount: number;
  readonly mosaicPath: string;
  /** The COG mosaic (`--mosaic cog`), when built. */
  readonly cogMosaicPath?: string | undefined;
  /** The PMTiles archive (`--mosaic pmtiles`), the TileJSON and the quicklook of a rendered scene (docs/web-maps.md). */
  readonly pmtilesPath?: string | undefined;
  readonly tileJsonPath?: string | undefined;
  readonly quicklookPath?: string | undefined;
  /** The STAC Item of the output, beside the mosaic. */
  readonly stacItemPath: string;
  /** The tiles' CRS (`EPSG:n`): the target's, or the source's own. */
  readonly crs: string;
  /** The tile matrix set and zoom, when the tiles are a set's. */
  readonly tms?: string | undefined;
  readonly zoom?: number | undefined;
  /** A pyramid's lowest zoom (`--zoom MIN-MAX`), and how many tiles its zooms have together. */
  readonly minZoom?: number | undefined;
  readonly pyramidTiles?: number | undefined;
  readonly outputDir: string;
  readonly elapsedMs: number;
  readonly ok: boolean;
  /** With `profile`: what one tile job took on this machine. */
  readonly profile?: TileProfile;
}

/**
 * One tile job's cost in time and memory, from a local run: the tile phase's
 * wall time shared over the tiles each worker rendered, and the worker processes'
 * highest peak resident memory (as Lambda's "Max Memory Used" counts the runtime too).
 * A mean over the run, on this machine's CPU: the clouds' vCPUs differ.
 */
export interface TileProfile {
  readonly workers: number;
  readonly tiles: number;
  readonly tilePhaseMs: number;
  readonly secondsPerTile: number;
  readonly peakMemoryMb: number;
  /** Bytes the worker processes read to hash the source for their pinned reads: 0 when the fan-out's settled hash was handed to them. */
  readonly workerSourceBytesHashed: number;
}

/** Where the last run's scene is remembered, so replay, backfill and reconcile need no arguments. */
export const LAST_RUN_FILE = 'last-run.json';

export interface LastRun {
  readonly sceneKey: string;
  readonly source: { bucket: string; key: string; versionToken: string };
  readonly params: ProcessingParams;
}

/**
 * The main job on the local backend: a scene in, a mosaic of NDVI COG tiles
 * out. On request (`tessera run --demo`: `duplicateRate`, `injectSteal`) the
 * at-least-once hazards of the cloud are injected on purpose: duplicate
 * deliveries and a worker that stalls past its lease.
 */
export async function runMainJob(options: MainJobOptions): Promise<MainJobSummary> {
  const started = performance.now();
  if (options.fresh) clearRun(options.dir);
  const telemetry = new JsonTelemetry(options.log);
  const backend = createLocalBackend(options.dir, { telemetry, maxReceiveCount: 5 });
  try {
    const base: ProcessingParams = options.params ?? { ...DEFAULT_PARAMS, tile_px: options.tilePx };
    const staged = await stageSource(backend, options);
    const withBands: ProcessingParams = staged.bands === undefined ? base : { ...base, bands: staged.bands };
    // --stac --unscale: the Item's raster:bands scale and offset, as the cloud's scene trigger takes them.
    const params = staged.stacBands === undefined ? withBands : withStacScaleOffsets(withBands, staged.stacBands, staged.source.key);
    const source = staged.source;
    // --stac: the Item's proj: CRS against each band file's own, as the cloud's scene trigger checks it.
    if (staged.stacBands !== undefined) {
      const versions = new Map(Object.values(source.assets ?? {}).map((a) => [a.key, a.versionToken]));
      const unchecked = await checkStacCrs(backend.sources, source.key, staged.stacBands, (key) => versions.get(key) as string);
      if (unchecked.length > 0) telemetry.log('WARN', 'stac-crs-unchecked', { item: source.key, bands: unchecked });
    }
    const lease = resolveLease({ platform: 'local', functionTimeoutSec: 600 });

    options.progress.phase('fan-out');
    const fan = await fanOutScene(backend, { source, params, onProgress: (n, total) => options.progress.update(n, total, 'enqueued') });
    writeFileSync(join(backend.dir, LAST_RUN_FILE), JSON.stringify({ sceneKey: fan.sceneKey, source, params } satisfies LastRun, null, 2));
    // The files the tiles pin, their hashes settled here: handed to every worker process (settledHashes below), so
    // none reads the scene again to hash it (a staged scene's own tick may need waiting out: a few ms at most).
    for (const f of [source, ...Object.values(source.assets ?? {})]) await backend.sources.settle(f.key, f.versionToken);

    // Duplicate deliveries: re-send a seeded random sample of the tile jobs.
    const duplicates = await injectDuplicates(backend, fan.sceneKey, fan.grid.count, options);

    // A zombie: takes the first job's delivery with a 1.5 s lease and a 1 s
    // visibility, stalls until another worker has taken the lapsed lease over
    // and committed, then finishes its write (refused) and commit (lease stolen).
    let zombie: Promise<void> | undefined;
    let zombieDone = !options.injectSteal;
    if (options.injectSteal) {
      const [delivery] = await backend.queue.receive(1, 1_000);
      if (delivery) {
        const job = parseTileJob(delivery.body);
        // A zombie's process is stalled, not just its job: its lease keeper's timer does not run
        // either, so its lease lapses as a stalled instance's does (a live one would renew it).
        const stalled = { ...backend, clock: { now: () => backend.clock.now(), every: () => () => {} } };
        zombie = processTile(
          stalled,
          {
            owner: 'zombie',
            leaseMs: 1_500,
            retentionMs: lease.leaseSec * 1000 * 10,
            hooks: { afterClaim: () => waitForCommit(backend, job) },
          },
          job,
          deliveryOwner(delivery.deliveryId, 'zombie'),
        )
          .then(() => undefined)
          .finally(() => {
            zombieDone = true;
          });
      } else zombieDone = true;
    }

    options.progress.phase('tiles');
    const tilesStarted = performance.now();
    const total = fan.grid.count + duplicates;
    let settled = 0;
    // The workers are OS processes on this directory (worker-process.ts): their counters and log lines
    // come back into this telemetry, so the summary counts their gates and the zombie's alike.
    const pool = await runWorkerProcesses({
      dir: backend.dir,
      workers: options.workers,
      maxReceiveCount: backend.queue.maxReceiveCount,
      settings: (i) => ({ owner: `worker-${i}`, leaseMs: lease.leaseSec * 1000, retentionMs: 7 * 24 * 3_600_000 }),
      telemetry,
      log: options.log,
      onSettled: () => options.progress.update(++settled, total, 'deliveries'),
      moreExpected: () => !zombieDone,
      // The scene's hash as the fan-out's pin settled it: each worker's first pinned read needs no SHA-256 of its own.
      settledHashes: backend.sources.settledHashes(),
    });
    await zombie;
    const tilePhaseMs = performance.now() - tilesStarted;

    options.progress.phase('mosaic');
    const counters = telemetry.counters();
    let manifestCount = 0;
    let mosaicKey = '';
    let cogMosaicKey: string | undefined;
    let web: Pick<MosaicResult, 'pmtilesKey' | 'tileJsonKey' | 'quicklookKey'> = {};
    let stacItemKey = '';
    try {
      const mosaic = await assembleMosaic(backend, fan.sceneKey);
      manifestCount = mosaic.manifestCount;
      mosaicKey = mosaic.mosaicKey;
      cogMosaicKey = mosaic.cogMosaicKey;
      web = mosaic;
      stacItemKey = mosaic.stacItemKey ?? '';
    } catch (error) {
      if (!(error instanceof MissingTilesError)) throw error;
      options.log(JSON.stringify({ level: 'ERROR', event: 'mosaic-failed', message: error.message }));
    }
    options.progress.done();
    const dead = await backend.queue.deadLetters();
    return {
      sceneKey: fan.sceneKey,
      source: `${source.bucket}/${source.key}`,
      ...(source.assets === undefined
        ? {}
        : { bands: Object.fromEntries(Object.entries(source.assets).map(([band, a]) => [band, `${source.bucket}/${a.key}`])) }),
      windows: fan.grid.count,
      tilesWritten: counters.written,
      duplicatesDelivered: duplicates + (options.injectSteal ? 1 : 0),
      duplicatesStoppedAtClaim: counters['claim-rejected'],
      duplicatesStoppedAtWrite: counters['write-already-present'],
      leasesStolen: counters['lease-stolen'],
      leasesTakenOver: counters['lease-taken-over'],
      poison: dead.length,
      failed: counters.failed,
      manifestCount,
      gridCount: fan.grid.count,
      mosaicPath: mosaicKey ? backend.outputs.pathOf(mosaicKey) : '',
      ...(cogMosaicKey === undefined ? {} : { cogMosaicPath: backend.outputs.pathOf(cogMosaicKey) }),
      ...(web.pmtilesKey === undefined ? {} : { pmtilesPath: backend.outputs.pathOf(web.pmtilesKey) }),
      ...(web.tileJsonKey === undefined ? {} : { tileJsonPath: backend.outputs.pathOf(web.tileJsonKey) }),
      ...(web.quicklookKey === undefined ? {} : { quicklookPath: backend.outputs.pathOf(web.quicklookKey) }),
      stacItemPath: stacItemKey ? backend.outputs.pathOf(stacItemKey) : '',
      ...(await gridSummary(backend, fan.sceneKey)),
      outputDir: join(backend.outputs.root, 'objects'),
      elapsedMs: Math.round(performance.now() - started),
      ok: manifestCount === fan.grid.count,
      ...(options.profile
        ? { profile: tileProfile(tilePhaseMs, options.workers, counters.written, pool.maxRssKb, pool.sourceBytesHashed) }
        : {}),
    };
  } finally {
    backend.close();
  }
}

function tileProfile(tilePhaseMs: number, workers: number, tiles: number, workerMaxRssKb: number, hashed: number): TileProfile {
  return {
    workers,
    tiles,
    tilePhaseMs: Math.round(tilePhaseMs),
    // Each worker renders tiles one after another: its share of the phase over its share of the tiles.
    secondsPerTile: tiles > 0 ? (tilePhaseMs / 1000) * (workers / tiles) : 0,
    // maxRSS is in KiB; the tiles ran in the worker processes, so theirs is the peak a function must hold.
    peakMemoryMb: Math.ceil(workerMaxRssKb / 1024),
    workerSourceBytesHashed: hashed,
  };
}

/**
 * Forget a previous run: claims, queue, outputs. Sources stay (a synthetic
 * scene is named by its size and seed, so it is the same input next time).
 */
function clearRun(dir: string): void {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    // The ingest manifest describes sources (which stay), so it stays with them.
    if (name !== 'sources' && !name.startsWith('manifest.db')) rmSync(join(dir, name), { recursive: true, force: true });
  }
}

/** The tiles' CRS, and their tile matrix set and zoom when they are a set's, from the scene manifest. */
async function gridSummary(
  backend: LocalBackend,
  scene: string,
): Promise<{ crs: string; tms?: string; zoom?: number; minZoom?: number; pyramidTiles?: number }> {
  const manifest = await readSceneManifest(backend.outputs, scene);
  const { crs } = sceneGeoref(manifest);
  const epsg = crs.epsg ?? (crs.wkt === undefined ? undefined : epsgFromWkt(crs.wkt));
  const tms = manifest.grid.target?.tms;
  const pyramid = pyramidOf(tilingParams(manifest.params));
  return {
    // A CRS without an EPSG code is named by its canonical PROJ string, the form its job key holds.
    crs: epsg !== undefined ? `EPSG:${epsg}` : crs.wkt === undefined ? 'none' : crsOfRaster(crs, 'the scene grid').id,
    ...(tms === undefined ? {} : { tms: tms.id, zoom: tms.zoom }),
    ...(pyramid === undefined
      ? {}
      : {
          minZoom: pyramid.minZoom,
          pyramidTiles: tilesPerZoom(manifest.grid, manifest.grid.tilePx, pyramid.minZoom).reduce((n, l) => n + l.tiles, 0),
        }),
  };
}

/** The scene's source, and `params.bands` when `--band` or `--stac` named them. */
async function stageSource(
  backend: LocalBackend,
  options: MainJobOptions,
): Promise<{ source: SourceRef; bands?: Record<string, number>; stacBands?: Record<string, ResolvedStacAsset> }> {
  if (options.stac !== undefined) {
    if (options.bandSpecs?.length || options.scene || options.sourceKey)
      throw new InvalidParamsError('--stac names the whole scene: leave out --band, --scene and --source-key');
    return stageStacItem(backend, options.stac.item, options.stac.assets, options.progress);
  }
  const specs = options.bandSpecs ?? [];
  if (specs.length === 0) return { source: await stageScene(backend, options) };
  const fromScene = options.scene !== undefined || options.sourceKey !== undefined ? () => stageScene(backend, options) : undefined;
  options.progress.phase('import');
  const staged = await stageBandFiles(backend, specs, fromScene);
  return { source: staged.source, bands: { ...staged.bands } };
}

async function stageScene(backend: LocalBackend, options: MainJobOptions) {
  let key: string;
  if (options.sourceKey) {
    key = options.sourceKey;
    if (!(await backend.sources.head(key)))
      throw new InvalidParamsError(
        `--source-key ${JSON.stringify(key)}: no such object in the source store (${backend.sources.root}); \`tessera ingest\` prints the published key`,
      );
  } else if (options.scene) {
    key = `${DEFAULT_SOURCE_PREFIX}${options.scene.split(/[\\/]/).pop() ?? 'scene.tif'}`;
    options.progress.phase('import');
    await backend.sources.importFile(key, options.scene);
  } else {
    key = `${DEFAULT_SOURCE_PREFIX}synthetic-${options.width}x${options.height}-seed${options.seed}.tif`;
    if (!(await backend.sources.head(key))) {
      options.progress.phase('synthetic scene');
      const tmp = join(backend.dir, `synthetic-${process.pid}.tif`);
      await writeSyntheticScene(tmp, {
        width: options.width,
        height: options.height,
        ...SENTINEL_LIKE_SCENE,
        seed: options.seed,
      });
      await backend.sources.importFile(key, tmp);
      rmSync(tmp, { force: true });
    }
  }
  const head = await backend.sources.head(key);
  if (!head) throw new Error(`staging ${key} failed`);
  return { bucket: LOCAL_SOURCE_BUCKET, key, versionToken: head.version };
}

async function injectDuplicates(backend: LocalBackend, sceneKey: string, count: number, options: MainJobOptions): Promise<number> {
  const want = Math.ceil(count * options.duplicateRate);
  if (want === 0) return 0;
  // Seeded choice of windows: the same seed duplicates the same jobs.
  const ranked = Array.from({ length: count }, (_, i) => i).sort((a, b) => rank(options.seed, a) - rank(options.seed, b));
  const chosen = new Set(ranked.slice(0, want));
  const messages = await loadJobsFor(backend, sceneKey, chosen);
  await backend.queue.sendBatch(messages);
  return messages.length;
}

function rank(seed: number, i: number): number {
  return createHash('sha256').update(`${seed}:${i}`).digest().readUInt32BE(0);
}

/** Rebuild the chosen windows' job messages from the scene manifest (deterministic: same bytes as the originals). */
async function loadJobsFor(backend: LocalBackend, sceneKey: string, chosen: ReadonlySet<number>): Promise<JobMessage[]> {
  const manifest = await readSceneManifest(backend.outputs, sceneKey);
  const out: JobMessage[] = [];
  let i = 0;
  // A pyramid's jobs name their zoom: the duplicates are the highest zoom's, as fan-out's jobs are.
  const zoom = pyramidOf(tilingParams(manifest.params))?.maxZoom;
  for (const w of windows(manifest.grid)) {
    if (chosen.has(i++))
      out.push(
        toJobMessage(makeTileJob(sceneKey, manifest.source, manifest.params, manifest.grid, w, undefined, undefined, undefined, zoom)),
      );
  }
  return out;
}

async function waitForCommit(backend: LocalBackend, job: TileJob): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const row = await backend.claims.get(job.jobKey);
    if (row?.state === 'COMMITTED') return;
    if (Date.now() > deadline) throw new Error('zombie waited 120 s and nobody took its job over');
    await new Promise((r) => setTimeout(r, 100));
  }
}
