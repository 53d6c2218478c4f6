import { odata, type TableClient, type TableEntityResult } from '@azure/data-tables';
import {
  type ClaimResult,
  type ClaimRow,
  type ClaimState,
  type CommitResult,
  type HeartbeatResult,
  isOwnLease,
} from '../../../shared/domain/claim.js';
import { AdapterError } from '../../../shared/domain/errors.js';
import type {
  ClaimRequest,
  ClaimStore,
  CommitRequest,
  DeleteClaimRequest,
  DeleteClaimResult,
  HeartbeatRequest,
} from '../../../shared/ports/claim-store.port.js';
import { isFailure, storageFailure } from './rest-error.js';

/** Hex characters of the job key that form the PartitionKey: 2 gives 256 partitions (docs/azure.md). */
export const PARTITION_PREFIX_LENGTH = 2;

/**
 * How often one call re-reads after losing a compare-and-set before giving up.
 * Each lost race means another writer made progress, so a handful is plenty;
 * the bound only stops a pathological livelock from spinning forever.
 */
const MAX_ROUNDS = 8;

const JOB_KEY = /^[0-9a-f]{64}$/;

/** The entity as stored. Times the port compares are Int64 epoch ms; `expires_at` is a DateTime for filters and tools. */
interface ClaimEntity {
  partitionKey: string;
  rowKey: string;
  state: ClaimState;
  owner: string;
  lease_until: bigint;
  expires_at: Date;
  output_uri?: string;
  finished_at?: bigint;
}

type Read = { readonly row: ClaimRow; readonly etag: string };

/** What {@link AzureTableClaimStore.deleteExpired} did. */
export interface CleanupReport {
  /** Rows past `expires_at` deleted under their ETag. */
  readonly deleted: number;
  /** Rows that changed (412) or vanished (404) between the read and the delete, or hold a live lease. */
  readonly skipped: number;
}

/**
 * The leased conditional claim on Azure Table Storage.
 *
 * Keys: PartitionKey = the first {@link PARTITION_PREFIX_LENGTH} hex characters of
 * the SHA-256 job key, RowKey = the whole key. A point read names both, so it is
 * one request; uniform hashes spread the load over 256 partitions.
 *
 * Every transition is one conditional request the service serialises:
 * - a fresh claim is Insert Entity (409 EntityAlreadyExists: someone has a row);
 * - taking over a lapsed lease, commit and heartbeat are Update Entity with
 *   `If-Match` on the ETag just read, after checking the row in code. A 412
 *   UpdateConditionNotSatisfied means another writer got there first; the
 *   adapter re-reads and decides again from what that writer left.
 *
 * Table Storage has no TTL: {@link deleteExpired} is the retention sweep, run by a timer.
 *
 * @example
 * const store = new AzureTableClaimStore(TableClient.fromConnectionString(cs, 'claims'));
 * const r = await store.claim({ jobId, owner, now, leaseUntil: now + 900_000, expiresAt: now + 7 * 86_400_000 });
 */
export class AzureTableClaimStore implements ClaimStore {
  readonly name = 'azure-table';

