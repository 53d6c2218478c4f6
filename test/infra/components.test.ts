import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as pulumi from '@pulumi/pulumi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFIG_KEYS, type ConfigKey, parseStackConfig, type StackConfig } from '../../infra/common/config.js';
import { DEFAULT_ARCHIVE_DIR, MissingArchiveError } from '../../infra/common/packaging.js';
import {
  ARCHIVE_DIR_ENV,
  CLOUD_ARGS,
  COMMON_ARGS,
  checkedSecret,
  fromStackConfig,
  packageArchiveDir,
} from '../../infra/components/args.js';
import {
  TesseraArgsError,
  TesseraAws,
  type TesseraAwsArgs,
  TesseraAzure,
  type TesseraAzureArgs,
  TesseraGcp,
  type TesseraGcpArgs,
} from '../../infra/components/index.js';
import { calls, engineUrns, type MockRun, mockResource, runProgramUnderMocks } from '../../infra/preflight/mock-run.js';
import { documentedTable, README_SECTION, readmeExample, renderArgsTable, resolvedReadmeExample, tableCells } from './component-docs.js';
import formerProgram from './former-program.js';
import { placeholderArchives, runStack } from './harness.js';
import { EXAMPLE_STACK_FILES, loadStackFile } from './stack-files.js';

/**
 * The components of `tessera/pulumi` (infra/components/): their args go through the stack files' validation (one
 * path into one StackConfig), bad args are refused with a typed error before anything is registered, the
 * repository's program is one consumer of them and declares what it declared before, and the README's example runs.
 * Under Pulumi mocks; the README example and the move of an existing stack also run on the real engine
 * (pulumi-engine.test.ts).
 */

const STACK = 'dev';
const AWS = { 'aws:region': 'eu-west-1' };
const GCP = { 'gcp:project': 'my-project', 'gcp:region': 'europe-west1' };
const AZURE = { 'azure-native:location': 'westeurope' };
/** What the providers read their region and project from besides config: cleared, so only the test's config counts. */
const PROVIDER_ENV = [
  'AWS_REGION',
  'AWS_DEFAULT_REGION',
  'GOOGLE_REGION',
  'GCLOUD_REGION',
  'CLOUDSDK_COMPUTE_REGION',
  'ARM_LOCATION',
  'GOOGLE_PROJECT',
  'GOOGLE_CLOUD_PROJECT',
  'GCLOUD_PROJECT',
  'CLOUDSDK_CORE_PROJECT',
];

let archiveDir: string;
let scratch: string;
const savedEnv = new Map<string, string | undefined>();

beforeAll(async () => {
  archiveDir = await placeholderArchives();
  scratch = mkdtempSync(join(tmpdir(), 'tessera-components-'));
  for (const k of [...PROVIDER_ENV, ARCHIVE_DIR_ENV]) {
    savedEnv.set(k, process.env[k]);
    delete process.env[k];
  }
  // A user's program finds prebuilt archives through the environment (the package's dist/ is not built here).
  process.env[ARCHIVE_DIR_ENV] = archiveDir;
});

afterAll(() => {
  for (const [k, v] of savedEnv) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  rmSync(scratch, { recursive: true, force: true });
});

/**
 * Construct under mocks with `config` as the stack config: the error it threw (if any) and every resource it
 * registered (the mock monitor's record, components included).
 */
async function construct(make: () => unknown, config: Readonly<Record<string, string>>): Promise<{ error: unknown; registered: string[] }> {
  await pulumi.runtime.setMocks(
    { newResource: (a) => mockResource(a.type, a.name, a.inputs as Record<string, unknown>), call: calls },
    'tessera',
    STACK,
    false,
    'tessera-org',
  );
  engineUrns(pulumi.runtime.getMonitor());
  pulumi.runtime.setAllConfig({ ...config });
  let error: unknown;
  try {
    make();
  } catch (e) {
    error = e;
  }
  await pulumi.runtime.disconnect().catch(() => undefined);
  const monitor = pulumi.runtime.getMonitor() as unknown as { getRegisteredResources(): Map<string, unknown> };
  const registered = [...monitor.getRegisteredResources().keys()].filter((u) => !u.includes('pulumi:pulumi:Stack'));
  return { error, registered };
}

