import type { ClaimStore } from '../ports/claim-store.port.js';
import type { Clock } from '../ports/clock.port.js';
import type { FeatureSink } from '../ports/feature-sink.port.js';
import type { JobQueue } from '../ports/job-queue.port.js';
import type { ObjectStore } from '../ports/object-store.port.js';
import type { Telemetry } from '../ports/telemetry.port.js';
import type { TileJob } from './tile-job.js';

/** Everything a use case needs, wired by one compose file per cloud. */
export interface Backend {
  readonly claims: ClaimStore;
  /** Where source scenes are read from (range reads only). */
  readonly sources: ObjectStore;
  /** Where tiles, scene manifests and mosaics are written (create-only). */
  readonly outputs: ObjectStore;
  readonly queue: JobQueue;
  readonly clock: Clock;
  readonly telemetry: Telemetry;
  /** Optional feature rows per tile (`--sink postgis://...`): inserted after the tile write, before the commit. */
  readonly sink?: FeatureSink | undefined;
}

/**
 * Test seams for crash injection (chaos and parity tests): a hook that throws
 * simulates the process dying at that point; one that waits simulates a stall.
 */
export interface WorkerHooks {
  afterClaim?(job: TileJob): Promise<void>;
  afterWrite?(job: TileJob): Promise<void>;
  /** After the feature sink's insert, before the commit (only with a sink). */
  afterFeature?(job: TileJob): Promise<void>;
  /** A zoom pyramid's tile: after its parent step (enqueued or waiting), before the commit. */
  afterParentEnqueue?(job: TileJob): Promise<void>;
}

export interface WorkerSettings {
  /** This worker instance (function instance, process). Claim owners are `${deliveryId}@${owner}`. */
  readonly owner: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly hooks?: WorkerHooks | undefined;
}
