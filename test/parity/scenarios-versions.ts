import type { Backend } from '../../shared/app/backend.js';
import { canonicalJson } from '../../shared/domain/canonical-json.js';
import { codeVersion } from '../../shared/domain/code-version.js';
import { AdapterError, TesseraError } from '../../shared/domain/errors.js';
import type { ClaimStore } from '../../shared/ports/claim-store.port.js';
import { jobBodyOfBuild } from '../support/tile-fixture.js';
import { type DeliverResult, LEASE_MS, type ScenarioContext } from './harness.js';
import { committed, outcome, receiveOne, type Scenario, tiles } from './scenario-kit.js';

// Issue 12, items 7 and 8: the code version in the key, the window bound to its grid, and the
// lease kept through a long render. See docs/parity.md.

/** A build of the render path other than the running one (as a message queued before a deploy names it). */
const OTHER_BUILD = '0.0.9+0123456789abcdef';

/** What the worker answered, in backend-neutral terms: the verdict and, for a refusal, the error's code. */
function refusal(r: DeliverResult): { readonly verdict: string; readonly code: string | null; readonly retryable: boolean | null } {
  if (r.kind !== 'poison' && r.kind !== 'retry') return { verdict: r.kind, code: null, retryable: null };
  return {
    verdict: r.kind,
    code: r.error instanceof TesseraError ? r.error.code : r.error.name,
    retryable: r.error instanceof TesseraError ? r.error.retryable : null,
  };
}

/** The claim store of `backend` with its first `n` heartbeats failing as a throttled store's do (the SDK gave up). */
function failingHeartbeats(n: number): (backend: Backend) => Backend {
  let failed = 0;
  return (backend) => {
    const claims = backend.claims;
    const flaky: ClaimStore = {
      name: claims.name,
      claim: (r) => claims.claim(r),
      commit: (r) => claims.commit(r),
      get: (id) => claims.get(id),
      list: () => claims.list(),
      deleteIf: (r) => claims.deleteIf(r),
      heartbeat: async (r) => {
        if (failed < n) {
          failed++;
          throw new AdapterError(`[claim-store:${claims.name}] heartbeat of ${r.jobId}: throttled (injected by parity 36)`, {
            retryable: true,
          });
        }
        return claims.heartbeat(r);
      },
    };
    return { ...backend, claims: flaky };
  };
}

