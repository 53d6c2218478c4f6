import { createServer, type Server } from 'node:net';
import { CreateAccessKeyCommand, CreateUserCommand, IAMClient, PutUserPolicyCommand } from '@aws-sdk/client-iam';
import { CreateSecretCommand, PutSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterAll, describe, expect, it } from 'vitest';
import {
  SecretsManagerSecret,
  type SecretsManagerSender,
  SecretUnavailableError,
} from '../../functions/aws/adapters/secrets-manager-secret.js';
import { composeAws } from '../../functions/aws/compose.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import type { TileFeature } from '../../shared/ports/feature-sink.port.js';
import { freePort } from '../support/emulators/process.js';
import type { AwsEndpoints, AwsKey } from '../support/emulators/types.js';
import { awsEndpoints, dynamoDbClient, freshName, s3Client, sqsClient } from './clients.js';

/**
 * The tile function's PostGIS sink URL lives in Secrets Manager (docs/postgis.md): the adapter that reads it,
 * against moto (which serves Secrets Manager on the S3/SQS endpoint), and composeAws reading it at cold start.
 */

/** Secrets Manager on the plain moto: any credentials may do anything there. */
function secretsManager(
  e: AwsEndpoints = awsEndpoints(),
  credentials: AwsKey = { accessKeyId: 'tesseratest', secretAccessKey: 'tesseratest' },
) {
  return new SecretsManagerClient({ endpoint: e.moto, region: e.region, credentials, maxAttempts: 1 });
}

/** A client that counts the calls it forwards. */
function counting(real: SecretsManagerSender): SecretsManagerSender & { readonly sent: () => number } {
  let sent = 0;
  return {
    send: ((command: never) => {
      sent++;
      return real.send(command);
    }) as SecretsManagerSender['send'],
    sent: () => sent,
  };
}

async function freshSecret(sm: SecretsManagerClient, value: string): Promise<{ arn: string; versionId: string }> {
  const created = await sm.send(new CreateSecretCommand({ Name: freshName('sink'), SecretString: value }));
  if (!created.ARN || !created.VersionId) throw new Error('moto returned no ARN or version for a new secret');
  return { arn: created.ARN, versionId: created.VersionId };
}

/** The rejection of `p`, which must reject. */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: unknown) => e,
  );
}

