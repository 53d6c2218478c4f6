import { type CollectionReference, type DocumentData, type DocumentSnapshot, Timestamp } from '@google-cloud/firestore';
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

const STORE = 'firestore';

/** gRPC status codes the protocol reads (google.rpc.Code). */
const Code = {
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
} as const;

/**
 * Attempts of one operation. Each lost compare-and-set means another writer
 * changed the document in between, so a loop only goes round while others make
 * progress; the bound turns a pathological fight (or an emulator that never
 * settles) into an error instead of a spin.
 */
const MAX_ATTEMPTS = 8;

/**
 * The claim document, one per job, id = job key. Times are epoch milliseconds
 * (integers) as the port speaks them, except `expires_at`: a Firestore
 * Timestamp, because that is the only type a Firestore TTL policy deletes on.
 * `rev` goes up by one on every write, so every compare-and-set changes the
 * document (Firestore keeps the old update time for a write that changes
 * nothing, and a no-op CAS would then leave the version where a rival expects it).
 */
interface ClaimDoc {
  job_id: string;
  state: ClaimState;
  owner: string;
  lease_until: number;
  expires_at: Timestamp;
  output_uri?: string;
  finished_at?: number;
  rev: number;
}

type Loaded = { readonly row: ClaimRow; readonly rev: number; readonly version: Timestamp };

/** What a compare-and-set round decided: answer without writing, or write these fields and answer `written` if the write lands. */
type CasStep<R> = { readonly answer: R } | { readonly write: Partial<ClaimDoc>; readonly written: R };

const grpcCode = (error: unknown): number | undefined => {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
};

/** A compare-and-set that lost: someone wrote the document after we read it. */
const lostRace = (error: unknown): boolean => {
  const code = grpcCode(error);
  return code === Code.FAILED_PRECONDITION || code === Code.ABORTED;
};

/**
 * The claim store on Firestore (native mode), over gRPC.
 *
 * Protocol, one document per job:
 * ```
 * claim   create()                       -> claimed
 *         ALREADY_EXISTS / ABORTED: read -> COMMITTED: done | our own lease: claimed | live lease: held
 *                                           (absent after ABORTED: create again)
 *         lapsed lease: update(..., { lastUpdateTime: <read> }) -> claimed (stolenFrom)
 *                                           FAILED_PRECONDITION/ABORTED: read again
 * commit  read; owner must match; update(state=COMMITTED, { lastUpdateTime: <read> })
 * beat    read; owner, CLAIMED and live lease must hold; update(lease_until, { lastUpdateTime })
 * delete  read; state and owner must match; delete({ lastUpdateTime: <read> })   (cleanup only)
 * ```
 * Compare-and-set writes use the `lastUpdateTime` precondition of the document
 * just read rather than a transaction: one RPC after the read, no server-side
 * locks held across a network round trip, the retry loop is ours and bounded
 * (the SDK's `runTransaction` retries on its own), and it is the path the
 * emulator can be made to check (docs/gcp.md, docs/emulator-fidelity.md).
 *
 * Give it a client built with `preferRest: false`: over REST an older SDK
 * retried a 409 forever (docs/gcp.md).
 *
 * @example
 * const claims = new FirestoreClaimStore(new Firestore({ preferRest: false }).collection('tessera-claims'));
 * await claims.claim({ jobId, owner, now, leaseUntil: now + 840_000, expiresAt: now + 7 * 86_400_000 });
 */
export class FirestoreClaimStore implements ClaimStore {
  readonly name = STORE;

