import dc from 'node:diagnostics_channel';
import type { ClientRequest, OutgoingHttpHeaders } from 'node:http';
import type { ClientHttp2Stream } from 'node:http2';
import { createRequire } from 'node:module';
import { FUNCTION_ROLES, type FunctionRole } from '../../../shared/domain/key-layout.js';
import { currentRole } from '../function-role.js';
import type { Cloud } from './access.js';
import { classify, needsBody } from './classify.js';
import { isAws } from './classify-aws.js';
import { isAzure } from './classify-azure.js';
import { isGcp } from './classify-gcp.js';
import type { Classified, RecordedRequest, WireRequest } from './wire.js';

export { registerResource, registerResources } from './resources.js';
export type { RecordedRequest, Requirement, WireRequest } from './wire.js';

/**
 * The access recorder (docs/iam.md): every request a role's code sends, seen at the SDK boundary, in
 * process, before any proxy, and turned into the permissions the cloud checks for it.
 *
 * Where it listens (Node 22 and 24 publish all of these):
 * - `http.client.request.created` / `http.client.request.start` (node:http): the AWS SDK v3
 *   (NodeHttpHandler), `@google-cloud/storage` (gaxios / node-fetch) and the Azure SDKs
 *   (core-rest-pipeline's NodeHttpClient). The role is read at `created`, which the ClientRequest
 *   constructor publishes synchronously in the SDK's own call, so in the caller's async context
 *   whatever the agent later does with sockets; `start` is published once the whole request was
 *   handed to the socket, so the body is complete by then.
 * - `http2.client.stream.created` (node:http2): Firestore and Pub/Sub over gRPC. grpc-js opens the
 *   stream when a connected transport is picked, which for a call made while the channel was still
 *   connecting happens in the connection's callback: the async context there is whichever call started
 *   the connection, not this one. So the role is not read from the context for gRPC: each call is tagged
 *   with its role as call metadata (`x-tessera-role`) where it is created, in its caller's context
 *   ({@link tagGrpcCalls}), and read back from the stream's headers.
 * - `undici:request:create` (fetch): no SDK used here sends through it today; it is listened to so
 *   that one which starts to is not missed.
 *
 * Requests outside any role (a test's set-up and checks, the emulators' own traffic) are not recorded.
 */

/** The metadata key a gRPC call carries its role in (test-only; the emulators ignore it). */
export const ROLE_METADATA_KEY = 'x-tessera-role';

/** Bodies longer than this are not kept (the request is then classified without, or refused). */
const MAX_BODY = 1 << 20;

type Listener = (recorded: RecordedRequest) => void;
const listeners = new Set<Listener>();
let installed = false;

/** How many role requests the recorder saw, per transport (the integration tests check it is non-zero). */
export const recorderStats = {
  http1: 0,
  http2: 0,
  fetch: 0,
  /** gRPC calls whose tag named another role than the async context at the stream's creation. */
  grpcContextDisagreements: 0,
};

/** Receive every recorded request from now on; the returned function stops it. Installs the recorder once. */
export function onRecorded(listener: Listener): () => void {
  installRecorder();
  listeners.add(listener);
  return () => {
    listeners.delete(listener);
  };
}

/** Subscribe to the channels and tag gRPC calls; idempotent, process-wide. */
export function installRecorder(): void {
  if (installed) return;
  installed = true;
  tagGrpcCalls();
  dc.subscribe('http.client.request.created', onHttpCreated as (m: unknown) => void);
  dc.subscribe('http.client.request.start', onHttpStart as (m: unknown) => void);
  dc.subscribe('http2.client.stream.created', onHttp2Created as (m: unknown) => void);
  dc.subscribe('undici:request:create', onUndiciCreate as (m: unknown) => void);
}

function emit(wire: WireRequest): void {
  let classified: Classified;
  try {
    classified = classify(wire);
  } catch (error) {
    // A classifier bug must fail the run visibly, not vanish inside a diagnostics channel.
    const cloud: Cloud | undefined = isAws(wire) ? 'aws' : isAzure(wire) ? 'azure' : isGcp(wire) ? 'gcp' : undefined;
    const why = `the classifier failed on it: ${error instanceof Error ? error.message : String(error)}`;
    classified = cloud === undefined ? { kind: 'not-cloud' } : { kind: 'unrecognised', cloud, why };
  }
  recorderStats[wire.transport]++;
  for (const l of listeners) l({ wire, classified });
}

function joinHeaders(headers: OutgoingHttpHeaders | Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || value === null) continue;
    out[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return out;
}

