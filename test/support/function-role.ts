import { AsyncLocalStorage } from 'node:async_hooks';
import type { FunctionRole } from '../../shared/domain/key-layout.js';

/**
 * Which deployed function the code running now stands for. In a stack each role is its own function with
 * its own identity; the tests run several roles in one process, so the role travels with the async context:
 * the parity harness, the soak and the handler tests run fan-out as `scene`, a delivery as `tile`, assembly
 * as `mosaic`, and so on. Two things read it: the access recorder (test/support/access-recorder.ts), which
 * checks every request against that role's deployed grants, and the AWS role-routed store, which signs the
 * request as that role's IAM user on the IAM-enforcing moto.
 *
 * Code that runs outside any role (a test staging its inputs, a check reading outputs) is the operator:
 * `currentRole()` is undefined and nothing is checked.
 */
const roles = new AsyncLocalStorage<FunctionRole>();

/** Run `fn` as `role`: everything it awaits, however deep, runs as that role. */
export function asRole<T>(role: FunctionRole, fn: () => T): T {
  return roles.run(role, fn);
}

/** The role the current async context runs as, if any. */
export function currentRole(): FunctionRole | undefined {
  return roles.getStore();
}

/** Run `fn` as the operator (no role), even inside a role's context: a test's own set-up and checks. */
export function asOperator<T>(fn: () => T): T {
  return roles.exit(fn);
}

function isAsyncIterable(v: unknown): v is AsyncIterable<unknown> {
  return typeof v === 'object' && v !== null && Symbol.asyncIterator in v && !(v instanceof Promise);
}

/** An async iterable whose every step runs as `role` (a listing's page requests happen in `next()`, not in `list()`). */
function iterateAs<T>(role: FunctionRole, inner: AsyncIterable<T>): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator]() {
      const it = asRole(role, () => inner[Symbol.asyncIterator]());
      return {
        next: (...args: [] | [undefined]) => asRole(role, () => it.next(...args)),
        return: (value?: unknown) => asRole(role, () => it.return?.(value as T) ?? Promise.resolve({ done: true, value: undefined as T })),
      };
    },
  };
}

/**
 * `port` with every method run as `role`: hand a use case `bindRole(backend.outputs, 'tile')`, or a whole
 * Backend through {@link backendAs}, and every request it makes is that role's.
 */
export function bindRole<T extends object>(port: T, role: FunctionRole): T {
  return new Proxy(port, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const result: unknown = asRole(role, () => (value as (...a: unknown[]) => unknown).apply(target, args));
        return isAsyncIterable(result) ? iterateAs(role, result) : result;
      };
    },
  });
}

/** A backend whose ports all run as `role` (clock and telemetry pass through: they make no requests). */
export function backendAs<
  B extends {
    readonly claims: object;
    readonly sources: object;
    readonly outputs: object;
    readonly queue: object;
    readonly sink?: object | undefined;
  },
>(backend: B, role: FunctionRole): B {
  return {
    ...backend,
    claims: bindRole(backend.claims, role),
    sources: bindRole(backend.sources, role),
    outputs: bindRole(backend.outputs, role),
    queue: bindRole(backend.queue, role),
    ...(backend.sink === undefined ? {} : { sink: bindRole(backend.sink, role) }),
  };
}
