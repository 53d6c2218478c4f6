import { connect, createServer, type Server, type Socket } from 'node:net';

/** One armed fault: the session it fires in carries `marker`; `beforeCommit` cuts before the COMMIT, else after it. */
interface Shot {
  readonly marker: Buffer;
  hits: number;
  readonly beforeCommit: boolean;
}

/**
 * A TCP proxy in front of PostgreSQL for the manifest and sink contracts: the
 * fault proxy of test/support/fault-proxy.ts speaks HTTP, and `pg` speaks the
 * PostgreSQL wire protocol. It records the SQL text every session sends (the
 * SQL guard reads it) and can lose the answer to one COMMIT: the COMMIT reaches
 * the server and commits, and the connection is cut before its answer, which
 * is what a network failure at that instant looks like to the driver.
 */
export class PgFaultProxy {
  /** SQL statements seen, in order (simple-query and Parse messages). */
  readonly statements: string[] = [];
  private armed: Shot[] = [];
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(target: { readonly host: string; readonly port: number }): Promise<PgFaultProxy> {
    let proxy: PgFaultProxy | undefined;
    const server = createServer((client) => proxy?.session(client, target));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    proxy = new PgFaultProxy(server, typeof address === 'object' && address ? address.port : 0);
    return proxy;
  }

  /** The target's URL with this proxy's port instead. */
  urlFor(targetUrl: string): string {
    const u = new URL(targetUrl);
    u.port = String(this.port);
    return u.toString();
  }

  /**
   * In the next session whose transaction carries `marker` (e.g. the runId of a
   * register), let the COMMIT through and cut the connection before its answer.
   */
  loseNextCommitAnswer(marker: string): { readonly hits: number } {
    const shot = { marker: Buffer.from(marker), hits: 0, beforeCommit: false };
    this.armed.push(shot);
    return shot;
  }

  /**
   * In the next session whose transaction carries `marker`, cut the connection instead of sending its
   * COMMIT: the server never sees it and rolls the transaction back, which is what a process that dies
   * between its statements and its COMMIT leaves.
   */
  cutBeforeNextCommit(marker: string): { readonly hits: number } {
    const shot = { marker: Buffer.from(marker), hits: 0, beforeCommit: true };
    this.armed.push(shot);
    return shot;
  }

  /** Take back a shot that never fired (its transaction never came), so that it cannot fire in a later session. */
  disarm(shot: { readonly hits: number }): void {
    this.armed = this.armed.filter((a) => a !== shot);
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private session(client: Socket, target: { readonly host: string; readonly port: number }): void {
    const upstream = connect(target.port, target.host);
    this.sockets.add(client);
    this.sockets.add(upstream);
    const close = () => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
    let shot: Shot | undefined;
    let cutOnAnswer = false;
    client.on('data', (chunk: Buffer) => {
      this.record(chunk);
      if (!shot) {
        const i = this.armed.findIndex((a) => chunk.includes(a.marker));
        if (i >= 0) shot = this.armed.splice(i, 1)[0];
      }
      if (shot && /\bCOMMIT\b/.test(chunk.toString('latin1'))) {
        shot.hits++;
        const before = shot.beforeCommit;
        shot = undefined;
        if (before) {
          close(); // the COMMIT never leaves: the server sees the session end inside its transaction
          return;
        }
        cutOnAnswer = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (cutOnAnswer) {
        close(); // the server committed; its answer never reaches the driver
        return;
      }
      client.write(chunk);
    });
  }

  /** SQL text in a client chunk: Query and Parse messages carry it NUL-terminated (a statement split across chunks is rare at these sizes). */
  private record(chunk: Buffer): void {
    for (const m of chunk.toString('utf8').matchAll(/\b(?:INSERT|UPDATE|DELETE|SELECT|CREATE|BEGIN|COMMIT|ROLLBACK)\b[^\0]*/g)) {
      this.statements.push(m[0].replace(/\s+/g, ' ').trim());
    }
  }
}