/** The problems of the args, asserting they were refused with a TesseraArgsError before anything was registered. */
async function refused(make: () => unknown, config: Readonly<Record<string, string>>): Promise<readonly string[]> {
  const { error, registered } = await construct(make, config);
  expect(error, 'the args were accepted').toBeInstanceOf(TesseraArgsError);
  expect(registered, 'registered before the args were refused').toEqual([]);
  const e = error as TesseraArgsError;
  expect(e.code).toBe('TESSERA_ARGS');
  // A RunError: `pulumi preview` prints its message alone, without a stack trace.
  expect(pulumi.RunError.isInstance(e)).toBe(true);
  return e.problems;
}

describe('component args are refused with a typed error naming the fix, before any resource is registered', () => {
  const aws = (args: object, config: Record<string, string> = AWS) =>
    refused(() => new TesseraAws('tiles', args as TesseraAwsArgs), config);
  const gcp = (args: object, config: Record<string, string> = GCP) =>
    refused(() => new TesseraGcp('tiles', args as TesseraGcpArgs), config);
  const azure = (args: object, config: Record<string, string> = AZURE) =>
    refused(() => new TesseraAzure('tiles', args as TesseraAzureArgs), config);

  it.each<[string, () => Promise<readonly string[]>, readonly (string | RegExp)[]]>([
    ['a fraction', () => aws({ memoryMb: 1.5 }), ['memoryMb must be a whole number from 128 to 32768, got "1.5"; e.g. `memoryMb: 2048`']],
    ['a string for a number', () => aws({ memoryMb: '2048' }), ['memoryMb must be a number, got "2048" (string)']],
    ['memory above the platform', () => aws({ memoryMb: 20_000 }), [/^memoryMb 20000 exceeds the AWS Lambda maximum of 10240 MB/]],
    [
      'a timeout above the ceiling',
      () => aws({ functionTimeoutSeconds: 1200 }),
      [/^functionTimeoutSeconds: .*exceeds.*Change it with `functionTimeoutSeconds: <seconds>` or remove it/],
    ],
    ['a lease under the ceiling', () => aws({ leaseSeconds: 600 }), [/^leaseSeconds: .*Change it with `leaseSeconds: <seconds>`/]],
    [
      'a retention under the lease',
      () => aws({ retentionSeconds: 600 }),
      [/^retentionSeconds 600 must be longer than the lease of 1200 s/],
    ],
    ['an empty prefix', () => aws({ sourcePrefix: '' }), ['sourcePrefix is empty; leave it out for the default']],
    ['a prefix over staging/', () => aws({ sourcePrefix: 'staging/' }), [/^sourcePrefix "staging\/" overlaps the ingest staging prefix/]],
    [
      'a STAC stack on .tif',
      () => aws({ stacAssets: { B04: 'red', B08: 'nir' }, sourceSuffix: '.tif' }),
      [/^sourceSuffix ".tif" would keep STAC Items .*\(stacAssets is set\)/],
    ],
    [
      'a list for the STAC selection',
      () => aws({ stacAssets: ['red'] }),
      ['stacAssets must be an object of strings, got ["red"] (an array)'],
    ],
    [
      'a codec that is not one',
      () => aws({ compression: 'LZW' }),
      ['compression must be one of DEFLATE, ZSTD, NONE, got "LZW"; e.g. `compression: \'DEFLATE\'`'],
    ],
    [
      'a zoom without its tms',
      () => aws({ zoom: [8, 14] }),
      [/^tms and zoom go together: e\.g\. `tms: 'WebMercatorQuad'` and `zoom: \[8, 14\]`/],
    ],
    [
      'an otlp exporter without endpoint',
      () => aws({ telemetry: { exporter: 'otlp' } }),
      [/^telemetry: the otlp exporter needs an endpoint/],
    ],
    [
      'a sink that is not PostGIS',
      () => aws({ featureSinkUrl: 'mysql://u:hunter2@db/x' }),
      [
        "featureSinkUrl must be postgis://user:password@host:5432/database (or postgres://); set it with `featureSinkUrl: new pulumi.Config().requireSecret('featureSinkUrl')`",
      ],
    ],
    [
      'an origin with a path',
      () => aws({ outputCorsOrigins: ['https://maps.example.org/'] }),
      [/^outputCorsOrigins: "https:\/\/maps\.example\.org\/" is not an origin; write scheme:\/\/host\[:port\]/],
    ],
    [
      'no origin',
      () => aws({ outputCorsOrigins: [] }),
      ['outputCorsOrigins is an empty list; leave it out for the default, or list at least one'],
    ],
    [
      'a host with a space',
      () => aws({ ingestAllowedHosts: ['a.example.org b.example.org'] }),
      [/^ingestAllowedHosts: "a\.example\.org b\.example\.org" must be one non-empty item/],
    ],
    ['an address that is not one', () => aws({ alertEmail: 'ops' }), ['alertEmail must be an e-mail address, got "ops"']],
    [
      'too little concurrency',
      () => aws({ tileMaxConcurrency: 1 }),
      [/^tileMaxConcurrency must be a whole number from 2 to 1000, got "1"; e\.g\. `tileMaxConcurrency: 100`/],
    ],
    ['a tag Tessera sets', () => aws({ tags: { stack: 'prod' } }), ['tags.stack is set by Tessera; pick another key']],
    ['a typo', () => aws({ memoryMB: 2048 }), [/^memoryMB is not an arg of TesseraAws; did you mean memoryMb\?/]],
    ["another cloud's arg", () => aws({ plan: 'flex' }), ['plan is an arg of TesseraAzure, not of TesseraAws; remove it']],
    [
      'a region the provider does not deploy to',
      () => aws({ region: 'us-east-1' }),
      [
        /^region is "us-east-1" but the default aws provider deploys to "eu-west-1" \(aws:region\); pass region: 'eu-west-1', set aws:region to us-east-1, or pass a provider/,
      ],
    ],
    ['no region anywhere', () => aws({}, {}), ["region is required (the provider region code); e.g. `region: 'eu-west-1'`"]],
    [
      'a region the aws provider lacks',
      () => aws({ region: 'eu-west-1' }, {}),
      [/^region is "eu-west-1" but the aws provider has no region; set it \(`pulumi config set aws:region eu-west-1`\)/],
    ],
    ['GCP without a project', () => gcp({}, { 'gcp:region': 'europe-west1' }), [/^project is not set and the gcp provider has none/]],
    [
      'a GCP trigger that is not one',
      () => gcp({ tileTrigger: 'push' }),
      ['tileTrigger must be one of event, http, got "push"; e.g. `tileTrigger: \'event\'`'],
    ],
    [
      'a Firestore id that is not one',
      () => gcp({ firestoreDatabase: 'Claims_DB' }),
      [/^firestoreDatabase must be \(default\) or 4-63 lowercase letters/],
    ],
    [
      'the premium plan',
      () => azure({ plan: 'premium' }),
      [/^plan must be one of consumption, flex/, /^plan premium is not deployed by this program/],
    ],
    [
      'a Flex size that is not one',
      () => azure({ plan: 'flex', memoryMb: 1024 }),
      ['memoryMb on Flex Consumption must be an instance size: 512, 2048, 4096; got 1024'],
    ],
    [
      'an account name Azure refuses',
      () => azure({ storageAccountName: 'Tiles-Data' }),
      ['storageAccountName must be 3-24 lowercase letters and digits, got "Tiles-Data"'],
    ],
    [
      'an AWS arg on Azure',
      () => azure({ tileMaxConcurrency: 10 }),
      ['tileMaxConcurrency is an arg of TesseraAws, not of TesseraAzure; remove it'],
    ],
  ])('%s', async (_, attempt, expected) => {
    const problems = await attempt();
    expect(problems).toEqual(expected.map((e) => (typeof e === 'string' ? e : expect.stringMatching(e))));
  });

  it('lists every problem of the args in one error, in the message too', async () => {
    const { error } = await construct(() => new TesseraAws('tiles', { memoryMb: 1.5, alertEmail: 'ops', sourcePrefix: 'tiles/' }), AWS);
    expect((error as TesseraArgsError).problems).toHaveLength(3);
    expect((error as Error).message).toMatch(
      /^TesseraAws "tiles" cannot be deployed with these args:\n {2}- memoryMb .*\n {2}- sourcePrefix .*\n {2}- alertEmail /,
    );
  });

  it('never echoes a sink URL it refuses: it holds a password', async () => {
    const { error } = await construct(() => new TesseraAws('tiles', { featureSinkUrl: 'mysql://u:hunter2@db/x' }), AWS);
    expect((error as Error).message).not.toContain('hunter2');
  });

  it('refuses missing archives with the files and the arg that finds them, the MissingArchiveError as cause', async () => {
    const empty = mkdtempSync(join(scratch, 'no-archives-'));
    const problems = await refused(() => new TesseraAws('tiles', { archiveDir: empty }), AWS);
    expect(problems).toEqual([
      expect.stringMatching(new RegExp(`^function archives not found: ${empty}/aws/scene\\.zip, .*; set archiveDir to the folder`)),
    ]);
    const { error } = await construct(() => new TesseraAws('tiles', { archiveDir: empty }), AWS);
    expect((error as Error).cause).toBeInstanceOf(MissingArchiveError);
  });

  it('checks a sink URL given as a secret Output when the deployment resolves it, with the same words', async () => {
    const value = (o: pulumi.Output<string>) => (o as unknown as { promise(): Promise<string> }).promise();
    const problemOf = (url: string) => (url.startsWith('postgis://') ? undefined : 'featureSinkUrl must be postgis://...');
    const fail = (p: string) => new TesseraArgsError('TesseraAws', 'tiles', [p]);
    const good = checkedSecret(pulumi.secret('postgis://u:p@db/x'), problemOf, fail);
    expect(await value(good)).toBe('postgis://u:p@db/x');
    expect(await pulumi.isSecret(good)).toBe(true);
    const bad = checkedSecret(pulumi.output('mysql://u:p@db/x'), problemOf, fail);
    await expect(value(bad)).rejects.toThrow(TesseraArgsError);
    // An Output carries its value's failure into its isKnown and isSecret promises too: a deployment awaits them all
    // (and fails with the error); so does the test, or they are unhandled rejections.
    const carried = bad as unknown as { isKnown: Promise<boolean>; isSecret: Promise<boolean> };
    for (const settled of await Promise.allSettled([carried.isKnown, carried.isSecret])) {
      expect(settled.status === 'rejected' && settled.reason instanceof TesseraArgsError).toBe(true);
    }
    // The component hands its resources the checked value, secret, in place of the one it was given.
    let config: StackConfig | undefined;
    const sink = pulumi.secret('postgis://u:p@db.example.org:5432/tiles');
    const { error } = await construct(() => {
      config = new TesseraAws('tiles', { featureSinkUrl: sink }).config;
    }, AWS);
    expect(error).toBeUndefined();
    const given = config?.featureSinkUrl as pulumi.Output<string>;
    expect(given).not.toBe(sink);
    expect(await value(given)).toBe('postgis://u:p@db.example.org:5432/tiles');
    expect(await pulumi.isSecret(given)).toBe(true);
  });
});

