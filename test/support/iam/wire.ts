import type { FunctionRole } from '../../../shared/domain/key-layout.js';
import type { Cloud, RecordedAccess } from './access.js';

/**
 * One request a role's code sent, as the recorder captured it at the SDK boundary (node:http's
 * ClientRequest, an HTTP/2 stream, a fetch), before any proxy: what the classifiers read.
 */
export interface WireRequest {
  /** `http1` (node:http/https), `http2` (one gRPC message, or a whole non-gRPC stream), `fetch` (undici). */
  readonly transport: 'http1' | 'http2' | 'fetch';
  readonly role: FunctionRole;
  /** How the role was known: the async context at the request's creation, or the tag the gRPC call carried. */
  readonly roleFrom: 'context' | 'grpc-tag';
  readonly method: string;
  /** `host:port` as sent (the Host header or `:authority`). */
  readonly authority: string;
  /** Path and query, as sent (gRPC: `/package.Service/Method`). */
  readonly path: string;
  /** Lower-case names; several values joined with `, `. */
  readonly headers: Readonly<Record<string, string>>;
  /**
   * The body, where the resource is named only there (DynamoDB and SQS JSON, a GCS compose, a gRPC
   * message); empty for the others, which are not kept (tiles and scenes are megabytes).
   */
  readonly body: Buffer;
  /** False when the body was longer than the recorder keeps (a classifier that needs it then refuses). */
  readonly bodyComplete: boolean;
  /**
   * gRPC: the first message of this call's stream. A streaming call names its resource once, in its first
   * message (StreamingPull's subscription); its later messages (acks, heartbeats) are placed by it.
   */
  readonly firstMessage?: Buffer | undefined;
}

/**
 * The permissions one request needs, in the cloud's own terms: every requirement must hold; a requirement
 * holds when every access of any one of its alternatives is allowed. Most requests need one access; the
 * alternatives are the cloud's own "or" (Azure Put Blob creating a blob: `blobs/write` or
 * `blobs/add/action`; Get Messages: `messages/process/action` or `messages/read` and `messages/delete`).
 */
export interface Requirement {
  readonly anyOf: readonly (readonly RecordedAccess[])[];
}

/** What a classifier made of a request. */
export type Classified =
  /** A request to a cloud store, and the permissions it needs (none: e.g. a resumable upload's later chunks). */
  | { readonly kind: 'accesses'; readonly cloud: Cloud; readonly required: readonly Requirement[] }
  /** A request to a cloud store the recorder cannot map to permissions or to a registered resource: a finding. */
  | { readonly kind: 'unrecognised'; readonly cloud: Cloud; readonly why: string }
  /** Not a cloud API request (an artefact fetched over plain HTTP, a test server): nothing to check. */
  | { readonly kind: 'not-cloud' };

/** One recorded request with its classification, as AccessCheck receives it. */
export interface RecordedRequest {
  readonly wire: WireRequest;
  readonly classified: Classified;
}

/** `METHOD /path` shortened for a message. */
export function describeRequest(wire: Pick<WireRequest, 'method' | 'path'>): string {
  const path = wire.path.length > 200 ? `${wire.path.slice(0, 199)}…` : wire.path;
  return `${wire.method} ${path}`;
}

/** One access needing nothing else: the common case. */
export function single(access: RecordedAccess): Requirement {
  return { anyOf: [[access]] };
}
