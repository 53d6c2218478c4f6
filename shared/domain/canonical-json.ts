import { InvalidParamsError } from './errors.js';

/**
 * Canonical JSON after RFC 8785 (JSON Canonicalization Scheme): object keys
 * sorted by UTF-16 code units, no whitespace, numbers in ECMAScript's
 * shortest round-trip form (`Number.prototype.toString`), so `0.1` is always
 * `0.1` and `1.0` is `1`, whatever produced the value.
 *
 * Values with no stable serialisation are refused rather than silently
 * coerced the way `JSON.stringify` would: NaN, ±Infinity, `undefined`,
 * functions, symbols, bigints, Dates and other class instances.
 *
 * @example
 * canonicalJson({ b: 1, a: [0.5, 'x'] }) // '{"a":[0.5,"x"],"b":1}'
 */
export function canonicalJson(value: unknown): string {
  return serialise(value, '$');
}

function serialise(value: unknown, path: string): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
      if (!value.isWellFormed()) throw new InvalidParamsError(`parameter ${path} holds a lone UTF-16 surrogate; pass well-formed text`);
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) {
        throw new InvalidParamsError(`parameter ${path} is ${String(value)}; NaN and Infinity have no canonical JSON form`);
      }
      // -0 serialises as 0 (RFC 8785 section 3.2.2.3).
      return Object.is(value, -0) ? '0' : String(value);
    case 'object': {
      if (Array.isArray(value)) {
        return `[${value.map((v, i) => serialise(v, `${path}[${i}]`)).join(',')}]`;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        throw new InvalidParamsError(
          `parameter ${path} is a ${proto?.constructor?.name ?? 'non-plain'} object; pass plain objects, arrays, strings, finite numbers, booleans or null`,
        );
      }
      const entries = Object.keys(value as object)
        .sort(compareUtf16)
        .map((k) => {
          const v = (value as Record<string, unknown>)[k];
          return `${JSON.stringify(k)}:${serialise(v, `${path}.${k}`)}`;
        });
      return `{${entries.join(',')}}`;
    }
    default:
      throw new InvalidParamsError(`parameter ${path} is of type ${typeof value}, which has no canonical JSON form`);
  }
}

function compareUtf16(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