describe('component args and stack files go through one validation into the same configuration', () => {
  /** The configuration a component resolves its args to. */
  async function configOf<C extends StackConfig>(make: () => { config: C }, config: Record<string, string>): Promise<C> {
    let built: C | undefined;
    const { error } = await construct(() => {
      built = make().config;
    }, config);
    if (error) throw error;
    return built as C;
  }
  const stackConfig = (values: Record<string, string>) =>
    parseStackConfig(values, { stack: `${STACK}-tiles`, defaultArchiveDir: archiveDir, today: new Date() });

  it.each<[string, () => Promise<StackConfig>, Record<string, string>]>([
    ['AWS, no args', () => configOf(() => new TesseraAws('tiles'), AWS), { 'tessera:cloud': 'aws', 'tessera:region': 'eu-west-1', ...AWS }],
    [
      'GCP, no args',
      () => configOf(() => new TesseraGcp('tiles'), GCP),
      { 'tessera:cloud': 'gcp', 'tessera:region': 'europe-west1', ...GCP },
    ],
    [
      'Azure, no args',
      () => configOf(() => new TesseraAzure('tiles'), AZURE),
      { 'tessera:cloud': 'azure', 'tessera:region': 'westeurope', ...AZURE },
    ],
    [
      'AWS, every kind of arg',
      () =>
        configOf(
          () =>
            new TesseraAws('tiles', {
              region: 'eu-west-1',
              functionTimeoutSeconds: 600,
              leaseSeconds: 1000,
              memoryMb: 4096,
              maxReceiveCount: 7,
              sourcePrefix: 'in/',
              stacAssets: { B04: 'red', B08: 'nir' },
              tilePx: 256,
              pipelineVersion: '2.0.0',
              compression: 'ZSTD',
              compressionLevel: 5,
              retentionSeconds: 86_400,
              stagingRetentionDays: 3,
              ingestAllowedHosts: ['example.com', '*.example.org'],
              alertEmail: 'ops@example.org',
              featureSinkUrl: 'postgis://u:p@db.example.org:5432/tiles',
              outputCorsOrigins: ['https://maps.example.org', 'http://localhost:8080'],
              telemetry: 'cloud',
              tileMaxConcurrency: 50,
              archiveDir,
            }),
          AWS,
        ),
      {
        'tessera:cloud': 'aws',
        'tessera:region': 'eu-west-1',
        ...AWS,
        'tessera:functionTimeoutSeconds': '600',
        'tessera:leaseSeconds': '1000',
        'tessera:memoryMb': '4096',
        'tessera:maxReceiveCount': '7',
        'tessera:sourcePrefix': 'in/',
        'tessera:stacAssets': '{"B04":"red","B08":"nir"}',
        'tessera:tilePx': '256',
        'tessera:pipelineVersion': '2.0.0',
        'tessera:compression': 'ZSTD',
        'tessera:compressionLevel': '5',
        'tessera:retentionSeconds': '86400',
        'tessera:stagingRetentionDays': '3',
        'tessera:ingestAllowedHosts': 'example.com, *.example.org',
        'tessera:alertEmail': 'ops@example.org',
        'tessera:featureSinkUrl': 'postgis://u:p@db.example.org:5432/tiles',
        'tessera:outputCorsOrigins': 'https://maps.example.org,http://localhost:8080',
        'tessera:telemetry': 'cloud',
        'tessera:tileMaxConcurrency': '50',
        'tessera:archiveDir': '(archives)',
      },
    ],
    [
      'GCP, rendered pyramid tiles on an http trigger',
      () =>
        configOf(
          () =>
            new TesseraGcp('tiles', {
              tileTrigger: 'http',
              claimsCollection: 'leases',
              firestoreDatabase: '(default)',
              tms: 'WebMercatorQuad',
              zoom: [8, 12],
              format: 'PNG',
              rescale: [-1, 1],
              colormap: 'viridis',
            }),
          GCP,
        ),
      {
        'tessera:cloud': 'gcp',
        'tessera:region': 'europe-west1',
        ...GCP,
        'tessera:gcpTileTrigger': 'http',
        'tessera:claimsCollection': 'leases',
        'tessera:gcpFirestoreDatabase': '(default)',
        'tessera:tms': 'WebMercatorQuad',
        'tessera:zoom': '8-12',
        'tessera:format': 'PNG',
        'tessera:rescale': '-1,1',
        'tessera:colormap': 'viridis',
      },
    ],
    [
      'Azure Flex, JPEG tiles, an otlp exporter',
      () =>
        configOf(
          () =>
            new TesseraAzure('tiles', {
              plan: 'flex',
              memoryMb: 4096,
              storageAccountName: 'tilesdata01',
              format: 'JPEG',
              rescale: [0, 3000],
              background: [0, 0, 0],
              telemetry: { exporter: 'otlp', endpoint: 'https://collector.example.org:4318', sampling: 0.5 },
              telemetryHeaders: 'x-api-key=abc',
            }),
          AZURE,
        ),
      {
        'tessera:cloud': 'azure',
        'tessera:region': 'westeurope',
        ...AZURE,
        'tessera:azurePlan': 'flex',
        'tessera:memoryMb': '4096',
        'tessera:azureStorageAccountName': 'tilesdata01',
        'tessera:format': 'JPEG',
        'tessera:rescale': '0,3000',
        'tessera:background': '0,0,0',
        'tessera:telemetry': '{"exporter":"otlp","endpoint":"https://collector.example.org:4318","sampling":0.5}',
        'tessera:telemetryHeaders': 'x-api-key=abc',
      },
    ],
  ])('%s: the same configuration as the equivalent stack file', async (_, fromArgs, values) => {
    const expected = stackConfig({ ...values, ...(values['tessera:archiveDir'] ? { 'tessera:archiveDir': archiveDir } : {}) });
    expect(await fromArgs()).toEqual(expected);
  });

  it('has an arg for every setting a stack file takes (a new key needs its arg)', () => {
    const settings = new Set<string>(
      [COMMON_ARGS, CLOUD_ARGS.aws, CLOUD_ARGS.gcp, CLOUD_ARGS.azure].flatMap((specs) => Object.values(specs).map((s) => s.setting)),
    );
    const missing = (Object.keys(CONFIG_KEYS) as ConfigKey[]).filter((k) => k !== 'cloud' && !settings.has(k));
    expect(missing).toEqual([]);
  });

  it('defaults the region, and the GCP project, to the provider', async () => {
    expect((await configOf(() => new TesseraAws('tiles'), AWS)).region).toBe('eu-west-1');
    process.env.AWS_REGION = 'eu-north-1';
    try {
      expect((await configOf(() => new TesseraAws('tiles'), {})).region).toBe('eu-north-1');
    } finally {
      delete process.env.AWS_REGION;
    }
    expect(await configOf(() => new TesseraGcp('tiles'), GCP)).toMatchObject({ region: 'europe-west1', project: 'my-project' });
  });

  it("leaves the region to the user's provider when the options pass one", async () => {
    const { Provider } = await import('@pulumi/aws/provider.js');
    const { error, registered } = await construct(() => {
      const provider = new Provider('us-east-1', { region: 'us-east-1' });
      new TesseraAws('tiles', { region: 'us-east-1' }, { provider });
    }, AWS);
    expect(error).toBeUndefined();
    expect(registered.some((u) => u.endsWith('tessera:index:TesseraAws::tiles'))).toBe(true);
  });

  it("reads the archives from $TESSERA_ARCHIVE_DIR, else from dist/ beside the nearest package.json (the repository's here)", () => {
    expect(packageArchiveDir()).toBe(DEFAULT_ARCHIVE_DIR.replace(/\/$/, ''));
    const nested = join(scratch, 'pkg', 'dist', 'package');
    mkdirSync(nested, { recursive: true });
    writeFileSync(join(scratch, 'pkg', 'package.json'), '{"name":"tessera"}');
    expect(packageArchiveDir(nested)).toBe(join(scratch, 'pkg', 'dist'));
  });
});

