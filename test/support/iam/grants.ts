import type { MockRun } from '../../../infra/preflight/mock-run.js';
import type { FunctionRole } from '../../../shared/domain/key-layout.js';
import { runStack } from '../../infra/harness.js';
import { EXAMPLE_STACK_FILES, loadStackFile } from '../../infra/stack-files.js';
import type { Cloud, StackGrants } from './access.js';
import {
  type AwsArnContext,
  type AwsResourceNames,
  awsPolicyDocumentsOf,
  awsStackGrants,
  awsStackModel,
  type NamedAwsPolicy,
} from './grants-aws.js';
import { azureStackGrants } from './grants-azure.js';
import { IamModelError } from './grants-common.js';
import { gcpStackGrants } from './grants-gcp.js';

/**
 * The grants each function role's identity has in a stack, as the Pulumi program deploys them: the program
 * runs under Pulumi mocks for the cloud's example stack file (or another), and each cloud's model reads the
 * role's policies, bindings or role assignments from the recorded resources and evaluates a request against
 * them with that cloud's own semantics (grants-aws.ts, grants-gcp.ts, grants-azure.ts). Nothing here says
 * which role may do what: that is all the program's.
 *
 * @example
 * const grants = await loadStackGrants('aws');
 * grants.check({ cloud: 'aws', role: 'tile', action: 's3:PutObject', resource: 'outputBucket', key: 'tiles/k/0_0.tif', request: 'PUT ...' });
 * // -> { allowed: true, grant: 'WriteTiles' }
 */

export type { AwsArnContext, AwsResourceNames, NamedAwsPolicy } from './grants-aws.js';
export { IamModelError } from './grants-common.js';

export interface LoadStackGrantsOptions {
  /** A stack file (absolute or repository-relative) instead of the cloud's example stack. */
  readonly stackFile?: string;
  /** Configuration laid over the stack file's (`tessera:sourcePrefix` -> `raw/`). */
  readonly config?: Readonly<Record<string, string>>;
}

/** The example stack file of a cloud (Pulumi.aws-eu-west-1.yaml, ...), by its `tessera:cloud`. */
export function exampleStackFile(cloud: Cloud): string {
  const file = EXAMPLE_STACK_FILES.find((f) => loadStackFile(f).config['tessera:cloud'] === cloud);
  if (file === undefined) throw new IamModelError(`no example stack file is for ${cloud} (${EXAMPLE_STACK_FILES.join(', ')})`);
  return file;
}

/** The StackGrants of a program already run under mocks (`stack` names it: GCP service account ids carry it). */
export function stackGrantsFromRun(cloud: Cloud, run: MockRun, stack: string): StackGrants {
  const runCloud = run.outputs.cloud;
  if (runCloud !== cloud) throw new IamModelError(`the program run is for ${String(runCloud)}, not ${cloud}`);
  switch (cloud) {
    case 'aws':
      return awsStackGrants(run);
    case 'gcp':
      return gcpStackGrants(run, stack);
    case 'azure':
      return azureStackGrants(run);
  }
}

/** A program run under mocks, and the stack it ran for. */
export interface LoadedStackRun {
  readonly run: MockRun;
  readonly stack: string;
}

/**
 * Pulumi's mocks are process-wide (setMocks replaces the monitor), so program runs take turns; each
 * configuration runs once per process and its record is shared by every caller.
 */
let turn: Promise<unknown> = Promise.resolve();
const runs = new Map<string, Promise<LoadedStackRun>>();

/** The program's run under mocks for a cloud's example stack (or `options.stackFile`), shared by every caller in the process. */
export function loadStackRun(cloud: Cloud, options: LoadStackGrantsOptions = {}): Promise<LoadedStackRun> {
  const file = loadStackFile(options.stackFile ?? exampleStackFile(cloud));
  const config = { ...file.config, ...options.config };
  const key = JSON.stringify([file.stack, Object.entries(config).sort()]);
  let loaded = runs.get(key);
  if (loaded === undefined) {
    loaded = turn.then(async () => ({ run: await runStack(file.stack, config), stack: file.stack }));
    // The next run waits for this one whether it succeeds or not.
    turn = loaded.catch(() => undefined);
    runs.set(key, loaded);
  }
  return loaded;
}

/** The grants of every role of one cloud's stack, read from the program under mocks. */
export async function loadStackGrants(cloud: Cloud, options: LoadStackGrantsOptions = {}): Promise<StackGrants> {
  const { run, stack } = await loadStackRun(cloud, options);
  return stackGrantsFromRun(cloud, run, stack);
}

/**
 * The AWS IAM policy documents of a role (its inline and attached policies; verify's operator policy) as the
 * program deploys them, with the ARN of every resource named in `names` replaced by the test's (physical
 * names, or full ARNs): what the IAM-enforcing moto gives that role's user.
 *
 * @example
 * const docs = await awsPolicyDocumentsFor('tile', { outputBucket: 'outputs-1a2b', sourceBucket: 'sources-1a2b' });
 * for (const { name, document } of docs) await iam.putUserPolicy({ UserName: 'tile', PolicyName: name, PolicyDocument: JSON.stringify(document) });
 */
export async function awsPolicyDocumentsFor(
  role: FunctionRole,
  names: AwsResourceNames,
  options: LoadStackGrantsOptions & AwsArnContext = {},
): Promise<NamedAwsPolicy[]> {
  const { run } = await loadStackRun('aws', options);
  return awsPolicyDocumentsOf(awsStackModel(run), role, names, options);
}
