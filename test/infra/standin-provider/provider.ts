import { appendFileSync } from 'node:fs';
import * as pulumi from '@pulumi/pulumi';
import type * as provider from '@pulumi/pulumi/provider';
import { ACCOUNT_ID, calls, mockResource } from '../../../infra/preflight/mock-run.js';

/**
 * A stand-in resource provider for the real Pulumi engine (test/infra/pulumi-engine.test.ts). No provider
 * plugin (aws, gcp, azure-native, time) can be had on the machines this project is built on, so each one is
 * replaced by this: check echoes the inputs, create answers with a deterministic id and the attributes the
 * program reads (the table of the mock run, infra/preflight/mock-run.ts, so the engine run and the mock run
 * see the same values), and diff reports a change only when the state the new inputs would give differs from
 * the state recorded. Nothing is created anywhere: it proves the program on the engine, not how a cloud answers.
 *
 * Values arrive as the engine encodes them (the SDK's provider server does not decode them): a secret is
 * `{ [specialSigKey]: specialSecretSig, value }`, an unknown is `unknownValue`. Secrets are echoed in that
 * form, so the engine keeps them secret in its state, as a real provider that accepts secrets does.
 */

const SIG = pulumi.runtime.specialSigKey;
const SECRET = pulumi.runtime.specialSecretSig;
const UNKNOWN = pulumi.runtime.unknownValue;

type Props = Record<string, unknown>;

/** `urn:pulumi:<stack>::<project>::<parent type>$<type>::<name>` -> type and name. */
export function parseUrn(urn: string): { type: string; name: string } {
  const parts = urn.split('::');
  const types = parts[2];
  const name = parts.slice(3).join('::');
  if (parts.length < 4 || !types || !name) throw new Error(`[standin-provider] not a resource URN: ${urn}`);
  return { type: types.split('$').at(-1) as string, name };
}

const isSecret = (v: unknown): v is { value: unknown } =>
  typeof v === 'object' && v !== null && (v as Props)[SIG] === SECRET && 'value' in (v as object);

/** True if the value holds an engine secret anywhere inside. */
export function holdsSecret(v: unknown): boolean {
  if (isSecret(v)) return true;
  if (Array.isArray(v)) return v.some(holdsSecret);
  if (typeof v === 'object' && v !== null) return Object.values(v).some(holdsSecret);
  return false;
}

/** True if the value holds an unknown (preview: an input that depends on an output not yet known). */
export function holdsUnknown(v: unknown): boolean {
  if (v === UNKNOWN) return true;
  if (Array.isArray(v)) return v.some(holdsUnknown);
  if (typeof v === 'object' && v !== null) return Object.values(v).some(holdsUnknown);
  return false;
}

/** The value with every secret replaced by its plain value: what the mock table reads. */
function reveal(v: unknown): unknown {
  if (isSecret(v)) return reveal(v.value);
  if (Array.isArray(v)) return v.map(reveal);
  if (typeof v === 'object' && v !== null) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, reveal(x)]));
  return v;
}

const secret = (value: unknown) => ({ [SIG]: SECRET, value });

/**
 * What a provider would add for a type the mock table does not name (a resource added to the program since):
 * a name and, on AWS, an ARN, from the type token and the logical name. The mock table's own attributes win.
 */
function generic(type: string, name: string, inputs: Props): Props {
  const physical = typeof inputs.name === 'string' ? inputs.name : `${name}-0a1b2c3`;
  const [pkg, module = 'index'] = type.split(':');
  const service = module.split('/')[0] ?? 'index';
  if (pkg === 'aws') return { name: physical, arn: `arn:aws:${service}:eu-west-1:${ACCOUNT_ID}:${service}/${physical}` };
  return { name: physical };
}

/**
 * The id and the state a create (or an update) answers with. Deterministic: the same inputs give the same
 * state, which is what lets diff compare a recomputed state with the recorded one. An attribute the table
 * computes over an input that held a secret (GCP's serviceConfig, say) is stored as a secret as a whole, so a
 * computed attribute never carries a secret out in clear.
 */
export function stateOf(type: string, name: string, inputs: Props): { id: string; outs: Props } {
  const plain = reveal(inputs) as Props;
  const { id, state } = mockResource(type, name, plain);
  const outs: Props = { ...generic(type, name, plain), ...inputs };
  for (const [key, value] of Object.entries(state)) {
    if (key in inputs && sameValue(value, plain[key])) continue; // an echoed input, kept as it came
    outs[key] = holdsSecret(inputs[key]) ? secret(value) : value;
  }
  return { id, outs };
}

/** Structural equality of two engine property values (objects compared key by key, whatever their key order). */
export function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => sameValue(x, b[i]));
  }
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  const ka = Object.keys(a).filter((k) => (a as Props)[k] !== undefined);
  const kb = Object.keys(b).filter((k) => (b as Props)[k] !== undefined);
  return ka.length === kb.length && ka.every((k) => sameValue((a as Props)[k], (b as Props)[k]));
}

/**
 * `TESSERA_STANDIN_LOG`, when set, names a file each create, update and delete appends a line to
 * (`create <urn>`), in the order the engine asked for them: the test checks the engine's ordering with it.
 */
function journal(op: 'create' | 'update' | 'delete', urn: string): void {
  const file = process.env.TESSERA_STANDIN_LOG;
  if (file) appendFileSync(file, `${op} ${urn}\n`);
}

/** Plugin name -> the npm package whose SDK the program uses (its package.json names the plugin and version). */
export const STANDIN_PLUGINS = {
  aws: '@pulumi/aws',
  gcp: '@pulumi/gcp',
  'azure-native': '@pulumi/azure-native',
  time: '@pulumiverse/time',
} as const;
export type StandinPlugin = keyof typeof STANDIN_PLUGINS;

/** The stand-in for one provider package (`aws`, `gcp`, `azure-native`, `time`) at the version the SDK asks for. */
export function standinProvider(version: string): provider.Provider {
  return {
    version,
    async check(_urn, _olds, news) {
      return { inputs: news };
    },
    async diff(_id, urn, olds, news) {
      if (holdsUnknown(news)) return { changes: true };
      const { type, name } = parseUrn(urn);
      return { changes: !sameValue(stateOf(type, name, news).outs, olds) };
    },
    async create(urn, inputs) {
      const { type, name } = parseUrn(urn);
      journal('create', urn);
      return stateOf(type, name, inputs);
    },
    async read(id, _urn, props) {
      return { id, props };
    },
    async update(_id, urn, _olds, news) {
      const { type, name } = parseUrn(urn);
      journal('update', urn);
      return { outs: stateOf(type, name, news).outs };
    },
    async delete(_id, urn) {
      journal('delete', urn);
    },
    async invoke(token, inputs) {
      return { outputs: calls({ token, inputs: reveal(inputs) }) };
    },
  };
}