/** The stack outputs infra/index.ts published before the components, per cloud. */
const PUBLISHED = {
  common: ['cloud', 'region', 'platform', 'functionTimeoutSeconds', 'leaseSeconds', 'leaseMustExceedSeconds', 'sourcePrefix'],
  aws: [
    'sourceBucket',
    'outputBucket',
    'claimsTable',
    'tileQueueUrl',
    'tileDeadLetterQueueUrl',
    'sceneQueueUrl',
    'ingestQueueUrl',
    'ingestDeadLetterQueueUrl',
    'manifestTable',
    'tileQueueVisibilitySeconds',
    'alarmTopic',
    'verifyPolicyArn',
  ],
  gcp: [
    'project',
    'sourceBucket',
    'outputBucket',
    'claimsCollection',
    'tileTopic',
    'deadLetterTopic',
    'ingestTopic',
    'ingestDeadLetterTopic',
    'manifestCollection',
    'firestoreDatabase',
    'tileAckDeadlineSeconds',
    'verifyServiceAccount',
  ],
  azure: [
    'plan',
    'resourceGroup',
    'storageAccount',
    'hostStorageAccount',
    'functionApp',
    'tileQueue',
    'sourceContainer',
    'outputContainer',
    'claimsTable',
    'sceneQueue',
    'poisonQueue',
    'ingestQueue',
    'ingestPoisonQueue',
    'manifestTable',
    'nextStep',
    'verifyIdentityClientId',
  ],
} as const;

