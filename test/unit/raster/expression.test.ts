import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { InvalidExpressionError, InvalidParamsError } from '../../../shared/domain/errors.js';
import { evaluate, MAX_EXPRESSION_DEPTH, MAX_EXPRESSION_LENGTH, parseExpression } from '../../../shared/raster/index.js';

const BANDS = ['B04', 'B08'] as const;

/** Evaluates on one pixel with B04 = 3 and B08 = 5. */
function at(text: string, b04 = 3, b08 = 5): number {
  const out = evaluate(parseExpression(text, BANDS), { B04: [b04], B08: [b08] }, 1, { noData: -9999 });
  return out[0] as number;
}

function parseError(text: string): InvalidExpressionError {
  try {
    parseExpression(text, BANDS);
  } catch (e) {
    if (e instanceof InvalidExpressionError) return e;
    throw e;
  }
  throw new Error(`${JSON.stringify(text)} parsed, but it should have been rejected`);
}

describe('parseExpression', () => {
  it.each([
    ['(B08 - B04) / (B08 + B04)', 0.25],
    ['1 + 2 * 3', 7],
    ['(1 + 2) * 3', 9],
    ['8 - 4 - 2', 2],
    ['8 / 4 / 2', 1],
    ['-B08 + 1', -4],
    ['2 - -B04', 5],
    ['--B04', 3],
    ['+B04', 3],
    ['-(B08 - B04) * 2', -4],
    ['2 * -3', -6],
    ['1e-3 * B08', 0.005],
    ['2.5E+1 + .5', 25.5],
    ['B08/B04', 5 / 3],
    [' \tB08\n*\r\nB04 ', 15],
    ['abs(B04 - B08)', 2],
    ['sqrt(B08 - 1)', 2],
    ['min(B04, B08, 4)', 3],
    ['max(B04, B08, 4)', 5],
    ['max(1, 2)', 2],
    ['abs(-2) * B04', 6],
  ])('evaluates %j to %d', (text, expected) => {
    expect(at(text)).toBeCloseTo(expected, 6);
  });

  it('lists the bands an expression reads, in order of first use', () => {
    expect(parseExpression('(B08 - B04) / (B08 + B04)', BANDS).bands).toEqual(['B08', 'B04']);
    expect(parseExpression('2 * B04', BANDS).bands).toEqual(['B04']);
    expect(parseExpression('3', BANDS).bands).toEqual([]);
  });

  it('builds a tree that gives * and / precedence over + and -, left-associative', () => {
    const { root } = parseExpression('B04 - B08 * 2 - 1', BANDS);
    expect(root).toMatchObject({
      kind: 'binary',
      op: '-',
      left: { kind: 'binary', op: '-', left: { kind: 'band', name: 'B04' }, right: { kind: 'binary', op: '*' } },
      right: { kind: 'number', value: 1 },
    });
  });

  it.each([
    ['(B08 - ', 7, 'expected a number, a band or "(" but found the end of the expression'],
    ['B08 + * B04', 6, 'found "*"'],
    ['B99', 0, 'unknown band "B99"'],
    ['eval(1)', 0, 'unknown function "eval"'],
    ['B08; process.exit()', 3, 'unexpected character ";"'],
    ['', 0, 'the expression is empty'],
    ['   ', 0, 'the expression is empty'],
    ['B08 B04', 4, 'expected an operator or the end of the expression but found "B04"'],
    ['(B08 - B04', 10, 'expected ")" to close the "(" at position 0'],
    ['B08 - B04)', 9, 'found ")"'],
    ['1e', 1, 'malformed number "1e"'],
    ['1.2.3', 3, 'malformed number'],
    ['2B08', 1, 'malformed number'],
    ['B08 ^ 2', 4, 'unexpected character "^"'],
    ['b08 + 1', 0, 'unknown band "b08" (did you mean "B08"?)'],
    ['abs(B08, B04)', 0, 'abs takes 1 argument, got 2'],
    ['min(B08)', 0, 'min takes 2 to 16 arguments, got 1'],
    ['sqrt()', 5, 'found ")"'],
    ['constructor(1)', 0, 'unknown function "constructor"'],
    ['__proto__', 0, 'unknown band "__proto__"'],
    ['B08 = 1', 4, 'unexpected character "="'],
    ['B08 + `x`', 6, 'unexpected character "`"'],
    ['1e999 * B08', 0, 'out of range'],
  ])('rejects %j at position %i', (text, position, message) => {
    const e = parseError(text);
    expect(e.position).toBe(position);
    expect(e.code).toBe('INVALID_EXPRESSION');
    expect(e.message).toContain(message);
    expect(e.message).toContain(`at position ${position}`);
  });

  it('names the known bands when it rejects an unknown one', () => {
    expect(parseError('B99').message).toContain('the bands are B04, B08');
  });

  it(`rejects an expression longer than ${MAX_EXPRESSION_LENGTH} characters at the first character past the limit`, () => {
    const text = `${'B08+'.repeat(250)}B04`;
    expect(text.length).toBeGreaterThan(MAX_EXPRESSION_LENGTH);
    const e = parseError(text);
    expect(e.position).toBe(MAX_EXPRESSION_LENGTH);
    expect(e.message).toContain('more than the 1000 allowed');
  });

  it('accepts an expression of exactly the maximum length', () => {
    const text = `${'B08+'.repeat(249)}1234`;
    expect(text.length).toBe(MAX_EXPRESSION_LENGTH);
    expect(() => parseExpression(text, BANDS)).not.toThrow();
  });

  it(`accepts ${MAX_EXPRESSION_DEPTH} nested parentheses and rejects one more where it opens`, () => {
    const ok = `${'('.repeat(MAX_EXPRESSION_DEPTH)}B08${')'.repeat(MAX_EXPRESSION_DEPTH)}`;
    expect(at(ok)).toBe(5);
    const deep = `${'('.repeat(MAX_EXPRESSION_DEPTH + 1)}B08${')'.repeat(MAX_EXPRESSION_DEPTH + 1)}`;
    const e = parseError(deep);
    expect(e.position).toBe(MAX_EXPRESSION_DEPTH);
    expect(e.message).toContain('nests deeper than 64 levels');
  });

  it('limits chains of unary minus like nesting', () => {
    expect(parseError(`${'-'.repeat(MAX_EXPRESSION_DEPTH + 1)}B08`).position).toBe(MAX_EXPRESSION_DEPTH);
    expect(at(`${'-'.repeat(MAX_EXPRESSION_DEPTH)}B08`)).toBe(5);
  });

  it('reports the leftmost error when an expression has several', () => {
    expect(parseError('B99 + ;').position).toBe(0);
  });

  it('never evaluates text as code: the module uses neither eval nor Function', () => {
    const source = readFileSync(new URL('../../../shared/raster/expression.ts', import.meta.url), 'utf8');
    const code = source.replace(/\/\/.*$/gm, '').replace(/\/\*[\s\S]*?\*\//g, '');
    expect(code).not.toMatch(/\beval\s*\(|\bnew\s+Function\b|\bFunction\s*\(/);
  });
});

describe('evaluate', () => {
  const ndvi = parseExpression('(B08 - B04) / (B08 + B04)', BANDS);

  it('computes NDVI per pixel and writes nodata where a source band is nodata', () => {
    const red = new Uint16Array([1000, 0, 500, 300, 2000]);
    const nir = new Uint16Array([3000, 4000, 0, 300, 1000]);
    const out = evaluate(ndvi, { B04: red, B08: nir }, 5, { noData: -9999, sourceNoData: 0 });
    expect(out).toBeInstanceOf(Float32Array);
    expect(Array.from(out)).toEqual([Math.fround(0.5), -9999, -9999, 0, Math.fround(-1 / 3)]);
  });

  it('writes nodata on division by zero instead of infinity or NaN', () => {
    const out = evaluate(parseExpression('B08 / (B04 - 3)', BANDS), { B04: [3, 4, 3], B08: [5, 5, 0] }, 3, { noData: -1 });
    expect(Array.from(out)).toEqual([-1, 5, -1]);
  });

  it('keeps a division by zero undefined even when later arithmetic would make it finite', () => {
    // IEEE would give 1 / (1 / 0) = 0; a division by zero has no value, so the pixel is nodata.
    expect(at('1 / (B08 / (B04 - 3))')).toBe(-9999);
    expect(at('B08 / 0')).toBe(-9999);
    expect(at('B08 * (1 / 0)')).toBe(-9999);
    expect(at('0 * (B04 / 0) + 1')).toBe(-9999);
  });

  it('writes nodata for NaN, infinities and values beyond float32', () => {
    expect(at('sqrt(B04 - B08)')).toBe(-9999);
    expect(at('B08 * 1e200 * 1e200')).toBe(-9999);
    expect(at('B08 * 1e38 * 10')).toBe(-9999); // finite in float64, Infinity in float32
    expect(at('B08 * 1e37')).toBe(Math.fround(5e37));
  });

  it('treats a NaN source nodata as matching NaN pixels', () => {
    const out = evaluate(ndvi, { B04: new Float32Array([Number.NaN, 1]), B08: new Float32Array([1, 3]) }, 2, {
      noData: -9999,
      sourceNoData: Number.NaN,
    });
    expect(Array.from(out)).toEqual([-9999, 0.5]);
  });

  it('may use NaN as its own nodata', () => {
    const out = evaluate(ndvi, { B04: [1, 0], B08: [3, 0] }, 2, { noData: Number.NaN });
    expect(out[0]).toBe(0.5);
    expect(out[1]).toBeNaN();
  });

  it('ignores source nodata in bands the expression does not read', () => {
    const out = evaluate(parseExpression('B08 * 2', BANDS), { B04: [0, 0], B08: [1, 2] }, 2, { noData: -9999, sourceNoData: 0 });
    expect(Array.from(out)).toEqual([2, 4]);
  });

  it('matches a direct per-pixel computation across many chunks', () => {
    const n = 100_003; // not a multiple of the chunk size
    const red = new Uint16Array(n);
    const nir = new Uint16Array(n);
    for (let i = 0; i < n; i++) {
      red[i] = (i * 7919) % 3001;
      nir[i] = (i * 104729) % 5003;
    }
    const expr = parseExpression('max(abs(B08 - 2 * B04) / (B08 + B04 + 1), 0.1) - min(B04 / 1000, 3) + sqrt(B08)', BANDS);
    const out = evaluate(expr, { B04: red, B08: nir }, n, { noData: -9999, sourceNoData: 0 });
    let mismatches = 0;
    for (let i = 0; i < n; i++) {
      const r = red[i] as number;
      const g = nir[i] as number;
      const expected =
        r === 0 || g === 0 ? -9999 : Math.fround(Math.max(Math.abs(g - 2 * r) / (g + r + 1), 0.1) - Math.min(r / 1000, 3) + Math.sqrt(g));
      if (out[i] !== expected) mismatches++;
    }
    expect(mismatches).toBe(0);
  });

  it('gives a normalized difference, (X - Y) / (X + Y) in one pass, the same float32 bits as the general kernels', () => {
    const n = 5_003;
    const u16 = (seed: number) => Uint16Array.from({ length: n }, (_, i) => ((i * seed) % 97 === 0 ? 0 : (i * seed) % 4001));
    const f64 = (seed: number) =>
      Float64Array.from({ length: n }, (_, i) =>
        i % 89 === 0 ? Number.NaN : i % 83 === 0 ? 0 : i % 7 === 0 ? -((i * seed) % 311) : (i * seed) % 977,
      );
    const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer));
    const general = parseExpression('((B08 - B04) * 1) / (B08 + B04)', BANDS); // x * 1 is exact: the same values, not the fused shape
    for (const [red, nir] of [
      [u16(7919), u16(104729)],
      [f64(31), f64(53)],
      [new Float32Array(f64(17)), new Float32Array(f64(29))],
    ] as const) {
      // NDVI 0 (equal bands) lands on a nodata of 0 and must move off it; a sum of 0 is a division by zero.
      red[1] = nir[1] = 25;
      red[2] = 3;
      nir[2] = red instanceof Uint16Array ? 3 : -3;
      for (const opts of [
        { noData: -9999, sourceNoData: 0 },
        { noData: 0 },
        { noData: -9999, sourceNoData: Number.NaN },
        { noData: 0, sourceNoData: 25 },
      ]) {
        const expected = bits(evaluate(general, { B04: red, B08: nir }, n, opts));
        expect(bits(evaluate(ndvi, { B04: red, B08: nir }, n, opts))).toEqual(expected);
        expect(bits(evaluate(parseExpression('(B08 - B04) / (B04 + B08)', BANDS), { B04: red, B08: nir }, n, opts))).toEqual(expected);
      }
    }
  });

  it('does not modify the input bands', () => {
    const red = new Uint16Array([0, 5, 7]);
    const before = red.slice();
    evaluate(parseExpression('B04', BANDS), { B04: red }, 3, { noData: -9999, sourceNoData: 0 });
    evaluate(parseExpression('-B04', BANDS), { B04: red }, 3, { noData: -9999, sourceNoData: 0 });
    expect(red).toEqual(before);
  });

  it('fills a constant expression', () => {
    expect(Array.from(evaluate(parseExpression('2 * (3 + 1)', BANDS), {}, 3, { noData: -1 }))).toEqual([8, 8, 8]);
    expect(Array.from(evaluate(parseExpression('1 / 0', BANDS), {}, 2, { noData: -1 }))).toEqual([-1, -1]);
  });

  it('refuses a band the expression reads but the caller did not supply', () => {
    expect(() => evaluate(ndvi, { B04: [1] }, 1, { noData: -1 })).toThrow(InvalidParamsError);
    expect(() => evaluate(ndvi, { B04: [1], B08: [1] }, 2, { noData: -1 })).toThrow(/holds 1 pixels, fewer than 2/);
  });
});
