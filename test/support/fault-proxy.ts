import { randomBytes } from 'node:crypto';
import {
  Agent,
  createServer as createHttp1Server,
  request as http1Request,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import {
  type ClientHttp2Session,
  createServer as createHttp2Server,
  type IncomingHttpHeaders as Http2Headers,
  type Http2Server,
  connect as http2Connect,
  type OutgoingHttpHeaders,
  type ServerHttp2Stream,
} from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';

/**
 * A fault proxy on 127.0.0.1 between an SDK and its emulator, so a test can make
 * the network fail the way it fails in production and let the SDK's OWN retry
 * logic run (the point: an adapter that a lost answer or an SDK retry can
 * surprise is wrong at the adapter, and only a real client meets it).
 *
 * Two wire modes:
 * - `http1` (the REST stores: DynamoDB Local, moto S3/SQS, fake-gcs-server,
 *   Azurite blob/table/queue). The Host header is forwarded as the client sent
 *   it, so SigV4 and SharedKey signatures still verify.
 * - `http2` (Firestore's gRPC on Google's emulator): a real HTTP/2 proxy with
 *   node:http2, chosen over a gRPC interceptor because an interceptor runs
 *   inside the client, above gax's retry loop and grpc-js's own retry, so it
 *   could not show what those layers do with a dropped connection; the proxy
 *   sits on the wire, below all of them. Each request is buffered until the
 *   client ends its half of the stream, which every unary and
 *   server-streaming call does (Commit, BatchGetDocuments, RunQuery: all the
 *   claim store uses); bidirectional streams (Listen, Write) are not supported.
 *
 * Actions a rule can take on a matching request:
 * - `drop-response`: forward the request, let the store apply it and answer in
 *   full, then destroy the client's socket (http2: the whole session) instead of
 *   relaying the answer. The SDK sees ECONNRESET / UNAVAILABLE and retries.
 * - `drop-request`: destroy the client's socket without forwarding (the request
 *   never landed).
 * - `respond`: answer with a canned response (the store's own error shapes are in
 *   {@link storeFaults}) without forwarding.
 * - `corrupt` ({@link CorruptBody}): damage the request body on the way, as a faulty
 *   NIC or proxy would, headers (and so the checksums the SDK computed) untouched, and
 *   forward it, so the store's own digest check answers; or, for an emulator that
 *   checks no digest (moto), answer the cloud's documented refusal instead of forwarding.
 *
 * Rules match on method, path, headers and body (strings match as substrings,
 * RegExps as patterns, or a predicate over the recorded request), fire `times`
 * times (default once; `Infinity` for always) and, with `probability`, only on a
 * draw from a seeded RNG (mulberry32), so a soak run is repeatable from its seed.
 * The first rule with shots left that matches wins. Every request is recorded
 * (method, path, headers, body, the fault applied, the upstream status) for guard
 * tests that inspect what an SDK actually sent.
 *
 * @example
 * const proxy = await FaultProxy.start({ target: endpoints.dynamodb });
 * const ddb = new DynamoDBClient({ endpoint: proxy.url, region, credentials });
 * // The claim lands, its answer is lost, the SDK retries:
 * const lost = proxy.add({ match: { header: { 'x-amz-target': 'DynamoDB_20120810.PutItem' } }, action: 'drop-response' });
 * await new DynamoDbClaimStore(ddb, table).claim(request);
 * expect(lost.hits).toBe(1);
 * proxy.add({ match: { method: 'PUT' }, action: storeFaults.s3SlowDown(), times: 2 });
 * proxy.requests.filter((r) => r.method === 'DELETE'); // what the SDK sent
 * await proxy.stop();
 *
 * // Firestore (gRPC over HTTP/2):
 * const fsProxy = await FaultProxy.start({ target: `http://${endpoints.firestore}`, protocol: 'http2' });
 * const db = new Firestore({ projectId, host: fsProxy.host, ssl: false, preferRest: false });
 * fsProxy.add({ match: { path: '/google.firestore.v1.Firestore/Commit' }, action: storeFaults.grpc(10, 'Transaction aborted') });
 */
export class FaultProxy {
  /** Every request seen, in arrival order. */
  readonly requests: RecordedRequest[] = [];
  private readonly rules: ActiveRule[] = [];
  private readonly random: () => number;

  private constructor(
    private readonly server: Server | Http2Server,
    private readonly closeUpstream: () => void,
    private readonly sockets: Set<Socket>,
    /** The proxy's base URL with the target's path kept, e.g. `http://127.0.0.1:41234/devstoreaccount1`. */
    readonly url: string,
    /** `127.0.0.1:port` of the proxy, for clients that take a host (Firestore). */
    readonly host: string,
    seed: number,
  ) {
    this.random = mulberry32(seed);
  }

  /**
   * Start a proxy in front of `target` (an emulator's base URL; any path it has
   * is kept in {@link url}, so Azurite's `http://127.0.0.1:p/devstoreaccount1` works).
   */
  static async start(options: FaultProxyOptions): Promise<FaultProxy> {
    const target = new URL(options.target);
    const protocol = options.protocol ?? 'http1';
    const seed = options.seed ?? 0x7e55e7a;
    const sockets = new Set<Socket>();
    let proxy: FaultProxy | undefined;
    const self = (): FaultProxy => {
      if (!proxy) throw new Error('fault proxy used before it started');
      return proxy;
    };
    let server: Server | Http2Server;
    let closeUpstream: () => void;
    if (protocol === 'http1') {
      const agent = new Agent({ keepAlive: true });
      closeUpstream = () => agent.destroy();
      server = createHttp1Server((req, res) => void self().onHttp1(req, res, target, agent));
    } else {
      const upstream = new LazySession(target.origin);
      closeUpstream = () => upstream.close();
      server = createHttp2Server();
      server.on('stream', (stream, headers) => void self().onHttp2(stream, headers, upstream));
    }
    server.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    const path = target.pathname === '/' ? '' : target.pathname.replace(/\/$/, '');
    proxy = new FaultProxy(server, closeUpstream, sockets, `http://127.0.0.1:${port}${path}`, `127.0.0.1:${port}`, seed);
    return proxy;
  }

  /** Add a rule; the handle counts how often it fired and can remove it. */
  add(rule: FaultRule): FaultRuleHandle {
    const active: ActiveRule = { rule, left: rule.times ?? 1, hits: 0 };
    this.rules.push(active);
    return {
      get hits() {
        return active.hits;
      },
      remove: () => {
        const i = this.rules.indexOf(active);
        if (i >= 0) this.rules.splice(i, 1);
      },
    };
  }

  /** Remove every rule and forget the recorded requests. */
  reset(): void {
    this.rules.length = 0;
    this.requests.length = 0;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    this.closeUpstream();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** The first rule with shots left that matches and whose probability draw (if any) says yes; consumes one shot. */
  private pick(request: RecordedRequest): ActiveRule | undefined {
    for (const active of this.rules) {
      if (active.left <= 0 || !matches(active.rule.match, request)) continue;
      if (active.rule.probability !== undefined && this.random() >= active.rule.probability) continue;
      active.left--;
      active.hits++;
      return active;
    }
    return undefined;
  }

  private async onHttp1(req: IncomingMessage, res: ServerResponse, target: URL, agent: Agent): Promise<void> {
    const body = await readAll(req);
    const recorded: RecordedRequest = {
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      headers: { ...req.headers },
      body,
      text: body.toString('utf8'),
    };
    this.requests.push(recorded);
    const fired = this.pick(recorded);
    const action = fired?.rule.action;
    if (fired) recorded.fault = describeAction(action);
    if (action === 'drop-request') {
      req.socket.destroy();
      return;
    }
    const canned = typeof action === 'object' ? ('corrupt' in action ? action.answer : action) : undefined;
    if (canned) {
      recorded.status = canned.status;
      res.writeHead(canned.status, { 'content-length': Buffer.byteLength(canned.body), ...canned.headers });
      res.end(canned.body);
      return;
    }
    const sent = typeof action === 'object' && 'corrupt' in action ? action.corrupt(Buffer.from(body)) : body;
    const upstream = http1Request({
      host: target.hostname,
      port: target.port,
      method: req.method,
      path: req.url,
      // The same headers, so every checksum and signature the client computed now names other bytes.
      headers: sent === body ? req.headers : { ...req.headers, 'content-length': String(sent.byteLength) },
      agent,
    });
    upstream.on('error', (error) => {
      recorded.status = 502;
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`fault proxy: upstream failed: ${error.message}`);
    });
    upstream.on('response', async (answer) => {
      const answerBody = await readAll(answer);
      recorded.status = answer.statusCode;
      if (action === 'drop-response') {
        // The store applied the request and answered in full; the client never hears it.
        req.socket.destroy();
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, stripHopByHop(answer.headers));
      res.end(answerBody);
    });
    upstream.end(sent);
  }

  /**
   * Cut the TCP connection under an HTTP/2 stream. node:http2 forbids touching
   * `session.socket`, so the raw socket is found by its client port among the
   * connections the server accepted.
   */
  private cut(stream: ServerHttp2Stream): void {
    const port = stream.session?.socket.remotePort;
    for (const socket of this.sockets) if (socket.remotePort === port) socket.destroy();
  }

  private async onHttp2(stream: ServerHttp2Stream, headers: Http2Headers, upstream: LazySession): Promise<void> {
    stream.on('error', () => {}); // a client that went away; nothing to tell it
    const body = await readAll(stream);
    const recorded: RecordedRequest = {
      method: String(headers[':method'] ?? 'POST'),
      path: String(headers[':path'] ?? '/'),
      headers: Object.fromEntries(Object.entries(headers).filter(([k]) => !k.startsWith(':'))) as IncomingHttpHeaders,
      body,
      text: body.toString('latin1'),
    };
    this.requests.push(recorded);
    const fired = this.pick(recorded);
    const action = fired?.rule.action;
    if (fired) recorded.fault = describeAction(action);
    if (action === 'drop-request') {
      this.cut(stream);
      return;
    }
    const canned = typeof action === 'object' ? ('corrupt' in action ? action.answer : action) : undefined;
    if (canned) {
      recorded.status = canned.status;
      stream.respond({ ':status': canned.status, ...canned.headers }, { endStream: canned.body.length === 0 });
      if (canned.body.length > 0) stream.end(canned.body);
      return;
    }
    const sent = typeof action === 'object' && 'corrupt' in action ? action.corrupt(Buffer.from(body)) : body;
    let out: ReturnType<ClientHttp2Session['request']>;
    try {
      out = upstream
        .session()
        .request(
          Object.fromEntries(Object.entries(headers).filter(([k]) => k !== ':authority' && k !== 'connection')) as OutgoingHttpHeaders,
        );
    } catch (error) {
      stream.close();
      throw error;
    }
    out.on('error', () => stream.session?.destroy());
    out.end(sent);
    const [answerHeaders, answerBody, trailers] = await new Promise<[Http2Headers, Buffer, Http2Headers | undefined]>((resolve) => {
      let got: Http2Headers = {};
      let tail: Http2Headers | undefined;
      const chunks: Buffer[] = [];
      out.on('response', (h) => {
        got = h;
      });
      out.on('data', (c: Buffer) => chunks.push(c));
      out.on('trailers', (t) => {
        tail = t;
      });
      out.on('close', () => resolve([got, Buffer.concat(chunks), tail]));
    });
    recorded.status = Number(answerHeaders[':status'] ?? 0);
    if (action === 'drop-response') {
      // "End the session after the response": the emulator committed, the client's connection dies
      // unanswered. The TCP socket is cut (no GOAWAY, no RST_STREAM), as a lost network path looks.
      this.cut(stream);
      return;
    }
    if (stream.destroyed) return;
    const respondHeaders = Object.fromEntries(Object.entries(answerHeaders).filter(([k]) => k === ':status' || !k.startsWith(':')));
    const trailing = trailers ? Object.fromEntries(Object.entries(trailers).filter(([k]) => !k.startsWith(':'))) : undefined;
    if (!trailing && answerBody.length === 0) {
      // A gRPC "trailers-only" answer (every error status): the status travels in a HEADERS frame that
      // ends the stream, and grpc-js reads it as trailers only when END_STREAM is on that frame.
      stream.respond(respondHeaders as OutgoingHttpHeaders, { endStream: true });
      return;
    }
    stream.respond(respondHeaders as OutgoingHttpHeaders, { waitForTrailers: trailing !== undefined, endStream: false });
    if (trailing) stream.once('wantTrailers', () => stream.sendTrailers(trailing as OutgoingHttpHeaders));
    stream.end(answerBody);
  }
}

export interface FaultProxyOptions {
  /** The emulator's base URL, e.g. `http://127.0.0.1:8000` (or `http://host:port` of a gRPC server for `http2`). */
  readonly target: string;
  /** `http1` (default) for REST stores, `http2` for gRPC (Firestore). */
  readonly protocol?: 'http1' | 'http2';
  /** Seed of the RNG behind `probability` rules. */
  readonly seed?: number;
}

/** A request as the proxy saw it. */
export interface RecordedRequest {
  readonly method: string;
  /** Path and query string, as sent. */
  readonly path: string;
  /** Lower-case header names (http2: without pseudo-headers). */
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** The body as text (UTF-8; latin1 for gRPC frames, so byte offsets survive). */
  readonly text: string;
  /** The fault applied to it, if any: `drop-response`, `drop-request`, `respond <status>` or `corrupt-body` (`corrupt-body, respond <status>`). */
  fault?: string | undefined;
  /** The status the client got or, for `drop-response`, the one the store answered and the client never saw. */
  status?: number | undefined;
}

type TextMatch = string | RegExp;

export interface RequestMatch {
  readonly method?: TextMatch;
  readonly path?: TextMatch;
  /** Every named header must match (names lower-case). */
  readonly header?: Readonly<Record<string, TextMatch>>;
  readonly body?: TextMatch;
  /** Anything else, over the recorded request. */
  readonly when?: (request: RecordedRequest) => boolean;
}

export interface CannedResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/**
 * Damage a request body in flight. `corrupt` gets a copy of the body as the client sent it and returns
 * the bytes to forward (see {@link corruptions}); the headers go unchanged (a changed length is
 * corrected, nothing else), so the client's checksums no longer match. With `answer`, the damaged
 * request is not forwarded and the canned answer stands in for a store that checks no digest.
 */
export interface CorruptBody {
  readonly corrupt: (body: Buffer) => Buffer;
  readonly answer?: CannedResponse | undefined;
}

export type FaultAction = 'drop-response' | 'drop-request' | CannedResponse | CorruptBody;

export interface FaultRule {
  /** Omitted: every request. */
  readonly match?: RequestMatch;
  readonly action: FaultAction;
  /** How many times it fires (default 1; `Infinity`: always). */
  readonly times?: number;
  /** Fire on a matching request with this probability (seeded draw), for soak runs. */
  readonly probability?: number;
}

export interface FaultRuleHandle {
  /** How many requests this rule has faulted so far. */
  readonly hits: number;
  remove(): void;
}

/**
 * Transient errors in each store's real wire shape, answered without forwarding.
 * Each is the answer the store documents for throttling or overload, so the SDK's
 * classifier (and ours) sees exactly what production sends.
 */
export const storeFaults = {
  /** DynamoDB throttling: 400, AWS JSON 1.0 `__type` (the SDK retries it as a throttling error). */
  dynamoDbThrottled(): CannedResponse {
    return {
      status: 400,
      headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-requestid': requestId() },
      body: JSON.stringify({
        __type: 'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException',
        message:
          'The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.',
      }),
    };
  },
  /** S3 overload: 503 SlowDown, the REST XML error body. */
  s3SlowDown(): CannedResponse {
    const id = requestId();
    return {
      status: 503,
      headers: { 'content-type': 'application/xml', 'x-amz-request-id': id },
      body: `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>${id}</RequestId><HostId>${id}</HostId></Error>`,
    };
  },
  /**
   * S3's refusal of a body that does not hash to its `x-amz-checksum-sha256` (400 BadDigest, nothing
   * stored), for moto, which stores such a body (docs/emulator-fidelity.md).
   */
  s3BadDigest(): CannedResponse {
    const id = requestId();
    return {
      status: 400,
      headers: { 'content-type': 'application/xml', 'x-amz-request-id': id },
      body: `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>BadDigest</Code><Message>The SHA256 you specified did not match the calculated checksum.</Message><RequestId>${id}</RequestId><HostId>${id}</HostId></Error>`,
    };
  },
  /** GCS JSON API: 429 rateLimitExceeded or 503 backendError. */
  gcs(status: 429 | 503 = 503): CannedResponse {
    const [reason, domain, message] =
      status === 429
        ? [
            'rateLimitExceeded',
            'usageLimits',
            'The rate of change requests to the object exceeds the rate limit. Please reduce the rate of create, update, and delete requests.',
          ]
        : ['backendError', 'global', 'Backend Error'];
    return {
      status,
      headers: { 'content-type': 'application/json; charset=UTF-8' },
      body: JSON.stringify({ error: { code: status, message, errors: [{ message, domain, reason }] } }),
    };
  },
  /** Azure Storage overload: 503 ServerBusy; XML for Blob and Queue, OData JSON for Table. */
  azureServerBusy(service: 'blob' | 'queue' | 'table' = 'blob'): CannedResponse {
    const id = requestId();
    const message = `The server is busy.\nRequestId:${id}\nTime:${new Date().toISOString()}`;
    const headers = { 'x-ms-error-code': 'ServerBusy', 'x-ms-request-id': id, 'x-ms-version': '2021-12-02' };
    return service === 'table'
      ? {
          status: 503,
          headers: { ...headers, 'content-type': 'application/json;odata=minimalmetadata;streaming=true;charset=utf-8' },
          body: JSON.stringify({ 'odata.error': { code: 'ServerBusy', message: { lang: 'en-US', value: message } } }),
        }
      : {
          status: 503,
          headers: { ...headers, 'content-type': 'application/xml' },
          body: `<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>${message}</Message></Error>`,
        };
  },
  /**
   * Blob Storage's refusal of a Put Blob whose body does not hash to its Content-MD5 (400 Md5Mismatch, nothing
   * stored), for Azurite, which checks but answers 400 InvalidOperation (docs/emulator-fidelity.md).
   */
  azureMd5Mismatch(): CannedResponse {
    const id = requestId();
    const message = `The MD5 value specified in the request did not match with the MD5 value calculated by the server.\nRequestId:${id}\nTime:${new Date().toISOString()}`;
    return {
      status: 400,
      headers: { 'content-type': 'application/xml', 'x-ms-error-code': 'Md5Mismatch', 'x-ms-request-id': id, 'x-ms-version': '2021-12-02' },
      body: `<?xml version="1.0" encoding="utf-8"?><Error><Code>Md5Mismatch</Code><Message>${message}</Message></Error>`,
    };
  },
  /** A gRPC error as a trailers-only answer (http2 mode), e.g. `grpc(10, 'Transaction aborted')` for ABORTED. */
  grpc(code: number, message: string): CannedResponse {
    return {
      status: 200,
      headers: { 'content-type': 'application/grpc', 'grpc-status': String(code), 'grpc-message': encodeURIComponent(message) },
      body: '',
    };
  },
} as const;

interface ActiveRule {
  readonly rule: FaultRule;
  left: number;
  hits: number;
}

function describeAction(action: FaultAction | undefined): string | undefined {
  if (action === undefined) return undefined;
  if (typeof action === 'string') return action;
  if ('corrupt' in action) return action.answer ? `corrupt-body, respond ${action.answer.status}` : 'corrupt-body';
  return `respond ${action.status}`;
}

/** Ways to damage a body for a {@link CorruptBody} rule. */
export const corruptions = {
  /**
   * Invert the byte in the middle of the body. The payload dominates every write the object stores send
   * (a raw PutObject or Put Blob body; the media part of a GCS multipart upload, whose JSON part is a few
   * hundred bytes; the data of an aws-chunked body between its short chunk header and trailer), so the
   * middle byte is a payload byte and the framing stays parseable: the store reaches its digest check.
   */
  flipMiddleByte(body: Buffer): Buffer {
    if (body.byteLength === 0) throw new Error('fault proxy: cannot corrupt an empty body');
    const out = Buffer.from(body);
    const at = Math.floor(out.byteLength / 2);
    out[at] = (out[at] ?? 0) ^ 0xff;
    return out;
  },
} as const;

function textMatches(pattern: TextMatch | undefined, value: string | undefined): boolean {
  if (pattern === undefined) return true;
  if (value === undefined) return false;
  return typeof pattern === 'string' ? value.includes(pattern) : pattern.test(value);
}

function matches(match: RequestMatch | undefined, request: RecordedRequest): boolean {
  if (!match) return true;
  if (
    match.method !== undefined &&
    !(typeof match.method === 'string' ? request.method === match.method : match.method.test(request.method))
  )
    return false;
  if (!textMatches(match.path, request.path) || !textMatches(match.body, request.text)) return false;
  for (const [name, pattern] of Object.entries(match.header ?? {})) {
    const value = request.headers[name.toLowerCase()];
    if (!textMatches(pattern, Array.isArray(value) ? value.join(', ') : value)) return false;
  }
  return match.when ? match.when(request) : true;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection']);

function stripHopByHop(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  // The body is relayed whole, so the length is known and chunked framing must not be claimed.
  return Object.fromEntries(Object.entries(headers).filter(([k]) => !HOP_BY_HOP.has(k)));
}

function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    // A client that hung up mid-request: keep what arrived.
    stream.on('error', () => resolve(Buffer.concat(chunks)));
    stream.on('close', () => resolve(Buffer.concat(chunks)));
  });
}

const requestId = (): string => randomBytes(8).toString('hex').toUpperCase();

/** mulberry32: a tiny, fast, seedable PRNG; enough for fault draws that must be repeatable. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** One HTTP/2 client session to the upstream, reopened when it closed. */
class LazySession {
  private current: ClientHttp2Session | undefined;
  constructor(private readonly origin: string) {}
  session(): ClientHttp2Session {
    if (!this.current || this.current.closed || this.current.destroyed) {
      const s = http2Connect(this.origin);
      s.on('error', () => {});
      this.current = s;
    }
    return this.current;
  }
  close(): void {
    this.current?.destroy();
  }
}
