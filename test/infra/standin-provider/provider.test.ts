import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as pulumi from '@pulumi/pulumi';
import { afterEach, describe, expect, it } from 'vitest';
import { ACCOUNT_ID } from '../../../infra/preflight/mock-run.js';
import { holdsSecret, parseUrn, sameValue, standinProvider, stateOf } from './provider.js';

/**
 * The stand-in provider on its own, without the engine (test/infra/pulumi-engine.test.ts runs it under the
 * engine): what it answers, and that its diff can say "changed", so the engine test's "a second up changes
 * nothing" is a finding and not the only answer the stand-in knows.
 */

const secret = (value: unknown) => ({ [pulumi.runtime.specialSigKey]: pulumi.runtime.specialSecretSig, value });
const URN = (type: string, name: string) => `urn:pulumi:aws-eu-west-1::tessera::tessera:aws:TilingStack$${type}::${name}`;
const QUEUE = URN('aws:sqs/queue:Queue', 'tessera-tile');
const provider = standinProvider('7.48.0');

async function diff(urn: string, olds: Record<string, unknown>, news: Record<string, unknown>) {
  return (provider.diff as NonNullable<typeof provider.diff>)('id', urn, olds, news);
}

async function create(urn: string, inputs: Record<string, unknown>) {
  return (provider.create as NonNullable<typeof provider.create>)(urn, inputs);
}

describe('the stand-in provider', () => {
  afterEach(() => {
    delete process.env.TESSERA_STANDIN_LOG;
  });

  it('reads the type and the name from a URN with a parent type', () => {
    expect(parseUrn(QUEUE)).toEqual({ type: 'aws:sqs/queue:Queue', name: 'tessera-tile' });
    expect(() => parseUrn('urn:pulumi:s::p')).toThrow(/not a resource URN/);
  });

  it("answers a create with the inputs and the mock table's attributes, the same each time", async () => {
    const inputs = { name: 'tessera-tile-q', visibilityTimeoutSeconds: 5400 };
    const created = await create(QUEUE, inputs);
    expect(created.outs).toMatchObject({
      ...inputs,
      arn: `arn:aws:sqs:eu-west-1:${ACCOUNT_ID}:tessera-tile-q`,
      url: `https://sqs.eu-west-1.amazonaws.com/${ACCOUNT_ID}/tessera-tile-q`,
    });
    expect(created.id).toBe('tessera-tile-id');
    expect(await create(QUEUE, inputs)).toEqual(created);
  });

  it('invents a name and an ARN for a type the mock table does not know', () => {
    const { outs } = stateOf('aws:newservice/thing:Thing', 'tessera-x', {});
    expect(outs).toMatchObject({
      name: 'tessera-x-0a1b2c3',
      arn: `arn:aws:newservice:eu-west-1:${ACCOUNT_ID}:newservice/tessera-x-0a1b2c3`,
    });
  });

  it('keeps secrets secret: an echoed input as it came, a computed attribute over a secret as a secret', () => {
    const url = 'postgis://u:pw-1234@db:5432/d';
    const inputs = {
      name: 'tessera-tile',
      project: 'p',
      location: 'europe-west1',
      serviceConfig: { environmentVariables: { TESSERA_FEATURE_SINK: secret(url) } },
      labels: secret({ a: 'b' }),
    };
    const { outs } = stateOf('gcp:cloudfunctionsv2/function:Function', 'tessera-tile', inputs);
    expect(outs.labels).toEqual(inputs.labels);
    // The table spreads serviceConfig into its answer (adding uri): that answer is a secret as a whole.
    expect(outs.serviceConfig).toEqual(secret(expect.objectContaining({ uri: expect.stringContaining('run.app') })));
    expect(holdsSecret(outs.serviceConfig)).toBe(true);
    // What the engine would store in clear: everything but the secrets.
    const clear = JSON.stringify(outs, (_k, v) => (v?.[pulumi.runtime.specialSigKey] === pulumi.runtime.specialSecretSig ? '[secret]' : v));
    expect(clear).not.toContain('pw-1234');
  });

  it('reports no change for the inputs a state was made from, and a change for any other', async () => {
    const inputs = { name: 'tessera-tile-q', visibilityTimeoutSeconds: 5400, tags: { stack: 'aws-eu-west-1' } };
    const { outs } = await create(QUEUE, inputs);
    expect(await diff(QUEUE, outs, inputs)).toEqual({ changes: false });
    expect(await diff(QUEUE, outs, { ...inputs, visibilityTimeoutSeconds: 3600 })).toEqual({ changes: true });
    expect(await diff(QUEUE, outs, { ...inputs, tags: { stack: 'other' } })).toEqual({ changes: true });
    const { tags: _removed, ...fewer } = inputs;
    expect(await diff(QUEUE, outs, fewer)).toEqual({ changes: true });
    expect(await diff(QUEUE, outs, { ...inputs, name: pulumi.runtime.unknownValue })).toEqual({ changes: true });
  });

  it('compares values structurally, whatever the order of their keys', () => {
    expect(sameValue({ a: 1, b: [1, { c: 2, d: 3 }] }, { b: [1, { d: 3, c: 2 }], a: 1 })).toBe(true);
    expect(sameValue({ a: 1 }, { a: 1, b: 2 })).toBe(false);
    expect(sameValue([1, 2], [2, 1])).toBe(false);
  });

  it('answers invokes from the mock table, and names the table for a function it does not know', async () => {
    const invoke = provider.invoke as NonNullable<typeof provider.invoke>;
    expect((await invoke('aws:index/getCallerIdentity:getCallerIdentity', {})).outputs).toMatchObject({ accountId: ACCOUNT_ID });
    await expect(invoke('aws:index/getNothing:getNothing', {})).rejects.toThrow(/infra\/preflight\/mock-run\.ts/);
  });

  it('journals creates, updates and deletes in the order asked when TESSERA_STANDIN_LOG is set', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-standin-'));
    try {
      process.env.TESSERA_STANDIN_LOG = join(dir, 'journal.log');
      const { id, outs } = await create(QUEUE, { name: 'q' });
      await (provider.update as NonNullable<typeof provider.update>)(id, QUEUE, outs, { name: 'q2' });
      await (provider.delete as NonNullable<typeof provider.delete>)(id, QUEUE, outs);
      expect(readFileSync(join(dir, 'journal.log'), 'utf8')).toBe(`create ${QUEUE}\nupdate ${QUEUE}\ndelete ${QUEUE}\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