  /** @param collection the collection holding one document per job key. */
  constructor(private readonly collection: CollectionReference) {}

  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const ref = this.collection.doc(request.jobId);
    const fresh: ClaimDoc = {
      job_id: request.jobId,
      state: 'CLAIMED',
      owner: request.owner,
      lease_until: request.leaseUntil,
      expires_at: Timestamp.fromMillis(request.expiresAt),
      rev: 1,
    };
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      try {
        await ref.create(fresh);
        return { kind: 'claimed', row: toRow(fresh) };
      } catch (error) {
        // ABORTED on a create is contention on the document, exactly as on the compare-and-set path
        // (lostRace): read and decide again. Only ALREADY_EXISTS and ABORTED lead on; the rest throws.
        if (grpcCode(error) !== Code.ALREADY_EXISTS && grpcCode(error) !== Code.ABORTED)
          throw this.failure(`claim of ${request.jobId}`, error);
      }
      const current = await this.load(request.jobId);
      if (!current) continue; // deleted (TTL) between create and read: create again
      const { row } = current;
      if (row.state === 'COMMITTED') return { kind: 'done', outputUri: row.outputUri, finishedAt: row.finishedAt };
      if (isOwnLease(row, request)) return { kind: 'claimed', row }; // our own create, retried by the SDK after a lost answer
      if (row.leaseUntil >= request.now) return { kind: 'held', by: row.owner, leaseUntil: row.leaseUntil };
      // The lease lapsed: take it over, on condition that nobody wrote since our read.
      const taken: ClaimDoc = { ...fresh, rev: current.rev + 1 };
      try {
        await ref.update({ ...taken }, { lastUpdateTime: current.version });
        return { kind: 'claimed', row: toRow(taken), stolenFrom: row.owner };
      } catch (error) {
        if (!lostRace(error) && grpcCode(error) !== Code.NOT_FOUND) throw this.failure(`takeover of ${request.jobId}`, error);
        // Lost to another claimer, a commit or a heartbeat: read again and answer from what won.
        const after = await this.load(request.jobId);
        if (after && isOwnLease(after.row, request)) return { kind: 'claimed', row: after.row, stolenFrom: row.owner };
      }
    }
    throw this.contention(`claim of ${request.jobId}`);
  }

  async commit(request: CommitRequest): Promise<CommitResult> {
    const stolen = { kind: 'lease-stolen', current: undefined } as const;
    return this.compareAndSet<CommitResult>(request.jobId, 'commit', stolen, ({ row }) => {
      if (row.owner !== request.owner) return { answer: { kind: 'lease-stolen', current: row } };
      if (row.state === 'COMMITTED') return { answer: { kind: 'committed', row } };
      return {
        write: { state: 'COMMITTED', output_uri: request.outputUri, finished_at: request.now },
        written: { kind: 'committed', row: { ...row, state: 'COMMITTED', outputUri: request.outputUri, finishedAt: request.now } },
      };
    });
  }

  async heartbeat(request: HeartbeatRequest): Promise<HeartbeatResult> {
    const lost = { kind: 'lost', current: undefined } as const;
    return this.compareAndSet<HeartbeatResult>(request.jobId, 'heartbeat', lost, ({ row }) => {
      // A retried beat whose first attempt landed (before the liveness check: a release's lease is in the past).
      if (isOwnLease(row, request)) return { answer: { kind: 'extended', leaseUntil: row.leaseUntil } };
      if (row.owner !== request.owner || row.state !== 'CLAIMED' || row.leaseUntil < request.now)
        return { answer: { kind: 'lost', current: row } };
      return { write: { lease_until: request.leaseUntil }, written: { kind: 'extended', leaseUntil: request.leaseUntil } };
    });
  }

  /**
   * Read, compare state and owner, delete on condition that nobody wrote since
   * the read (`lastUpdateTime`). A lost race reads again. A delete the SDK
   * resent after its first attempt landed fails its precondition on the
   * missing document, and the next read answers `absent`.
   */
  async deleteIf(request: DeleteClaimRequest): Promise<DeleteClaimResult> {
    const ref = this.collection.doc(request.jobId);
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      const current = await this.load(request.jobId);
      if (!current) return { kind: 'absent' };
      if (current.row.state !== request.state || current.row.owner !== request.owner) return { kind: 'mismatch', current: current.row };
      try {
        await ref.delete({ lastUpdateTime: current.version });
        return { kind: 'deleted' };
      } catch (error) {
        if (grpcCode(error) === Code.NOT_FOUND) return { kind: 'absent' };
        if (!lostRace(error)) throw this.failure(`conditional delete of ${request.jobId}`, error);
      }
    }
    throw this.contention(`conditional delete of ${request.jobId}`);
  }

  async get(jobId: string): Promise<ClaimRow | undefined> {
    return (await this.load(jobId))?.row;
  }

  async *list(): AsyncIterable<ClaimRow> {
    // One streamed query: RunQuery has no page size limit, and the SDK resumes a broken stream itself.
    try {
      for await (const snap of this.collection.stream() as AsyncIterable<DocumentSnapshot>) {
        const data = snap.data();
        if (data) yield toRow(parseDoc(snap.id, data));
      }
    } catch (error) {
      throw this.failure(`listing of collection ${this.collection.path}`, error);
    }
  }

  /**
   * Read, decide, write conditionally on the version read; on a lost race
   * (someone wrote meanwhile: a takeover, or our own heartbeat) read again and
   * decide again. `missing` answers a document that is not (or no longer) there.
   */
  private async compareAndSet<R>(jobId: string, what: string, missing: R, decide: (current: Loaded) => CasStep<R>): Promise<R> {
    const ref = this.collection.doc(jobId);
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      const current = await this.load(jobId);
      if (!current) return missing;
      const step = decide(current);
      if ('answer' in step) return step.answer;
      try {
        await ref.update({ ...step.write, rev: current.rev + 1 }, { lastUpdateTime: current.version });
        return step.written;
      } catch (error) {
        if (grpcCode(error) === Code.NOT_FOUND) return missing;
        if (!lostRace(error)) throw this.failure(`${what} of ${jobId}`, error);
      }
    }
    throw this.contention(`${what} of ${jobId}`);
  }

  private async load(jobId: string): Promise<Loaded | undefined> {
    let snap: DocumentSnapshot;
    try {
      snap = await this.collection.doc(jobId).get();
    } catch (error) {
      throw this.failure(`read of ${jobId}`, error);
    }
    const data = snap.data();
    if (!data || !snap.updateTime) return undefined;
    const doc = parseDoc(jobId, data);
    return { row: toRow(doc), rev: doc.rev, version: snap.updateTime };
  }

  private failure(what: string, error: unknown): AdapterError {
    const code = grpcCode(error);
    // DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED (contention), INTERNAL, UNAVAILABLE (or no gRPC
    // answer): worth another delivery. One classification for every call, create included.
    const retryable = code === undefined || code === 4 || code === 8 || code === Code.ABORTED || code === 13 || code === 14;
    return new AdapterError(
      `[claim-store:${STORE}] ${what} in ${this.collection.path} failed${code === undefined ? '' : ` with gRPC code ${code}`}: ` +
        `${error instanceof Error ? error.message : String(error)}; ` +
        (retryable
          ? 'a retry may succeed'
          : 'check that Firestore (native mode) is enabled and the function service account has roles/datastore.user'),
      { cause: error, retryable },
    );
  }

  private contention(what: string): AdapterError {
    return new AdapterError(
      `[claim-store:${STORE}] ${what} lost ${MAX_ATTEMPTS} compare-and-set rounds in a row; ` +
        'the document is being rewritten continuously: look for a worker heartbeating in a loop. A redelivery will try again',
      { retryable: true },
    );
  }
}

