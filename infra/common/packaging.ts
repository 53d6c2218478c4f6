import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Cloud, FunctionRole } from './config.js';

/**
 * The contract between `npm run build:functions` (scripts/build-functions.ts),
 * which bundles the handlers into archives, and the infra program, which
 * deploys those archives. infra/ never imports functions/ code: it only knows
 * these paths. Both sides import them from here so they cannot drift.
 */

/** The repository root (this file is infra/common/packaging.ts). */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Where build:functions writes, unless `tessera:archiveDir` points elsewhere. */
export const DEFAULT_ARCHIVE_DIR = join(REPO_ROOT, 'dist');

/** Handler entry points the build bundles, relative to the repository root. */
export const HANDLER_ENTRIES = {
  /** One Lambda per role, each module exporting `handler`. */
  aws: {
    scene: 'functions/aws/handlers/scene.handler.ts',
    tile: 'functions/aws/handlers/tile.handler.ts',
    mosaic: 'functions/aws/handlers/mosaic.handler.ts',
    ingest: 'functions/aws/handlers/ingest.handler.ts',
    reconcile: 'functions/aws/handlers/reconcile.handler.ts',
    stream: 'functions/aws/handlers/stream.handler.ts',
  },
  /** One module registering every function with the functions-framework, under {@link GCP_ENTRY_POINTS}. */
  gcp: 'functions/gcp/handlers/index.ts',
  /** One module registering every v4 app function, under {@link AZURE_FUNCTION_NAMES}. */
  azure: 'functions/azure/handlers/index.ts',
  /** The Functions host configuration shipped in the Azure package. */
  azureHostJson: 'functions/azure/host.json',
} as const satisfies { aws: Record<FunctionRole, string>; gcp: string; azure: string; azureHostJson: string };

/** Archive paths, relative to the archive directory. */
export const ARCHIVES = {
  aws: {
    scene: 'aws/scene.zip',
    tile: 'aws/tile.zip',
    mosaic: 'aws/mosaic.zip',
    ingest: 'aws/ingest.zip',
    reconcile: 'aws/reconcile.zip',
    stream: 'aws/stream.zip',
  },
  gcp: 'gcp/source.zip',
  azure: 'azure/app.zip',
} as const satisfies { aws: Record<FunctionRole, string>; gcp: string; azure: string };

/**
 * The instruction set every Lambda function runs on (Graviton: cheaper per GB-second). The build ships native
 * binaries (sharp's libvips, for rendered tiles) for this architecture in the AWS archives, so the two must agree:
 * both read it from here.
 */
export const LAMBDA_ARCHITECTURE = 'arm64' as const;

/** Lambda handler string: the bundle is `index.mjs` exporting `handler`. */
export const LAMBDA_HANDLER = 'index.handler';

/**
 * functions-framework names the GCP bundle registers: `cloudEvent` for the
 * scene (Eventarc), tile and ingest (Pub/Sub push) functions, `http` for the
 * mosaic sweep and the manifest reconcile (Cloud Scheduler). build:functions
 * checks the bundle against these.
 */
export const GCP_ENTRY_POINTS: Readonly<Record<FunctionRole, string>> = {
  scene: 'tesseraScene',
  tile: 'tesseraTile',
  mosaic: 'tesseraMosaic',
  ingest: 'tesseraIngest',
  reconcile: 'tesseraReconcile',
  stream: 'tesseraStream',
};

/** Function names the Azure bundle registers (`app.storageQueue('scene', ...)` and so on). */
export const AZURE_FUNCTION_NAMES: Readonly<Record<FunctionRole, string>> = {
  scene: 'scene',
  tile: 'tile',
  mosaic: 'mosaic',
  ingest: 'ingest',
  reconcile: 'reconcile',
  stream: 'stream',
};

/** The Azure functions a Storage Queue triggers; the mosaic and the reconcile are timer-triggered, as on AWS and GCP. */
export const AZURE_QUEUE_TRIGGERED = ['scene', 'tile', 'ingest', 'stream'] as const;
export type AzureQueueTriggered = (typeof AZURE_QUEUE_TRIGGERED)[number];

