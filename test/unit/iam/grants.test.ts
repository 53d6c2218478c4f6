import { beforeAll, describe, expect, it } from 'vitest';
import {
  AREAS,
  type AreaName,
  areaPrefix,
  DEFAULT_SOURCE_PREFIX,
  DEPLOYED_ROLES,
  FUNCTION_ROLES,
  type FunctionRole,
  type ObjectAccess,
  ROLE_ACCESS,
  SWEEP_STATE_KEY,
  sceneLifecycleKeys,
} from '../../../shared/domain/key-layout.js';
import { loadStackFile } from '../../infra/stack-files.js';
import type { Cloud, LogicalResource, RecordedAccess, StackGrants } from '../../support/iam/access.js';
import {
  awsPolicyDocumentsFor,
  exampleStackFile,
  IamModelError,
  loadStackGrants,
  loadStackRun,
  stackGrantsFromRun,
} from '../../support/iam/grants.js';
import { awsStackModel } from '../../support/iam/grants-aws.js';
import { mainAt797a1da } from './mock-runs.js';

/**
 * The grant model on the real program under mocks (test/support/iam/grants.ts): the final state (every
 * access shared/domain/key-layout.ts ROLE_ACCESS lists is granted, on every cloud, with that cloud's
 * semantics), awsPolicyDocumentsFor, and the check failing on main at 797a1da, before the grants were derived.
 */

const CLOUDS = ['aws', 'gcp', 'azure'] as const satisfies readonly Cloud[];
const SCENE = 'a6652a0c11138e63f004ec57fa86808c30554162af0b56656beeac9ef7c36e61';
const BLOBS = 'Microsoft.Storage/storageAccounts/blobServices/containers/blobs';

const access = (
  cloud: Cloud,
  role: FunctionRole,
  action: string,
  resource: LogicalResource,
  key?: string,
  list?: boolean,
): RecordedAccess => ({
  cloud,
  role,
  action,
  resource,
  ...(key === undefined ? {} : { key }),
  ...(list ? { list: true } : {}),
  request: `${action} ${key ?? ''}`,
});

/**
 * What one ObjectAccess of the layout takes on each cloud, as sets of permissions: every set listed must be
 * held, each in one of its alternatives (the cloud's own "or": Azure's create-only Put Blob is authorised by
 * blobs/write or blobs/add/action).
 */
function permissionsFor(cloud: Cloud, area: AreaName, accessKind: ObjectAccess): readonly (readonly string[])[][] {
  const one = (action: string) => [[action]];
  switch (cloud) {
    case 'aws':
      switch (accessKind) {
        // Source reads are pinned to the version the job key names.
        case 'read':
          return area === 'source' ? [one('s3:GetObject'), one('s3:GetObjectVersion')] : [one('s3:GetObject')];
        case 'create':
        case 'replace':
          return [one('s3:PutObject')];
        case 'delete':
          return [one('s3:DeleteObject')];
        case 'list':
          return [one('s3:ListBucket')];
        // A pin is a read by version id (GetObjectVersion, held with read).
        case 'pin':
          return [];
      }
      break;
    case 'gcp':
      switch (accessKind) {
        case 'read':
          return [one('storage.objects.get')];
        case 'create':
          return [one('storage.objects.create')];
        // An overwrite, even conditional, needs delete as well as create.
        case 'replace':
          return [one('storage.objects.create'), one('storage.objects.delete')];
        case 'delete':
          return [one('storage.objects.delete')];
        case 'list':
          return [one('storage.objects.list')];
        // A pin names a generation, read with storage.objects.get.
        case 'pin':
          return [];
      }
      break;
    case 'azure':
      switch (accessKind) {
        case 'read':
        case 'list':
          return [one(`${BLOBS}/read`)];
        case 'create':
          return [[[`${BLOBS}/write`], [`${BLOBS}/add/action`]]];
        case 'replace':
          return [one(`${BLOBS}/write`)];
        case 'delete':
          return [one(`${BLOBS}/delete`)];
        // A pin is a snapshot, which Azure authorizes as a write of the base blob.
        case 'pin':
          return [one(`${BLOBS}/write`)];
      }
  }
}

