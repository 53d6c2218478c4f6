import diagnostics from 'node:diagnostics_channel';

/**
 * Requests that actually left this process, by destination: what a "round
 * trip" costs on a cloud, as opposed to a call of a port (an adapter may
 * answer one port call with two requests, e.g. a refused create followed by
 * a read of the row that refused it).
 *
 * HTTP requests are counted from Node's diagnostics channels (the AWS SDK and
 * the Azure SDK use node:http; fetch-based clients go through undici), every
 * attempt of a retry included. gRPC calls (Firestore) are counted by the
 * client's call invocation hook, see {@link WireCounter.grpcHook}.
 */
export class WireCounter {
  readonly #counts = new Map<string, number>();
  readonly #routes: { host: string; fragment: string; label: string }[] = [];
  readonly #onHttp = (message: unknown) => {
    const request = (message as { request?: { getHeader?(name: string): unknown; host?: string; path?: string } }).request;
    const host = request?.getHeader?.('host');
    this.#seen(typeof host === 'string' ? host : (request?.host ?? 'unknown'), request?.path ?? '');
  };
  readonly #onUndici = (message: unknown) => {
    const request = (message as { request?: { origin?: string; path?: string } }).request;
    this.#seen(request?.origin ? new URL(request.origin).host : 'unknown', request?.path ?? '');
  };

  constructor() {
    diagnostics.subscribe('http.client.request.start', this.#onHttp);
    diagnostics.subscribe('undici:request:create', this.#onUndici);
  }

  /** Requests sent to `target` (`host:port`, or a name given to {@link bump}). */
  count(target: string): number {
    return this.#counts.get(target) ?? 0;
  }

  /** Requests sent to any of `targets`. */
  total(targets: readonly string[]): number {
    return targets.reduce((n, t) => n + this.count(t), 0);
  }

  /**
   * Also count requests to `host` whose path contains `fragment` under
   * `label`: how requests to one bucket are told from another's on the same
   * endpoint (bucket and container names are in the path, path-style).
   */
  route(host: string, fragment: string, label: string): void {
    this.#routes.push({ host, fragment, label });
  }

  #seen(host: string, path: string): void {
    this.bump(host);
    for (const r of this.#routes) if (r.host === host && path.includes(r.fragment)) this.bump(r.label);
  }

  bump(target: string): void {
    this.#counts.set(target, this.count(target) + 1);
  }

  /**
   * A grpc-js `callInvocationTransformer` (a client option that sees every
   * call, each retry included) that counts calls under `target`.
   */
  grpcHook(target: string): (properties: unknown) => unknown {
    return (properties) => {
      this.bump(target);
      return properties;
    };
  }

  close(): void {
    diagnostics.unsubscribe('http.client.request.start', this.#onHttp);
    diagnostics.unsubscribe('undici:request:create', this.#onUndici);
  }
}

/** `host:port` of an endpoint URL (`http://127.0.0.1:1234/...`) or a bare `host:port`. */
export function hostOf(endpoint: string): string {
  return endpoint.includes('://') ? new URL(endpoint).host : endpoint;
}