/** Keeps a request's body chunks, once it is known to be needed, up to {@link MAX_BODY}. */
class BodyCapture {
  readonly #chunks: Buffer[] = [];
  #size = 0;
  complete = true;
  #wanted: boolean | undefined;

  constructor(private readonly decide: () => boolean) {}

  keep(chunk: unknown, encoding?: unknown): void {
    this.#wanted ??= this.decide();
    if (!this.#wanted || !this.complete || chunk === undefined || chunk === null || typeof chunk === 'function') return;
    const buffer =
      typeof chunk === 'string'
        ? Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8')
        : chunk instanceof Uint8Array
          ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
          : undefined;
    if (buffer === undefined) return;
    if (this.#size + buffer.length > MAX_BODY) {
      this.complete = false;
      this.#chunks.length = 0;
      return;
    }
    this.#chunks.push(Buffer.from(buffer)); // a copy: a stream may reuse its buffer
    this.#size += buffer.length;
  }

  body(): Buffer {
    return Buffer.concat(this.#chunks);
  }
}

// ---------------------------------------------------------------- node:http

interface HttpCapture {
  readonly role: FunctionRole;
  readonly body: BodyCapture;
}
const httpRequests = new WeakMap<ClientRequest, HttpCapture>();

function onHttpCreated({ request }: { request: ClientRequest }): void {
  try {
    const role = currentRole();
    if (role === undefined) return;
    const body = new BodyCapture(() => needsBody(request.method, request.path, joinHeaders(request.getHeaders())));
    httpRequests.set(request, { role, body });
    // end(chunk) writes through the internal write, not this.write: each chunk is kept once.
    const write = request.write;
    const end = request.end;
    request.write = function (this: ClientRequest, chunk: unknown, ...rest: unknown[]) {
      body.keep(chunk, rest[0]);
      return (write as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
    } as ClientRequest['write'];
    request.end = function (this: ClientRequest, chunk?: unknown, ...rest: unknown[]) {
      body.keep(chunk, rest[0]);
      return (end as (...a: unknown[]) => ClientRequest).call(this, chunk, ...rest);
    } as ClientRequest['end'];
  } catch (error) {
    reportInternal(error);
  }
}

function onHttpStart({ request }: { request: ClientRequest }): void {
  try {
    const capture = httpRequests.get(request);
    if (capture === undefined) return;
    httpRequests.delete(request);
    const headers = joinHeaders(request.getHeaders());
    emit({
      transport: 'http1',
      role: capture.role,
      roleFrom: 'context',
      method: request.method,
      authority: headers.host ?? request.host,
      path: request.path,
      headers,
      body: capture.body.body(),
      bodyComplete: capture.body.complete,
    });
  } catch (error) {
    reportInternal(error);
  }
}

// ---------------------------------------------------------------- node:http2 (gRPC)

function isRole(value: unknown): value is FunctionRole {
  return typeof value === 'string' && (FUNCTION_ROLES as readonly string[]).includes(value);
}

function onHttp2Created({ stream, headers }: { stream: ClientHttp2Stream; headers: Record<string, unknown> }): void {
  try {
    // grpc-js hands metadata values to node:http2 as arrays.
    const raw = headers[ROLE_METADATA_KEY];
    const tagged: unknown = Array.isArray(raw) ? raw[0] : raw;
    const fromContext = currentRole();
    const role = isRole(tagged) ? tagged : fromContext;
    if (role === undefined) return;
    if (isRole(tagged) && fromContext !== undefined && fromContext !== tagged) recorderStats.grpcContextDisagreements++;
    const all = joinHeaders(headers);
    const base = {
      transport: 'http2' as const,
      role,
      roleFrom: isRole(tagged) ? ('grpc-tag' as const) : ('context' as const),
      method: all[':method'] ?? 'POST',
      authority: all[':authority'] ?? '',
      path: all[':path'] ?? '',
      headers: all,
    };
    const grpc = (all['content-type'] ?? '').startsWith('application/grpc');
    const body = new BodyCapture(() => grpc || needsBody(base.method, base.path, all));
    let sent = 0;
    let first: Buffer | undefined;
    // Each gRPC message is one framed write (1 flag byte, 4 length bytes, the message): one request per message.
    const drain = () => {
      if (!grpc) return;
      let pending = body.body().subarray(sent);
      while (pending.length >= 5) {
        const length = pending.readUInt32BE(1);
        if (pending.length < 5 + length) break;
        const message = Buffer.from(pending.subarray(5, 5 + length));
        first ??= message;
        emit({ ...base, body: message, bodyComplete: pending[0] === 0, firstMessage: first });
        sent += 5 + length;
        pending = pending.subarray(5 + length);
      }
    };
    const write = stream.write;
    const end = stream.end;
    stream.write = function (this: ClientHttp2Stream, chunk: unknown, ...rest: unknown[]) {
      body.keep(chunk, rest[0]);
      drain();
      return (write as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
    } as ClientHttp2Stream['write'];
    stream.end = function (this: ClientHttp2Stream, chunk?: unknown, ...rest: unknown[]) {
      body.keep(chunk, rest[0]);
      drain();
      // A non-gRPC HTTP/2 request is one request, whole at its end.
      if (!grpc) emit({ ...base, body: body.body(), bodyComplete: body.complete });
      return (end as (...a: unknown[]) => ClientHttp2Stream).call(this, chunk, ...rest);
    } as ClientHttp2Stream['end'];
  } catch (error) {
    reportInternal(error);
  }
}

// ---------------------------------------------------------------- fetch (undici)

interface UndiciRequest {
  readonly origin: string | URL;
  readonly method: string;
  readonly path: string;
  readonly headers: string | readonly string[] | Record<string, string>;
  readonly body?: unknown;
}

function undiciHeaders(headers: UndiciRequest['headers']): Record<string, string> {
  if (typeof headers === 'string') {
    const out: Record<string, string> = {};
    for (const line of headers.split('\r\n')) {
      const colon = line.indexOf(':');
      if (colon > 0) out[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    return out;
  }
  if (Array.isArray(headers)) {
    const out: Record<string, string> = {};
    for (let i = 0; i + 1 < headers.length; i += 2) out[String(headers[i]).toLowerCase()] = String(headers[i + 1]);
    return out;
  }
  return joinHeaders(headers as Record<string, string>);
}

function onUndiciCreate({ request }: { request: UndiciRequest }): void {
  try {
    const role = currentRole();
    if (role === undefined) return;
    const headers = undiciHeaders(request.headers);
    const body = new BodyCapture(() => needsBody(request.method, request.path, headers));
    body.keep(request.body);
    const origin = new URL(String(request.origin));
    emit({
      transport: 'fetch',
      role,
      roleFrom: 'context',
      method: request.method,
      authority: headers.host ?? origin.host,
      path: request.path,
      headers,
      body: body.body(),
      // A streamed fetch body is not read here: a classifier that needs it refuses rather than guesses.
      bodyComplete:
        body.complete &&
        (request.body === null || request.body === undefined || typeof request.body === 'string' || request.body instanceof Uint8Array),
    });
  } catch (error) {
    reportInternal(error);
  }
}

// ---------------------------------------------------------------- gRPC role tag

interface GrpcCall {
  start(metadata: { set(key: string, value: string): void }, listener: unknown): void;
}
interface GrpcChannelPrototype {
  createCall(...args: unknown[]): GrpcCall;
}

const taggedPrototypes = new WeakSet<object>();

/**
 * Make every gRPC call carry its caller's role as metadata: `Channel.prototype.createCall` is called
 * synchronously by the client's `make*Request`, in the caller's async context, before any queueing for a
 * connection. Patched on each copy of `@grpc/grpc-js` the Google SDKs load (one today).
 */
export function tagGrpcCalls(): void {
  const require = createRequire(import.meta.url);
  for (const sdk of ['@google-cloud/firestore', '@google-cloud/pubsub']) {
    const grpc = createRequire(require.resolve(sdk))('@grpc/grpc-js') as { Channel: { prototype: GrpcChannelPrototype } };
    const proto = grpc.Channel.prototype;
    if (taggedPrototypes.has(proto)) continue;
    taggedPrototypes.add(proto);
    const createCall = proto.createCall;
    proto.createCall = function (this: unknown, ...args: unknown[]): GrpcCall {
      const call = createCall.apply(this, args);
      const role = currentRole();
      if (role === undefined) return call;
      const start = call.start.bind(call);
      call.start = (metadata, listener) => {
        metadata.set(ROLE_METADATA_KEY, role);
        start(metadata, listener);
      };
      return call;
    };
  }
}

/** The recorder must never throw into an SDK's request path; its own failure is printed and counted. */
export const recorderErrors: string[] = [];
function reportInternal(error: unknown): void {
  const line = `[iam:recorder] internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`;
  recorderErrors.push(line);
  process.stderr.write(`${line}\n`);
}