/** The accesses of `role` to `area` that the grants refuse, described. */
function refusedLayoutAccesses(grants: StackGrants, cloud: Cloud, role: FunctionRole, area: AreaName, sourcePrefix: string): string[] {
  const grant = ROLE_ACCESS[role].find((g) => g.area === area);
  const prefix = areaPrefix(area, sourcePrefix);
  const resource: LogicalResource = AREAS[area].store === 'sources' ? 'sourceBucket' : 'outputBucket';
  const exact = 'exact' in AREAS[area] && AREAS[area].exact === true;
  const refused: string[] = [];
  for (const kind of grant?.access ?? []) {
    const list = kind === 'list';
    const key = list || exact ? prefix : `${prefix}${SCENE}/sample.bin`;
    for (const alternatives of permissionsFor(cloud, area, kind)) {
      const held = alternatives.some((actions) => actions.every((a) => grants.check(access(cloud, role, a, resource, key, list)).allowed));
      if (!held) refused.push(`${kind}: ${alternatives.map((a) => a.join(' + ')).join(' or ')} on ${resource} ${key}`);
    }
  }
  return refused;
}

describe.each(CLOUDS)('loadStackGrants(%s) on the example stack', (cloud) => {
  let grants: StackGrants;
  let sourcePrefix: string;

  beforeAll(async () => {
    grants = await loadStackGrants(cloud);
    sourcePrefix = loadStackFile(exampleStackFile(cloud)).config['tessera:sourcePrefix'] ?? DEFAULT_SOURCE_PREFIX;
  }, 120_000);

  it('reads at least one grant of every deployed role from the program', () => {
    for (const role of DEPLOYED_ROLES) expect(grants.grants(role).length, role).toBeGreaterThan(0);
  });

  it('gives every grant a distinct id within its role, which check() answers with', () => {
    for (const role of FUNCTION_ROLES) {
      const ids = grants.grants(role).map((g) => g.id);
      expect(new Set(ids).size, `${role}: ${ids.join(', ')}`).toBe(ids.length);
    }
  });

  it.each(FUNCTION_ROLES.flatMap((role) => ROLE_ACCESS[role].map((g) => [role, g.area] as const)))(
    'grants %s every access the key layout lists in %s',
    (role, area) => {
      expect(refusedLayoutAccesses(grants, cloud, role, area, sourcePrefix)).toEqual([]);
    },
  );

  it('names the grant that allows an access, among the role’s grants', () => {
    const [role, area] = ['tile', 'tiles'] as const;
    const key = `${areaPrefix(area, sourcePrefix)}${SCENE}/0_0.tif`;
    const action = { aws: 's3:GetObject', gcp: 'storage.objects.get', azure: `${BLOBS}/read` }[cloud];
    const verdict = grants.check(access(cloud, role, action, 'outputBucket', key));
    expect(verdict.allowed).toBe(true);
    expect(grants.grants(role).map((g) => g.id)).toContain(verdict.grant);
  });

  it('refuses an access to a resource the stack does not have, and an access of another cloud', () => {
    // The example stacks set no tessera:featureSinkUrl, so none deploys the feature sink's secret.
    expect(grants.check(access(cloud, 'scene', 'any', 'featureSinkSecret')).allowed).toBe(false);
    const other = CLOUDS.find((c) => c !== cloud) as Cloud;
    expect(() => grants.check(access(other, 'tile', 'any', 'outputBucket', 'tiles/x'))).toThrow(IamModelError);
  });
});

