import type { Cloud, StackGrants } from './access.js';
import { AccessCheck, AccessTally } from './access-check.js';
import { type LoadStackGrantsOptions, loadStackGrants } from './grants.js';
import { type CloudIamRun, renderIamReport } from './report.js';

/**
 * The enforced-IAM check of one run (the parity matrix, a soak, the verify tests): the grants of each
 * cloud's stack, read once from the program under mocks, one AccessCheck per unit of work (a parity cell,
 * a soak backend, a verify stack), and the run's totals per cloud for reports/iam.md.
 *
 * @example
 * const iam = new IamRun({ config: { 'tessera:sourcePrefix': 'incoming/' } });
 * const check = await iam.start('gcp');
 * try { await work(); } finally { findings = iam.finish(check); } // [] when every access was granted
 */
export class IamRun {
  readonly #grants = new Map<Cloud, Promise<StackGrants>>();
  readonly #totals = new Map<Cloud, { grants: StackGrants; tally: AccessTally }>();

  constructor(
    private readonly options: LoadStackGrantsOptions = {},
    private readonly load: (cloud: Cloud, options: LoadStackGrantsOptions) => Promise<StackGrants> = loadStackGrants,
  ) {}

  /** The grants of `cloud`'s stack (the program runs under mocks once per process and configuration). */
  grants(cloud: Cloud): Promise<StackGrants> {
    let g = this.#grants.get(cloud);
    if (g === undefined) {
      g = this.load(cloud, this.options);
      this.#grants.set(cloud, g);
    }
    return g;
  }

  /** A started check of everything `cloud`'s roles do from now on. */
  async start(cloud: Cloud): Promise<AccessCheck> {
    return new AccessCheck(await this.grants(cloud)).start();
  }

  /** Stop the check, add its tally to the run's totals, and return its findings (empty: every access granted). */
  finish(check: AccessCheck): readonly string[] {
    check.stop();
    let total = this.#totals.get(check.cloud);
    if (total === undefined) {
      total = { grants: check.grants, tally: new AccessTally(check.cloud) };
      this.#totals.set(check.cloud, total);
    }
    total.tally.absorb(check.tally);
    return check.tally.findings();
  }

  /** The run's totals per cloud (the clouds that ran at least one check). */
  totals(): Partial<Record<Cloud, CloudIamRun>> {
    return Object.fromEntries(this.#totals);
  }

  /** One line per cloud: requests, denials, grants never used. */
  summary(): string[] {
    return [...this.#totals.entries()].map(([cloud, { grants, tally }]) => {
      const roles = [...tally.accessesByRole.keys()];
      const unused = roles.flatMap((r) => grants.grants(r)).filter((g) => tally.allowedBy(g.role, g.id) === 0).length;
      const denied = tally.denials().length;
      return `${cloud}: ${tally.requests} requests of ${roles.length} roles checked, ${denied} denied access(es), ${tally.unrecognised().length} unclassified, ${unused} grant(s) of those roles never used`;
    });
  }

  /** reports/iam.md of this run. */
  report(run: { readonly command: string; readonly at: Date; readonly scope: string }): string {
    return renderIamReport(this.totals(), run);
  }
}