describe('SecretsManagerSecret', () => {
  it('reads the current string, or the version it is pinned to', async () => {
    const sm = secretsManager();
    const { arn, versionId } = await freshSecret(sm, 'postgis://tessera:first@db.example:5432/gis');
    await sm.send(new PutSecretValueCommand({ SecretId: arn, SecretString: 'postgis://tessera:second@db.example:5432/gis' }));
    expect(await new SecretsManagerSecret(sm, arn).value()).toBe('postgis://tessera:second@db.example:5432/gis');
    expect(await new SecretsManagerSecret(sm, arn, { versionId }).value()).toBe('postgis://tessera:first@db.example:5432/gis');
  });

  it('reads once per instance: later calls send nothing', async () => {
    const sm = counting(secretsManager());
    const { arn } = await freshSecret(secretsManager(), 'postgis://tessera:pw@db.example:5432/gis');
    const secret = new SecretsManagerSecret(sm, arn);
    const values = await Promise.all([secret.value(), secret.value()]);
    expect(await secret.value()).toBe(values[0]);
    expect(sm.sent()).toBe(1);
  });

  it('throws a typed, non-retryable not-found error naming the secret, and reads again on the next call', async () => {
    const sm = secretsManager();
    const name = freshName('missing');
    const secret = new SecretsManagerSecret(sm, name, { purpose: 'the PostGIS feature sink URL' });
    const error = await rejection(secret.value());
    expect(error).toBeInstanceOf(SecretUnavailableError);
    expect(error).toMatchObject({ reason: 'not-found', retryable: false, secretId: name, code: 'ADAPTER_FAILURE' });
    expect((error as Error).message).toContain(`the PostGIS feature sink URL (${name})`);
    expect((error as Error).message).toContain('pulumi up');
    // The failure was not kept: once the secret exists, the same instance reads it.
    await sm.send(new CreateSecretCommand({ Name: name, SecretString: 'postgis://tessera:pw@db.example:5432/gis' }));
    expect(await secret.value()).toBe('postgis://tessera:pw@db.example:5432/gis');
  });

  it('throws not-found for a version that is not there', async () => {
    const sm = secretsManager();
    const { arn } = await freshSecret(sm, 'postgis://tessera:pw@db.example:5432/gis');
    const error = await rejection(new SecretsManagerSecret(sm, arn, { versionId: '00000000-0000-4000-8000-000000000000' }).value());
    expect(error).toMatchObject({ reason: 'not-found', retryable: false });
    expect((error as Error).message).toContain('version 00000000-0000-4000-8000-000000000000');
  });

  it('refuses a secret that holds binary data rather than a string', async () => {
    const sm = secretsManager();
    const created = await sm.send(new CreateSecretCommand({ Name: freshName('binary'), SecretBinary: new Uint8Array([1, 2, 3]) }));
    const error = await rejection(new SecretsManagerSecret(sm, created.ARN as string).value());
    expect(error).toMatchObject({ reason: 'not-a-string', retryable: false });
    expect((error as Error).message).toContain('binary data');
  });

  it('throws a retryable unreachable error when Secrets Manager does not answer', async () => {
    const port = await freePort();
    const e = awsEndpoints();
    const sm = new SecretsManagerClient({
      endpoint: `http://127.0.0.1:${port}`,
      region: e.region,
      credentials: { accessKeyId: 'tesseratest', secretAccessKey: 'tesseratest' },
      maxAttempts: 1,
    });
    const error = await rejection(new SecretsManagerSecret(sm, 'arn:aws:secretsmanager:us-east-1:123456789012:secret:x').value());
    expect(error).toMatchObject({ reason: 'unreachable', retryable: true });
  });

  it('throws a typed access-denied error when the caller may not read the secret (moto with IAM enforced)', async () => {
    const e = awsEndpoints();
    // The operator creates the secret, and a user whose policy allows what a scene function does but no secretsmanager action.
    const operator = new SecretsManagerClient({ endpoint: e.motoIam, region: e.region, credentials: e.motoIamAdmin, maxAttempts: 1 });
    const created = await operator.send(
      new CreateSecretCommand({ Name: freshName('sink'), SecretString: 'postgis://tessera:pw@db.example:5432/gis' }),
    );
    const iam = new IAMClient({ endpoint: e.motoIam, region: e.region, credentials: e.motoIamAdmin, maxAttempts: 3 });
    const UserName = freshName('scene');
    await iam.send(new CreateUserCommand({ UserName }));
    await iam.send(
      new PutUserPolicyCommand({
        UserName,
        PolicyName: 'no-secrets',
        PolicyDocument: JSON.stringify({
          Version: '2012-10-17',
          Statement: [{ Effect: 'Allow', Action: ['s3:*', 'sqs:*'], Resource: '*' }],
        }),
      }),
    );
    const key = (await iam.send(new CreateAccessKeyCommand({ UserName }))).AccessKey;
    iam.destroy();
    if (!key?.AccessKeyId || !key.SecretAccessKey) throw new Error('moto created no access key');
    const asScene = new SecretsManagerClient({
      endpoint: e.motoIam,
      region: e.region,
      credentials: { accessKeyId: key.AccessKeyId, secretAccessKey: key.SecretAccessKey },
      maxAttempts: 1,
    });
    // moto answers 403 with an XML body the JSON client cannot parse (AWS sends AccessDeniedException as JSON): the
    // adapter goes by the status, which both give. moto matches a secret ARN in a statement against "*", so the
    // tile role's own grant (one ARN) cannot be shown allowed here; test/infra/aws.test.ts pins that statement.
    const error = await rejection(new SecretsManagerSecret(asScene, created.ARN as string).value());
    expect(error).toBeInstanceOf(SecretUnavailableError);
    expect(error).toMatchObject({ reason: 'access-denied', retryable: false, secretId: created.ARN });
    expect((error as Error).message).toContain('only the tile role is granted secretsmanager:GetSecretValue');
    // The same secret, read by the operator: the refusal was the caller's, not the secret's.
    expect(await new SecretsManagerSecret(operator, created.ARN as string).value()).toBe('postgis://tessera:pw@db.example:5432/gis');
  });
});

/** A TCP server that records the PostgreSQL startup packet of each connection and hangs up. */
async function startupRecorder(): Promise<{ readonly server: Server; readonly port: number; readonly packets: string[] }> {
  const packets: string[] = [];
  const server = createServer((socket) => {
    socket.once('data', (chunk) => {
      packets.push(chunk.toString('latin1'));
      socket.destroy();
    });
  });
  const port = await new Promise<number>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)),
  );
  return { server, port, packets };
}

