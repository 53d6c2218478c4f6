import {
  type AttributeValue,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
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
import { type DynamoTable, isConditionFailure, scanTable, tableFailure } from './dynamodb-table.js';

/**
 * The only part of a `DynamoDBClient` this adapter uses, so tests and callers
 * can inject any client (a real one against DynamoDB Local, a fault-injecting
 * wrapper) without a cast.
 */
export type DynamoDbSender = Pick<DynamoDBClient, 'send'>;

/** The table's partition key (type S). The table has no sort key. */
export const CLAIMS_PARTITION_KEY = 'job_id';
/** The table's TTL attribute: epoch SECONDS, as DynamoDB TTL requires. Infra enables TTL on it. */
export const CLAIMS_TTL_ATTRIBUTE = 'expires_at';

/** Item attributes. `state` and `owner` are DynamoDB reserved words, so every expression goes through names. */
const names = {
  '#job_id': CLAIMS_PARTITION_KEY,
  '#state': 'state',
  '#owner': 'owner',
  '#lease_until': 'lease_until',
  '#expires_at': CLAIMS_TTL_ATTRIBUTE,
  '#output_uri': 'output_uri',
  '#finished_at': 'finished_at',
} as const;

/** The owner a takeover replaced, kept on the row it wrote: what a retry of that very takeover reports (see claim). */
const TAKEN_FROM = 'taken_from';
/** Rounds of "read the row, take it over on condition it is unchanged" before contention is reported as retryable. */
const MAX_CLAIM_ROUNDS = 5;

// Timeline of one claim row:
//   (absent) --claim--> CLAIMED(owner, lease_until) --commit by owner--> COMMITTED (forever)
//                          |   ^
//                          |   +-- heartbeat by owner while lease_until >= now
//                          +-- lease_until < now: a claim by anyone takes it over (read by the
//                              failed create, then replaced on condition it is still that row)
// Each arrow is ONE conditional write; these named parts are the conditions.
const jobIsNew = 'attribute_not_exists(#job_id)';
// A takeover replaces exactly the lapsed row it read (and its condition failure names what is there instead).
const rowIsTheOneRead = '#state = :claimed AND #owner = :prev_owner AND #lease_until = :prev_lease';
const jobIsClaimed = '#state = :claimed';
const leaseIsLive = '#lease_until >= :now';
const callerOwnsJob = '#owner = :owner';

const commitCondition = callerOwnsJob;
const heartbeatCondition = `${callerOwnsJob} AND ${jobIsClaimed} AND ${leaseIsLive}`;
// Cleanup only (tessera verify): the row is still in the state and with the owner its creator left it.
const deleteCondition = `#state = :state AND ${callerOwnsJob}`;

/** Only the names an expression mentions: DynamoDB rejects unused ExpressionAttributeNames. */
function namesFor(...expressions: string[]): Record<string, string> {
  const text = expressions.join(' ');
  return Object.fromEntries(Object.entries(names).filter(([placeholder]) => new RegExp(`${placeholder}\\b`).test(text)));
}

const S = (value: string): AttributeValue => ({ S: value });
const N = (value: number): AttributeValue => ({ N: String(value) });
const toSeconds = (ms: number): number => Math.ceil(ms / 1000);

/**
 * Claims in a DynamoDB table (partition key `job_id`, TTL on `expires_at`).
 *
 * - claim: ONE PutItem conditioned on "no row". Its condition failure returns
 *   the row in place (`ReturnValuesOnConditionCheckFailure: ALL_OLD`), so a
 *   `held` or `done` answer costs no second read. Only a lapsed lease costs a
 *   second request: a PutItem conditioned on the row being exactly the one
 *   read (state, owner, lease_until), which records the owner it replaces
 *   (`taken_from`). One PutItem for both cases (absent or lapsed) would be one
 *   request fewer, but its answer is the only place the replaced owner is
 *   named: when that answer is lost and the SDK resends the PutItem, the
 *   resend meets its own row and the takeover went uncounted, so the zombie's
 *   later `lease-stolen` had no `lease-taken-over` to match (parity 97).
 * - commit: ONE UpdateItem conditioned on the caller still owning the row. A
 *   failed condition there is `lease-stolen`, an alarm the caller logs at ERROR
 *   (on claim, a failed condition is the normal "someone else has it" path).
 * - heartbeat: ONE UpdateItem conditioned on owner, CLAIMED and a live lease.
 *
 * Times: `lease_until` and `finished_at` are epoch milliseconds, as the port
 * speaks; `expires_at` is epoch seconds because DynamoDB TTL reads only that.
 * TTL deletes "within a few days" and expired rows stay readable, so the
 * lease logic never relies on it: it compares `lease_until` with `now` itself.
 *
 * Reads are strongly consistent: a commit that just landed must be visible to
 * the claim check of a duplicate delivery on another instance.
 *
 * @example
 * const claims = new DynamoDbClaimStore(new DynamoDBClient({}), process.env.TESSERA_CLAIMS_TABLE);
 * const r = await claims.claim({ jobId, owner, now, leaseUntil: now + 1_200_000, expiresAt: now + 7 * 86_400_000 });
 */
export class DynamoDbClaimStore implements ClaimStore {
  readonly name = 'dynamodb';

  /**
   * @param client a DynamoDBClient (or anything with its `send`)
   * @param table the claims table; infra/ creates it, tests create their own
   */
  constructor(
    private readonly client: DynamoDbSender,
    private readonly table: string,
  ) {
    if (!table) throw new AdapterError('[claim-store:dynamodb] no table name given; set TESSERA_CLAIMS_TABLE to the claims table');
  }

  async claim(req: ClaimRequest): Promise<ClaimResult> {
    const row: ClaimRow = { jobId: req.jobId, state: 'CLAIMED', owner: req.owner, leaseUntil: req.leaseUntil, expiresAt: req.expiresAt };
    const item = (takenFrom?: string): Record<string, AttributeValue> => ({
      [CLAIMS_PARTITION_KEY]: S(req.jobId),
      state: S('CLAIMED'),
      owner: S(req.owner),
      lease_until: N(req.leaseUntil),
      [CLAIMS_TTL_ATTRIBUTE]: N(toSeconds(req.expiresAt)),
      ...(takenFrom === undefined ? {} : { [TAKEN_FROM]: S(takenFrom) }),
    });
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const created = await this.#put(item(), jobIsNew, {}, `claim of job ${req.jobId}`);
      if (created === undefined) return { kind: 'claimed', row };
      // A row was there (or went away again: create once more).
      if (created.row === undefined) continue;
      const current = created.row;
      // Our own PutItem, landed once and resent (by the SDK after a lost answer, or by the caller): the claim is
      // ours, and if it was a takeover, the row names whom it took the lease from.
      if (isOwnLease(current, req)) return { kind: 'claimed', row: current, stolenFrom: created.takenFrom };
      if (current.state === 'COMMITTED') return { kind: 'done', outputUri: current.outputUri, finishedAt: current.finishedAt };
      if (current.leaseUntil >= req.now) return { kind: 'held', by: current.owner, leaseUntil: current.leaseUntil };
      // The lease lapsed: take over exactly the row read.
      const taken = await this.#put(
        item(current.owner),
        rowIsTheOneRead,
        { ':claimed': S('CLAIMED'), ':prev_owner': S(current.owner), ':prev_lease': N(current.leaseUntil) },
        `takeover of job ${req.jobId} from ${current.owner}`,
      );
      if (taken === undefined) return { kind: 'claimed', row, stolenFrom: current.owner };
      // This very takeover, landed and resent by the SDK after its answer was lost: still a takeover from that owner.
      if (taken.row !== undefined && isOwnLease(taken.row, req)) return { kind: 'claimed', row: taken.row, stolenFrom: current.owner };
      // Changed since the read (a heartbeat, a commit, another claimer, a delete): read what won and decide again.
    }
    throw new AdapterError(
      `[claim-store:dynamodb] claim of job ${req.jobId} kept meeting concurrent changes of its row after ${MAX_CLAIM_ROUNDS} rounds; retry the delivery`,
      { retryable: true },
    );
  }

  /**
   * One conditional PutItem of a claim row. Undefined when it was written; else what its condition failure
   * returned (ALL_OLD): the row in place and the owner it records having taken over, or no row at all.
   */
  async #put(
    item: Record<string, AttributeValue>,
    condition: string,
    values: Record<string, AttributeValue>,
    what: string,
  ): Promise<{ readonly row: ClaimRow | undefined; readonly takenFrom: string | undefined } | undefined> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: item,
          ConditionExpression: condition,
          ExpressionAttributeNames: namesFor(condition),
          ...(Object.keys(values).length === 0 ? {} : { ExpressionAttributeValues: values }),
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return undefined;
    } catch (e) {
      if (!isConditionFailure(e)) throw this.failed(what, e);
      return { row: e.Item ? this.toRow(e.Item) : undefined, takenFrom: e.Item?.[TAKEN_FROM]?.S };
    }
  }

  async commit(req: CommitRequest): Promise<CommitResult> {
    // finished_at keeps its first value, so a repeated commit by the owner does not move it.
    const update = 'SET #state = :committed, #output_uri = :uri, #finished_at = if_not_exists(#finished_at, :now)';
    try {
      const out = await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: { [CLAIMS_PARTITION_KEY]: S(req.jobId) },
          UpdateExpression: update,
          ConditionExpression: commitCondition,
          ExpressionAttributeNames: namesFor(update, commitCondition),
          ExpressionAttributeValues: { ':committed': S('COMMITTED'), ':uri': S(req.outputUri), ':now': N(req.now), ':owner': S(req.owner) },
          ReturnValues: 'ALL_NEW',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      if (!out.Attributes)
        throw new AdapterError(`[claim-store:dynamodb] commit of job ${req.jobId} returned no row; retry the delivery`, {
          retryable: true,
        });
      return { kind: 'committed', row: this.toRow(out.Attributes) };
    } catch (e) {
      if (!isConditionFailure(e)) throw e instanceof AdapterError ? e : this.failed(`commit of job ${req.jobId}`, e);
      return { kind: 'lease-stolen', current: e.Item ? this.toRow(e.Item) : undefined };
    }
  }

  async heartbeat(req: HeartbeatRequest): Promise<HeartbeatResult> {
    const update = 'SET #lease_until = :lease_until';
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: { [CLAIMS_PARTITION_KEY]: S(req.jobId) },
          UpdateExpression: update,
          ConditionExpression: heartbeatCondition,
          ExpressionAttributeNames: namesFor(update, heartbeatCondition),
          ExpressionAttributeValues: {
            ':lease_until': N(req.leaseUntil),
            ':owner': S(req.owner),
            ':claimed': S('CLAIMED'),
            ':now': N(req.now),
          },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { kind: 'extended', leaseUntil: req.leaseUntil };
    } catch (e) {
      if (!isConditionFailure(e)) throw this.failed(`heartbeat of job ${req.jobId}`, e);
      const current = e.Item ? this.toRow(e.Item) : undefined;
      // Our own beat, retried by the SDK after a lost answer (a release sets the lease into the past, so
      // the retry fails `lease_until >= now` on the row the first attempt wrote): it was extended.
      if (isOwnLease(current, req)) return { kind: 'extended', leaseUntil: req.leaseUntil };
      return { kind: 'lost', current };
    }
  }

  /** ONE DeleteItem conditioned on state and owner; a failed condition returns the row (ALL_OLD) or none. */
  async deleteIf(req: DeleteClaimRequest): Promise<DeleteClaimResult> {
    try {
      await this.client.send(
        new DeleteItemCommand({
          TableName: this.table,
          Key: { [CLAIMS_PARTITION_KEY]: S(req.jobId) },
          ConditionExpression: deleteCondition,
          ExpressionAttributeNames: namesFor(deleteCondition),
          ExpressionAttributeValues: { ':state': S(req.state), ':owner': S(req.owner) },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { kind: 'deleted' };
    } catch (e) {
      if (!isConditionFailure(e)) throw this.failed(`conditional delete of job ${req.jobId}`, e);
      // No row: never there, or this very delete landed and the SDK resent it after a lost answer.
      return e.Item ? { kind: 'mismatch', current: this.toRow(e.Item) } : { kind: 'absent' };
    }
  }

  async get(jobId: string): Promise<ClaimRow | undefined> {
    try {
      const out = await this.client.send(
        new GetItemCommand({ TableName: this.table, Key: { [CLAIMS_PARTITION_KEY]: S(jobId) }, ConsistentRead: true }),
      );
      return out.Item ? this.toRow(out.Item) : undefined;
    } catch (e) {
      throw this.failed(`read of job ${jobId}`, e);
    }
  }

  /** Every row, by a paginated consistent Scan: for reconcile and tests, not for a hot path. */
  async *list(): AsyncIterable<ClaimRow> {
    for await (const item of scanTable(this.#table(), 'scan of the claims table')) yield this.toRow(item);
  }

  private toRow(item: Record<string, AttributeValue>): ClaimRow {
    const str = (name: string): string | undefined => item[name]?.S;
    const num = (name: string): number | undefined => {
      const raw = item[name]?.N;
      return raw === undefined ? undefined : Number(raw);
    };
    const jobId = str(CLAIMS_PARTITION_KEY);
    const state = str('state');
    const owner = str('owner');
    const leaseUntil = num('lease_until');
    const expiresAtSec = num(CLAIMS_TTL_ATTRIBUTE);
    if (jobId === undefined || (state !== 'CLAIMED' && state !== 'COMMITTED') || owner === undefined || leaseUntil === undefined) {
      throw new AdapterError(
        `[claim-store:dynamodb] row ${JSON.stringify(jobId ?? '?')} in table ${this.table} is not a Tessera claim row; ` +
          'point TESSERA_CLAIMS_TABLE at a table used only by Tessera',
      );
    }
    return {
      jobId,
      state: state satisfies ClaimState,
      owner,
      leaseUntil,
      expiresAt: expiresAtSec === undefined ? 0 : expiresAtSec * 1000,
      outputUri: str('output_uri'),
      finishedAt: num('finished_at'),
    };
  }

  private failed(what: string, error: unknown): AdapterError {
    return tableFailure(this.#table(), what, error);
  }

  #table(): DynamoTable {
    return {
      client: this.client,
      table: this.table,
      tag: 'claim-store:dynamodb',
      envName: 'TESSERA_CLAIMS_TABLE',
      actions: 'dynamodb:PutItem, UpdateItem, GetItem, DeleteItem and Scan',
    };
  }
}
