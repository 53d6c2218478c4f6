import { AZURE_ROLES } from '../azure/roles.js';
import type { MockRun, RecordedResource } from './mock-run.js';

/**
 * A readable plan of what the program declares, drawn from a run under Pulumi
 * mocks (mock-run.ts): the resources by type, the identities with the
 * permissions each holds, and the grants each function or app is created
 * after. Names the mocks invent (random suffixes, account ids) are shown as
 * the program's logical names, which is what `pulumi up` prints too.
 */

export interface PlannedResource {
  readonly type: string;
  readonly names: readonly string[];
}

export interface Permission {
  /** An IAM action list, a GCP role, or an Azure role name. */
  readonly what: string;
  /** The resource it applies to, by logical name where the program declared it. */
  readonly on: string;
  readonly condition?: string;
}

export interface PlannedIdentity {
  /** The principal: an IAM role, a service account or agent, a managed identity. */
  readonly principal: string;
  /** The functions or apps that run as it ('' for a platform's own service agent). */
  readonly runs: readonly string[];
  readonly permissions: readonly Permission[];
}

export interface Ordering {
  /** A function or app. */
  readonly resource: string;
  /** Grants and waits the engine creates before it, as `<kind> <logical name>`. */
  readonly after: readonly string[];
}

export interface Plan {
  readonly resourceCount: number;
  readonly resources: readonly PlannedResource[];
  readonly identities: readonly PlannedIdentity[];
  readonly ordering: readonly Ordering[];
}

const FUNCTION_TYPES = ['aws:lambda/function:Function', 'gcp:cloudfunctionsv2/function:Function', 'azure-native:web:WebApp'];
const GRANT_TYPE = /IAMMember|IamMember|RolePolicy|RoleAssignment|sleep:Sleep/;

export function planOf(run: MockRun): Plan {
  const custom = run.resources.filter((r) => r.custom && !r.type.startsWith('pulumi:providers:'));
  const byType = new Map<string, string[]>();
  for (const r of custom) byType.set(r.type, [...(byType.get(r.type) ?? []), r.name]);
  const resources = [...byType.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([type, names]) => ({ type, names }));
  const cloud = custom[0]?.type.split(':')[0];
  const identities = cloud === 'aws' ? awsIdentities(run) : cloud === 'gcp' ? gcpIdentities(run) : azureIdentities(run);
  const ordering = custom
    .filter((r) => FUNCTION_TYPES.includes(r.type))
    .map((r) => ({
      resource: r.name,
      after: run
        .createdBefore(r)
        .filter((d) => GRANT_TYPE.test(d.type))
        // By kind and name: a role policy may share its function's logical name.
        .map((d) => `${d.type.split(':').at(-1)} ${d.name}`)
        .sort(),
    }));
  return { resourceCount: custom.length, resources, identities, ordering };
}

/** A logical name for a physical value the mocks handed out (an ARN, a bucket name, an id), else the value. */
function namer(run: MockRun): (value: unknown) => string {
  const names = new Map<string, string>();
  for (const r of run.resources) {
    for (const key of ['arn', 'id', 'name', 'bucket', 'url', 'email', 'member']) {
      const v = r.state[key];
      if (typeof v === 'string' && v !== '' && !names.has(v)) names.set(v, r.name);
    }
  }
  return (value) => {
    const text = String(value);
    const exact = names.get(text);
    if (exact) return exact;
    // ARN/prefix forms: "<arn>/scenes/*", "<account id>/blobServices/default/containers/x".
    let best: [string, string] | undefined;
    for (const [k, n] of names) if (k.length > 8 && text.startsWith(k) && (!best || k.length > best[0].length)) best = [k, n];
    return best ? `${best[1]}${text.slice(best[0].length)}` : text;
  };
}

interface Statement {
  readonly Action: string | readonly string[];
  readonly Resource?: string | readonly string[];
  readonly Condition?: unknown;
}

function awsIdentities(run: MockRun): PlannedIdentity[] {
  const name = namer(run);
  return run.ofType('aws:iam/role:Role').map((role) => {
    const runs = run
      .ofType('aws:lambda/function:Function')
      .filter((f) => f.inputs.role === role.state.arn)
      .map((f) => f.name);
    const permissions = run
      .ofType('aws:iam/rolePolicy:RolePolicy')
      .filter((p) => p.inputs.role === role.id)
      .flatMap((p) => (JSON.parse(String(p.inputs.policy)) as { Statement: Statement[] }).Statement)
      .flatMap((s) =>
        [s.Resource ?? []].flat().map((res) => ({
          what: [s.Action].flat().join(', '),
          on: name(res),
          ...(s.Condition ? { condition: JSON.stringify(s.Condition) } : {}),
        })),
      );
    return { principal: `IAM role ${role.name}`, runs, permissions };
  });
}