function parseDoc(jobId: string, data: DocumentData): ClaimDoc {
  const state = data.state;
  const expires = data.expires_at;
  if ((state !== 'CLAIMED' && state !== 'COMMITTED') || typeof data.owner !== 'string' || typeof data.lease_until !== 'number') {
    throw new AdapterError(
      `[claim-store:${STORE}] claim document ${jobId} is malformed (state ${JSON.stringify(state)}, owner ${JSON.stringify(data.owner)}); ` +
        'something other than Tessera wrote to the claims collection: give Tessera a collection of its own',
    );
  }
  return {
    job_id: jobId,
    state,
    owner: data.owner,
    lease_until: data.lease_until,
    expires_at: expires instanceof Timestamp ? expires : Timestamp.fromMillis(0),
    ...(typeof data.output_uri === 'string' ? { output_uri: data.output_uri } : {}),
    ...(typeof data.finished_at === 'number' ? { finished_at: data.finished_at } : {}),
    rev: typeof data.rev === 'number' ? data.rev : 0,
  };
}

function toRow(doc: ClaimDoc): ClaimRow {
  return {
    jobId: doc.job_id,
    state: doc.state,
    owner: doc.owner,
    leaseUntil: doc.lease_until,
    expiresAt: doc.expires_at.toMillis(),
    ...(doc.output_uri === undefined ? {} : { outputUri: doc.output_uri }),
    ...(doc.finished_at === undefined ? {} : { finishedAt: doc.finished_at }),
  };
}
