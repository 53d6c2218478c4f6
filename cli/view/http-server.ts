import { createReadStream } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, sep } from 'node:path';
import { validateObjectKey } from '../../shared/domain/object-key.js';
import type { ServedKeys } from './scene-view.js';
import type { ViewConfig } from './view-config.js';

/** The page's bundle: what cli/view/bundle.ts built. */
export interface PageAssets {
  readonly js: Uint8Array;
  readonly css: Uint8Array;
  /** A hash of both, their ETag. */
  readonly hash: string;
}

export interface ViewServerOptions {
  /** The folder object keys are paths under. */
  readonly root: string;
  readonly served: ServedKeys;
  readonly config: ViewConfig;
  readonly assets: PageAssets;
  /** 0 (the default): a free port the system picks. */
  readonly port?: number | undefined;
}

export interface ViewServer {
  /** `http://127.0.0.1:<port>/` */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/** Where the server listens, always: the loopback interface, never a public one. */
export const VIEW_HOST = '127.0.0.1';

const MEDIA_TYPES: Readonly<Record<string, string>> = {
  '.tif': 'image/tiff; application=geotiff; profile=cloud-optimized',
  '.tiff': 'image/tiff',
  '.json': 'application/json',
  '.pmtiles': 'application/vnd.pmtiles',
  '.png': 'image/png',
  '.webp': 'image/webp',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.vrt': 'application/xml',
};

/**
 * The page loads only from this server: its script, its styles, its objects. Inline styles are OpenLayers' own
 * (controls and overlays set `style` attributes); `blob:` and `data:` are the images it decodes tiles into.
 */
const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' blob: data:; " +
  "connect-src 'self'; worker-src 'self' blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/**
 * `tessera view`'s HTTP server, on 127.0.0.1 only. It answers
 * - `/` the page, `/assets/view.js` and `/assets/view.css` its bundle, `/view.json` the scene's {@link ViewConfig};
 * - `/o/<key>` an object of the scene, only when `served` lists the key or a prefix of it, after the key passed
 *   {@link validateObjectKey} (no `..`, no empty segment, no backslash): a path outside `root` is never opened.
 *   Objects are read in place with range requests (RFC 9110): `Accept-Ranges: bytes`, one range per request
 *   answered 206 with `Content-Range` (several ranges get the whole object, 200, as the RFC allows),
 *   416 past the end, `ETag` from the file's inode, size and mtime (outputs are written create-only and
 *   replaced by rename, so a new version is a new inode), `If-None-Match` 304, `If-Range`;
 * - GET and HEAD only (405 otherwise), and only for a `Host` of this server (421 otherwise), so a page of
 *   another site cannot read the outputs through a DNS name rebound to 127.0.0.1.
 */
