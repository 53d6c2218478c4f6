import type { MockRun, RecordedResource } from '../../../infra/preflight/mock-run.js';
import { FUNCTION_ROLES, type FunctionRole } from '../../../shared/domain/key-layout.js';
import type { AccessVerdict, Cloud, GrantDescription, RecordedAccess, StackGrants } from './access.js';

/**
 * What the three per-cloud grant models (grants-aws.ts, grants-gcp.ts, grants-azure.ts) share: the error
 * they raise on what they do not model, wildcard matching, and the StackGrants they all build.
 */

/**
 * A policy construct the grant model does not evaluate: an IAM condition operator, a CEL function, an ABAC
 * attribute, a role it has no permission table for. Raised when the grants are loaded (or, for a request
 * attribute only a request carries, when it is checked), never answered with a guess: a model that guessed
 * would pass accesses the cloud refuses, or the reverse. The message names the construct and the resource
 * that carries it, so the table or parser it belongs to can be extended, with the provider's documentation.
 */
export class IamModelError extends Error {
  readonly code = 'IAM_MODEL_UNSUPPORTED';

  constructor(message: string, options: { cause?: unknown } = {}) {
    super(`[iam-grants] ${message}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'IamModelError';
  }
}

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/**
 * A pattern with `*` (any run of characters, `/` included) and `?` (one character), the wildcards IAM action
 * and ARN patterns, `StringLike`, and Azure's action patterns share; everything else is literal.
 */
export function wildcardMatcher(pattern: string, options: { ignoreCase?: boolean } = {}): (value: string) => boolean {
  const source = pattern
    .split('')
    .map((c) => (c === '*' ? '.*' : c === '?' ? '.' : escapeRegExp(c)))
    .join('');
  const re = new RegExp(`^${source}$`, options.ignoreCase === true ? 'is' : 's');
  return (value) => re.test(value);
}

/** The grants of one role as a cloud's model built them, and its verdict for one request of that role. */
export interface RoleGrants {
  readonly grants: readonly GrantDescription[];
  check(access: RecordedAccess): AccessVerdict;
}

const DENIED: AccessVerdict = { allowed: false };

/** A StackGrants over per-role models; a role with none (no identity in the stack) is denied everything. */
export function stackGrantsOf(cloud: Cloud, roles: ReadonlyMap<FunctionRole, RoleGrants>): StackGrants {
  return {
    cloud,
    check(access) {
      if (access.cloud !== cloud) {
        throw new IamModelError(`a ${access.cloud} access (${access.request}) was checked against the ${cloud} stack's grants`);
      }
      return roles.get(access.role)?.check(access) ?? DENIED;
    },
    grants: (role) => roles.get(role)?.grants ?? [],
  };
}

/** A string-valued state or input attribute of a recorded resource, if it is one. */
export function attr(resource: RecordedResource | undefined, key: string): string | undefined {
  const v = resource?.state[key] ?? resource?.inputs[key];
  return typeof v === 'string' ? v : undefined;
}

/** The resources of `type` whose attribute `key` equals `value`; `undefined` values match nothing. */
export function byAttr(run: MockRun, type: string, key: string, value: string | undefined): RecordedResource | undefined {
  if (value === undefined) return undefined;
  const found = run.ofType(type).filter((r) => attr(r, key) === value);
  if (found.length > 1) throw new IamModelError(`${found.length} resources of ${type} have ${key} = ${value}; expected one`);
  return found[0];
}

/** A stack output that must be a string (a bucket name, a queue URL). */
export function outputString(run: MockRun, key: string): string | undefined {
  const v = run.outputs[key];
  return typeof v === 'string' ? v : undefined;
}

/**
 * The function roles a logical resource name stands for: its `-`-separated segments after the component's
 * own name (`tessera-tile` -> tile, `tessera-verify-operator` -> verify). Names are how the program ties
 * an identity to its function (the stack file cannot: one program serves every stack), and the component
 * prefix is stripped so a stack or component named after a role does not count.
 */
export function rolesNamedIn(logicalName: string, componentName: string): FunctionRole[] {
  const rest = logicalName.startsWith(`${componentName}-`) ? logicalName.slice(componentName.length + 1) : logicalName;
  const segments = new Set(rest.split('-'));
  return FUNCTION_ROLES.filter((role) => segments.has(role));
}

/** The name of the program's one component resource of `type` (`tessera`), which prefixes its children's names. */
export function componentName(run: MockRun, type: string): string {
  const components = run.ofType(type);
  if (components.length !== 1) throw new IamModelError(`expected one ${type} component in the program, found ${components.length}`);
  return (components[0] as RecordedResource).name;
}

/** `value` as an array: IAM documents allow a single string where a list is meant. */
export function listOf(value: unknown): unknown[] {
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}