  /** @param table a client for an existing table (infra/ creates it; tests create their own). */
  constructor(private readonly table: TableClient) {}

  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const keys = this.keys(request.jobId);
    const fresh: ClaimEntity = {
      ...keys,
      state: 'CLAIMED',
      owner: request.owner,
      lease_until: BigInt(request.leaseUntil),
      expires_at: new Date(request.expiresAt),
    };
    // The owner a takeover of ours replaced, should its answer be lost and the re-read find our row.
    let takenFrom: string | undefined;
    for (let round = 0; round < MAX_ROUNDS; round++) {
      try {
        await this.table.createEntity(fresh);
        return { kind: 'claimed', row: toRow(request.jobId, fresh) };
      } catch (e) {
        if (!isFailure(e, 409, 'EntityAlreadyExists')) throw this.failed(`claim of job ${request.jobId}`, e);
      }
      // Somebody has a row. Decide from it; a lapsed lease is taken with If-Match on the ETag we read.
      for (; round < MAX_ROUNDS; round++) {
        const current = await this.read(request.jobId);
        if (current === undefined) break; // swept between our insert and our read: insert again
        const { row, etag } = current;
        if (row.state === 'COMMITTED') return { kind: 'done', outputUri: row.outputUri, finishedAt: row.finishedAt };
        // Our own insert (409 on the SDK's retry after a lost answer) or takeover (412 likewise): ours.
        if (isOwnLease(row, request)) return { kind: 'claimed', row, stolenFrom: takenFrom };
        if (row.leaseUntil >= request.now) return { kind: 'held', by: row.owner, leaseUntil: row.leaseUntil };
        try {
          takenFrom = row.owner;
          await this.table.updateEntity(fresh, 'Replace', { etag });
          return { kind: 'claimed', row: toRow(request.jobId, fresh), stolenFrom: row.owner };
        } catch (e) {
          if (isFailure(e, 404)) break;
          // 412: another claimer (or the old owner's commit) won; re-read and report what it left.
          if (!isFailure(e, 412)) throw this.failed(`takeover of job ${request.jobId} from ${row.owner}`, e);
        }
      }
    }
    throw this.contended(`claim of job ${request.jobId}`);
  }

  async commit(request: CommitRequest): Promise<CommitResult> {
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const current = await this.read(request.jobId);
      if (current === undefined) return { kind: 'lease-stolen', current: undefined };
      const { row, etag } = current;
      if (row.owner !== request.owner) return { kind: 'lease-stolen', current: row };
      if (row.state === 'COMMITTED') return { kind: 'committed', row };
      // Still ours (a lapsed lease nobody took over is still ours): seal it unless the row moved since the read.
      const sealed: ClaimEntity = {
        ...this.keys(request.jobId),
        state: 'COMMITTED',
        owner: request.owner,
        lease_until: BigInt(row.leaseUntil),
        expires_at: new Date(row.expiresAt),
        output_uri: request.outputUri,
        finished_at: BigInt(request.now),
      };
      try {
        await this.table.updateEntity(sealed, 'Replace', { etag });
        return { kind: 'committed', row: toRow(request.jobId, sealed) };
      } catch (e) {
        if (isFailure(e, 404)) return { kind: 'lease-stolen', current: undefined };
        // 412: a takeover landed between our read and our update. The re-read names the new owner.
        if (!isFailure(e, 412)) throw this.failed(`commit of job ${request.jobId} by ${request.owner}`, e);
      }
    }
    throw this.contended(`commit of job ${request.jobId}`);
  }

  async heartbeat(request: HeartbeatRequest): Promise<HeartbeatResult> {
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const current = await this.read(request.jobId);
      if (current === undefined) return { kind: 'lost', current: undefined };
      const { row, etag } = current;
      // Our own beat seen again (its answer was lost and the SDK retried: 412 on the ETag it changed).
      if (isOwnLease(row, request)) return { kind: 'extended', leaseUntil: row.leaseUntil };
      if (row.owner !== request.owner || row.state !== 'CLAIMED' || row.leaseUntil < request.now) return { kind: 'lost', current: row };
      try {
        // Merge touches only lease_until; the ETag still pins the whole row we checked.
        await this.table.updateEntity({ ...this.keys(request.jobId), lease_until: BigInt(request.leaseUntil) }, 'Merge', { etag });
        return { kind: 'extended', leaseUntil: request.leaseUntil };
      } catch (e) {
        if (isFailure(e, 404)) return { kind: 'lost', current: undefined };
        if (!isFailure(e, 412)) throw this.failed(`heartbeat of job ${request.jobId} by ${request.owner}`, e);
      }
    }
    throw this.contended(`heartbeat of job ${request.jobId}`);
  }

  /** Read, compare state and owner, Delete Entity with `If-Match` on the ETag read; a 412 reads again. */
  async deleteIf(request: DeleteClaimRequest): Promise<DeleteClaimResult> {
    const { partitionKey, rowKey } = this.keys(request.jobId);
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const current = await this.read(request.jobId);
      // No row: never there, or this delete landed and the SDK resent it after a lost answer.
      if (current === undefined) return { kind: 'absent' };
      if (current.row.state !== request.state || current.row.owner !== request.owner) return { kind: 'mismatch', current: current.row };
      try {
        await this.table.deleteEntity(partitionKey, rowKey, { etag: current.etag });
        return { kind: 'deleted' };
      } catch (e) {
        if (isFailure(e, 404)) return { kind: 'absent' };
        if (!isFailure(e, 412)) throw this.failed(`conditional delete of job ${request.jobId}`, e);
      }
    }
    throw this.contended(`conditional delete of job ${request.jobId}`);
  }

  async get(jobId: string): Promise<ClaimRow | undefined> {
    return (await this.read(jobId))?.row;
  }

  async *list(): AsyncIterable<ClaimRow> {
    try {
      for await (const entity of this.table.listEntities<ClaimEntity>()) yield toRow(entity.rowKey, entity);
    } catch (e) {
      throw this.failed('listing of claim rows', e);
    }
  }

  /**
   * Delete every row whose `expires_at` is before `now`, each with `If-Match`
   * on the ETag it was read with, so a row re-claimed or committed since the
   * scan is left alone. Rows with a live lease are kept whatever their
   * retention says. Run it from a timer: Table Storage has no TTL.
   *
   * @param now epoch ms
   */
  async deleteExpired(now: number): Promise<CleanupReport> {
    let deleted = 0;
    let skipped = 0;
    const filter = odata`expires_at lt ${new Date(now)}`;
    try {
      for await (const entity of this.table.listEntities<ClaimEntity>({ queryOptions: { filter } })) {
        const row = toRow(entity.rowKey, entity);
        if (row.state === 'CLAIMED' && row.leaseUntil >= now) {
          skipped++;
          continue;
        }
        try {
          await this.table.deleteEntity(entity.partitionKey, entity.rowKey, { etag: entity.etag });
          deleted++;
        } catch (e) {
          if (isFailure(e, 412) || isFailure(e, 404)) skipped++;
          else throw e;
        }
      }
    } catch (e) {
      if (e instanceof AdapterError) throw e;
      throw this.failed(`cleanup of rows expired before ${new Date(now).toISOString()}`, e);
    }
    return { deleted, skipped };
  }

  /** PartitionKey and RowKey of a job: see the class comment and docs/azure.md. */
  keys(jobId: string): { partitionKey: string; rowKey: string } {
    if (!JOB_KEY.test(jobId)) {
      throw new AdapterError(
        `[claim-store:${this.name}] job id ${JSON.stringify(jobId.slice(0, 100))} is not a lowercase SHA-256 hex key; ` +
          'claim ids come from sceneKey/tileJobKey/repairJobKey in shared/domain/job-key.ts',
      );
    }
    return { partitionKey: jobId.slice(0, PARTITION_PREFIX_LENGTH), rowKey: jobId };
  }

  private async read(jobId: string): Promise<Read | undefined> {
    const { partitionKey, rowKey } = this.keys(jobId);
    let entity: TableEntityResult<ClaimEntity>;
    try {
      entity = await this.table.getEntity<ClaimEntity>(partitionKey, rowKey);
    } catch (e) {
      if (isFailure(e, 404)) return undefined;
      throw this.failed(`read of job ${jobId}`, e);
    }
    return { row: toRow(jobId, entity), etag: entity.etag };
  }

  private contended(what: string): AdapterError {
    return new AdapterError(
      `[claim-store:${this.name}] ${what} lost ${MAX_ROUNDS} compare-and-set rounds in a row; ` +
        'something rewrites the row continuously: check for a runaway worker, then retry the delivery',
      { retryable: true },
    );
  }

  private failed(what: string, cause: unknown): AdapterError {
    return storageFailure(cause, what, {
      tag: `claim-store:${this.name}`,
      kind: 'table',
      resource: this.table.tableName,
      missingCode: 'TableNotFound',
      role: 'Storage Table Data Contributor',
    });
  }
}

/** Entity to port row. Int64 properties come back as bigint, DateTime as Date (data-tables type conversion). */
function toRow(jobId: string, e: Omit<ClaimEntity, 'partitionKey' | 'rowKey'>): ClaimRow {
  return {
    jobId,
    state: e.state,
    owner: e.owner,
    leaseUntil: Number(e.lease_until),
    expiresAt: e.expires_at instanceof Date ? e.expires_at.getTime() : Number(e.expires_at),
    ...(e.output_uri === undefined ? {} : { outputUri: e.output_uri }),
    ...(e.finished_at === undefined ? {} : { finishedAt: Number(e.finished_at) }),
  };
}
