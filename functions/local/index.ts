/**
 * `import ... from 'tessera'`: the package's core entry (docs/packages.md).
 *
 * The provider-neutral core (shared/: the use cases, the port interfaces an
 * adapter implements, the domain's keys, parameters and typed errors, raster
 * I/O) and the local runtime's entry points (a backend on one directory, the
 * main job, worker processes). No cloud SDK and no Pulumi: the components
 * are `tessera/pulumi`, the command line is the `tessera` bin.
 *
 * @example
 * import { defaultWorkers, runMainJob, silentProgress } from 'tessera';
 * const summary = await runMainJob({
 *   dir: '.tessera', width: 512, height: 512, tilePx: 256, seed: 42, fresh: true,
 *   workers: defaultWorkers(), duplicateRate: 0, injectSteal: false, progress: silentProgress, log: () => {},
 * });
 * console.log(summary.tilesWritten, summary.mosaicPath); // 4, .../mosaics/<scene>.vrt
 */

export * from '../../shared/app/index.js';
export { BACKFILL_POLICIES, type BackfillPolicy, isBackfillPolicy } from '../../shared/domain/backfill-policy.js';
export { type LeaseConfig, type LeaseConfigInput, PLATFORMS, type Platform, resolveLease } from '../../shared/domain/ceilings.js';
export {
  assertNever,
  type ClaimResult,
  type ClaimRow,
  type ClaimState,
  type CommitResult,
  type HeartbeatResult,
} from '../../shared/domain/claim.js';
export { codeVersion } from '../../shared/domain/code-version.js';
export * from '../../shared/domain/errors.js';
export { type AssetRef, type ProcessingParams, type SourceRef, sceneKey, tileJobKey } from '../../shared/domain/job-key.js';
export { DEFAULT_PARAMS } from '../../shared/domain/runtime-config.js';
export { parseStacItem, type StacItemInput, type StacItemMetadata } from '../../shared/domain/stac-item.js';
export { type TileGrid, tileGrid, type Window, windowAt } from '../../shared/domain/tile-grid.js';
export {
  MOSAIC_KINDS,
  OUTPUT_COMPRESSIONS,
  RESAMPLINGS,
  type Resampling,
  type TilingParams,
  tilingParams,
} from '../../shared/domain/tiling-params.js';
export type * from '../../shared/ports/index.js';
export * from '../../shared/raster/index.js';
export { createLocalBackend, LOCAL_SOURCE_BUCKET, type LocalBackend, type LocalBackendOptions } from './compose.js';
export { type MainJobOptions, type MainJobSummary, runMainJob, type TileProfile } from './main-job.js';
export { type Progress, silentProgress } from './progress.js';
export {
  defaultWorkers,
  runWorkerProcesses,
  startWorkerPool,
  type WorkerPoolResult,
  type WorkerProcessPool,
  type WorkerProcessPoolOptions,
} from './worker-process.js';
