import { type AttributeValue, ConditionalCheckFailedException, ScanCommand } from '@aws-sdk/client-dynamodb';
import { AdapterError } from '../../../shared/domain/errors.js';
import { describeAwsFailure, isAwsFailure, isRetryableAws } from './aws-error.js';
import type { DynamoDbSender } from './dynamodb-claim-store.js';

/** What the DynamoDB adapters (claims, manifest) share about their one table each. */
export interface DynamoTable {
  readonly client: DynamoDbSender;
  readonly table: string;
  /** The adapter's log tag, e.g. `claim-store:dynamodb`. */
  readonly tag: string;
  /** The env variable naming the table, for the hint when it is missing. */
  readonly envName: string;
  /** The actions the function role needs on it, for the hint when access is denied. */
  readonly actions: string;
}

/** A conditional write refused by its ConditionExpression (the create-only or compare-and-set answer, not a failure). */
export function isConditionFailure(error: unknown): error is ConditionalCheckFailedException {
  // instanceof first; the name check covers a client from another copy of the SDK package.
  return (
    error instanceof ConditionalCheckFailedException || (error as { name?: unknown } | null)?.name === 'ConditionalCheckFailedException'
  );
}

/** A typed, retry-classified error for a failed call on the table, with what to do about it. */
export function tableFailure(t: DynamoTable, what: string, error: unknown): AdapterError {
  const hint = isAwsFailure(error, 400, 'ResourceNotFoundException')
    ? `table ${t.table} does not exist in this account and region: deploy the stack or fix ${t.envName}`
    : isAwsFailure(error, 400, 'AccessDeniedException')
      ? `the function role may not use table ${t.table}: grant ${t.actions} on it`
      : 'retry; if it persists check the table and the network';
  return new AdapterError(`[${t.tag}] ${what} failed (${describeAwsFailure(error)}); ${hint}`, {
    cause: error,
    retryable: isRetryableAws(error),
  });
}

/** Every item, by a paginated consistent Scan: for reconcile and tests, not for a hot path. */
export async function* scanTable(t: DynamoTable, what: string): AsyncIterable<Record<string, AttributeValue>> {
  let start: Record<string, AttributeValue> | undefined;
  do {
    let page: { Items?: Record<string, AttributeValue>[] | undefined; LastEvaluatedKey?: Record<string, AttributeValue> | undefined };
    try {
      page = await t.client.send(new ScanCommand({ TableName: t.table, ConsistentRead: true, ExclusiveStartKey: start }));
    } catch (e) {
      throw tableFailure(t, what, e);
    }
    yield* page.Items ?? [];
    start = page.LastEvaluatedKey;
  } while (start !== undefined);
}