export const VERSION_SCENARIOS: readonly Scenario[] = [
  {
    id: '33',
    title:
      'a queued message of another code version is refused before its claim (typed poison); the current build’s job of the window is written',
    async run(ctx: ScenarioContext) {
      const source = await ctx.stage();
      const job = ctx.jobFor('A', source, 0, 0);
      // The running build's own job of the window: processed as usual.
      await ctx.send([job]);
      const current = await receiveOne(ctx);
      await ctx.settle(current, await ctx.deliver(current, 'w1'));
      // The same window as a build from before the deploy enqueued it: its key names that build.
      const stale = jobBodyOfBuild(job, OTHER_BUILD);
      ctx.nameBody(stale, 'A/0_0 other build');
      await ctx.queue.sendBatch([{ jobKey: JSON.parse(stale).jobKey as string, body: stale }]);
      const d = await receiveOne(ctx);
      const r = await ctx.deliver(d, 'w1');
      ctx.fact('refusal', refusal(r));
      ctx.fact('namesBothBuilds', r.kind === 'poison' && r.error.message.includes(OTHER_BUILD) && r.error.message.includes(codeVersion()));
      await ctx.settle(d, r);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ack:written': 1, poison: 1 },
      outputs: tiles('A', '0_0'),
      counters: { claimed: 1, written: 1, committed: 1, 'code-version-refused': 1, poison: 1 },
      alarms: { 'poison-message': 1 },
      claims: [committed('A/0_0', 'A/0_0#m1@w1')],
      facts: { refusal: { verdict: 'poison', code: 'CODE_VERSION_MISMATCH', retryable: false }, namesBothBuilds: true },
    }),
  },
  {
    id: '34',
    title: 'a message whose window width does not match its grid is poison before its claim; nothing is read or written',
    async run(ctx: ScenarioContext) {
      const source = await ctx.stage();
      const job = ctx.jobFor('A', source, 0, 0);
      // The keys still derive from (row, col): only the geometry lies (16 px wide instead of 32).
      const narrow = canonicalJson({ ...job, window: { ...job.window, width: 16 } });
      ctx.nameBody(narrow, 'A/0_0 width 16');
      await ctx.queue.sendBatch([{ jobKey: job.jobKey, body: narrow }]);
      const d = await receiveOne(ctx);
      const reads = ctx.sources.reads;
      const r = await ctx.deliver(d, 'w1');
      ctx.fact('refusal', refusal(r));
      ctx.fact(
        'says',
        r.kind === 'poison' &&
          /window 0_0 of the 64x48 grid at 32 px is x=0 y=0 32x32, but the job says x=0 y=0 16x32/.test(r.error.message),
      );
      ctx.fact('sourceReads', ctx.sources.reads - reads);
      await ctx.settle(d, r);
      return ctx.record();
    },
    expected: outcome({
      calls: { poison: 1 },
      counters: { poison: 1 },
      alarms: { 'poison-message': 1 },
      facts: { refusal: { verdict: 'poison', code: 'INVALID_EVENT', retryable: false }, says: true, sourceReads: 0 },
    }),
  },
  {
    id: '35',
    title: 'a render slower than the lease keeps its lease by heartbeats every lease/3: a duplicate finds it held, no takeover, one write',
    async run(ctx: ScenarioContext) {
      const source = await ctx.stage();
      const job = ctx.jobFor('A', source, 0, 0);
      await ctx.send([job], 2);
      const [first, second] = await ctx.receive(2);
      if (!first || !second) throw new Error('two deliveries expected');
      let duplicate: DeliverResult | undefined;
      const r = await ctx.deliver(first, 'w1', {
        hooks: {
          afterClaim: async () => {
            // 2.5 leases of rendering, the process alive: the lease keeper's timer runs.
            await ctx.clock.advanceRunning(2.5 * LEASE_MS);
            const row = await ctx.backend.claims.get(job.jobKey);
            ctx.fact('leaseLiveAfter2.5Leases', row !== undefined && row.state === 'CLAIMED' && row.leaseUntil > ctx.clock.now());
            duplicate = await ctx.deliver(second, 'w2');
          },
        },
      });
      if (duplicate) await ctx.settle(second, duplicate);
      await ctx.settle(first, r);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ack:written': 1, 'ack:claim-rejected:held': 1 },
      outputs: tiles('A', '0_0'),
      counters: { claimed: 1, 'claim-rejected': 1, written: 1, committed: 1 },
      claims: [committed('A/0_0', 'A/0_0#m1@w1')],
      facts: { 'leaseLiveAfter2.5Leases': true },
    }),
  },
  {
    id: '36',
    title: 'a transient heartbeat error during the render does not throw the finished tile away: written and committed by its worker',
    async run(ctx: ScenarioContext) {
      const source = await ctx.stage();
      await ctx.send([ctx.jobFor('A', source, 0, 0)]);
      const d = await receiveOne(ctx);
      const r = await ctx.deliver(d, 'w1', {
        ports: failingHeartbeats(1),
        // Most of a lease of rendering: the first renewal (at lease/3) fails, the second succeeds.
        hooks: { afterClaim: () => ctx.clock.advanceRunning(0.9 * LEASE_MS) },
      });
      ctx.fact('heartbeatFailuresLogged', ctx.logs().filter((l) => l.level === 'WARN' && l.event === 'heartbeat-failed').length);
      await ctx.settle(d, r);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ack:written': 1 },
      outputs: tiles('A', '0_0'),
      counters: { claimed: 1, written: 1, committed: 1, 'heartbeat-failed': 1 },
      claims: [committed('A/0_0', 'A/0_0#m1@w1')],
      facts: { heartbeatFailuresLogged: 1 },
    }),
  },
];
