import { AdapterError, type IntegrityRefusal, isIntegrityRefusal } from '../../../shared/domain/errors.js';

/**
 * What an Azure Storage SDK call failed with, read the same way for Blob,
 * Queue and Table. The SDKs throw `RestError` from @azure/core-rest-pipeline,
 * but each SDK may carry its own copy of that package, so `instanceof` is not
 * reliable: the shape is checked instead.
 *
 * Where the error code lives differs: Blob and Queue set `code` from the
 * `x-ms-error-code` header; Tables leave `code` unset and put the header in
 * `details.errorCode` and the OData body in `details.odataError.code`
 * (observed with @azure/data-tables 13.3 against Azurite 3.35).
 */
export interface AzureFailure {
  /** HTTP status, or `undefined` when no response came back (connection refused, reset, timeout). */
  readonly status: number | undefined;
  /** The storage error code, e.g. `BlobAlreadyExists`, `UpdateConditionNotSatisfied`. */
  readonly code: string | undefined;
}

interface RestErrorShape {
  readonly name?: unknown;
  readonly statusCode?: unknown;
  readonly code?: unknown;
  readonly details?: unknown;
}

/** The status and storage error code of an Azure SDK failure, or `undefined` if `error` is not one. */
export function azureFailure(error: unknown): AzureFailure | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as RestErrorShape;
  if (e.name !== 'RestError' && typeof e.statusCode !== 'number') return undefined;
  const status = typeof e.statusCode === 'number' ? e.statusCode : undefined;
  const details = (typeof e.details === 'object' && e.details !== null ? e.details : {}) as {
    errorCode?: unknown;
    odataError?: { code?: unknown };
  };
  // The x-ms-error-code header first (every service sends it), then the OData body, then whatever
  // the pipeline set: for transport failures that is e.g. REQUEST_SEND_ERROR or ECONNREFUSED.
  const code =
    typeof details.errorCode === 'string'
      ? details.errorCode
      : typeof details.odataError?.code === 'string'
        ? details.odataError.code
        : typeof e.code === 'string'
          ? e.code
          : undefined;
  return { status, code };
}

/** True when the failure is `status` (and, if given, one of `codes`). */
export function isFailure(error: unknown, status: number, ...codes: string[]): boolean {
  const f = azureFailure(error);
  if (f?.status !== status) return false;
  return codes.length === 0 || (f.code !== undefined && codes.includes(f.code));
}

/**
 * How Blob Storage refuses a body that does not hash to the `Content-MD5` (or `x-ms-content-crc64`) sent
 * with it: 400 Md5Mismatch / Crc64Mismatch, nothing stored. The body was damaged on the way: transient.
 */
export const AZURE_INTEGRITY_REFUSAL: IntegrityRefusal = { status: 400, codes: ['Md5Mismatch', 'Crc64Mismatch'] };

/** Whether the failure is the service refusing a body damaged on the way ({@link AZURE_INTEGRITY_REFUSAL}). */
export function isIntegrityFailure(error: unknown): boolean {
  const f = azureFailure(error);
  return f !== undefined && isIntegrityRefusal(f, AZURE_INTEGRITY_REFUSAL);
}

/**
 * Whether repeating the same call may succeed: throttling (429, and 503
 * ServerBusy), server errors, request timeouts, transport failures with no
 * HTTP answer, and a body refused as damaged on the way (resent whole, it
 * arrives intact). A 4xx other than those is a bug or a configuration problem.
 */
export function isRetryable(error: unknown): boolean {
  const f = azureFailure(error);
  if (!f) return true;
  if (f.status === undefined) return true;
  return f.status === 408 || f.status === 429 || f.status >= 500 || isIntegrityRefusal(f, AZURE_INTEGRITY_REFUSAL);
}

/** A short description for error messages: `409 BlobAlreadyExists`, or the message of a non-HTTP failure. */
export function describeFailure(error: unknown): string {
  const f = azureFailure(error);
  const message = error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error);
  if (!f || f.status === undefined) return f?.code ? `${f.code}: ${message}` : message;
  return `${f.status} ${f.code ?? ''}`.trim();
}

/** Where a failed call went, for {@link storageFailure}'s message. */
export interface FailureSite {
  /** The message tag, e.g. `object-store:azure-blob`. */
  readonly tag: string;
  /** What the resource is, e.g. `container`, `queue`, `table`. */
  readonly kind: 'container' | 'queue' | 'table';
  readonly resource: string;
  /** The error code of the resource itself missing, e.g. `ContainerNotFound`. */
  readonly missingCode: string;
  /** The data-plane role an identity needs, e.g. `Storage Blob Data Contributor`. */
  readonly role: string;
}

/**
 * The AdapterError for an unexpected Azure Storage failure: names the adapter
 * and the resource, says whether a retry may help, and what to do.
 *
 * @example
 * throw storageFailure(e, `create-only write of "a.tif"`, { tag: 'object-store:azure-blob', kind: 'container',
 *   resource: 'tiles', missingCode: 'ContainerNotFound', role: 'Storage Blob Data Contributor' });
 */
export function storageFailure(cause: unknown, what: string, site: FailureSite): AdapterError {
  const retryable = isRetryable(cause);
  const hint = isFailure(cause, 404, site.missingCode)
    ? `${site.kind} ${site.resource} does not exist: deploy the infrastructure or create it`
    : isFailure(cause, 403)
      ? `the identity lacks ${site.role} on the account, or the connection string key is wrong`
      : retryable
        ? 'the storage account did not answer: retry'
        : `this is not a condition the adapter expects: check the account, the ${site.kind} and the SDK versions`;
  return new AdapterError(`[${site.tag}] ${what} (${site.kind} ${site.resource}) failed (${describeFailure(cause)}); ${hint}`, {
    cause,
    retryable,
  });
}
