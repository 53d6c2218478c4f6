/**
 * What an AWS SDK v3 call failed with, read the same way for DynamoDB, S3 and
 * SQS. Every service exception carries `name` (the error code, e.g.
 * `ConditionalCheckFailedException`, `PreconditionFailed`), `$metadata.httpStatusCode`
 * and `$fault`; transport failures (connection refused, reset, timeout) have
 * no HTTP status. The shape is checked rather than `instanceof`, since each
 * client package brings its own exception classes.
 */
export interface AwsFailure {
  /** HTTP status, or `undefined` when no response came back. */
  readonly status: number | undefined;
  /** The service error code (the exception name), e.g. `PreconditionFailed`. */
  readonly code: string;
}

interface ServiceExceptionShape {
  readonly name?: unknown;
  readonly $metadata?: { readonly httpStatusCode?: unknown };
  readonly $fault?: unknown;
  readonly $retryable?: unknown;
}

export function awsFailure(error: unknown): AwsFailure {
  const e = (typeof error === 'object' && error !== null ? error : {}) as ServiceExceptionShape;
  const status = typeof e.$metadata?.httpStatusCode === 'number' ? e.$metadata.httpStatusCode : undefined;
  return { status, code: typeof e.name === 'string' ? e.name : 'Error' };
}

/** True when the failure has HTTP `status` (and, if given, one of `codes`). */
export function isAwsFailure(error: unknown, status: number, ...codes: string[]): boolean {
  const f = awsFailure(error);
  return f.status === status && (codes.length === 0 || codes.includes(f.code));
}

/** Error codes AWS documents as "slow down and try again", whatever status they come with. */
const THROTTLING = new Set([
  'ThrottlingException',
  'Throttling',
  'ProvisionedThroughputExceededException',
  'RequestLimitExceeded',
  'SlowDown',
  'TooManyRequestsException',
  'TransactionConflictException',
  'RequestThrottled',
]);

/**
 * Whether repeating the same call may succeed: throttling, server errors,
 * request timeouts and transport failures. (The SDK has already retried these
 * `maxAttempts` times; we say so to the trigger, which redelivers later.)
 * Any other 4xx is a bug or a configuration problem: retrying cannot help.
 */
export function isRetryableAws(error: unknown): boolean {
  const e = (typeof error === 'object' && error !== null ? error : {}) as ServiceExceptionShape;
  const f = awsFailure(error);
  if (THROTTLING.has(f.code) || e.$retryable !== undefined) return true;
  if (f.status === undefined) return true;
  return f.status === 408 || f.status === 429 || f.status >= 500;
}

/** A short description for messages: `412 PreconditionFailed`, or the first line of a transport error. */
export function describeAwsFailure(error: unknown): string {
  const f = awsFailure(error);
  const message = error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error);
  return f.status === undefined ? `${f.code}: ${message}` : `${f.status} ${f.code}${message && message !== f.code ? `: ${message}` : ''}`;
}

/** Full-jitter exponential backoff (AWS Architecture Blog): a random delay in [0, min(cap, base * 2^attempt)). */
export function backoffDelayMs(attempt: number, baseMs: number, capMs: number, random: () => number = Math.random): number {
  return Math.floor(random() * Math.min(capMs, baseMs * 2 ** attempt));
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
