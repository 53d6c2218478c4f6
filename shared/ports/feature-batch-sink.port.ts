import type { PositionRecord, RecordReject } from '../domain/feature-batch.js';

/**
 * Where a feature batch lands (docs/feature-batches.md): one transaction per batch object that inserts its records,
 * keeps its rejects and marks the batch done, with the claim owner as the commit evidence. PostGIS
 * (functions/postgres/postgis-feature-batch-sink.ts) is the adapter; every backend uses it.
 */

/** A record with the cell it falls in, computed by the use case before the insert. */
export interface CellRecord extends PositionRecord {
  /** The H3 cell (hex) at the batch's resolution. */
  readonly cell: string;
}

/** One batch object's content, ready for its one transaction. */
export interface FeatureBatch {
  /** The batch's job key (feature-batch.ts `batchJobKey`): the key of the batch row. */
  readonly batchKey: string;
  /** The claim owner that inserts it: recorded in the batch row, so a takeover can tell whose insert it finds. */
  readonly owner: string;
  readonly pipeline: string;
  readonly source: { readonly bucket: string; readonly key: string; readonly versionToken: string };
  /** How the object was read: `ndjson`, `ndjson+gzip`, `avro`. */
  readonly format: string;
  readonly records: readonly CellRecord[];
  readonly rejects: readonly RecordReject[];
  /** Empty lines of an NDJSON batch: not records, counted so every line is accounted for. */
  readonly blankLines: number;
}

/** What a done batch's row says. */
export interface BatchDone {
  /** The claim owner whose transaction inserted it. */
  readonly owner: string;
  /**
   * Valid records in the batch and its rejects. How many of the records were new is not kept here (the row is
   * written once, before the records, as the gate); each record row names the batch that first inserted it.
   */
  readonly records: number;
  readonly rejects: number;
}

export type BatchPutResult =
  /** This transaction inserted the batch: `inserted` new records, `duplicates` already in from another batch (or twice in this one). */
  | { readonly kind: 'inserted'; readonly inserted: number; readonly duplicates: number; readonly rejects: number }
  /**
   * The batch row was there: an earlier attempt's transaction committed (it crashed after the insert, before its
   * claim's commit, or a zombie finished). Nothing was written by this call.
   */
  | { readonly kind: 'already-done'; readonly done: BatchDone };

export interface FeatureBatchSink {
  readonly name: string;
  /**
   * In ONE transaction: the batch row (`INSERT ... ON CONFLICT (batch_key) DO NOTHING`, first, so a second
   * attempt of the batch waits for the first and then finds its row), every record `ON CONFLICT (record_id)
   * DO NOTHING`, every reject. A failure or a crash before COMMIT leaves nothing.
   */
  putBatch(batch: FeatureBatch): Promise<BatchPutResult>;
  /** The batch row, if the batch is done: what a takeover asks before it reads the object again. */
  batchDone(batchKey: string): Promise<BatchDone | undefined>;
}
