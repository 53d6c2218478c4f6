import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../../cli/main.js';
import { createLocalBackend } from '../../../functions/local/compose.js';
import { validArtefact } from '../../support/ingest-fixtures.js';

// `tessera ingest --allowed-hosts` and `--allow-private-address` (docs/ingest.md, "Remote hrefs stay in their lane").

const dirs: string[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function cli(cwd: string, ...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(argv, { cwd, stdout: (s) => (out += s), stderr: (s) => (err += s) });
  return { code, out, err };
}

async function published(cwd: string): Promise<string[]> {
  const b = createLocalBackend(join(cwd, '.tessera'));
  try {
    const out: string[] = [];
    for await (const h of b.sources.list('')) out.push(h.key);
    return out;
  } finally {
    b.close();
  }
}

async function origin(): Promise<{ url: string; hits: () => number }> {
  const bytes = await validArtefact(8);
  let hits = 0;
  const server = createServer((_req, res) => {
    hits++;
    res.writeHead(200, { 'content-length': String(bytes.byteLength) }).end(Buffer.from(bytes));
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/scene.tif`, hits: () => hits };
}

const cwd = () => {
  const d = mkdtempSync(join(tmpdir(), 'tessera-ingest-lanes-'));
  dirs.push(d);
  return d;
};
const ids = ['--source', 'sentinel-2-l2a', '--item-id', 'S2B_T30UXB_20260612'];

describe('tessera ingest > http(s) hrefs stay in their lane', () => {
  it('a server on this machine is refused unless named with --allow-private-address; then it publishes', async () => {
    const dir = cwd();
    const http = await origin();
    const refused = await cli(dir, 'ingest', '--href', http.url, ...ids);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain('HrefRefusedError [HREF_REFUSED]');
    expect(refused.err).toContain('--allow-private-address');
    expect(http.hits()).toBe(0);
    expect(await published(dir)).toEqual([]);
    const ok = await cli(dir, 'ingest', '--href', http.url, ...ids, '--allow-private-address', '127.0.0.1', '--json');
    expect(ok.code, ok.err).toBe(0);
    expect(JSON.parse(ok.out)).toMatchObject({ published: true, reason: 'published' });
  });

  it('--allowed-hosts confines http(s) hrefs to the hosts it names', async () => {
    const dir = cwd();
    const http = await origin();
    const off = await cli(
      dir,
      'ingest',
      '--href',
      http.url,
      ...ids,
      '--allow-private-address',
      '127.0.0.1',
      '--allowed-hosts',
      'stac.example.com',
    );
    expect(off.code).toBe(1);
    expect(off.err).toContain('host 127.0.0.1 is not an allowed host (stac.example.com)');
    expect(http.hits()).toBe(0);
    const on = await cli(
      dir,
      'ingest',
      '--href',
      http.url,
      ...ids,
      '--allow-private-address',
      '127.0.0.1',
      '--allowed-hosts',
      'stac.example.com,127.0.0.1',
    );
    expect(on.code, on.err).toBe(0);
  });

  it('refuses malformed lists as bad options, and both options with --cloud (a stack keeps to its own configuration)', async () => {
    const dir = cwd();
    const bad = await cli(dir, 'ingest', '--href', 'https://stac.example.com/a.tif', ...ids, '--allowed-hosts', 'stac.example.com:443');
    expect(bad.code).toBe(1);
    expect(bad.err).toContain('InvalidParamsError [INVALID_PARAMS]: --allowed-hosts: "stac.example.com:443" names a port');
    const badAddress = await cli(dir, 'ingest', '--href', 'https://stac.example.com/a.tif', ...ids, '--allow-private-address', 'localhost');
    expect(badAddress.err).toContain('--allow-private-address: "localhost" is not an IP address');
    const cloud = await cli(
      dir,
      'ingest',
      '--href',
      'https://stac.example.com/a.tif',
      ...ids,
      '--cloud',
      'aws',
      '--stack',
      'x',
      '--allowed-hosts',
      'a.example.com',
    );
    expect(cloud.code).toBe(1);
    expect(cloud.err).toContain('tessera:ingestAllowedHosts');
  });
});