describe('awsPolicyDocumentsFor', () => {
  it('returns the role’s documents verbatim, the mock ARNs replaced by the given names', async () => {
    const { run } = await loadStackRun('aws');
    const mockArns = awsStackModel(run).arns;
    const names = {
      sourceBucket: 'src-1a2b',
      outputBucket: 'out-1a2b',
      claimsTable: 'claims-1a2b',
      tileQueue: 'tiles-1a2b',
      deadLetterQueue: 'dlq-1a2b',
    };
    const verbatim = await awsPolicyDocumentsFor('tile', {});
    const renamed = await awsPolicyDocumentsFor('tile', names, { region: 'us-east-1', accountId: '000000000000' });
    const real = {
      sourceBucket: 'arn:aws:s3:::src-1a2b',
      outputBucket: 'arn:aws:s3:::out-1a2b',
      claimsTable: 'arn:aws:dynamodb:us-east-1:000000000000:table/claims-1a2b',
      tileQueue: 'arn:aws:sqs:us-east-1:000000000000:tiles-1a2b',
      deadLetterQueue: 'arn:aws:sqs:us-east-1:000000000000:dlq-1a2b',
    };
    const text = JSON.stringify(renamed);
    for (const [resource, arn] of Object.entries(real)) {
      expect(text, resource).toContain(arn);
      expect(text, resource).not.toContain(`"${mockArns.get(resource as LogicalResource)}`);
    }
    // Back to the mock's ARNs, it is the program's own document: nothing else was touched.
    let back = text;
    for (const [resource, arn] of Object.entries(real)) back = back.split(arn).join(mockArns.get(resource as LogicalResource) as string);
    expect(JSON.parse(back)).toEqual(verbatim);
    const tilePolicy = run.ofType('aws:iam/rolePolicy:RolePolicy').find((p) => p.name.endsWith('-tile'));
    expect(verbatim.map((d) => d.document)).toContainEqual(JSON.parse(String(tilePolicy?.inputs.policy)));
  });

  it('refuses to rename a resource the stack does not deploy', async () => {
    // The example stack sets no tessera:featureSinkUrl, so it has no feature sink secret.
    await expect(awsPolicyDocumentsFor('tile', { featureSinkSecret: 'sink' })).rejects.toThrow(IamModelError);
  });
});

/**
 * main at 797a1da: the program before its grants were derived from the key layout (issue 24). These are the
 * accesses the issue found refused there, checked on that program's recorded resources: the check fails on them.
 */