const FEATURE: TileFeature = {
  jobId: 'job-1',
  scene: {
    sceneKey: 'scene-1',
    source: { bucket: 'sources', key: 'scenes/a.tif' },
    sourceVersion: 'v1',
    pipeline: 'ndvi-tiler',
    pipelineVersion: '1.0.0',
    codeVersion: 'test',
    windowCount: 1,
    fannedOutAt: undefined,
  },
  tileKey: 'tiles/scene-1/0_0.tif',
  count: 1,
  mean: 0.5,
  min: 0.5,
  max: 0.5,
  footprint: [
    [500_000, 0],
    [500_100, 0],
    [500_100, 100],
    [500_000, 100],
    [500_000, 0],
  ],
  epsg: 32631,
};

describe('composeAws with TESSERA_FEATURE_SINK_SECRET (the tile function of a stack with a PostGIS sink)', () => {
  const servers: Server[] = [];
  afterAll(() => {
    for (const s of servers) s.close();
  });
  const baseEnv = {
    [ENV.platform]: 'aws-lambda',
    [ENV.claimsTable]: 'claims',
    [ENV.sourceBucket]: 'sources',
    [ENV.outputBucket]: 'outputs',
    [ENV.tileQueue]: 'https://sqs.us-east-1.amazonaws.com/123456789012/tiles',
  };
  const compose = (env: Record<string, string>, sm: SecretsManagerSender) => {
    const e = awsEndpoints();
    return composeAws(env, {
      clients: { dynamodb: dynamoDbClient(e), s3: s3Client(e), sqs: sqsClient(e), secretsManager: sm },
      telemetry: new JsonTelemetry(() => undefined),
      owner: 'worker-a',
    });
  };

  it('starts reading the secret at cold start, and connects the sink to the URL it holds', async () => {
    const { server, port, packets } = await startupRecorder();
    servers.push(server);
    const { arn, versionId } = await freshSecret(secretsManager(), `postgis://sinkuser:pw@127.0.0.1:${port}/sinkdb`);
    const sm = counting(secretsManager());
    const rt = compose({ ...baseEnv, [ENV.featureSinkSecret]: arn, [ENV.featureSinkSecretVersion]: versionId }, sm);
    // Sent during composition, before any job asks for the sink.
    expect(sm.sent()).toBe(1);
    expect(rt.config.featureSinkUrl).toBeUndefined();
    // The recorder hangs up, so the put fails; what matters is where it connected, and as whom.
    await rejection((rt.backend.sink as NonNullable<typeof rt.backend.sink>).put(FEATURE));
    expect(packets.length).toBeGreaterThan(0);
    expect(packets[0]).toContain('user\0sinkuser\0');
    expect(packets[0]).toContain('database\0sinkdb\0');
    expect(sm.sent()).toBe(1);
  });

  it('fails the put with the typed error when the secret is missing, reading again at each put', async () => {
    const sm = counting(secretsManager());
    const missing = `arn:aws:secretsmanager:us-east-1:123456789012:secret:${freshName('gone')}-AbCdEf`;
    const rt = compose({ ...baseEnv, [ENV.featureSinkSecret]: missing }, sm);
    const sink = rt.backend.sink as NonNullable<typeof rt.backend.sink>;
    expect(await rejection(sink.put(FEATURE))).toMatchObject({ reason: 'not-found', retryable: false, secretId: missing });
    expect(sm.sent()).toBe(1);
    expect(await rejection(sink.put(FEATURE))).toMatchObject({ reason: 'not-found' });
    // The cold-start read served the first put; a failed read is not kept, so each later put reads again and a
    // configuration fixed meanwhile is picked up without a new instance.
    expect(sm.sent()).toBe(2);
  });

  it('refuses an environment that sets both the URL and the secret, or a version without its secret', () => {
    expect(() =>
      compose(
        { ...baseEnv, [ENV.featureSink]: 'postgis://u:p@h/db', [ENV.featureSinkSecret]: 'arn:aws:secretsmanager:x' },
        secretsManager(),
      ),
    ).toThrow(`${ENV.featureSink} and ${ENV.featureSinkSecret} are both set`);
    expect(() => compose({ ...baseEnv, [ENV.featureSinkSecretVersion]: 'v1' }, secretsManager())).toThrow(
      `${ENV.featureSinkSecretVersion} is set without ${ENV.featureSinkSecret}`,
    );
  });
});