/**
 * The Storage Queue each queue-triggered Azure function listens on. Event Grid
 * delivers BlobCreated events (base64-encoded Event Grid schema JSON, as the
 * Functions queue trigger expects) to the scene queue; the scene function
 * enqueues tile jobs (and the tile function fan-out chunks) on the tile queue.
 * Each queue has a `<name>-poison` twin where poison is settled: at once by
 * the handler, or by the host after maxDequeueCount failed deliveries.
 * The tile queue's name is also in TESSERA_TILE_QUEUE.
 */
export const AZURE_QUEUES: Readonly<Record<AzureQueueTriggered, string>> = {
  scene: 'tessera-scenes',
  tile: 'tessera-tiles',
  /** Ingest requests (`tessera ingest --cloud azure` puts them here; also in TESSERA_INGEST_QUEUE). */
  ingest: 'tessera-ingest',
  /** BlobCreated events of batch objects under streams/ (docs/feature-batches.md), one per batch. */
  stream: 'tessera-streams',
};

/**
 * The app-setting prefix the Azure queue triggers connect with
 * (`connection: 'TESSERA_STORAGE'`). The stack sets identity-based settings
 * under it (`TESSERA_STORAGE__queueServiceUri`, ...): the managed identity,
 * no connection string.
 */
export const AZURE_TRIGGER_CONNECTION = 'TESSERA_STORAGE';

/** The queue the Functions host moves a message to after maxDequeueCount deliveries. */
export function azurePoisonQueue(queue: string): string {
  return `${queue}-poison`;
}

/** A built archive, with the digest that names its uploaded copy (so a code change redeploys). */
export interface Archive {
  readonly path: string;
  readonly sha256: string;
  readonly bytes: number;
}

export interface CloudArchives {
  readonly aws: Readonly<Record<FunctionRole, Archive>>;
  readonly gcp: Archive;
  readonly azure: Archive;
}

/** One or more archives are missing: the message lists them and says to build them. */
export class MissingArchiveError extends Error {
  readonly code = 'MISSING_ARCHIVE';
  constructor(readonly missing: readonly string[]) {
    super(
      `function archive${missing.length > 1 ? 's' : ''} not found: ${missing.join(', ')}; run npm run build:functions first ` +
        '(or point tessera:archiveDir at the folder that holds them)',
    );
    this.name = 'MissingArchiveError';
  }
}

function load(path: string, missing: string[]): Archive {
  if (!existsSync(path) || !statSync(path).isFile()) {
    missing.push(path);
    return { path, sha256: '', bytes: 0 };
  }
  const bytes = readFileSync(path);
  return { path, sha256: createHash('sha256').update(bytes).digest('hex'), bytes: bytes.length };
}

/**
 * Locate and fingerprint a cloud's archives. Throws {@link MissingArchiveError}
 * naming every missing file, so `pulumi preview` stops before declaring anything.
 *
 * @example
 * archivesFor('aws', DEFAULT_ARCHIVE_DIR).tile.path // <repo>/dist/aws/tile.zip
 */
export function archivesFor<C extends Cloud>(cloud: C, archiveDir: string): CloudArchives[C] {
  const dir = isAbsolute(archiveDir) ? archiveDir : resolve(REPO_ROOT, archiveDir);
  const missing: string[] = [];
  let result: CloudArchives[Cloud];
  switch (cloud) {
    case 'aws':
      result = {
        scene: load(join(dir, ARCHIVES.aws.scene), missing),
        tile: load(join(dir, ARCHIVES.aws.tile), missing),
        mosaic: load(join(dir, ARCHIVES.aws.mosaic), missing),
        ingest: load(join(dir, ARCHIVES.aws.ingest), missing),
        reconcile: load(join(dir, ARCHIVES.aws.reconcile), missing),
        stream: load(join(dir, ARCHIVES.aws.stream), missing),
      };
      break;
    case 'gcp':
      result = load(join(dir, ARCHIVES.gcp), missing);
      break;
    case 'azure':
      result = load(join(dir, ARCHIVES.azure), missing);
      break;
    default:
      throw new Error(`unknown cloud ${JSON.stringify(cloud)}`);
  }
  if (missing.length > 0) throw new MissingArchiveError(missing);
  return result as CloudArchives[C];
}
