import type { FunctionRole } from '../../../shared/domain/key-layout.js';
import type { Cloud, LogicalResource, RecordedAccess, StackGrants } from './access.js';
import { onRecorded, recorderErrors } from './recorder.js';
import type { RecordedRequest, Requirement } from './wire.js';

/**
 * Checks every access a run's roles make on one cloud against that cloud's StackGrants (the program under
 * mocks), and keeps the tally the IAM report is made of: how many accesses each grant allowed, every
 * denied access (deduplicated by role, action, resource and key, with a count and the first request), and
 * every request the recorder could not classify (a finding too: an unknown call path must not pass unseen).
 *
 * @example
 * const check = new AccessCheck(await loadStackGrants('gcp')).start();
 * try { await runTheScenario(); } finally { check.stop(); }
 * check.assertAllowed(); // throws IamAccessDeniedError naming role, action and key of each denied access
 */

export interface Denial {
  readonly role: FunctionRole;
  readonly action: string;
  readonly resource: LogicalResource;
  /** The key (or listing prefix) first denied; {@link pattern} is the shape every key of this denial has. */
  readonly key?: string | undefined;
  /** The key with the layout's variable parts named: `index/scenes/<hour>/<scene>`. */
  readonly pattern?: string | undefined;
  /** The distinct keys denied under this pattern. */
  readonly keys: Set<string>;
  readonly list?: boolean | undefined;
  /** The first request that needed it, as sent. */
  readonly request: string;
  /** The cloud's other ways to authorise the same request, none of which was granted either (`a + b` means both). */
  readonly alternatives: readonly string[];
  count: number;
}

export interface UnrecognisedRequest {
  /** Undefined for the recorder's own failure (it may have hidden a request of any role). */
  readonly role: FunctionRole | undefined;
  readonly why: string;
  readonly request: string;
  count: number;
}

/** What a run did on one cloud; tallies of several checks (a matrix's cells) add up into one. */
export class AccessTally {
  /**
   * Accesses allowed, by the role and id of the grant that allowed them ({@link grantKey}): a grant id is only
   * unique within its role (two AWS policies may both have an `ObjectsSource` statement).
   */
  readonly allowedByGrant = new Map<string, number>();
  /** Accesses checked, by role (allowed or not). */
  readonly accessesByRole = new Map<FunctionRole, number>();
  readonly #denials = new Map<string, Denial>();
  readonly #unrecognised = new Map<string, UnrecognisedRequest>();
  requests = 0;

  constructor(readonly cloud: Cloud) {}