/** The outputs a component registered (the mock monitor keeps them as the component's state). */
function registeredOutputs(urn: string): Record<string, unknown> {
  const monitor = pulumi.runtime.getMonitor() as unknown as {
    getRegisteredResources(): Map<string, { state: { toJavaScript(): Record<string, unknown> } }>;
  };
  const state = monitor.getRegisteredResources().get(urn)?.state;
  if (!state) throw new Error(`no registered resource ${urn}`);
  return state.toJavaScript();
}

describe("the repository's program is one consumer of the components", () => {
  for (const file of EXAMPLE_STACK_FILES) {
    const { stack, config } = loadStackFile(file);
    const cloud = config['tessera:cloud'] as 'aws' | 'gcp' | 'azure';
    const type = { aws: 'tessera:index:TesseraAws', gcp: 'tessera:index:TesseraGcp', azure: 'tessera:index:TesseraAzure' }[cloud];

    it(`${stack}: declares what the former program declared, same names and inputs, each URN the former one under ${type}`, async () => {
      const current = await runStack(stack, config);
      const component = current.ofType(type);
      expect(component.map((r) => r.name)).toEqual(['tessera']);
      // Published as stack outputs and registered as the component's, the keys the program published before.
      const keys = [...PUBLISHED.common, ...PUBLISHED[cloud]].sort();
      expect(Object.keys(current.outputs).sort()).toEqual(keys);
      expect(Object.keys(registeredOutputs(component[0]?.urn ?? '')).sort()).toEqual(keys);

      const former: MockRun = await runProgramUnderMocks(stack, { 'tessera:archiveDir': archiveDir, ...config }, formerProgram);
      const key = (r: { type: string; name: string }) => `${r.type}::${r.name}`;
      const before = new Map(former.resources.map((r) => [key(r), r]));
      const now = current.resources.filter((r) => r.type !== type);
      expect(now.map(key).sort()).toEqual([...before.keys()].sort());
      for (const r of now) {
        const old = before.get(key(r));
        expect(r.inputs, key(r)).toEqual(old?.inputs);
        // The component sits between the stack and the former top: the URN gains its type, nothing else changes.
        expect(r.urn.replace(`::${type}$`, '::'), key(r)).toBe(old?.urn);
      }
    });
  }

  it('keeps the clean error of a missing archive (a RunError with the files), not an args error', async () => {
    const empty = mkdtempSync(join(scratch, 'no-archives-'));
    const cfg = parseStackConfig(
      { 'tessera:cloud': 'aws', 'tessera:region': 'eu-west-1', ...AWS, 'tessera:archiveDir': empty },
      { stack: 'aws-eu-west-1', defaultArchiveDir: DEFAULT_ARCHIVE_DIR },
    );
    if (cfg.cloud !== 'aws') throw new Error('an AWS configuration was expected');
    const { error, registered } = await construct(() => new TesseraAws('tessera', fromStackConfig(cfg)), AWS);
    expect(pulumi.RunError.isInstance(error)).toBe(true);
    expect(error).not.toBeInstanceOf(TesseraArgsError);
    expect((error as Error).message).toMatch(
      /^function archives not found: .*; run npm run build:functions first \(or point tessera:archiveDir/,
    );
    expect(registered).toEqual([]);
  });
});

describe(`the README's example ("${README_SECTION}")`, () => {
  let run: MockRun;
  const type = (t: string) => run.ofType(t);

  it('is a short program that imports the components from tessera/pulumi', () => {
    const example = readmeExample();
    expect(example).toContain("from 'tessera/pulumi'");
    expect(example.trim().split('\n').length).toBeLessThanOrEqual(10);
  });

  it('runs under mocks with only aws:region set, declaring one TesseraAws with every resource below it', async () => {
    const path = join(scratch, 'readme-example.ts');
    writeFileSync(path, resolvedReadmeExample());
    run = await runProgramUnderMocks(STACK, AWS, async () => ({ ...(await import(path)) }));
    expect(type('tessera:index:TesseraAws').map((r) => r.name)).toEqual(['tiles']);
    const custom = run.resources.filter((r) => r.custom);
    expect(custom.length).toBeGreaterThan(60);
    for (const r of custom) {
      expect(r.urn, r.name).toContain('::tessera:index:TesseraAws$tessera:aws:TilingStack$');
      expect(r.name).toMatch(/^tiles-/);
    }
  });

  it('deploys what the example asks: 4 GB tile workers, the alarm address, CORS for the web map, its outputs', () => {
    const tile = run.one('aws:lambda/function:Function', 'tiles-tile');
    expect(tile.inputs.memorySize).toBe(4096);
    expect(run.one('aws:sns/topicSubscription:TopicSubscription', '-alarms-email').inputs).toMatchObject({
      protocol: 'email',
      endpoint: 'ops@example.org',
    });
    const outputs = run.one('aws:s3/bucket:Bucket', 'tiles-outputs');
    const cors = run.one('aws:s3/bucketCorsConfiguration:BucketCorsConfiguration', 'tiles-outputs');
    expect(cors.inputs.bucket).toBe(outputs.id);
    expect(cors.inputs.corsRules).toEqual([
      expect.objectContaining({ allowedOrigins: ['https://maps.example.org'], allowedMethods: ['GET', 'HEAD'] }),
    ]);
    expect(run.outputs).toEqual({
      sourceBucket: run.one('aws:s3/bucket:Bucket', 'tiles-sources').state.bucket,
      outputBucket: outputs.state.bucket,
    });
  });

  it('names what AWS wants unique after the stack and the component, and tags every resource with it', () => {
    const logGroups = type('aws:cloudwatch/logGroup:LogGroup').map((r) => r.inputs.name);
    expect(logGroups).toContain(`/tessera/${STACK}-tiles/tile`);
    for (const r of run.resources.filter((x) => x.custom && x.inputs.tags !== undefined)) {
      expect(r.inputs.tags, r.name).toEqual({
        project: 'tessera',
        stack: STACK,
        cloud: 'aws',
        'managed-by': 'pulumi',
        'tessera-component': 'tiles',
      });
    }
  });

  it("declares the repository's AWS stack, renamed, and the two things the example adds", async () => {
    const stackRun = await runStack('aws-eu-west-1', loadStackFile('Pulumi.aws-eu-west-1.yaml').config);
    const names = (r: MockRun, prefix: RegExp) =>
      r.resources.filter((x) => x.custom).map((x) => `${x.type}::${x.name.replace(prefix, '')}`);
    expect(names(run, /^tiles-/).sort()).toEqual(
      [
        ...names(stackRun, /^tessera-/),
        'aws:s3/bucketCorsConfiguration:BucketCorsConfiguration::outputs',
        'aws:sns/topicSubscription:TopicSubscription::alarms-email',
      ].sort(),
    );
  });

  it('puts the CORS rule on the outputs on GCP and Azure too, and no rule without the arg', async () => {
    const origins = ['https://maps.example.org'];
    const gcp = await runProgramUnderMocks(STACK, GCP, async () => ({
      ...new TesseraGcp('tiles', { outputCorsOrigins: origins }).outputs,
    }));
    expect(gcp.one('gcp:storage/bucket:Bucket', 'tiles-outputs').inputs.cors).toEqual([
      expect.objectContaining({ origins, methods: ['GET', 'HEAD'], responseHeaders: expect.arrayContaining(['Range', 'Content-Range']) }),
    ]);
    expect(gcp.one('gcp:storage/bucket:Bucket', 'tiles-sources').inputs.cors).toBeUndefined();
    const azure = await runProgramUnderMocks(STACK, AZURE, async () => ({ ...new TesseraAzure('tiles').outputs }));
    expect(azure.one('azure-native:storage:BlobServiceProperties', 'tiles-blob-service').inputs.cors).toBeUndefined();
    const withCors = await runProgramUnderMocks(STACK, AZURE, async () => ({
      ...new TesseraAzure('tiles', { outputCorsOrigins: origins }).outputs,
    }));
    expect(withCors.one('azure-native:storage:BlobServiceProperties', 'tiles-blob-service').inputs.cors).toEqual({
      corsRules: [expect.objectContaining({ allowedOrigins: origins, allowedMethods: ['GET', 'HEAD'] })],
    });
  });

  it('lets two components share a stack: no URN and no fixed name twice', async () => {
    const both = await runProgramUnderMocks(STACK, AWS, async () => {
      new TesseraAws('a');
      new TesseraAws('b');
      return {};
    });
    const urns = both.resources.map((r) => r.urn);
    expect(new Set(urns).size).toBe(urns.length);
    const fixed = both.resources.flatMap((r) => (typeof r.inputs.name === 'string' ? [`${r.type} ${r.inputs.name}`] : []));
    expect(fixed.length).toBeGreaterThan(5);
    expect(new Set(fixed).size).toBe(fixed.length);
  });
});

describe('docs/deploy.md', () => {
  it('documents every arg of the components as the Args types declare it (name, type, default, meaning)', () => {
    const table = renderArgsTable();
    expect(table.split('\n').length).toBeGreaterThan(30);
    const documented = documentedTable();
    expect(documented, 'docs/deploy.md has no generated args table').toBeDefined();
    expect(tableCells(documented ?? ''), 'rewrite it: node scripts/node.mjs tsx test/infra/component-docs.ts --write').toEqual(
      tableCells(table),
    );
  });
});
