import { S3Client, CreateBucketCommand, PutBucketVersioningCommand, PutObjectCommand, GetObjectCommand, HeadObjectCommand, CopyObjectCommand } from '@aws-sdk/client-s3';
import { createHash } from 'node:crypto';
const s3 = new S3Client({ endpoint: 'http://127.0.0.1:47101', region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: 'x', secretAccessKey: 'y' } });
const st = async (p: Promise<any>) => { try { const r = await p; return r; } catch (e: any) { return { ERR: e.name, status: e.$metadata?.httpStatusCode }; } };
const sha = (s: string) => createHash('sha256').update(s).digest('base64');
const main = async () => {
  for (const versioned of [true, false]) {
    const Bucket = 'p' + (versioned ? 'v' : 'u') + Date.now();
    await s3.send(new CreateBucketCommand({ Bucket }));
    if (versioned) await s3.send(new PutBucketVersioningCommand({ Bucket, VersioningConfiguration: { Status: 'Enabled' } }));
    const a = await s3.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'one', IfNoneMatch: '*', ChecksumSHA256: sha('one'), Metadata: { 'tessera-sha256': 'abc' } }));
    console.log(versioned, 'put1', a.ETag, a.VersionId, a.ChecksumSHA256);
    const h = await s3.send(new HeadObjectCommand({ Bucket, Key: 'k', ChecksumMode: 'ENABLED' }));
    console.log('head', h.ETag, h.VersionId, h.ChecksumSHA256, h.Metadata, h.ContentLength);
    const bad = await st(s3.send(new PutObjectCommand({ Bucket, Key: 'k2', Body: 'two', ChecksumSHA256: sha('xxx'), IfNoneMatch: '*' })));
    console.log('badchecksum', bad.ERR, bad.status);
    const b = await s3.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'second', IfMatch: a.ETag }));
    console.log('put2', b.ETag, b.VersionId);
    const gOld = await st(s3.send(new GetObjectCommand({ Bucket, Key: 'k', VersionId: a.VersionId ?? 'null', Range: 'bytes=0-1' })));
    console.log('get old version', gOld.ERR ?? (await gOld.Body.transformToString()), gOld.status);
    const gIf = await st(s3.send(new GetObjectCommand({ Bucket, Key: 'k', IfMatch: a.ETag, Range: 'bytes=0-1' })));
    console.log('get ifmatch old etag', gIf.ERR, gIf.status);
    const gIf2 = await st(s3.send(new GetObjectCommand({ Bucket, Key: 'k', IfMatch: b.ETag, Range: 'bytes=0-1' })));
    console.log('get ifmatch cur etag', gIf2.ERR ?? (await gIf2.Body.transformToString()));
    const gbogus = await st(s3.send(new GetObjectCommand({ Bucket, Key: 'k', VersionId: 'bogusversion' })));
    console.log('get bogus version', gbogus.ERR, gbogus.status);
    const hv = await st(s3.send(new HeadObjectCommand({ Bucket, Key: 'k', VersionId: a.VersionId ?? 'null' })));
    console.log('head old version', hv.ERR ?? hv.ETag, hv.status);
  }
};
main();