describe('the grants of main at 797a1da (recorded), which the issue found too narrow', () => {
  const hour = '2026010112';
  const aws = () => {
    const { run, stack } = mainAt797a1da('aws');
    return stackGrantsFromRun('aws', run, stack);
  };

  it('AWS: fan-out may not enter a scene in the sweep index', () => {
    expect(aws().check(access('aws', 'scene', 's3:PutObject', 'outputBucket', sceneLifecycleKeys.indexEntry(hour, SCENE))).allowed).toBe(
      false,
    );
  });

  it('AWS: a tile job may write its tile but not read the manifest, write a chunk marker or a tombstone under scenes/', () => {
    const g = aws();
    expect(g.check(access('aws', 'tile', 's3:PutObject', 'outputBucket', `tiles/${SCENE}/0_0.tif`))).toEqual({
      allowed: true,
      grant: 'WriteTiles',
    });
    expect(g.check(access('aws', 'tile', 's3:GetObject', 'outputBucket', `scenes/${SCENE}/scene.json`)).allowed).toBe(false);
    expect(g.check(access('aws', 'tile', 's3:PutObject', 'outputBucket', sceneLifecycleKeys.chunkDone(SCENE, 0, 10))).allowed).toBe(false);
    expect(g.check(access('aws', 'tile', 's3:PutObject', 'outputBucket', sceneLifecycleKeys.superseded(SCENE))).allowed).toBe(false);
  });

  it('AWS: the mosaic sweep may neither read nor rewrite its state, nor list the scene index', () => {
    const g = aws();
    expect(g.check(access('aws', 'mosaic', 's3:GetObject', 'outputBucket', SWEEP_STATE_KEY)).allowed).toBe(false);
    expect(g.check(access('aws', 'mosaic', 's3:PutObject', 'outputBucket', SWEEP_STATE_KEY)).allowed).toBe(false);
    expect(g.check(access('aws', 'mosaic', 's3:ListBucket', 'outputBucket', sceneLifecycleKeys.indexRoot(), true)).allowed).toBe(false);
    expect(g.check(access('aws', 'mosaic', 's3:ListBucket', 'outputBucket', 'tiles/', true))).toEqual({
      allowed: true,
      grant: 'ListScenesMosaicsTiles',
    });
  });

  it('fails the key-layout check above on it (that check is not vacuous)', () => {
    const key = SWEEP_STATE_KEY;
    expect(refusedLayoutAccesses(aws(), 'aws', 'mosaic', 'sweepState', DEFAULT_SOURCE_PREFIX)).toEqual([
      `read: s3:GetObject on outputBucket ${key}`,
      `create: s3:PutObject on outputBucket ${key}`,
      `replace: s3:PutObject on outputBucket ${key}`,
    ]);
    const { run, stack } = mainAt797a1da('gcp');
    expect(refusedLayoutAccesses(stackGrantsFromRun('gcp', run, stack), 'gcp', 'tile', 'scenes', DEFAULT_SOURCE_PREFIX)).toEqual([
      `create: storage.objects.create on outputBucket scenes/${SCENE}/sample.bin`,
    ]);
  });

  it('GCP: the mosaic sweep may not rewrite its state (no storage.objects.delete), and objectCreator cannot replace a mosaic', () => {
    const { run, stack } = mainAt797a1da('gcp');
    const g = stackGrantsFromRun('gcp', run, stack);
    expect(g.check(access('gcp', 'mosaic', 'storage.objects.delete', 'outputBucket', SWEEP_STATE_KEY)).allowed).toBe(false);
    expect(g.check(access('gcp', 'mosaic', 'storage.objects.create', 'outputBucket', SWEEP_STATE_KEY)).allowed).toBe(false);
    expect(g.check(access('gcp', 'mosaic', 'storage.objects.create', 'outputBucket', `mosaics/${SCENE}.vrt`))).toEqual({
      allowed: true,
      grant: 'tessera-mosaic-write-mosaics',
    });
    expect(g.check(access('gcp', 'mosaic', 'storage.objects.delete', 'outputBucket', `mosaics/${SCENE}.vrt`)).allowed).toBe(false);
    // objectUser on tiles/ did carry delete, so tiles could be repaired.
    expect(g.check(access('gcp', 'tile', 'storage.objects.delete', 'outputBucket', `tiles/${SCENE}/0_0.tif`)).allowed).toBe(true);
  });

  it('Azure: the app’s one identity serves every function, with Contributor on whole containers', () => {
    const { run, stack } = mainAt797a1da('azure');
    const g = stackGrantsFromRun('azure', run, stack);
    for (const role of DEPLOYED_ROLES) expect(g.grants(role).map((x) => x.id)).toContain('tessera-app-outputs');
    expect(g.grants('verify')).toEqual([]);
    // Over-privilege, visible in the report: the tile function may write mosaics.
    expect(g.check(access('azure', 'tile', `${BLOBS}/write`, 'outputBucket', `mosaics/${SCENE}.vrt`))).toEqual({
      allowed: true,
      grant: 'tessera-app-outputs',
    });
    // Queue Data Contributor holds messages/write but not messages/add/action: Put Message is allowed by the first.
    const messages = 'Microsoft.Storage/storageAccounts/queueServices/queues/messages';
    expect(g.check(access('azure', 'scene', `${messages}/add/action`, 'tileQueue')).allowed).toBe(false);
    expect(g.check(access('azure', 'scene', `${messages}/write`, 'tileQueue')).allowed).toBe(true);
  });
});
