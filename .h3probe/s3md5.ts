import { S3Client, CreateBucketCommand, PutObjectCommand, HeadObjectCommand } from '@aws-sdk/client-s3';
import { createHash } from 'node:crypto';
const s3 = new S3Client({ endpoint: 'http://127.0.0.1:47101', region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: 'x', secretAccessKey: 'y' } });
const st = async (p: Promise<any>) => { try { return await p; } catch (e: any) { return { ERR: e.name, status: e.$metadata?.httpStatusCode }; } };
const md5 = (s: string) => createHash('md5').update(s).digest('base64');
const main = async () => {
  const Bucket = 'm' + Date.now(); await s3.send(new CreateBucketCommand({ Bucket }));
  const bad = await st(s3.send(new PutObjectCommand({ Bucket, Key: 'a', Body: 'two', ContentMD5: md5('xxx'), IfNoneMatch: '*' })));
  console.log('bad md5', bad.ERR ?? 'accepted', bad.status);
  const ok = await st(s3.send(new PutObjectCommand({ Bucket, Key: 'b', Body: 'two', ContentMD5: md5('two'), IfNoneMatch: '*' })));
  console.log('good md5', ok.ERR ?? ok.ETag);
  const bad2 = await st(s3.send(new PutObjectCommand({ Bucket, Key: 'c', Body: 'two', ChecksumAlgorithm: 'SHA256', ChecksumSHA256: createHash('sha256').update('zz').digest('base64'), IfNoneMatch: '*' })));
  console.log('bad sha256', bad2.ERR ?? 'accepted', bad2.status);
  const bad3 = await st(s3.send(new PutObjectCommand({ Bucket, Key: 'd', Body: 'two', ChecksumCRC32: 'AAAAAA==', IfNoneMatch: '*' })));
  console.log('bad crc32', bad3.ERR ?? 'accepted', bad3.status);
  const h = await s3.send(new HeadObjectCommand({ Bucket, Key: 'b', ChecksumMode: 'ENABLED' })); console.log(h.ChecksumCRC32, h.ChecksumSHA256, h.ETag);
};
main();
