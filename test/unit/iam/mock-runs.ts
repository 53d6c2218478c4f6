import { readFileSync } from 'node:fs';
import type { MockRun, RecordedResource } from '../../../infra/preflight/mock-run.js';
import type { Cloud } from '../../support/iam/access.js';

/**
 * Program runs the grant model tests read without running a program: a recorded run of an earlier
 * program (fixtures/), or a few resources written out to pin one cloud semantic at a time.
 */

/** What a test writes of a resource: its type, logical name, and inputs (the state defaults to them). */
export interface ResourceSketch {
  readonly type: string;
  readonly name: string;
  readonly id?: string;
  readonly inputs?: Record<string, unknown>;
  readonly state?: Record<string, unknown>;
}

/** A MockRun over these resources and outputs, as runProgramUnderMocks would have recorded them. */
export function mockRunOf(outputs: Record<string, unknown>, sketches: readonly ResourceSketch[]): MockRun {
  const resources: RecordedResource[] = sketches.map((s) => ({
    type: s.type,
    name: s.name,
    urn: `urn:pulumi:test::tessera::${s.type}::${s.name}`,
    custom: true,
    id: s.id ?? `${s.name}-id`,
    inputs: s.inputs ?? {},
    state: { ...s.inputs, ...s.state },
    dependencies: [],
    propertyDependencies: {},
  }));
  return {
    resources,
    outputs,
    urns: resources.map((r) => r.urn),
    ofType: (type) => resources.filter((r) => r.type === type),
    one(type, suffix) {
      const found = resources.filter((r) => r.type === type && r.name.endsWith(suffix));
      if (found.length !== 1) throw new Error(`expected one ${type} named *${suffix}, found ${found.length}`);
      return found[0] as RecordedResource;
    },
    byUrn: (urn) => resources.find((r) => r.urn === urn),
    createdBefore: () => [],
  };
}

interface RecordedStack {
  readonly stack: string;
  readonly outputs: Record<string, unknown>;
  readonly resources: ResourceSketch[];
}

/**
 * The IAM-relevant resources of main at 797a1da (the program before its grants were derived from the key
 * layout), recorded by running that commit's program under the same mocks for each example stack: the
 * grants issue 24 found too narrow, kept so the check can be shown failing on them.
 */
export function mainAt797a1da(cloud: Cloud): { readonly run: MockRun; readonly stack: string } {
  const all = JSON.parse(readFileSync(new URL('./fixtures/main-797a1da.json', import.meta.url), 'utf8')) as Record<Cloud, RecordedStack>;
  const recorded = all[cloud];
  return { run: mockRunOf(recorded.outputs, recorded.resources), stack: recorded.stack };
}
