import { Storage } from '@google-cloud/storage';
import { createHash } from 'node:crypto';
const storage = new Storage({ apiEndpoint: 'http://127.0.0.1:47102', projectId: 'p' });
const md5 = (s: string) => createHash('md5').update(s).digest('base64');
const st = async (p: Promise<any>) => { try { return await p; } catch (e: any) { return { ERR: e.message?.slice(0, 120), code: e.code }; } };
const main = async () => {
  for (const versioned of [false, true]) {
  const name = 'b' + Date.now() + (versioned ? 'v' : '');
  const [bucket] = await storage.createBucket(name, versioned ? { versioning: { enabled: true } } : {});
  const f = bucket.file('k');
  await f.save(Buffer.from('one'), { resumable: false, validation: false, preconditionOpts: { ifGenerationMatch: 0 }, metadata: { md5Hash: md5('one'), metadata: { 'tessera-sha256': 'x' } } });
  const g1 = String(f.metadata.generation);
  console.log(versioned, 'g1', g1, f.metadata.md5Hash, f.metadata.crc32c, f.metadata.metadata);
  const bad = await st(bucket.file('k2').save(Buffer.from('two'), { resumable: false, validation: false, preconditionOpts: { ifGenerationMatch: 0 }, metadata: { md5Hash: md5('xxx') } }));
  console.log('bad md5 ->', bad.ERR ?? 'accepted', bad.code);
  const badc = await st(bucket.file('k3').save(Buffer.from('two'), { resumable: false, validation: false, preconditionOpts: { ifGenerationMatch: 0 }, metadata: { crc32c: 'AAAAAA==' } }));
  console.log('bad crc ->', badc.ERR ?? 'accepted', badc.code);
  await f.save(Buffer.from('second'), { resumable: false, validation: false, preconditionOpts: { ifGenerationMatch: g1 } });
  const g2 = String(f.metadata.generation);
  const old = await st(bucket.file('k', { generation: g1 }).download({ start: 0, end: 1, validation: false }));
  console.log('read old gen', old.ERR ?? old[0].toString(), old.code);
  const cur = await st(bucket.file('k', { generation: g2 }).download({ start: 0, end: 1, validation: false }));
  console.log('read cur gen', cur.ERR ?? cur[0].toString());
  const md = await st(bucket.file('k', { generation: g1 }).getMetadata());
  console.log('meta old gen', md.ERR ?? md[0].generation, md.code);
  const miss = await st(bucket.file('nokey', { generation: g1 }).download({ validation: false }));
  console.log('missing key with gen', miss.ERR, miss.code);
  }
};
main();
