import { BlobServiceClient } from '@azure/storage-blob';
import { createHash } from 'node:crypto';
const cs = 'DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:47103/devstoreaccount1;';
const md5 = (s: string) => createHash('md5').update(s).digest();
const st = async (p: Promise<any>) => { try { return await p; } catch (e: any) { return { ERR: e.code ?? e.message?.slice(0,100), status: e.statusCode }; } };
const main = async () => {
  const svc = BlobServiceClient.fromConnectionString(cs);
  const c = svc.getContainerClient('c' + Date.now()); await c.create();
  const b = c.getBlockBlobClient('k');
  const r1 = await b.upload('one', 3, { conditions: { ifNoneMatch: '*' }, metadata: { tesserasha256: 'x' } });
  console.log('put', r1.etag, r1.versionId, r1.contentMD5 && Buffer.from(r1.contentMD5).toString('base64'));
  const p = await b.getProperties();
  console.log('props', p.etag, p.versionId, p.contentMD5 && Buffer.from(p.contentMD5).toString('base64'), md5('one').toString('base64'), p.metadata);
  const bad = await st(c.getBlockBlobClient('k2').upload('two', 3, { conditions: { ifNoneMatch: '*' }, transactionalContentMD5: md5('xxx') }));
  console.log('bad transactional md5', bad.ERR ?? 'accepted', bad.status);
  const b3 = c.getBlockBlobClient('k3');
  await b3.upload('three', 5, { conditions: { ifNoneMatch: '*' }, transactionalContentMD5: md5('three') });
  const p3 = await b3.getProperties();
  console.log('stored md5 after transactional', p3.contentMD5 && Buffer.from(p3.contentMD5).toString('base64'), md5('three').toString('base64'));
  const b4 = c.getBlockBlobClient('k4');
  const bad4 = await st(b4.upload('four', 4, { conditions: { ifNoneMatch: '*' }, blobHTTPHeaders: { blobContentMD5: md5('zzz') } }));
  console.log('bad blobContentMD5', bad4.ERR ?? 'accepted', bad4.status);
  // snapshot
  const snap = await st(b.createSnapshot({ conditions: { ifMatch: p.etag } }));
  console.log('snapshot', snap.ERR ?? snap.snapshot, snap.status);
  const snapBad = await st(b.createSnapshot({ conditions: { ifMatch: '"0x8DEADBEEF"' } }));
  console.log('snapshot bad etag', snapBad.ERR, snapBad.status);
  await b.setMetadata({ a: 'b' });
  const p2 = await b.getProperties();
  console.log('etag after setMetadata', p2.etag, p.etag);
  await b.upload('second', 6, { conditions: { ifMatch: p2.etag } });
  const sb = b.withSnapshot(snap.snapshot);
  const d = await st(sb.download(0, 2));
  console.log('snapshot read', d.ERR ?? (await new Promise(r => { const ch: any[] = []; d.readableStreamBody.on('data', (x: any) => ch.push(x)); d.readableStreamBody.on('end', () => r(Buffer.concat(ch).toString())); })));
  const sp = await sb.getProperties(); console.log('snap props etag', sp.etag, 'md5', sp.contentMD5 && Buffer.from(sp.contentMD5).toString('base64'));
  const gone = await st(b.withSnapshot('2020-01-01T00:00:00.0000000Z').download(0, 2));
  console.log('missing snapshot', gone.ERR, gone.status);
  const ver = await st(b.withVersion('2020-01-01T00:00:00.0000000Z').download(0, 2));
  console.log('versionId read', ver.ERR, ver.status);
  const props = await st(svc.getProperties()); console.log('svc props', JSON.stringify(props).slice(0, 300));
  const setv = await st(svc.setProperties({ } as any)); console.log('setprops', setv.ERR ?? 'ok');
  // download with ifMatch
  const dm = await st(b.download(0, 2, { conditions: { ifMatch: p.etag } })); console.log('download ifmatch old', dm.ERR, dm.status);
  // list snapshots
  for await (const i of c.listBlobsFlat({ includeSnapshots: true })) console.log('list', i.name, i.snapshot ?? '');
};
main();