  denials(): readonly Denial[] {
    return [...this.#denials.values()];
  }

  unrecognised(): readonly UnrecognisedRequest[] {
    return [...this.#unrecognised.values()];
  }

  /** True when nothing was denied and every request was classified. */
  get clean(): boolean {
    return this.#denials.size === 0 && this.#unrecognised.size === 0;
  }

  /** One denied access; accesses of one role, action and resource whose keys have one shape are one denial. */
  deny(access: RecordedAccess, alternatives: readonly string[], times = 1, keys: Iterable<string> = []): void {
    const pattern = access.key === undefined ? undefined : keyPattern(access.key);
    const id = JSON.stringify([access.role, access.action, access.resource, pattern ?? null, access.list ?? false]);
    let known = this.#denials.get(id);
    if (known === undefined) {
      known = {
        role: access.role,
        action: access.action,
        resource: access.resource,
        key: access.key,
        pattern,
        keys: new Set(),
        list: access.list,
        request: access.request,
        alternatives,
        count: 0,
      };
      this.#denials.set(id, known);
    }
    known.count += times;
    if (access.key !== undefined) known.keys.add(access.key);
    for (const k of keys) known.keys.add(k);
  }

  unrecognise(entry: Omit<UnrecognisedRequest, 'count'>, times = 1): void {
    const id = JSON.stringify([entry.role, entry.why]);
    const known = this.#unrecognised.get(id);
    if (known !== undefined) known.count += times;
    else this.#unrecognised.set(id, { ...entry, count: times });
  }

  /** How many accesses `role`'s grant `id` allowed. */
  allowedBy(role: FunctionRole, id: string): number {
    return this.allowedByGrant.get(grantKey(role, id)) ?? 0;
  }

  /** Add another tally of the same cloud into this one. */
  absorb(other: AccessTally): void {
    if (other.cloud !== this.cloud) throw new Error(`[iam:check] cannot add a ${other.cloud} tally into a ${this.cloud} one`);
    this.requests += other.requests;
    for (const [g, n] of other.allowedByGrant) this.allowedByGrant.set(g, (this.allowedByGrant.get(g) ?? 0) + n);
    for (const [r, n] of other.accessesByRole) this.accessesByRole.set(r, (this.accessesByRole.get(r) ?? 0) + n);
    for (const d of other.denials()) this.deny({ ...d, cloud: this.cloud }, d.alternatives, d.count, d.keys);
    for (const u of other.unrecognised()) this.unrecognise(u, u.count);
  }

  /** One line per denied access and per unclassified request: what a failing run prints. */
  findings(): string[] {
    const plural = (n: number) => (n === 1 ? 'once' : `${n} times`);
    return [
      ...this.denials().map((d) => {
        const key = d.keys.size > 1 ? d.pattern : d.key;
        const keys = d.keys.size > 1 ? `${d.keys.size} keys, ` : '';
        return (
          `denied: ${d.role} ${d.action} on ${d.resource}${key === undefined ? '' : ` ${d.list ? 'listing ' : ''}${JSON.stringify(key)}`}` +
          ` (${keys}${plural(d.count)}; first ${d.request})${d.alternatives.length > 0 ? `; nor was any of: ${d.alternatives.join('; ')}` : ''}`
        );
      }),
      ...this.unrecognised().map((u) => `unclassified: ${u.role ?? '(any role)'} ${u.request}: ${u.why} (${plural(u.count)})`),
    ];
  }
}

export class IamAccessDeniedError extends Error {
  override readonly name = 'IamAccessDeniedError';
  readonly code = 'IAM_ACCESS_DENIED';
  constructor(
    readonly cloud: Cloud,
    readonly findings: readonly string[],
  ) {
    const shown = findings.slice(0, 60);
    super(
      `[iam:check] ${findings.length} access(es) of the ${cloud} functions fall outside the grants the Pulumi program deploys ` +
        '(fix the grant in infra/ or the code, docs/iam.md):\n' +
        `${shown.map((f) => `  ${f}`).join('\n')}${findings.length > shown.length ? `\n  ... and ${findings.length - shown.length} more` : ''}`,
    );
  }
}

/**
 * A key with the key layout's variable parts named (shared/domain/key-layout.ts): a scene key (64 hex
 * digits) `<scene>`, an index hour (10 digits) `<hour>`. A run denies the same access on many scenes; one
 * line per shape is what a reader can act on.
 */
export function keyPattern(key: string): string {
  return key.replace(/[0-9a-f]{64}/g, '<scene>').replace(/(^|\/)\d{10}(?=\/|$)/g, '$1<hour>');
}

/** The key of {@link AccessTally.allowedByGrant}: `<role> <grant id>`. */
export function grantKey(role: FunctionRole, id: string): string {
  return `${role} ${id}`;
}

const describeAccess = (a: RecordedAccess) => `${a.action} on ${a.resource}${a.key === undefined ? '' : ` ${JSON.stringify(a.key)}`}`;

export class AccessCheck {
  readonly tally: AccessTally;
  #stop: (() => void) | undefined;
  #recorderErrorsAtStart = 0;

  constructor(readonly grants: StackGrants) {
    this.tally = new AccessTally(grants.cloud);
  }

  get cloud(): Cloud {
    return this.grants.cloud;
  }

  /** Check every request the recorder sees from now on (those of other clouds are left to their own check). */
  start(): this {
    this.#recorderErrorsAtStart = recorderErrors.length;
    this.#stop ??= onRecorded((r) => this.add(r));
    return this;
  }

  stop(): void {
    this.#stop?.();
    this.#stop = undefined;
    // The recorder's own failures would have hidden requests: they fail the run too.
    for (const line of recorderErrors.slice(this.#recorderErrorsAtStart)) {
      this.tally.unrecognise({ role: undefined, why: line.split('\n')[0] ?? line, request: '(the recorder itself)' });
    }
    this.#recorderErrorsAtStart = recorderErrors.length;
  }

  add(recorded: RecordedRequest): void {
    const c = recorded.classified;
    if (c.kind === 'not-cloud' || c.cloud !== this.cloud) return;
    this.tally.requests++;
    if (c.kind === 'unrecognised') {
      this.tally.unrecognise({
        role: recorded.wire.role,
        why: c.why,
        request: `${recorded.wire.method} ${recorded.wire.path.slice(0, 200)}`,
      });
      return;
    }
    for (const requirement of c.required) this.#require(requirement);
  }

  #require(requirement: Requirement): void {
    const judged = requirement.anyOf.map((alternative) => alternative.map((access) => ({ access, verdict: this.grants.check(access) })));
    const granted = judged.find((alternative) => alternative.every((j) => j.verdict.allowed));
    const counted = granted ?? judged[0] ?? [];
    for (const { access } of counted) this.tally.accessesByRole.set(access.role, (this.tally.accessesByRole.get(access.role) ?? 0) + 1);
    if (granted !== undefined) {
      for (const { access, verdict } of granted) {
        const key = grantKey(access.role, verdict.grant ?? '(unnamed grant)');
        this.tally.allowedByGrant.set(key, (this.tally.allowedByGrant.get(key) ?? 0) + 1);
      }
      return;
    }
    // Denied: name the cloud's first way to authorise it, and the others it also lacked.
    const others = judged.slice(1).map((alternative) => alternative.map((j) => describeAccess(j.access)).join(' + '));
    for (const { access, verdict } of judged[0] ?? []) if (!verdict.allowed) this.tally.deny(access, others);
  }

  /** Throws IamAccessDeniedError when anything was denied or left unclassified. */
  assertAllowed(): void {
    if (!this.tally.clean) throw new IamAccessDeniedError(this.cloud, this.tally.findings());
  }
}