export async function startViewServer(options: ViewServerOptions): Promise<ViewServer> {
  const page = Buffer.from(pageHtml(options.config.title));
  const configJson = Buffer.from(JSON.stringify(options.config));
  let port = 0;
  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) send(res, 500, 'text/plain; charset=utf-8', `internal error: ${(error as Error).message}\n`);
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'no-referrer');
    const host = req.headers.host ?? '';
    if (host !== `${VIEW_HOST}:${port}` && host !== `localhost:${port}`) {
      send(res, 421, 'text/plain; charset=utf-8', `this server answers http://${VIEW_HOST}:${port}/ only\n`);
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      send(res, 405, 'text/plain; charset=utf-8', 'GET and HEAD only\n');
      return;
    }
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (path === '/' || path === '/index.html') {
      res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
      return sendBuffer(req, res, page, 'text/html; charset=utf-8', `"page-${options.assets.hash}"`);
    }
    if (path === '/assets/view.js')
      return sendBuffer(req, res, options.assets.js, 'text/javascript; charset=utf-8', `"${options.assets.hash}-js"`);
    if (path === '/assets/view.css')
      return sendBuffer(req, res, options.assets.css, 'text/css; charset=utf-8', `"${options.assets.hash}-css"`);
    if (path === '/view.json') return sendBuffer(req, res, configJson, 'application/json', undefined);
    if (path.startsWith('/o/')) {
      const key = servedKey(path.slice(3), options.served);
      if (key === undefined) {
        send(res, 404, 'text/plain; charset=utf-8', 'not an object of this scene\n');
        return;
      }
      return sendObject(
        req,
        res,
        options.root,
        key,
        options.served.sparse.some((p) => key.startsWith(p)),
      );
    }
    send(res, 404, 'text/plain; charset=utf-8', 'not found\n');
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, VIEW_HOST, () => {
      server.off('error', reject);
      resolve();
    });
  });
  port = (server.address() as AddressInfo).port;
  return {
    url: `http://${VIEW_HOST}:${port}/`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * The object key of a `/o/` path, or undefined when the path does not decode to a valid key that `served` lists.
 * Percent-encoded slashes and dots decode before the check, so `%2e%2e` is refused as `..` is.
 */
export function servedKey(encoded: string, served: ServedKeys): string | undefined {
  let key: string;
  try {
    key = decodeURIComponent(encoded);
    validateObjectKey(key);
  } catch {
    return undefined;
  }
  if (served.exact.has(key) || served.prefixes.some((p) => key.startsWith(p))) return key;
  return undefined;
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' });
  res.end(body);
}

function sendBuffer(req: IncomingMessage, res: ServerResponse, body: Uint8Array, type: string, etag: string | undefined): void {
  if (etag !== undefined) {
    res.setHeader('ETag', etag);
    if (noneMatch(req, etag)) {
      res.writeHead(304, { 'Cache-Control': 'no-cache' });
      res.end();
      return;
    }
  }
  res.writeHead(200, { 'Content-Type': type, 'Content-Length': body.byteLength, 'Cache-Control': 'no-cache' });
  res.end(req.method === 'HEAD' ? undefined : body);
}

/** `If-None-Match`: `*` or a list holding `etag` (weak comparison, RFC 9110 13.1.2). */
function noneMatch(req: IncomingMessage, etag: string): boolean {
  const header = req.headers['if-none-match'];
  if (header === undefined) return false;
  if (header.trim() === '*') return true;
  const bare = etag.replace(/^W\//, '');
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === bare);
}

/** One `bytes=` range of a `size`-byte object: `[start, end]` inclusive, 'unsatisfiable', or undefined (serve it all). */
export function parseRange(header: string | undefined, size: number): readonly [number, number] | 'unsatisfiable' | undefined {
  if (header === undefined) return undefined;
  const m = /^bytes=\s*(\d*)-(\d*)\s*$/.exec(header);
  if (!m) return undefined; // several ranges, or another unit: the whole object (RFC 9110 14.2 lets a server ignore Range)
  const [, a = '', b = ''] = m;
  if (a === '' && b === '') return undefined;
  if (a === '') {
    const suffix = Number(b);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return [Math.max(0, size - suffix), size - 1];
  }
  const start = Number(a);
  const end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  if (start >= size) return 'unsatisfiable';
  if (end < start) return undefined; // invalid range-spec: ignored
  return [start, end];
}

async function sendObject(req: IncomingMessage, res: ServerResponse, root: string, key: string, sparse: boolean): Promise<void> {
  const path = join(root, ...key.split('/'));
  if (!path.startsWith(root + sep)) {
    send(res, 404, 'text/plain; charset=utf-8', 'not found\n');
    return;
  }
  let handle: FileHandle;
  try {
    handle = await open(path, 'r');
  } catch {
    if (sparse) {
      res.writeHead(204, { 'Cache-Control': 'no-cache' });
      res.end();
    } else send(res, 404, 'text/plain; charset=utf-8', 'no such object\n');
    return;
  }
  let streaming = false;
  try {
    // One descriptor for the stat and the read: the ETag names the very bytes sent, even if the key is replaced meanwhile.
    const stat = await handle.stat();
    if (!stat.isFile()) {
      send(res, 404, 'text/plain; charset=utf-8', 'no such object\n');
      return;
    }
    const etag = `"${stat.ino.toString(16)}-${stat.size.toString(16)}-${Math.floor(stat.mtimeMs).toString(16)}"`;
    const ext = key.slice(key.lastIndexOf('.')).toLowerCase();
    const headers: Record<string, string | number> = {
      'Content-Type': MEDIA_TYPES[ext] ?? 'application/octet-stream',
      'Accept-Ranges': 'bytes',
      ETag: etag,
      'Last-Modified': stat.mtime.toUTCString(),
      'Cache-Control': 'no-cache',
    };
    if (noneMatch(req, etag)) {
      res.writeHead(304, { ETag: etag, 'Cache-Control': 'no-cache', 'Accept-Ranges': 'bytes' });
      res.end();
      return;
    }
    const ifRange = req.headers['if-range'];
    const range = ifRange === undefined || ifRange === etag ? parseRange(req.headers.range, stat.size) : undefined;
    if (range === 'unsatisfiable') {
      res.writeHead(416, { ...headers, 'Content-Range': `bytes */${stat.size}`, 'Content-Length': 0 });
      res.end();
      return;
    }
    const [start, end] = range ?? [0, stat.size - 1];
    const length = stat.size === 0 ? 0 : end - start + 1;
    res.writeHead(range === undefined ? 200 : 206, {
      ...headers,
      'Content-Length': length,
      ...(range === undefined ? {} : { 'Content-Range': `bytes ${start}-${end}/${stat.size}` }),
    });
    if (req.method === 'HEAD' || length === 0) {
      res.end();
      return;
    }
    streaming = true;
    const stream = createReadStream('', { fd: handle, start, end, autoClose: true });
    stream.on('error', () => res.destroy());
    stream.pipe(res);
  } finally {
    if (!streaming) await handle.close();
  }
}

/** The page: the bundle's script and styles, and the elements it fills. */
function pageHtml(title: string): string {
  const esc = title.replace(/[<>&"]/g, (c) => `&#${c.charCodeAt(0)};`);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="assets/view.css">
<script type="module" src="assets/view.js"></script>
</head>
<body>
<div id="map" aria-label="map"></div>
<aside id="panel">
  <h1 id="title">${esc}</h1>
  <div id="layers"></div>
  <div id="legend"></div>
  <div id="probe" aria-live="polite">move the cursor over the scene</div>
  <div id="notes"></div>
</aside>
</body>
</html>
`;
}
