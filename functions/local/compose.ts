import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Backend } from '../../shared/app/backend.js';
import { JsonTelemetry, systemClock } from '../../shared/app/telemetry.js';
import type { Clock } from '../../shared/ports/clock.port.js';
import type { Telemetry } from '../../shared/ports/telemetry.port.js';
import { FsObjectStore } from './adapters/fs-object-store.js';
import { SqliteClaimStore } from './adapters/sqlite-claim-store.js';
import { SqliteJobQueue } from './adapters/sqlite-job-queue.js';

/** The bucket name local sources are addressed by in job keys. */
export const LOCAL_SOURCE_BUCKET = 'local-sources';

export interface LocalBackend extends Backend {
  readonly claims: SqliteClaimStore;
  readonly sources: FsObjectStore;
  readonly outputs: FsObjectStore;
  readonly queue: SqliteJobQueue;
  readonly dir: string;
  close(): void;
}

export interface LocalBackendOptions {
  readonly clock?: Clock;
  readonly telemetry?: Telemetry;
  readonly maxReceiveCount?: number;
}

/**
 * The local backend's one wiring point: filesystem objects and SQLite claims
 * and queue under one directory (default `.tessera/`).
 *
 * Layout: `<dir>/sources/objects/...`, `<dir>/outputs/objects/{tiles,scenes,mosaics}/...`,
 * `<dir>/claims.db`, `<dir>/queue.db`.
 */
export function createLocalBackend(dir: string, options: LocalBackendOptions = {}): LocalBackend {
  const root = resolve(dir);
  mkdirSync(root, { recursive: true });
  const clock = options.clock ?? systemClock;
  const claims = new SqliteClaimStore(join(root, 'claims.db'));
  const queue = new SqliteJobQueue(join(root, 'queue.db'), { clock, maxReceiveCount: options.maxReceiveCount ?? 3 });
  return {
    dir: root,
    claims,
    sources: new FsObjectStore(join(root, 'sources')),
    outputs: new FsObjectStore(join(root, 'outputs')),
    queue,
    clock,
    telemetry: options.telemetry ?? new JsonTelemetry(),
    close() {
      claims.close();
      queue.close();
    },
  };
}