function gcpIdentities(run: MockRun): PlannedIdentity[] {
  const name = namer(run);
  const grants = run.resources.filter((r) => /IAMMember|IamMember/.test(r.type));
  const members = [...new Set(grants.map((g) => String(g.inputs.member)))];
  const runsAs = (member: string) =>
    run.ofType('gcp:cloudfunctionsv2/function:Function').flatMap((f) => {
      const build = (f.inputs.buildConfig as { serviceAccount?: string } | undefined)?.serviceAccount;
      const sc = f.inputs.serviceConfig as { serviceAccountEmail?: string } | undefined;
      const trigger = (f.inputs.eventTrigger as { serviceAccountEmail?: string } | undefined)?.serviceAccountEmail;
      const roles: string[] = [];
      if (member === `serviceAccount:${sc?.serviceAccountEmail}`) roles.push(f.name);
      if (build !== undefined && member === `serviceAccount:${build.split('/').at(-1)}`) roles.push(`${f.name} (build)`);
      if (trigger !== undefined && member === `serviceAccount:${trigger}`) roles.push(`${f.name} (its trigger)`);
      return roles;
    });
  return members.map((member) => ({
    principal: accountName(run, member),
    runs: runsAs(member),
    permissions: grants
      .filter((g) => g.inputs.member === member)
      .map((g) => ({
        what: String(g.inputs.role),
        on: gcpTarget(g, name, run.ofType('gcp:cloudfunctionsv2/function:Function')),
        ...(g.inputs.condition ? { condition: String((g.inputs.condition as { expression: string }).expression) } : {}),
      })),
  }));
}

/** A service account by its logical name, a Google service agent by its address. */
function accountName(run: MockRun, member: string): string {
  const own = run.ofType('gcp:serviceaccount/account:Account').find((a) => a.state.member === member);
  return own ? `service account ${own.name}` : member.replace(/^serviceAccount:/, 'service agent ');
}

function gcpTarget(grant: RecordedResource, name: (v: unknown) => string, functions: readonly RecordedResource[]): string {
  const i = grant.inputs;
  if (i.bucket !== undefined) return `bucket ${name(i.bucket)}`;
  if (i.topic !== undefined) return `topic ${name(i.topic)}`;
  if (i.subscription !== undefined) return `subscription ${name(i.subscription)}`;
  if (grant.type.startsWith('gcp:cloudrunv2')) {
    const fn = functions.find((f) => (f.state.serviceConfig as { service?: string } | undefined)?.service === i.name);
    return `the Cloud Run service of ${fn?.name ?? String(i.name)}`;
  }
  return `project ${String(i.project)}`;
}

function azureIdentities(run: MockRun): PlannedIdentity[] {
  const name = namer(run);
  const roleNames = new Map<string, string>(Object.entries(AZURE_ROLES).map(([n, id]) => [id, n]));
  return run.ofType('azure-native:managedidentity:UserAssignedIdentity').map((identity) => ({
    principal: `managed identity ${identity.name}`,
    runs: run
      .ofType('azure-native:web:WebApp')
      .filter((a) => JSON.stringify(a.inputs.identity ?? {}).includes(String(identity.state.id)))
      .map((a) => a.name),
    permissions: run
      .ofType('azure-native:authorization:RoleAssignment')
      .filter((a) => a.inputs.principalId === identity.state.principalId)
      .map((a) => {
        const roleId = String(a.inputs.roleDefinitionId).split('/').at(-1) ?? '';
        return { what: roleNames.get(roleId) ?? roleId, on: name(a.inputs.scope) };
      }),
  }));
}

/** The plan as text, indented under a heading. */
export function renderPlan(plan: Plan): string {
  const lines = [`Plan (the program under Pulumi mocks: ${plan.resourceCount} resources)`, '  resources:'];
  for (const r of plan.resources) lines.push(`    ${String(r.names.length).padStart(2)} ${r.type}  ${r.names.join(', ')}`);
  lines.push('  identities and permissions:');
  for (const id of plan.identities) {
    lines.push(`    ${id.principal}${id.runs.length > 0 ? `  (runs ${id.runs.join(', ')})` : ''}`);
    for (const p of id.permissions) lines.push(`      ${p.what} on ${p.on}${p.condition ? `  if ${p.condition}` : ''}`);
  }
  lines.push('  created only after their grants:');
  for (const o of plan.ordering) lines.push(`    ${o.resource} after ${o.after.length > 0 ? o.after.join(', ') : '(nothing)'}`);
  return lines.join('\n');
}
